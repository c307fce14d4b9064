r"""Interference floor of near-orthogonal positional encodings (fixed table or sphere).

With ``W_ee = c I``, ``V_x = γ I`` (``W_xe = 0``, ``V_e = 0``, ``x_query = 0``) and the sum
query ``p_q = Σ_{j∈y} p_j`` the logit of token ``i`` is ``c <p_i, p_q>``. For unit vectors
with ``ε_ij = <p_i, p_j>`` (mean 0, variance ``1/d_e`` for random vectors):

* a selected token ``i ∈ y`` has logit ``c (1 + ξ_i)``, ``ξ_i = Σ_{j∈y, j≠i} ε_ij``, with
  ``Cov(ξ) = ((q − 2) I + J)/d_e`` (``ξ_i`` and ``ξ_k`` share ``ε_ik``);
* an unselected token has logit ``c Σ_{j∈y} ε_ij``, of variance ``c² q/d_e``.

Expanding the softmax over the selected tokens to first order,
``s_i ≈ (1/q)(1 + c (ξ_i − ξ̄))``; the loss ``E_X ℓ = (d/2)[Σ_i (γ s_i − u_i)² + γ² Σ_{i∉y} s_i²]``
then has a *spread* term and a *leak* term

    L(c) ≈ (d/2) [ c² A + B e^{−2c} ],   A = (q − 1)(q − 2)/(q² d_e),   B = (T − q)/q²

(``E Σ_i (ξ_i − ξ̄)² = tr((I − J/q) Cov) = (q − 1)(q − 2)/d_e``; γ = 1). The spread grows with
``c`` and the leak falls, so the loss has a floor: ``dL/dc = 0`` gives
``c e^{2c} = B/A``, i.e. ``c* = ½ W₀(2B/A)`` (Lambert W), and

    L* ≈ (d/2) A c* (c* + 1) ≈ (d/8) (q−1)(q−2)/(q² d_e) · ln²(T d_e / q²)   (large T d_e).

So the floor falls as ``1/d_e`` up to a ``log²`` factor and vanishes for ``q ≤ 2``. At the
``c`` learnt for ``q`` the spread at an unseen ``q_test`` is
``c² (q_test − 1)(q_test − 2)/(q_test² d_e)``, which grows with ``q_test`` (0, 2/9, 3/8, 5/9
for q_test = 2, 3, 4, 6). A fixed one-hot table has ``ε = 0`` and no such term.

:func:`interference_loss_mc` is the Monte-Carlo check of these formulas (exact
expectation over X, Monte-Carlo over subsets and, for the sphere law, encodings).
"""
from __future__ import annotations

import numpy as np

__all__ = ["interference_floor_approx", "interference_loss_mc",
           "interference_floor_mc", "random_table"]


def interference_floor_approx(T, q, d, d_e):
    """``(c*, L*)`` of the first-order law: ``c* = ½ W₀(2B/A)``, ``L* = (d/2) A c*(c*+1)``;
    ``(inf, 0)`` for ``q <= 2``."""
    A, B = (q - 1) * (q - 2) / (q * q * d_e), (T - q) / (q * q)
    if A == 0:
        return float("inf"), 0.0
    from scipy.special import lambertw      # here: the figures command starts without scipy
    c = 0.5 * float(np.real(lambertw(2.0 * B / A)))
    return c, 0.5 * d * A * c * (c + 1.0)


def random_table(rng, n, d_e):
    """``n`` i.i.d. uniform unit vectors in ``R^{d_e}`` (rows)."""
    G = rng.standard_normal((n, d_e))
    return G / np.linalg.norm(G, axis=1, keepdims=True)


def interference_loss_mc(c, T, q, d, table=None, *, d_e=None, gamma=None, n_mc=4000,
                         rng=None):
    """Loss of ``W_ee = c I``, ``V_x = γ I`` (sum query, theory model), exact in X and
    Monte-Carlo over ``n_mc`` subsets.

    ``table`` (n >= T, d_e): a fixed near-orthogonal table (positions ``0..T-1`` are used);
    if None, a fresh sphere table is drawn for each sample (width ``d_e``).
    ``gamma=None`` uses the optimal ``γ = E[s·u]/E[|s|²]``. ``c`` may be an array.
    Returns ``(loss, gamma)`` arrays shaped like ``c``.
    """
    rng = np.random.default_rng(0) if rng is None else rng
    shape = np.shape(c)
    c = np.atleast_1d(np.asarray(c, dtype=float))
    y = np.argsort(rng.random((n_mc, T)), axis=1)[:, :q]          # the subsets
    if table is not None:
        P = np.asarray(table, dtype=float)[:T]
        G = P @ P.T                                           # (T, T)
        g = G[:, y].sum(axis=2).T                             # (n_mc, T): <p_i, p_q>
    else:
        P = random_table(rng, n_mc * T, d_e).reshape(n_mc, T, d_e)
        pq = np.take_along_axis(P, y[:, :, None], axis=1).sum(axis=1)
        g = np.einsum("btk,bk->bt", P, pq)
    sel = np.zeros((n_mc, T), bool)
    np.put_along_axis(sel, y, True, axis=1)
    out_L, out_g = [], []
    for ci in c:
        a = ci * g
        a = a - a.max(axis=1, keepdims=True)
        s = np.exp(a)
        s /= s.sum(axis=1, keepdims=True)
        S2 = (s * s).sum(axis=1).mean()
        su = (s * sel).sum(axis=1).mean() / q
        gm = su / S2 if gamma is None else float(gamma)
        out_L.append(0.5 * d * (S2 * gm * gm - 2.0 * gm * su + 1.0 / q))
        out_g.append(gm)
    return np.array(out_L).reshape(shape), np.array(out_g).reshape(shape)


def interference_floor_mc(T, q, d, table=None, *, d_e=None, c_grid=None, n_mc=4000, rng=None):
    """Minimum over ``c`` (grid) of :func:`interference_loss_mc` with optimal γ:
    ``(c*, L*)``."""
    c_grid = np.linspace(0.5, 12.0, 116) if c_grid is None else np.asarray(c_grid, float)
    L, _ = interference_loss_mc(c_grid, T, q, d, table, d_e=d_e, n_mc=n_mc, rng=rng)
    i = int(np.argmin(L))
    return float(c_grid[i]), float(L[i])
