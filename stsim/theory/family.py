r"""Best population loss of the two-parameter family W_ee = a I, V_x = γ I (sphere PE, theory model).

The family zero-initialised training converges to (docs/theory.md §2: with ``x_query = 0``
population GD stays on ``(W_ee, V_x)``; by the rotation symmetry of the sphere law it stays on
``(a I, γ I)``); its best loss at a given ``d_e`` is the representational side of the
separation study (:mod:`stsim.studies.separation`).

Logits ``a_i = a · p_iᵀ p_q``, ``p_q = c Σ_{j∈y} p_j``. With ``s = softmax(a g)``,
``g_i = p_iᵀ p_q``, ``u = 1_y / q``, the X-expectation is (population.py)::

    E_X ℓ = ½ (|s|² γ² d − 2 γ d (s·u) + d/q).

γ enters quadratically with shared coefficient, so for fixed a the optimal γ is
``γ*(a) = E[s·u] / E[|s|²]`` and::

    L(a) = (d/2) (1/q − E[s·u]² / E[|s|²]),       L/L0 = 1 − q E[s·u]² / E[|s|²].

Only a 1-D minimisation over a remains (common random numbers: the encodings are drawn
once).  The query c (sum: 1, mean: 1/q) only rescales a, so the *best* family loss is the
same for "sum" and "mean" (the training dynamics are not).

Fast exact sampling of g (cost O(n (T + q d_e)), not O(n T d_e)): the q selected vectors
are drawn explicitly; for an unselected token p_i (independent of p_q, uniform on S^{d_e-1})
``p_iᵀ p_q = |p_q| t_i`` with ``t_i`` the first coordinate of a uniform unit vector,
(t_i + 1)/2 ~ Beta((d_e−1)/2, (d_e−1)/2), i.i.d. across i.
"""
from __future__ import annotations

import numpy as np

from stsim.core.model import query_coef
from stsim.core.targets import Mean
from stsim.theory.family_asymptotic import family_mc_moments

__all__ = ["sample_scores", "family_stats", "family_rel",
           "best_family_loss", "best_softmax_family", "family_loss_at", "family_point"]


def sample_scores(T, q, d_e, n_mc, rng, query="sum"):
    """g (n_mc, T): g[:, :q] selected tokens' p_iᵀ p_q, g[:, q:] unselected."""
    rng = np.random.default_rng(rng)
    c = query_coef(query, q)
    P = rng.standard_normal((n_mc, q, d_e))
    P /= np.linalg.norm(P, axis=2, keepdims=True)
    pq = c * P.sum(axis=1)                                   # (n, d_e)
    gsel = np.einsum("nqe,ne->nq", P, pq)
    if d_e == 1:
        t = rng.choice([-1.0, 1.0], size=(n_mc, T - q))
    else:
        h = 0.5 * (d_e - 1)
        t = 2.0 * rng.beta(h, h, size=(n_mc, T - q)) - 1.0
    gun = np.linalg.norm(pq, axis=1)[:, None] * t
    return np.concatenate([gsel, gun], axis=1)


def family_stats(a, g, q):
    """``E[|s|²]``, ``E[s·u]`` for logits ``a·g``: the means of
    :func:`stsim.theory.family_asymptotic.family_mc_moments`."""
    S, Q = family_mc_moments(a, g, q)
    return Q.mean(), S.mean() / q


def family_rel(a, g, q):
    """``L(a)/L0 = 1 − q E[s·u]² / E[|s|²]``: the family's Monte-Carlo population loss
    at ``W_ee = a I`` with the best γ*(a), relative to ``L0 = d/(2q)`` (d-free), on scores ``g``
    ``(n_mc, T)`` of :func:`sample_scores` (the ``q`` selected tokens first)."""
    S2, su = family_stats(a, g, q)
    return 1.0 - q * su * su / S2


def best_family_loss(T, q, d, d_e, n_mc=4096, rng=0, query="sum", g=None, bounds=(-1.0, 3.0)):
    """Minimise the Monte-Carlo population loss over (a, γ) for W_ee = aI, V_x = γI.

    Returns dict(loss, rel = loss/L0, a, gamma, L0).  The minimisation is over log10(a)
    in ``bounds`` (a ≥ 0; a < 0 only down-weights the selected tokens) with γ in closed form.
    """
    if g is None:
        g = sample_scores(T, q, d_e, n_mc, rng, query)
    la, at_bound = best_softmax_family(g, q, bounds=bounds)[1:]
    a = 10.0 ** la
    S2, su = family_stats(a, g, q)
    L0 = Mean().zero_loss(d, q)
    rel = 1.0 - q * su * su / S2
    return {"loss": rel * L0, "rel": float(rel), "a": float(a), "gamma": float(su / S2),
            "L0": L0, "at_bound": at_bound}


def best_softmax_family(g, q, hint=None, bounds=(-1.0, 3.0)) -> tuple:
    """``(best L/L(0), its log10 a, at_bound)`` of the softmax sphere family on scores ``g``
    (``(n, T)``, the q selected first; :func:`sample_scores`):
    ``L/L(0) = 1 − (E S)²/(q E|s|²)`` at ``s = softmax(a g)`` (γ in closed form), minimised
    over ``log10 a``: from ``hint``, a 7-point grid ``hint ± 0.3`` (falling back to the
    whole search when its best point is an end), else a 17-point grid over ``bounds``;
    then bounded Brent between the best grid point's neighbours (``xatol`` 2·10⁻³). The
    row max of ``a g`` is ``a max g`` (``a > 0``), so ``g`` is shifted once for every ``a``;
    ``S`` and ``|s|²`` from the unnormalised weights and their sum. ``at_bound``: the
    best grid point is an end of ``bounds``."""
    gc = g - g.max(axis=1, keepdims=True)          # a > 0: the row max of a·g is a·max g

    def f(la):
        z = gc * (10.0 ** la)
        np.exp(z, out=z)
        Z = z.sum(axis=1)
        S = z[:, :q].sum(axis=1) / Z
        Q = np.einsum("nt,nt->n", z, z) / (Z * Z)
        return float(1.0 - S.mean() ** 2 / (q * Q.mean()))

    def search(grid):
        vals = [f(x) for x in grid]
        k = int(np.argmin(vals))
        return grid, vals, k
    grid, vals, k = search(np.linspace(hint - 0.3, hint + 0.3, 7) if hint is not None
                           else np.linspace(bounds[0], bounds[1], 17))
    if hint is not None and k in (0, len(grid) - 1):
        grid, vals, k = search(np.linspace(bounds[0], bounds[1], 17))
    lo, hi = grid[max(k - 1, 0)], grid[min(k + 1, len(grid) - 1)]
    from scipy.optimize import minimize_scalar   # here: scipy.optimize slows every command
    r = minimize_scalar(f, bounds=(lo, hi), method="bounded", options={"xatol": 2e-3})
    edge = bool(grid[k] in (bounds[0], bounds[1]))
    return ((float(r.fun), float(r.x), edge) if r.fun <= vals[k]
            else (float(vals[k]), float(grid[k]), edge))


def family_loss_at(a, gamma, T, q, d, g):
    """Population loss (MC) of a given (a, γ)."""
    S2, su = family_stats(a, g, q)
    return 0.5 * (S2 * gamma ** 2 * d - 2 * gamma * d * su + d / q)


def family_point(q, T, d_e, n_mc, seed, query="sum"):
    """One Monte-Carlo estimate of the family's best ``L/L0`` at ``(q, T, d_e)`` (d-free).

    For :func:`stsim.sweeps.sweep`: returns ``rel`` (best loss / L0), ``a``, ``gamma`` (at
    ``d = 1``; γ does not depend on d), ``at_bound`` (the optimum hit the search bound).
    """
    r = best_family_loss(T, q, 1, d_e, n_mc=n_mc, rng=seed, query=query)
    return {"rel": r["rel"], "a": r["a"], "gamma": r["gamma"], "at_bound": int(r["at_bound"])}


def width_grid(max_width: int, min_width: int = 1) -> list:
    """Integer widths ``round(2^{k/2})`` between ``min_width`` and ``max_width`` (ratio √2)."""
    out, k = [], 0
    while round(2 ** (k / 2)) <= max_width:
        w = int(round(2 ** (k / 2)))
        if w >= min_width and (not out or w > out[-1]):
            out.append(w)
        k += 1
    return out


