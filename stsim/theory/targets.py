r"""The exact side of another target (docs/targets.md, "The exact side").

**Separable targets.** The target ``(1/q) Σ_{j∈y} φ(x_j)`` of a
:class:`~stsim.core.targets.Target` whose features have ``E φ = 0``, ``E φφᵀ = I`` (its
:meth:`~stsim.core.targets.Target.moments`) and the linear readout. With ``W_xe = 0``,
``V_e = 0`` and the query without a content part the weights ``s`` depend on the positions
only, and with ``u = 1_y/q``, ``m = dim φ``::

    r = Σ_i (s_i V_x − u_i I_m) φ(x_i),  φ(x_i) independent, mean 0, covariance I_m
    E_X ℓ = ½ (‖s‖² ‖V_x‖_F² − 2 (s·u) tr V_x + m/q)

— the mean task's expression with ``d`` replaced by ``m``, so its exact population loss
(:mod:`stsim.theory.population`) and its ``(a, γ)`` reduction (:mod:`stsim.core.reduced`)
are those of the mean task at ``d = m`` (:func:`mean_task_dim`, :func:`exact_objective`).
``E ∂ℓ/∂V_e = E[r] h_eᵀ = 0`` (``E φ = 0``). ``E ∂ℓ/∂W_xe`` at ``W_xe = 0`` is NOT 0 when φ
has third moments: with ``V_x = γ I``, ``κ_a = E[φ_a ‖φ‖²]``, it is
``γ κ E_y[Σ_i s_i (1 − s_i)(γ s_i − u_i) p_q]ᵀ`` (``κ = E h_k³ ≠ 0`` for ``moment:k``, k
even), so the formula is exact on the dynamics with W's token rows held at 0 (what a run's
plan holds), and invariant without holding them only for odd ``φ``.

**The variance** ``(1/q) Σ_{j∈y} x_j² − ((1/q) Σ_{j∈y} x_j)²`` is
``((q−1)/q²) Σ_{j∈y} x_j² + N``, ``N = −(1/q²) Σ_{i≠j∈y} x_i x_j`` elementwise. ``N`` is
orthogonal to every function ``Σ_i g_i(x_i)`` of the tokens (``E[x_i x_j | x_k] = 0`` for
``i ≠ j``), and a readout ``f = V h + b`` of ``h = Σ_i s_i z_i`` with weights that depend on
the positions only is such a function for each ``y``: its loss is at least
``½ E‖N‖² = d (q−1)/q³`` (:func:`variance_linear_floor`), reached by
``f = ((q−1)/q²) Σ_{j∈y} x_j²`` (weights ``1/q``, ``φ ∋ h_2``).
"""
from __future__ import annotations

import math

import numpy as np

from stsim.core.targets import hermite, make_target, target_of
from stsim.theory.population import make_population_objective

__all__ = ["mean_task_dim", "exact_objective", "variance_linear_floor", "variance_linear_fit",
           "heldout_fit", "readout_regressors", "family_target_rel"]

_KEYS = ("T", "q", "d", "d_e", "pe", "sampler", "query", "model", "seed", "attention",
         "temperature", "rank", "target")


def mean_task_dim(target, d: int) -> int:
    """``m = dim φ``: the ``d`` at which the mean task's exact population loss and reduced
    dynamics are ``target``'s (a name or :class:`~stsim.core.targets.Target`; module
    docstring), asked of the object: separable, the linear readout, output ``dim φ`` and
    moments ``(0, I)``. ``ValueError`` naming ``target`` otherwise."""
    t = make_target(target)
    m = t.feature_dim(d)
    mom = t.moments(d)
    if not (t.separable and t.linear_readout and t.dim(d) == m and mom is not None
            and np.array_equal(mom[0], np.zeros(m)) and np.array_equal(mom[1], np.eye(m))):
        raise ValueError(f"target {t.label!r}: the exact population loss is derived for a "
                         f"separable target with the linear readout and moments E phi = 0, "
                         f"E phi phi^T = I (docs/targets.md); use Monte-Carlo")
    return m


def exact_objective(cfg, target=None, **kw):
    """The exact population objective of a separable target (:func:`mean_task_dim`) for a
    config (a resolved :class:`stsim.Config` or a dict of the keys of
    :func:`~stsim.theory.population.make_population_objective`, which ``**kw`` go to):
    the mean task's at ``d = dim φ``. Its ``W`` is ``(dim φ + d_e)²``, its ``V``
    ``(dim φ, dim φ + d_e)``, as the target's model. ``target``: default the config's."""
    has = cfg.__contains__ if isinstance(cfg, dict) else lambda k: hasattr(cfg, k)
    get = cfg.get if isinstance(cfg, dict) else lambda k: getattr(cfg, k)
    c = {k: get(k) for k in _KEYS if has(k)}
    t = make_target(target if target is not None else c.get("target", "mean")) \
        if isinstance(cfg, dict) or target is not None else target_of(cfg)
    c["d"] = mean_task_dim(t, c["d"])
    return make_population_objective(c, **kw)


def variance_linear_floor(d: int, q: int) -> float:
    """``d (q−1)/q³``: the least population loss ``½‖f − target‖²`` of the variance for
    ANY readout linear in the attended vector when the weights depend on the positions
    only (module docstring); ``2/(q(q+1))`` of ``½ E‖target‖² = d (q²−1)/(2q²)``."""
    return d * (q - 1) / q ** 3




def heldout_fit(design, n: int):
    """Least squares of the targets on the regressors of ``design(n)`` (``(H (n, k), v
    (n, o))``, one fit per output column), then its loss ``½‖H c − v‖²`` per sample on a
    fresh ``design(n)``: ``(mean, SE, losses)``. The one least-squares readout of the
    exact side (:func:`variance_linear_fit`, :func:`family_target_rel`)."""
    H, v = design(n)
    coef = np.linalg.lstsq(H, v, rcond=None)[0]
    H, v = design(n)
    loss = 0.5 * ((H @ coef - v) ** 2).sum(axis=1)
    return float(loss.mean()), float(loss.std(ddof=1) / math.sqrt(n)), loss


def variance_linear_fit(T: int, q: int, d: int, n: int = 200_000, K: int = 4, seed: int = 0):
    """The best readout linear in the ideal attention's vector, measured: least squares of
    the variance on ``[1, h_φ, h_e]`` (attention ``1/q`` on the selected tokens,
    ``φ = [h_1, …, h_K]`` of every token, one-hot positions), fitted on ``n`` samples; its
    loss ``½‖f − target‖²`` on ``n`` fresh ones (:func:`heldout_fit`): ``(mean, SE)`` (to
    compare with :func:`variance_linear_floor`)."""
    rng = np.random.default_rng(seed)

    def design(n):
        X = rng.standard_normal((n, T, d))
        y = np.argsort(rng.random((n, T)), axis=1)[:, :q]
        sel = np.take_along_axis(X, y[:, :, None], axis=1)
        v = (sel ** 2).mean(axis=1) - sel.mean(axis=1) ** 2
        he = np.zeros((n, T))
        np.put_along_axis(he, y, 1.0 / q, axis=1)
        H = np.concatenate([np.ones((n, 1))] + [hermite(sel, k).mean(axis=1)
                                                 for k in range(1, K + 1)] + [he], axis=1)
        return H, v
    return heldout_fit(design, n)[:2]


def readout_regressors(target, h):
    """The regressors of ``target``'s readout on the attended features ``h`` (n, dim φ):
    ``h`` for the linear readout ``f = V h``; ``[1, h, h_a h_b (a ≤ b)]`` for the
    quadratic one, ``f_o = (V h)_o + b_o + hᵀ Q_o h``. The positional part of the attended
    vector is left out: the target is independent of the positions, so its least-squares
    coefficient is 0 in population (a sample fit of it only adds noise)."""
    if make_target(target).linear_readout:
        return h
    a, b = np.triu_indices(h.shape[1])
    return np.concatenate([np.ones((len(h), 1)), h, h[:, a] * h[:, b]], axis=1)


def family_target_rel(target, T: int, q: int, d: int, d_e: int, n: int, seed, a=None,
                      query: str = "sum", chunk: int = 4096) -> dict:
    r"""A target's loss over ``L(0)`` in the sphere family (:mod:`stsim.theory.family`),
    by Monte-Carlo of the target itself: the family's attention ``s = softmax(a g)``,
    ``g_i = p_iᵀ p_q`` (sphere encodings of width ``d_e``, the ``query``), at the mean's
    best ``a`` at ``(T, d_e)`` (:func:`~stsim.theory.family.best_family_loss` on ``n``
    scores of its own) unless ``a`` is given; the attended features
    ``h = Σ_i s_i φ(x_i)``; the target's readout fitted by least squares
    (:func:`readout_regressors`, :func:`heldout_fit`) on ``n`` samples, its loss on ``n``
    fresh ones.

    Returns ``rel`` (the held-out loss over :meth:`~stsim.core.targets.Target.zero_loss`)
    and its ``se``; ``mean_rel``, the mean task's family ``L/L(0)`` at the same ``a`` on
    the same held-out scores, exact in ``X``: per sample ``1 − 2γS + qγ²|s|²``
    (``S = s·1_y``, ``γ = E[s·u]/E|s|²``), mean ``1 − q E[s·u]²/E|s|²``; ``diff = rel −
    mean_rel`` and ``diff_se`` (paired: each sample's own scores in both); ``a``. For a
    separable target with orthonormal features the derivation gives ``E diff = 0`` up to
    the fit's ``O(dim φ²/n)`` (docs/targets.md, "The width law")."""
    from stsim.theory.family import best_family_loss, sample_scores
    from stsim.theory.family_asymptotic import family_mc_moments
    t = make_target(target)
    rng = np.random.default_rng(seed)
    if a is None:
        a = best_family_loss(T, q, 1, d_e, n_mc=n, rng=rng, query=query)["a"]
    y = np.tile(np.arange(q), (chunk, 1))
    held = {}

    def design(n):
        Hs, vs, g = [], [], sample_scores(T, q, d_e, n, rng, query)
        for k in range(0, n, chunk):
            gk = a * g[k:k + chunk]
            s = np.exp(gk - gk.max(axis=1, keepdims=True))
            s /= s.sum(axis=1, keepdims=True)
            X = rng.standard_normal((len(s), T, d))
            Hs.append(readout_regressors(t, np.einsum("nt,ntm->nm", s, t.features(X))))
            vs.append(t.value(X, y[:len(s)]))
        held["g"] = g
        return np.concatenate(Hs), np.concatenate(vs)
    rel_i = heldout_fit(design, n)[2] / t.zero_loss(d, q)
    S, Qs = family_mc_moments(a, held["g"], q)          # per sample: s·1_y, |s|²
    S2, su = Qs.mean(), S.mean() / q
    gam = su / S2
    dif = rel_i - (1.0 - 2.0 * gam * S + q * gam * gam * Qs)
    return {"rel": float(rel_i.mean()), "se": float(rel_i.std(ddof=1) / math.sqrt(n)),
            "mean_rel": float(1.0 - q * su * su / S2), "diff": float(dif.mean()),
            "diff_se": float(dif.std(ddof=1) / math.sqrt(n)), "a": float(a)}


