r"""Length generalisation on the reduced dynamics (the project's Theorem 3): the
out-of-distribution (OOD) loss, at test lengths ``T' = T_test > T``, of the model that
population GD trains at length ``T``, and the two statements :func:`check_theorem
<stsim.theory.checks.check_theorem>` gates on — derived in docs/theory.md, §5.

Notation: ``r = T − q``, ``r' = T' − q``, ``Δ = T' − T``, ``θ = c a`` (``c = 1`` for
``query="sum"``, ``1/q`` for ``"mean"``), ``ξ = e^{−θ}``.

**Stochastic/slots** (``ood_to_zero``): every slot of ``d_e >= T'`` is trained, so the OOD
loss is :func:`~stsim.theory.reduced.reduced_loss` at ``T'``. Along the trajectory γ
follows the in-distribution optimum ``γ*(ξ) = (q + rξ)/(q + rξ²)``, where the ratio OOD/ID
is (:func:`ood_ratio_law`)::

    R*(ξ) = q (q + rξ²) [(q r (1 − ξ)/(q + rξ²) − r')²/q + r' γ*²] / (r (q + r'ξ)²),

which tends to ``ρ = (r' + Δ²/q)/r`` as ``ξ → 0``: ``OOD = R* · ID → 0`` with ``ID``. The
trajectory's γ lags ``γ*``, which moves the ratio off the law by a relative ``O(1/t)``.

**Fixed one-hot** (``fixed_ood_floor``): positions ``>= T`` are never trained; the exact
loss is :func:`~stsim.theory.reduced.ood_loss_onehot`, and every state population GD
reaches (``a >= 0``, any γ) has ``OOD >= F`` (:func:`ood_min_onehot`) while ``ID → 0``.
"""
from __future__ import annotations

import math

import numpy as np

from stsim.core.targets import Mean
from stsim.theory.embedded import mc_ood
from stsim.theory.reduced import ood_floor_onehot, ood_loss_onehot, query_coef, reduced_loss
from stsim.theory.report import make_check

__all__ = ["ood_statement", "ood_closed_form", "ood_ratio_law", "ood_ratio_limit",
           "ood_min_onehot", "ood_min_limit", "check_ood_to_zero", "check_fixed_ood_floor", "length_step"]

LAG_SHRINK = 4.0      # required shrink of the deviation from R*(ξ), eps -> eps/8 (1/t: ~8)
ROUNDING = 1e-9       # relative rounding allowance of the floor comparison


def ood_statement(enc) -> str:
    """The length-generalisation statement the encoding ``enc`` makes: ``"ood_to_zero"``
    when training reaches every slot (a stochastic family) and ``"fixed_ood_floor"`` when
    positions ``>= T`` are never trained (``enc.fixed``)."""
    return "fixed_ood_floor" if enc.fixed else "ood_to_zero"


def ood_closed_form(enc, a, gamma, T, T_test, q, d, *, query="sum"):
    """Exact OOD population loss at length ``T_test`` of the reduced state ``(a, γ)``
    trained at ``T`` on the encoding ``enc``: ``ood_loss_onehot`` for a fixed family (its
    trained block), ``reduced_loss`` at ``T_test`` when every slot is trained."""
    if enc.fixed:
        return ood_loss_onehot(a, gamma, T, T_test, q, d, query=query)
    return reduced_loss(a, gamma, T_test, q, d, query=query)


def ood_ratio_law(xi, T, T_test, q):
    r"""``R*(ξ)``: the ratio OOD/ID of the slots law at ``γ = γ*(ξ)`` (module docstring);
    ``xi`` broadcasts. ``R*(0) = ρ`` (:func:`ood_ratio_limit`).

    >>> round(float(ood_ratio_law(0.0, 9, 24, 2)), 6) == round(ood_ratio_limit(9, 24, 2), 6)
    True
    """
    xi = np.asarray(xi, dtype=np.float64)
    r, rp = float(T - q), float(T_test - q)
    den = q + r * xi * xi
    g = (q + r * xi) / den
    bracket = (q * r * (1.0 - xi) / den - rp) ** 2 / q + rp * g * g
    return q * den * bracket / (r * (q + rp * xi) ** 2)


def ood_ratio_limit(T, T_test, q) -> float:
    """``ρ = (T' − q + (T' − T)²/q)/(T − q)``: the limit of OOD/ID as ID → 0 (slots)."""
    return ((T_test - q) + (T_test - T) ** 2 / q) / (T - q)


def _gamma_quadratic(a, T, T_test, q, d):
    """``(A(a), B(a))`` of ``ood_loss_onehot = (d/2)(A γ² − 2 B γ + 1/q)``, read off the
    closed form at γ = −1, 0, 1 (``query="sum"``: the loss depends on ``c a`` only)."""
    L = [ood_loss_onehot(a, g, T, T_test, q, d) for g in (-1.0, 0.0, 1.0)]
    return (L[0] + L[2] - 2.0 * L[1]) / d, (L[0] - L[2]) / (2.0 * d)


def ood_min_onehot(T, T_test, q, d) -> tuple:
    r"""``(F, θ_min)``: the infimum over ``θ = c a >= 0`` and every γ of the fixed one-hot
    OOD loss (:func:`~stsim.theory.reduced.ood_loss_onehot`), and where it is attained
    (``inf`` when at ``a → ∞``).

    L is quadratic in γ, ``(d/2)(A(θ) γ² − 2 B(θ) γ + 1/q)`` (:func:`_gamma_quadratic`),
    so ``min_γ L = (d/2)(1/q − B(θ)²/A(θ))``; it is minimised over θ on a grid (0 and 4000
    geometric points in [1e-3, 200]) refined by bounded Brent, and compared with its
    ``θ → ∞`` limit (:func:`ood_min_limit`). ``F <= L_∞`` (the limit of docs/theory.md §5,
    reached at γ = 1 rather than the best γ).

    >>> F, _ = ood_min_onehot(12, 16, 2, 3)
    >>> 0 < F < 0.3328                                # below L_inf = ood_floor_onehot
    True
    """
    def value(theta):
        A, B = _gamma_quadratic(theta, T, T_test, q, d)
        return 0.5 * d * (1.0 / q - B * B / A)

    grid = np.concatenate([[0.0], np.geomspace(1e-3, 200.0, 4000)])
    v = value(grid)
    i = int(np.argmin(v))
    from scipy.optimize import minimize_scalar  # here, not at the top: 0.1 s of `import stsim`
    res = minimize_scalar(lambda t: float(value(t)), method="bounded",
                          bounds=(grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)]),
                          options={"xatol": 1e-10})
    best, arg = (float(res.fun), float(res.x)) if res.fun < v[i] else (float(v[i]), grid[i])
    lim = ood_min_limit(T, T_test, q, d)
    return (lim, math.inf) if lim < best else (best, float(arg))


def ood_min_limit(T, T_test, q, d) -> float:
    r"""``lim_{θ→∞} min_γ`` of the fixed one-hot OOD loss: ``(d/2)(1/q − B∞²/A∞)`` with
    ``A∞ = Σ_{m>=1} P(m)/m + P(0)/T'`` and ``B∞ = Σ_{m>=1} P(m)/q + P(0)/T'`` (``P``: the
    hypergeometric law of the number ``m`` of selected positions inside the trained
    range; attention uniform on those m tokens, or, for ``m = 0``, on all ``T'`` tokens,
    whose logits are then all 0)."""
    m = np.arange(1, q + 1)
    from scipy.stats import hypergeom      # here, not at the top: 0.3 s of `import stsim`
    pm = hypergeom(T_test, T, q).pmf(m)
    p0 = float(hypergeom(T_test, T, q).pmf(0))
    A_inf = float(np.sum(pm / m)) + p0 / T_test
    B_inf = float(np.sum(pm)) / q + p0 / T_test
    return 0.5 * d * (1.0 / q - B_inf ** 2 / A_inf)


def _not_reached(name, states):
    return make_check(name, "the loss did not reach " + ("eps" if states[0] is None else
                                                         "eps/8") + ": not checked",
                      "the loss must reach eps and eps/8", False,
                      source="P" if name == "ood_to_zero" else "D")


def check_ood_to_zero(enc, states, T, T_test, q, d, *, query="sum"):
    r"""The statement ``ood_to_zero`` (stochastic PE): the OOD loss at every ``T_test``
    goes to 0 as the in-distribution loss does.

    ``states``: ``[(a, γ, ID) at t_ε, (a, γ, ID) at t_{ε/8}]`` (``None`` where not
    reached). Per ``T_test``: ``R = OOD/ID`` at both points against the law ``R*(ξ)``
    (limit ρ); ``dev = R/R* − 1`` is the γ lag, ``O(1/t)``, so it must shrink: ``|dev(ε/8)|
    <= max(|dev(ε)|/4, 1e-6, 1e-14 L(0)/ID(ε/8))`` (``t_{ε/8} ≈ 7–8 t_ε``: /8 expected; the
    last term is the rounding of the closed forms, which cancel to ``~1e-16 L(0)``); the
    OOD loss must fall,
    ``OOD(ε/8) < OOD(ε)``, by the law's factor ``ID(ε) R*(ξ_ε)/(ID(ε/8) R*(ξ_{ε/8}))``
    (→ 8 as ε → 0) within ``|dev(ε)| + |dev(ε/8)|``.

    Returns ``(check, rows)``: the check dict (:func:`~stsim.theory.report.make_check`)
    and one row per ``T_test`` with the measured numbers.
    """
    name = "ood_to_zero"
    if any(s is None for s in states):
        return _not_reached(name, states), []
    c = float(query_coef(query, q))
    xi = [math.exp(-c * s[0]) for s in states]
    rows, texts, ok = [], [], True
    for Tt in T_test:
        ood = [float(ood_closed_form(enc, a, g, T, Tt, q, d, query=query)) for a, g, _ in states]
        ratio = [o / s[2] for o, s in zip(ood, states)]
        law = [float(ood_ratio_law(x, T, Tt, q)) for x in xi]
        dev = [r / w - 1.0 for r, w in zip(ratio, law)]
        factor, factor_law = ood[0] / ood[1], states[0][2] * law[0] / (states[1][2] * law[1])
        f_tol = abs(dev[0]) + abs(dev[1]) + 1e-12
        # the closed forms cancel to ~1e-16 of L(0) = d/(2q): their rounding, relative
        floor = max(1e-6, 1e-14 * Mean().zero_loss(d, q) / states[1][2])
        this = (abs(dev[1]) <= max(abs(dev[0]) / LAG_SHRINK, floor) and ood[1] < ood[0]
                and abs(factor / factor_law - 1.0) <= f_tol)
        ok = ok and this
        rows.append({"T_test": Tt, "ood": ood, "ratio": ratio, "ratio_law": law, "dev": dev,
                     "ratio_limit": ood_ratio_limit(T, Tt, q), "factor": factor,
                     "factor_law": factor_law, "passed": bool(this)})
        texts.append(f"T_test={Tt}: OOD/ID {ratio[0]:.4g} -> {ratio[1]:.4g} (rho "
                     f"{rows[-1]['ratio_limit']:.4g}; off the law by {dev[0]:.2g} -> "
                     f"{dev[1]:.2g}), OOD {ood[0]:.3g} -> {ood[1]:.3g} (/{factor:.4g}, law "
                     f"/{factor_law:.4g})")
    tol = ("per T_test, at t_eps -> t_eps/8: |dev(eps/8)| <= max(|dev(eps)|/4, 1e-6, "
           "1e-14 L(0)/ID(eps/8) (rounding)), dev = "
           "(OOD/ID)/R*(xi) - 1 (the gamma lag, O(1/t): /8 expected, /4 required); OOD falls, "
           "by the law's factor within |dev(eps)| + |dev(eps/8)| (-> 8 as eps -> 0)")
    return make_check(name, "; ".join(texts), tol, ok, data=rows, source="P"), rows


def check_fixed_ood_floor(enc, states, traj, T, T_test, q, d, *, query="sum"):
    r"""The statement ``fixed_ood_floor`` (fixed PE): the OOD loss at every ``T_test``
    stays above the floor ``F`` (:func:`ood_min_onehot`) while the in-distribution loss
    goes to 0.

    ``states`` as in :func:`check_ood_to_zero`; ``traj = (a, γ)``: arrays of the states
    recorded along the run to ``t_{ε/8}`` (and beyond). Per ``T_test``: ``min OOD >= F (1 −
    1e-9)`` over the recorded states, and ``ID(t_{ε/8}) < F`` (the in-distribution loss
    went below the floor the OOD loss cannot cross). The limit ``L_∞`` (approached from
    below) is reported beside.
    """
    name = "fixed_ood_floor"
    if any(s is None for s in states):
        return _not_reached(name, states), []
    a8, g8, id8 = states[1]
    rows, texts, ok = [], [], True
    for Tt in T_test:
        F, theta = ood_min_onehot(T, Tt, q, d)
        ood = np.asarray(ood_closed_form(enc, traj[0], traj[1], T, Tt, q, d, query=query))
        low = float(np.min(ood))
        ood8 = float(ood_closed_form(enc, a8, g8, T, Tt, q, d, query=query))
        above = low >= F * (1.0 - ROUNDING)
        this = bool(above and id8 < F)
        ok = ok and this
        rows.append({"T_test": Tt, "floor_inf": F, "min_ood": low,
                     "theta_at_floor": theta if math.isfinite(theta) else None,   # None: a -> inf
                     "ood_eps8": ood8, "id_eps8": id8, "floor": ood_floor_onehot(T, Tt, q, d),
                     "n_states": int(ood.size), "passed": this})
        texts.append(f"T_test={Tt}: min OOD {low:.5g} {'>=' if above else '<'} F {F:.5g} "
                     f"(x{low / F:.5g}); ID(eps/8) {id8:.3g} {'<' if id8 < F else '>='} F; "
                     f"OOD(eps/8) {ood8:.4g}, limit {rows[-1]['floor']:.4g}")
    tol = (f"per T_test: min OOD over the {rows[0]['n_states'] if rows else 0} recorded states "
           "(a >= 0, every gamma: no state can go below F) >= F (1 - 1e-9), while ID(t_eps/8) "
           "< F (ID went to 0 past the floor)")
    return make_check(name, "; ".join(texts), tol, ok, data=rows), rows


def length_step(s, final, states, tr_s, n_mc, checks) -> list:
    """The OOD step of :func:`~stsim.theory.checks.check_theorem` (``s``: its settings):
    the closed form beside Monte-Carlo (:func:`~stsim.theory.embedded.mc_ood`) at the
    ``final`` state ``(a, γ)``, then the encoding's length-generalisation statement at the
    ``states`` of t_ε and t_{ε/8} (``tr_s``: the run to the ε/8 budget). Appends its checks
    to ``checks``; returns one row per ``T_test``."""
    if not s.T_test or not all(math.isfinite(v) for v in final):
        return []
    rng = np.random.default_rng(np.random.SeedSequence(s.seed))
    rows = []
    for Tt in s.T_test:
        closed = float(ood_closed_form(s.enc, final[0], final[1], s.T, Tt, s.q, s.d,
                                               query=s.query))
        mc, se = mc_ood(final[0], final[1], s.n, s.enc_test, Tt, s.q, s.d, n_mc, rng, s.query)
        rows.append({"T_test": Tt, "closed_form": closed, "mc": mc, "mc_se": se, "floor":
                     ood_floor_onehot(s.T, Tt, s.q, s.d) if s.enc.fixed else None})
        checks.append(make_check(f"OOD T_test={Tt}: closed form = Monte-Carlo",
                             f"|{closed:.4g} - {mc:.4g}| = "
                             f"{abs(closed - mc) / max(se, 1e-300):.2f} s.e.",
                             "<= 4 s.e.", abs(closed - mc) / max(se, 1e-300), "<=", 4.0,
                             on="model"))
    args = (s.T, s.T_test, s.q, s.d)
    if ood_statement(s.enc) == "ood_to_zero":
        check, extra = check_ood_to_zero(s.enc, states, *args, query=s.query)
    else:
        traj = (tr_s.a[0], tr_s.gamma[0]) if tr_s is not None else None
        check, extra = check_fixed_ood_floor(s.enc, states, traj, *args, query=s.query)
    checks.append(check)
    for row, more in zip(rows, extra):
        row.update({k: v for k, v in more.items() if k not in ("T_test", "passed", "floor")})
    return rows
