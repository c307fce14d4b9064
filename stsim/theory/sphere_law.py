r"""The law of the sphere PE's overlaps: one coordinate of a uniform unit vector, and the Gram
matrix of a few such vectors (used by :mod:`stsim.theory.family_asymptotic`).

For ``p`` uniform on the unit sphere of ``R^{d_e}`` and any fixed unit ``e``, ``t = <p, e>``
has density ``∝ (1 − t²)^{(d_e−3)/2}`` on (−1, 1), i.e. ``(1 + t)/2 ~ Beta((d_e−1)/2,
(d_e−1)/2)``: mean 0, ``E t² = 1/d_e``, ``E t⁴ = 3/(d_e(d_e+2))``, moment generating
function ``M(λ) = E e^{λt} = ₀F₁(; d_e/2; λ²/4)``.  The Gram matrix of q i.i.d. such vectors
is a normalised Wishart matrix (Bartlett decomposition below).
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from stsim.core.model import query_coef

__all__ = ["log_sphere_mgf", "log_gauss_mgf", "sphere_nodes", "selected_gram", "gram_rule",
           "draw_scores"]


# ---- the law of t: moment generating function and Gauss rule ---------------------------
def log_sphere_mgf(lam, d_e):
    """``ln E e^{λt}`` for ``t`` the first coordinate of a uniform unit vector in ``R^{d_e}``.

    ``₀F₁(; d_e/2; λ²/4)`` (scipy ``hyp0f1``); where that overflows (λ ≳ 700), the Bessel
    form ``ln Γ(d_e/2) + (1 − d_e/2) ln(λ/2) + ln ive(d_e/2 − 1, λ) + λ``.

    Parameters
    ----------
    lam : array_like
        Exponents λ (the MGF is even in λ).
    d_e : int
        Dimension, ≥ 2.
    """
    from scipy.special import gammaln, hyp0f1, ive   # here, not at the top: a study's
    #                                   command and pool workers start without scipy
    lam = np.abs(np.asarray(lam, dtype=float))
    b = 0.5 * d_e
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        v = np.atleast_1d(np.log(hyp0f1(b, 0.25 * lam * lam)))
        bad = ~np.isfinite(v)
        if np.any(bad):
            x = np.atleast_1d(lam)[bad]
            v[bad] = gammaln(b) + (1.0 - b) * np.log(0.5 * x) + np.log(ive(b - 1.0, x)) + x
    return v.reshape(lam.shape) if lam.ndim else float(v[0])


def log_gauss_mgf(lam, d_e):
    """``λ²/(2 d_e)``: the Gaussian form of :func:`log_sphere_mgf` (t of variance 1/d_e),
    with the same parameters."""
    lam = np.asarray(lam, dtype=float)
    return lam * lam / (2.0 * d_e)


@lru_cache(maxsize=256)
def _nodes(d_e, n_nodes):
    from scipy.linalg import eigh_tridiagonal
    al = 0.5 * (d_e - 3)                       # Jacobi weight (1 − t)^α (1 + t)^α
    n = np.arange(2, n_nodes, dtype=float)
    beta = np.concatenate([[1.0 / (2 * al + 3)],          # n = 1 (finite also at α = −1/2)
                           n * (n + 2 * al) / ((2 * n + 2 * al + 1) * (2 * n + 2 * al - 1))])
    t, v = eigh_tridiagonal(np.zeros(n_nodes), np.sqrt(beta))
    w = v[0] ** 2
    t.flags.writeable = False
    w = w / w.sum()
    w.flags.writeable = False
    return t, w


def sphere_nodes(d_e, n_nodes=64):
    """Gauss rule for the law of t (density ∝ ``(1 − t²)^{(d_e−3)/2}``): ``(t, w)``, Σw = 1.

    Golub–Welsch on the monic Gegenbauer recurrence ``β_n = n(n+2α)/((2n+2α+1)(2n+2α−1))``,
    ``α = (d_e − 3)/2`` (exact for polynomials of degree < 2 ``n_nodes``; any d_e ≥ 2).

    Parameters
    ----------
    d_e, n_nodes : int
        Dimension (≥ 2), number of nodes.
    """
    if not isinstance(d_e, (int, np.integer)) or d_e < 2:
        raise ValueError(f"d_e must be an integer >= 2, got {d_e!r}")
    if not isinstance(n_nodes, (int, np.integer)) or n_nodes < 2:
        raise ValueError(f"n_nodes must be an integer >= 2, got {n_nodes!r}")
    return _nodes(int(d_e), int(n_nodes))


# ---- the selected encodings' Gram matrix ------------------------------------------------
def selected_gram(q, d_e, n, rng):
    """``n`` Gram matrices ``(n, q, q)`` of q i.i.d. uniform unit vectors in ``R^{d_e}``.

    Bartlett decomposition of the Wishart ``W = X Xᵀ`` (O(q²) per sample) when
    ``d_e ≥ q``; explicit vectors otherwise.

    Parameters
    ----------
    q, d_e, n : int
        Number of vectors, dimension, number of samples.
    rng : numpy.random.Generator or int
        Random source.
    """
    rng = np.random.default_rng(rng)
    if d_e < q:
        P = rng.standard_normal((n, q, d_e))
        P /= np.linalg.norm(P, axis=2, keepdims=True)
        return P @ P.transpose(0, 2, 1)
    L = np.zeros((n, q, q))
    for i in range(q):
        L[:, i, i] = np.sqrt(rng.chisquare(d_e - i, n))
        L[:, i, :i] = rng.standard_normal((n, i))
    W = L @ L.transpose(0, 2, 1)
    dg = 1.0 / np.sqrt(np.einsum("nii->ni", W))
    G = W * dg[:, :, None] * dg[:, None, :]
    G[:, np.arange(q), np.arange(q)] = 1.0
    return G


def gram_rule(q, d_e, n_gram=8192, rng=0, n_nodes=64):
    """``(G, w, mc)``: Gram matrices with weights for ``E_G``; ``mc`` = Monte Carlo.

    q = 1: one point; q = 2: the Gauss rule of :func:`sphere_nodes` on ``ε = G_12``
    (deterministic); q ≥ 3: ``n_gram`` draws of :func:`selected_gram`, weights 1/n.

    Parameters
    ----------
    q, d_e : int
        Number of selected tokens, dimension.
    n_gram, rng
        Sample size and random source of :func:`selected_gram` (q ≥ 3).
    n_nodes : int
        Gauss nodes (q = 2).
    """
    if q == 1:
        return np.ones((1, 1, 1)), np.ones(1), False
    if q == 2:
        e, w = sphere_nodes(d_e, n_nodes)
        G = np.ones((len(e), 2, 2))
        G[:, 0, 1] = G[:, 1, 0] = e
        return G, np.array(w), False
    return selected_gram(q, d_e, n_gram, rng), np.full(n_gram, 1.0 / n_gram), True


def draw_scores(T, d_e, G, rng, query="sum"):
    """Scores ``g`` ``(n, T)``, ``g_i = <p_i, p_q>``, given the selected Gram matrices: the q
    selected first (``c Σ_j G_ij``), then T − q unselected ``c |Σ_j p_j| t_k`` with t_k
    drawn i.i.d. (O(n T); the law of :func:`stsim.theory.family.sample_scores`).

    Parameters
    ----------
    T, d_e : int
        Sequence length, dimension (≥ 2).
    G : ndarray
        Gram matrices ``(n, q, q)``.
    rng : numpy.random.Generator or int
        Random source.
    query : str
        ``"sum"`` (c = 1) or ``"mean"`` (c = 1/q).
    """
    rng = np.random.default_rng(rng)
    n, q = G.shape[:2]
    c = query_coef(query, q)
    h = 0.5 * (d_e - 1)
    tk = 2.0 * rng.beta(h, h, size=(n, T - q)) - 1.0
    r = c * np.sqrt(G.sum(axis=(1, 2)))
    return np.concatenate([c * G.sum(axis=2), r[:, None] * tk], axis=1)
