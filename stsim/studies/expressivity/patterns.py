r"""Sparse attention patterns from fixed parameters (Likhosherstov, Choromanski & Weller
2021): inputs whose softmax attention approximates a k-sparse target, as pure
vectorised functions (keys drawn like the position vectors of
:mod:`stsim.studies.expressivity.qsa`).

Target ``A ∈ R^{L×L}``, entries ``≥ 0``, at most ``k`` non-zeros per row and per column,
every row non-empty. Fixed parameters ``W_Q = [I_d; 0]``, ``W_K = [0; I_d]`` (``2d × d``
selections): a token ``x_i = [q_i; k_i] ∈ R^{2d}`` gives logits ``ℓ_ij = q_iᵀ k_j`` and the
attention matrix ``S = rowsoftmax(ℓ)``. Inputs: keys ``k_j = r_j`` (near-orthogonal unit
vectors in ``R^d``), queries built from the target logits ``c_ij = τ + log(A_ij / max_j A_ij)``
on the support ``S_i`` of row ``i``:

* ``"jl"``    ``q_i = Σ_{j∈S_i} c_ij r_j`` (random-projection / JL scheme):
  ``ℓ_ij = c_ij + e_ij`` with ``e_ij = Σ_{j'≠j} c_ij' <r_j', r_j> ≈ N(0, ‖c_i‖²/d)``.
* ``"exact"`` ``q_i = R_{S_i}ᵀ (R_{S_i} R_{S_i}ᵀ)^{-1} c_i``: ``ℓ_ij = c_ij`` exactly on the
  support (ratios preserved to rounding), off-support ``ℓ_ij ≈ N(0, ‖q_i‖²/d)``.

The criteria (log-ratio error ``≤ tol`` and off-support mass ``≤ ε_off`` per row,
:func:`pattern_errors`), the design ``τ = 2 log(L/ε_off)``, the width laws
``d ≥ kτ = 2k log(L/ε_off)`` (exact) and ``d ≳ C k τ² log(Lk)/tol²`` (jl), and the memory
``O(L d + nnz)`` (queries solved in row blocks, logits formed ``block × L`` at a time):
docs/expressivity.md, §2.2–2.4.
"""
from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp
from scipy.special import logsumexp

from stsim.studies.expressivity.qsa import position_vectors, solve_gram
from stsim.util.validate import check_choice, check_int, check_real

__all__ = ["SCHEMES", "TARGETS", "check_pattern", "sparse_target", "pattern_params",
           "pattern_inputs", "pattern_errors", "pattern_attention"]

SCHEMES = ("exact", "jl")
TARGETS = ("random", "banded", "permutation", "block")


def check_pattern(A, k: int | None = None) -> sp.csr_matrix:
    """Validate a target pattern and return it as CSR (explicit zeros removed).

    Raises ``ValueError`` (naming ``A`` or ``k``) if ``A`` is not a non-empty square 2-D
    matrix, has a non-finite or negative entry, has a row without a positive entry
    (a softmax row sums to 1), or has more than ``k`` non-zeros in a row or a column.
    """
    if not sp.issparse(A):
        A = np.asarray(A, dtype=np.float64)
        if A.ndim != 2:
            raise ValueError(f"A must be a square L×L matrix, got shape {A.shape}")
    A = sp.csr_matrix(A, dtype=np.float64)
    if A.shape[0] != A.shape[1]:
        raise ValueError(f"A must be a square L×L matrix, got shape {A.shape}")
    if A.shape[0] < 1:
        raise ValueError("A must be non-empty (L >= 1), got shape (0, 0)")
    if not np.all(np.isfinite(A.data)):
        raise ValueError("A must have finite entries")
    if A.data.size and A.data.min() < 0:
        raise ValueError(f"A must have entries >= 0 (positive on the support), found "
                         f"{A.data.min():.3g}")
    A.eliminate_zeros()
    A.sort_indices()
    row_nnz = np.diff(A.indptr)
    if row_nnz.min() < 1:
        raise ValueError(f"every row of A needs at least one positive entry (a softmax row "
                         f"sums to 1); row {int(np.argmin(row_nnz))} is empty")
    col_nnz = np.bincount(A.indices, minlength=A.shape[1])
    if k is not None:
        k = check_int("k", k, 1)
        if row_nnz.max() > k or col_nnz.max() > k:
            bad = ("row", int(np.argmax(row_nnz)), int(row_nnz.max())) if row_nnz.max() > k \
                else ("column", int(np.argmax(col_nnz)), int(col_nnz.max()))
            raise ValueError(f"A has {bad[2]} non-zeros in {bad[0]} {bad[1]} but k={k} was "
                             f"promised; k must be >= the largest number of non-zeros per row "
                             f"and per column ({max(row_nnz.max(), col_nnz.max())})")
    return A


def sparse_target(kind: str, L: int, k: int, rng: np.random.Generator,
                  low: float = 0.1) -> sp.csr_matrix:
    """A target pattern with at most ``k`` non-zeros per row and column, values in
    ``[low, 1]`` (uniform), as CSR.

    kind : ``random`` — union of ``k`` random permutation matrices (collisions merge, so
    rows have ≤ k entries); ``banded`` — ``|i − j| ≤ (k−1)//2`` (k odd is exact);
    ``permutation`` — one random permutation (k ignored, k = 1); ``block`` — block-diagonal
    with ``k × k`` dense blocks (the last block may be smaller).
    """
    check_choice("kind", kind, TARGETS)
    L, k = check_int("L", L, 1), check_int("k", k, 1)
    low = float(low)
    if kind == "random":
        rows = np.tile(np.arange(L), k)
        cols = np.concatenate([rng.permutation(L) for _ in range(k)])
    elif kind == "banded":
        b = (k - 1) // 2
        off = np.arange(-b, b + 1)
        rows = np.repeat(np.arange(L), off.size)
        cols = rows + np.tile(off, L)
    elif kind == "permutation":
        rows, cols = np.arange(L), rng.permutation(L)
    else:
        blk = np.arange(L) // k
        rows = np.repeat(np.arange(L), k)
        cols = np.repeat(blk * k, k) + np.tile(np.arange(k), L)
    keep = (cols >= 0) & (cols < L)              # a band or the last block past the edge
    rows, cols = rows[keep], cols[keep]
    A = sp.coo_matrix((np.ones(rows.size), (rows, cols)), shape=(L, L)).tocsr()
    A.data = rng.uniform(low, 1.0, size=A.data.size)         # merged duplicates get one value
    A.sort_indices()
    return A


def pattern_params(d: int):
    """Fixed attention parameters ``W_Q = [I_d; 0]``, ``W_K = [0; I_d]`` (each 2d × d):
    a token ``x_i = [q_i; k_i]`` gives ``(x_i W_Q)·(x_j W_K) = q_iᵀ k_j``."""
    d = check_int("d", d, 1)
    WQ = np.zeros((2 * d, d))
    WK = np.zeros((2 * d, d))
    WQ[:d] = np.eye(d)
    WK[d:] = np.eye(d)
    return WQ, WK


def _row_logit_targets(A: sp.csr_matrix, tau: float) -> np.ndarray:
    """``c_ij = τ + log(A_ij / max_j A_ij)`` in CSR data order."""
    rowmax = np.maximum.reduceat(A.data, A.indptr[:-1])
    return tau + np.log(A.data / np.repeat(rowmax, np.diff(A.indptr)))


def pattern_inputs(A, d: int, rng: np.random.Generator, *, k: int | None = None,
                   scheme: str = "exact", eps_off: float = 0.01, tau: float | None = None,
                   family: str = "sphere", block: int = 1024):
    """Inputs ``X = [Q, K]`` (L × 2d) whose attention under :func:`pattern_params`
    approximates the row-normalised target ``A``.

    Parameters
    ----------
    A : (L, L) array or scipy.sparse matrix
        The target, validated by :func:`check_pattern`.
    d : int
        Head dimension, >= 1 (tokens have dimension 2d).
    rng : numpy.random.Generator
        Draws the keys ``r_1..r_L`` (near-orthogonal unit rows).
    k : int, optional
        Promised bound on non-zeros per row and column.
    scheme : {"exact", "jl"}
        ``jl``: ``q_i = Σ_j c_ij r_j``; ``exact``: the minimum-norm ``q_i`` with
        ``q_iᵀ r_j = c_ij`` on the support (needs ``|S_i| <= d``).
    eps_off : float
        Off-support mass the design aims at; sets ``τ = 2 log(L/ε_off)``.
    tau : float, optional
        Overrides τ.
    family : {"sphere", "rademacher"}
        Law of the keys.
    block : int
        Rows solved at once (memory ``O(block · k · d)``).

    Returns
    -------
    Q : (L, d) array
        The queries.
    K : (L, d) array
        The keys.
    tau : float
        The logit scale used.
    """
    A = check_pattern(A, k)
    d = check_int("d", d, 1)
    check_choice("scheme", scheme, SCHEMES)
    L = A.shape[0]
    if tau is None:
        tau = 2.0 * math.log(max(L, 2) / check_real("eps_off", eps_off, lo=0.0, lo_open=True))
    tau = check_real("tau", tau, lo=0.0, lo_open=True)
    K = position_vectors(rng, L, d, family)
    c = _row_logit_targets(A, tau)
    if scheme == "jl":
        C = sp.csr_matrix((c, A.indices, A.indptr), shape=A.shape)
        return np.asarray(C @ K), K, tau
    nnz = np.diff(A.indptr)
    if nnz.max() > d:
        raise ValueError(f"the exact scheme needs d >= the largest row support "
                         f"({int(nnz.max())}), got d={d}")
    Q = np.empty((L, d))
    for s in np.unique(nnz):                    # rows with the same support size, in blocks
        rows_s = np.flatnonzero(nnz == s)
        for b0 in range(0, rows_s.size, block):
            r = rows_s[b0:b0 + block]
            pos = A.indptr[r][:, None] + np.arange(s)             # (n, s) CSR positions
            Rs = K[A.indices[pos]]                                 # (n, s, d)
            Gm = Rs @ Rs.transpose(0, 2, 1)                        # (n, s, s)
            coef = solve_gram(Gm, c[pos][:, :, None])
            Q[r] = (Rs.transpose(0, 2, 1) @ coef)[:, :, 0]
    return Q, K, tau


def pattern_errors(A, Q: np.ndarray, K: np.ndarray, block: int = 512) -> dict:
    """Per-row approximation errors of ``S = rowsoftmax(Q Kᵀ)`` against ``A``.

    Logits are formed ``block × L`` at a time (``L²`` dot products, memory
    ``O(block · L + L d)``; the ``L × L`` matrix is never stored).

    Parameters
    ----------
    A : (L, L) array or scipy.sparse matrix
        The target pattern.
    Q : (L, d) array
        The queries.
    K : (L, d) array
        The keys.
    block : int
        Rows of logits formed at once.

    Returns
    -------
    dict
        (L,) arrays: ``ratio`` ``max_{j,j'∈S_i} |log(S_ij/S_ij') − log(A_ij/A_ij')|``,
        ``off_mass`` ``Σ_{j∉S_i} S_ij``, ``tv`` ``½ Σ_j |S_ij − Â_ij|`` with ``Â`` = A
        row-normalised, ``off_max`` the largest off-support logit minus the smallest
        on-support one.
    """
    A = check_pattern(A)
    L = A.shape[0]
    nnz = np.diff(A.indptr)
    rowid = np.repeat(np.arange(L), nnz)
    Ahat = A.data / np.add.reduceat(A.data, A.indptr[:-1])[rowid]
    ratio, off, tv, gap = (np.empty(L) for _ in range(4))
    for s0 in range(0, L, block):
        s1 = min(L, s0 + block)
        lg = Q[s0:s1] @ K.T                                        # (b, L)
        lo, hi = A.indptr[s0], A.indptr[s1]
        rr = rowid[lo:hi] - s0
        cc = A.indices[lo:hi]
        lse = logsumexp(lg, axis=1)
        on = lg[rr, cc]
        e = on - np.log(A.data[lo:hi])
        starts = A.indptr[s0:s1] - lo
        ratio[s0:s1] = np.maximum.reduceat(e, starts) - np.minimum.reduceat(e, starts)
        s_on = np.exp(on - lse[rr])
        on_mass = np.add.reduceat(s_on, starts)
        off[s0:s1] = np.clip(1.0 - on_mass, 0.0, None)
        tv[s0:s1] = 0.5 * (np.add.reduceat(np.abs(s_on - Ahat[lo:hi]), starts) + off[s0:s1])
        lg[rr, cc] = -np.inf
        gap[s0:s1] = lg.max(axis=1) - np.minimum.reduceat(on, starts)
    return {"ratio": ratio, "off_mass": off, "tv": tv, "off_max": gap}


def pattern_attention(X: np.ndarray, WQ: np.ndarray, WK: np.ndarray) -> np.ndarray:
    """Dense reference ``rowsoftmax((X W_Q)(X W_K)ᵀ)`` (L × L; small L only, for tests)."""
    lg = (X @ WQ) @ (X @ WK).T
    return np.exp(lg - logsumexp(lg, axis=1, keepdims=True))
