r"""The (a, γ) family's best loss, smallest width and asymptotic width law at large T (sphere
PE), from :mod:`stsim.theory.family_asymptotic`; the width laws are derived in
docs/separation.md, "The width laws".

* :func:`best_large_T_loss` — the best ``L/L0`` over ``(a, γ)`` at ``(q, T, d_e)``, any T;
* :func:`large_T_width` — the smallest integer ``d_e`` reaching a target (bisection);
* :func:`spread_loss`, :func:`asymptotic_coefficients` — the constants of the width laws
  ``d_e ≈ c (ln T)²`` (q ≥ 3) and ``d_e ≈ 2 log₂ T + C √d_e`` (q = 2).
"""
from __future__ import annotations

import math

import numpy as np

from stsim.theory.family_asymptotic import _check, large_T_rel
from stsim.theory.sphere_law import gram_rule

__all__ = ["best_large_T_loss", "large_T_width", "spread_loss", "asymptotic_coefficients"]

_LOG_A = (-1.0, 2.5)            # log10 a search bounds


def best_large_T_loss(q, T, d_e, *, method="exact", mgf="exact", query="sum", n_gram=8192,
                      rng=0, n_nodes=64, bounds=_LOG_A, n_grid=57):
    """Best ``L/L0`` over ``(a, γ)`` (γ closed form; ``log10 a`` on a grid, then bounded
    Brent from every grid-local minimum within 0.05 of the best), as
    :func:`stsim.theory.family.best_family_loss` does on the Monte Carlo.

    Returns ``dict(rel, se, a, gamma, margin, rem, at_bound)``.

    Parameters
    ----------
    q : int
        Number of selected tokens.
    T, d_e, method, mgf, query, n_nodes
        As for :func:`stsim.theory.family_asymptotic.conditional_moments` (``T`` of any
        size: the cost does not depend on T).
    n_gram, rng
        As for :func:`stsim.theory.sphere_law.gram_rule` (one draw, common to every a).
    bounds, n_grid
        The ``log10 a`` range (tuple) and its number of grid points (int).
    """
    _check(q, T, d_e, method, mgf, query)
    G, w, mc = gram_rule(q, d_e, n_gram, rng, n_nodes)
    memo = {}

    def ev(la):
        if la not in memo:
            memo[la] = large_T_rel(10.0 ** la, T, d_e, G, w, mc, method=method, mgf=mgf,
                                   query=query, n_nodes=n_nodes, diagnostics=False)
        return memo[la]

    from scipy.optimize import minimize_scalar   # here: scipy.optimize slows every command
    grid = np.linspace(bounds[0], bounds[1], n_grid)
    vals = np.array([ev(x)["rel"] for x in grid])
    best = int(np.argmin(vals))
    # every grid-local minimum within 0.05 of the best is refined (the loss can have two
    # branches in a: selected-dominated and bulk-dominated denominators)
    cand = [k for k in range(len(grid)) if vals[k] <= vals[max(k - 1, 0)]
            and vals[k] <= vals[min(k + 1, len(grid) - 1)] and vals[k] <= vals[best] + 0.05]
    for k in cand:
        lo, hi = grid[max(k - 1, 0)], grid[min(k + 1, len(grid) - 1)]
        minimize_scalar(lambda x: ev(float(x))["rel"], bounds=(lo, hi), method="bounded",
                        options={"xatol": 1e-3})
    la = min(memo, key=lambda x: memo[x]["rel"])
    out = large_T_rel(10.0 ** la, T, d_e, G, w, mc, method=method, mgf=mgf, query=query,
                      n_nodes=n_nodes)
    out.update(a=float(10.0 ** la), at_bound=bool(best in (0, len(grid) - 1)))
    return out


def large_T_width(q, T, target, *, method="exact", d_start=8, d_max=65536, step=2.0,
                  band=0.0, **kw):
    """Smallest integer ``d_e ≥ 2`` with best ``L/L0 + band·SE ≤ target`` (bisection).

    Assumes the best loss falls with d_e (a probe that contradicts it by more than its
    4 SE + 1e-3 raises).  Returns ``dict(d_e, rel, se, a, gamma, margin, rel_below,
    probes)``; ``d_e = None`` if ``d_max`` fails; ``rel_below`` is the loss at ``d_e − 1``.

    Parameters
    ----------
    q, T, method
        As for :func:`best_large_T_loss`.
    target : float
        Target ``L/L0`` in (0, 1).
    d_start : int
        First probe (the bracket is found by steps of ``step`` from it).
    d_max : int
        Largest width tried.
    step : float
        Growth factor of the bracketing steps (> 1).
    band : float
        Pass criterion ``rel + band·se ≤ target`` (±2 gives the 2-SE band of the width).
    **kw
        Passed to :func:`best_large_T_loss` (mgf, query, n_gram, rng, n_nodes).
    """
    if not 0.0 < target < 1.0:
        raise ValueError(f"target must be in (0, 1), got {target!r}")
    if not step > 1.0:
        raise ValueError(f"step must be > 1, got {step!r}")
    _check(q, T, 2)
    cache = {}

    def best(d):
        if d not in cache:
            cache[d] = best_large_T_loss(q, T, d, method=method, **kw)
        return cache[d]

    ok = lambda d: best(d)["rel"] + band * best(d)["se"] <= target
    up = lambda d: min(max(d + 1, int(np.ceil(d * step))), d_max)
    down = lambda d: max(min(d - 1, int(d / step)), 2)
    d = max(2, min(int(d_start), d_max))
    if ok(d):                               # invariant: ok(hi); lo fails (or lo = 1)
        hi = d
        while hi > 2 and ok(down(hi)):
            hi = down(hi)
        lo = down(hi) if hi > 2 else 1
    else:
        lo = d
        while lo < d_max and not ok(up(lo)):
            lo = up(lo)
        if lo >= d_max:
            return {"d_e": None, "probes": _probes(cache)}
        hi = up(lo)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    items = sorted(cache.items())
    for (d1, r1), (d2, r2) in zip(items, items[1:]):
        if r2["rel"] > r1["rel"] + 4 * (r1["se"] + r2["se"]) + 1e-3:
            raise RuntimeError(f"large-T loss not monotone in d_e at q={q} T={T}: "
                               f"{d1}:{r1['rel']:.4f} then {d2}:{r2['rel']:.4f}")
    r = best(hi)
    return {"d_e": hi, "rel": r["rel"], "se": r["se"], "a": r["a"], "gamma": r["gamma"],
            "margin": r["margin"], "rel_below": best(lo)["rel"] if lo >= 2 else None,
            "probes": _probes(cache)}


def _probes(cache):
    return " ".join(f"{d}:{r['rel']:.4f}" for d, r in sorted(cache.items()))


def spread_loss(beta, q, n=200000, rng=0):
    """``F_q(β) = 1 − 1/(q E|softmax(β Z)|²)``, ``Z ~ N(0, (q−2) I + J)``: the loss of the
    selected tokens' spread alone (large d_e, no leak; ``β = a/√d_e``), Monte Carlo.

    Parameters
    ----------
    beta : float or array_like
        Scale(s) β.
    q : int
        Number of selected tokens (≥ 2; F_2 = 0).
    n, rng
        Monte-Carlo samples (int) and their random source (numpy.random.Generator or int;
        common to every β).
    """
    if not isinstance(q, (int, np.integer)) or q < 2:
        raise ValueError(f"q must be an integer >= 2, got {q!r}")
    rng = np.random.default_rng(rng)
    C = (q - 2) * np.eye(q) + np.ones((q, q))
    Z = rng.standard_normal((n, q)) @ np.linalg.cholesky(C + 1e-12 * np.eye(q)).T
    b = np.atleast_1d(np.asarray(beta, float))
    out = []
    for bi in b:
        z = bi * Z
        z -= z.max(axis=1, keepdims=True)
        e = np.exp(z)
        e /= e.sum(axis=1, keepdims=True)
        out.append(1.0 - 1.0 / (q * np.einsum("nq,nq->n", e, e).mean()))
    return np.array(out).reshape(np.shape(beta))


def asymptotic_coefficients(q, target, n=400000, rng=0):
    """Leading-order width laws (docs/separation.md, "The width laws"): ``{"log2T": 2}``
    for q = 2 (``d_e ≈ 2 log₂ T``); for q ≥ 3 ``{"selected": 1/β_s², "bulk": 1/(4β_b²),
    "beta_s", "beta_b"}`` (``d_e ≈ c (ln T)²``, the smaller ``c`` wins) of the two branches
    of the mean-field loss: *selected*, ``a ≈ ln N``, the selected logits' spread costs
    ``F_q(β_s) = target`` (β_s by root finding on the Monte-Carlo :func:`spread_loss`);
    *bulk*, ``a ≈ ½ ln N``, the loss ``1 − e^{−(q−1)β_b²} = target``.

    Parameters
    ----------
    q : int
        Number of selected tokens, ≥ 2.
    target : float
        Target ``L/L0`` in (0, 1).
    n, rng
        Of :func:`spread_loss`.
    """
    if not 0.0 < target < 1.0:
        raise ValueError(f"target must be in (0, 1), got {target!r}")
    if not isinstance(q, (int, np.integer)) or q < 2:
        raise ValueError(f"q must be an integer >= 2, got {q!r}")
    if q == 2:
        return {"log2T": 2.0}
    from scipy.optimize import brentq
    bs = brentq(lambda b: float(spread_loss(b, q, n, rng)) - target, 1e-3, 10.0, xtol=1e-6)
    bb = math.sqrt(-math.log1p(-target) / (q - 1))
    return {"selected": 1.0 / bs ** 2, "bulk": 1.0 / (4.0 * bb * bb), "beta_s": bs,
            "beta_b": bb}
