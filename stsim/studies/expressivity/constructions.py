r"""Expressivity constructions: explicit attention solutions, with their width laws (SPEC §8).

Two results that sit beside the paper's upper bound ``O(d + q log T)`` are built here
explicitly, as pure vectorised functions (float64; randomness only through the
generators / seeds passed in).

1. q-sparse averaging (Sanford, Hsu & Telgarsky 2023)
-----------------------------------------------------
Tokens ``z_i = [x_i; u_i] ∈ R^{d+m}`` with *position vectors* ``u_1..u_N ∈ R^m`` drawn
from a near-orthogonal family (:data:`FAMILIES`: ``"sphere"`` = i.i.d. uniform unit
vectors, the law of ``stochastic/sphere`` in :mod:`stsim.core.encodings`; ``"rademacher"`` =
i.i.d. entries ``±1/√m``). For a subset ``y`` (``|y| = q``) the query token is
``z_q = [0; w_y]`` and the parameters are the paper's ground truth scaled by ``λ``::

    W = λ [[0, 0], [0, I_m]]        V = [I_d, 0]          (a_i = z_iᵀ W z_q = λ <u_i, w_y>)

Two query vectors (:data:`QUERIES`):

* ``"sum"``   ``w_y = Σ_{j∈y} u_j`` (the paper's ``p_query``). With ``g_i = <u_i, w_y>``:
  ``g_i = 1 + Σ_{j∈y, j≠i} <u_i,u_j>`` for ``i ∈ y`` and ``g_i = Σ_{j∈y} <u_i,u_j>`` else,
  so with coherence ``δ = max_{i≠j} |<u_i,u_j>|`` the selected logits lie in
  ``λ[1 − (q−1)δ, 1 + (q−1)δ]`` and the others in ``λ[−qδ, qδ]``.
* ``"exact"`` ``w_y = U_yᵀ (U_y U_yᵀ)^{-1} 1_q`` — the minimum-norm vector with
  ``<u_j, w_y> = 1`` for every ``j ∈ y`` (needs ``q ≤ m``; the q×q Gram matrix of the
  selected vectors is the only Gram block ever formed). The selected logits are then
  *exactly* equal (``λ``), which is what makes the error vanish as ``λ → ∞``.

Error bound (derived in ``docs/expressivity.md``). Let ``s = softmax(λ g)``,
``u = 1_y / q``, margin ``Δ = min_{i∈y} g_i − max_{i∉y} g_i``, in-subset spread
``σ = max_{i∈y} g_i − min_{i∈y} g_i``, leak ``ρ = Σ_{i∉y} s_i``. Then
``f − STS_q = Σ_i (s_i − u_i) x_i``, so for tokens with ``‖x_i‖ ≤ B``::

    ‖f − STS_q‖ ≤ B ‖s − u‖₁,      ‖s − u‖₁ ≤ 2ρ + (e^{λσ} − 1),     ρ ≤ ((N−q)/q) e^{−λΔ}

and ``sup_{‖x_i‖≤1} ‖f − STS_q‖ = ‖s − u‖₁`` exactly (take ``x_i = sign(s_i−u_i) e_1``), so
the *weight error* ``‖s − u‖₁`` is the worst-case error over unit-ball tokens. For the
``exact`` query ``σ = 0`` and ``‖s − u‖₁ = 2ρ → 0`` as ``λ → ∞`` **iff** ``Δ > 0``; with
``λ = log(2(N−q)/(qε))/γ`` the error is ``≤ ε`` whenever ``Δ ≥ γ``. Width law: for random
position vectors and ``i ∉ y``, ``g_i = <u_i, w_y>`` is (sub-)Gaussian with variance
``‖w_y‖²/m ≈ q/m``, so ``E e^{λ g_i} ≤ e^{λ² q/(2m)}`` and
``E ρ ≤ ((N−q)/q) exp(−λ + λ² q/(2m))``. At the design λ this is ``≤ ε/2`` iff
``m ≥ λq / (2(1−γ)) = q log(2(N−q)/(qε)) / (2γ(1−γ))`` — ``2 q log(2(N−q)/(qε))`` at
``γ = ½``: the ``m = O(q log N)`` law (for the mean; the worst over sampled inputs needs
a constant factor more).
For the ``sum`` query ``g_i − g_j = Σ_{l∈y∖{i,j}} (<u_i,u_l> − <u_j,u_l>)`` (``i, j ∈ y``)
has variance ``2(q−2)/m``: zero for ``q ≤ 2`` (the sum query is then exact too), otherwise
``σ > 0`` does not vanish — at fixed ``m`` the error is U-shaped in ``λ`` (leak falls,
spread grows), the hard-max limit is ``2(q−1)/q``, and reaching ``ε`` needs ``λσ ≲ ε``
with ``λ ≳ log(N/(qε))``, i.e. ``m ≳ C (q−2) log²(2(N−q)/(qε))/ε²``.

Structured computation: for one query only the ``N`` logits ``<u_i, w_y>`` and the q×q
selected Gram block are needed; :class:`PositionTable` streams ``U`` in seeded row chunks
so that ``N = 10⁴``-scale tables are never stored whole and no ``N×N`` Gram is built.
The sequence-to-sequence qSA (every token ``i`` has its own subset ``y_i``) uses tokens
``[x_i; u_i; w_{y_i}] ∈ R^{d+2m}`` and ``W = λ`` · (identity from the query block to the
key block), computed in row blocks.

2. Sparse attention patterns from fixed parameters (Likhosherstov, Choromanski & Weller 2021)
----------------------------------------------------------------------------------------------
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

Approximation criteria per row (measured): log-ratio error
``max_{j,j'∈S_i} |log(S_ij/S_ij') − log(A_ij/A_ij')| = max_j e_ij − min_j e_ij ≤ tol`` and
off-support mass ``Σ_{j∉S_i} S_ij ≤ ε_off``. Since ``Σ_{S_i} e^{c_ij} ≥ e^τ``, the mass is at
most ``(L − k) e^{o_i − τ}`` with ``o_i`` the largest off-support logit, so with the design
``τ = 2 log(L/ε_off)`` it suffices that ``o_i ≤ τ/2`` (and, for ``jl``, ``e_ij`` small). With
``‖q_i‖² ≈ Σ_j c_ij² ≲ k τ²`` the off-support logits are (sub-)Gaussian with variance
``≲ kτ²/d``; summing their exponentials (Gaussian moment generating function),
``E[off mass] ≲ (L/Σ_j a_ij) exp(kτ²/(2d) − τ)``, which is ``≤ ε_off`` once
``kτ²/(2d) ≤ τ − log(L/ε_off) = τ/2``, i.e. ``d ≥ kτ = 2k log(L/ε_off)`` for ``exact``.
``jl`` also needs the on-support errors small: ``e_ij − e_ij' = Σ_l c_il(ρ_lj − ρ_lj')``
(``ρ`` = Gram of the keys) has standard deviation ``≈ τ √(2(k−2)/d)`` — the ``τ`` parts
cancel only for ``k ≤ 2`` — so ``d ≳ C k τ² log(Lk)/tol²``: ``log L / tol²`` at fixed
``τ``, and ``log³ L`` once ``τ`` grows with ``L`` as it must for a fixed ``ε_off``.
Memory is ``O(L d + nnz)``: queries are solved in row blocks, and the ``L²`` logits are
formed ``block × L`` at a time.
"""
from __future__ import annotations

from dataclasses import dataclass
import math

import numpy as np
import scipy.sparse as sp
from scipy.special import logsumexp

from stsim.core.encodings import StochasticSphere
from stsim.core.model import target_params
from stsim.util.validate import check_int

__all__ = [
    "FAMILIES", "QUERIES", "SCHEMES", "TARGETS",
    "PositionTable", "position_vectors", "subset_queries", "qsa_params", "design_lambda",
    "selection_errors", "qsa_errors", "qsa_output", "seq2seq_params", "seq2seq_errors",
    "check_pattern", "sparse_target", "pattern_params", "pattern_inputs",
    "pattern_errors", "pattern_attention", "smallest_passing", "fit_linear",
]

FAMILIES = ("sphere", "rademacher")
QUERIES = ("sum", "exact")
SCHEMES = ("exact", "jl")
TARGETS = ("random", "banded", "permutation", "block")


def _choice(name, value, allowed):
    if value not in allowed:
        raise ValueError(f"{name} must be one of {allowed}, got {value!r}")
    return value


def _positive(name, value, allow_inf=False):
    v = float(value)
    if not (v > 0) or (math.isinf(v) and not allow_inf) or math.isnan(v):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return v


# ======================================================================================
# 1. position vectors
# ======================================================================================
def _draw_rows(rng: np.random.Generator, n: int, m: int, family: str) -> np.ndarray:
    """``n`` i.i.d. position vectors in ``R^m`` (rows). ``sphere`` reuses the sampler of
    ``stochastic/sphere`` (normalised Gaussians); ``rademacher`` has entries ``±1/√m``."""
    if family == "sphere":
        return StochasticSphere(m).sample(rng, 1, n).P[0]
    return (2.0 * rng.integers(0, 2, size=(n, m)) - 1.0) / math.sqrt(m)


@dataclass(frozen=True)
class PositionTable:
    """Seeded table of ``N`` position vectors ``u_i ∈ R^m``, generated in row chunks.

    Row chunk ``c`` (rows ``c·chunk .. (c+1)·chunk − 1``) is drawn from its own generator
    ``default_rng(SeedSequence(seed).spawn(n_chunks)[c])``, so any row can be regenerated
    without storing the table: :meth:`rows` returns selected rows, :meth:`chunks` streams
    the table, :meth:`dense` builds it (small ``N`` only). Memory ``O(chunk · m)``.

    Attributes
    ----------
    N, m : int — number of positions and their dimension.
    family : {"sphere", "rademacher"}
    seed : int or tuple of ints — ``SeedSequence`` entropy (the experiments key it by the
        point's sizes, e.g. ``(seed, 2, N, q, m, family)``).
    chunk : int — rows per chunk (default 2048).

    Example
    -------
    >>> t = PositionTable(N=10, m=4, seed=0, chunk=3)
    >>> np.allclose(t.rows([7, 2]), t.dense()[[7, 2]])
    True
    """

    N: int
    m: int
    family: str = "sphere"
    seed: int | tuple = 0
    chunk: int = 2048

    def __post_init__(self):
        check_int("N", self.N, 1)
        check_int("m", self.m, 1)
        check_int("chunk", self.chunk, 1)
        _choice("family", self.family, FAMILIES)

    @property
    def n_chunks(self) -> int:
        """Number of chunks the positions are split into."""
        return -(-self.N // self.chunk)

    def _chunk(self, c: int) -> np.ndarray:
        ss = np.random.SeedSequence(self.seed, spawn_key=(c,))
        n = min(self.chunk, self.N - c * self.chunk)
        return _draw_rows(np.random.default_rng(ss), n, self.m, self.family)

    def chunks(self):
        """Yield ``(start, U_chunk)`` over the whole table, in order."""
        for c in range(self.n_chunks):
            yield c * self.chunk, self._chunk(c)

    def rows(self, idx) -> np.ndarray:
        """Rows ``U[idx]`` for any integer array ``idx`` (shape ``idx.shape + (m,)``),
        generating only the chunks that hold them."""
        idx = np.asarray(idx, dtype=np.int64)
        if idx.size and (idx.min() < 0 or idx.max() >= self.N):
            raise ValueError(f"position indices must lie in [0, {self.N - 1}]")
        out = np.empty(idx.shape + (self.m,))
        flat, res = idx.ravel(), out.reshape(-1, self.m)
        cid = flat // self.chunk
        for c in np.unique(cid):
            sel = cid == c
            res[sel] = self._chunk(int(c))[flat[sel] - c * self.chunk]
        return out

    def dense(self) -> np.ndarray:
        """The whole table (N, m)."""
        return np.concatenate([u for _, u in self.chunks()], axis=0)


def position_vectors(rng: np.random.Generator, N: int, m: int, family: str = "sphere"):
    """``N`` i.i.d. position vectors in ``R^m``, shape (N, m).

    ``family="sphere"``: uniform unit vectors (coherence ``≈ √(4 log N / m)``);
    ``"rademacher"``: entries ``±1/√m`` (unit norm exactly, same coherence law).

    >>> U = position_vectors(np.random.default_rng(0), 5, 3)
    >>> np.allclose(np.linalg.norm(U, axis=1), 1)
    True
    """
    N, m = check_int("N", N, 1), check_int("m", m, 1)
    return _draw_rows(rng, N, m, _choice("family", family, FAMILIES))


def subset_queries(Uy: np.ndarray, query: str = "sum") -> np.ndarray:
    """Query vectors ``w_y`` from the selected position vectors.

    Parameters
    ----------
    Uy : (B, q, m) — ``U[y_b]`` for each of ``B`` subsets.
    query : {"sum", "exact"}
        ``sum``: ``w = Σ_j u_j``.  ``exact``: ``w = U_yᵀ G⁻¹ 1_q`` with ``G = U_y U_yᵀ``
        (q × q), so ``<u_j, w> = 1`` for every selected ``j`` (needs ``q <= m``).

    Returns
    -------
    (B, m)
    """
    _choice("query", query, QUERIES)
    Uy = np.asarray(Uy, dtype=np.float64)
    if query == "sum":
        return Uy.sum(axis=1)
    B, q, m = Uy.shape
    if q > m:
        raise ValueError(f"the exact query needs q <= m (a q×q Gram of rank <= m), "
                         f"got q={q}, m={m}")
    G = Uy @ Uy.transpose(0, 2, 1)
    coef = _solve_gram(G, np.ones((B, q, 1)))
    return (Uy.transpose(0, 2, 1) @ coef)[:, :, 0]


def _solve_gram(G: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Solve the stacked Gram systems ``G x = c``; if one is singular (e.g. two equal
    ``±1/√m`` vectors at small m) fall back to the pseudo-inverse (least-squares
    minimum-norm solution) for the whole stack."""
    try:
        return np.linalg.solve(G, c)
    except np.linalg.LinAlgError:
        return np.linalg.pinv(G, hermitian=True) @ c


def qsa_params(d: int, m: int, lam: float):
    """``W = λ [[0,0],[0,I_m]]`` ((d+m) × (d+m), rows key side) and ``V = [I_d, 0]``.

    The paper's ground truth ``(W*, V*)`` (:func:`stsim.core.model.target_params`) scaled by λ.
    """
    d, m = check_int("d", d, 1), check_int("m", m, 1)
    W, V = target_params(d, m)
    return float(lam) * W, V


def design_lambda(N: int, q: int, eps: float, gamma: float = 0.5) -> float:
    """``λ = log(2(N−q)/(qε)) / γ``: with the ``exact`` query, every input whose margin is
    ``Δ ≥ γ`` then has weight error ``‖s − u‖₁ = 2ρ ≤ 2((N−q)/q) e^{−λΔ} ≤ ε``."""
    N, q = check_int("N", N, 1), check_int("q", q, 1, N)
    eps, gamma = _positive("eps", eps), _positive("gamma", gamma)
    return math.log(max(2.0 * (N - q) / (q * eps), 1.0)) / gamma


# ======================================================================================
# 1b. errors of the q-sparse averaging construction
# ======================================================================================
def selection_errors(G: np.ndarray, Y: np.ndarray, lams) -> dict:
    """Weight errors of ``s = softmax(λ g)`` against ``u = 1_y/q``, for several λ.

    Parameters
    ----------
    G : (B, N) — ``g_{bi} = <u_i, w_{y_b}>`` (logits divided by λ).
    Y : (B, q) int — the subsets.
    lams : float or (n_λ,) — scales λ (``np.inf`` gives the hard-max limit).

    Returns
    -------
    dict of arrays: ``l1`` (n_λ, B) ``‖s − u‖₁``; ``leak`` (n_λ, B) ``Σ_{i∉y} s_i``;
    ``margin`` (B,) ``Δ = min_y g − max_{∉y} g``; ``spread`` (B,) ``σ = max_y g − min_y g``.
    """
    G = np.asarray(G, dtype=np.float64)
    Y = np.asarray(Y)
    B, N = G.shape
    q = Y.shape[1]
    lams = np.atleast_1d(np.asarray(lams, dtype=np.float64))
    rows = np.arange(B)[:, None]
    gy = G[rows, Y]                                          # (B, q)
    mask = np.zeros((B, N), dtype=bool)
    mask[rows, Y] = True
    gout = np.where(mask, -np.inf, G).max(axis=1) if N > q else np.full(B, -np.inf)
    margin, spread = gy.min(axis=1) - gout, gy.max(axis=1) - gy.min(axis=1)
    l1 = np.empty((lams.size, B))
    leak = np.empty((lams.size, B))
    for t, lam in enumerate(lams):
        if np.isinf(lam):                                    # hard max: uniform on argmax set
            top = G.max(axis=1, keepdims=True)               # ties up to rounding
            s = (G >= top - 1e-12 * np.maximum(1.0, np.abs(top))).astype(float)
            s /= s.sum(axis=1, keepdims=True)
            sy = s[rows, Y]
        else:
            lse = logsumexp(lam * G, axis=1)                 # overflow-safe
            sy = np.exp(lam * gy - lse[:, None])
        leak[t] = np.clip(1.0 - sy.sum(axis=1), 0.0, None)
        l1[t] = leak[t] + np.abs(sy - 1.0 / q).sum(axis=1)
    return {"l1": l1, "leak": leak, "margin": margin, "spread": spread}


def _logits_streamed(table: PositionTable, Wq: np.ndarray) -> np.ndarray:
    """``G = [<u_i, w_b>]`` (B, N) streaming the table in chunks (never stores U)."""
    G = np.empty((Wq.shape[0], table.N))
    for start, Uc in table.chunks():
        G[:, start:start + Uc.shape[0]] = Wq @ Uc.T
    return G


def qsa_errors(table: PositionTable, Y: np.ndarray, lams, query: str = "sum") -> dict:
    """Weight errors of the q-sparse averaging construction on a position table.

    Only the selected rows ``U[y]`` (hence the q×q Gram blocks) and the ``N`` logits per
    input are computed; the table is streamed (memory ``O(B N + chunk · m)``).

    Parameters
    ----------
    table : PositionTable;  Y : (B, q) int subsets;  lams : float or (n_λ,)
    query : {"sum", "exact"}

    Returns
    -------
    dict as :func:`selection_errors`.
    """
    Y = np.asarray(Y, dtype=np.int64)
    Wq = subset_queries(table.rows(Y), query)
    return selection_errors(_logits_streamed(table, Wq), Y, lams)


def qsa_output(X: np.ndarray, U: np.ndarray, Y: np.ndarray, lam: float, query: str = "sum"):
    """Output ``f_b = V Z_b softmax(Z_bᵀ W z_q)`` of the construction, token errors.

    Parameters
    ----------
    X : (B, N, d) tokens;  U : (N, m) shared position vectors;  Y : (B, q) subsets
    lam : float;  query : {"sum", "exact"}

    Returns
    -------
    f : (B, d);  err : (B,) ``‖f − STS_q(X, y)‖₂``
    """
    X = np.asarray(X, dtype=np.float64)
    Y = np.asarray(Y, dtype=np.int64)
    Wq = subset_queries(np.asarray(U)[Y], query)
    a = lam * (Wq @ U.T)
    s = np.exp(a - logsumexp(a, axis=1, keepdims=True))
    f = (s[:, None, :] @ X)[:, 0, :]
    t = np.take_along_axis(X, Y[:, :, None], axis=1).mean(axis=1)
    return f, np.linalg.norm(f - t, axis=1)


def seq2seq_params(d: int, m: int, lam: float):
    """Parameters of the sequence-to-sequence qSA on tokens ``e_i = [x_i; u_i; w_{y_i}]``.

    ``W`` ((d+2m) × (d+2m), rows key side, columns query side) has ``λ I_m`` in the block
    (key rows ``u``, query columns ``w``), so ``a_ij = e_jᵀ W e_i = λ <u_j, w_{y_i}>``;
    ``V = [I_d, 0, 0]``.
    """
    d, m = check_int("d", d, 1), check_int("m", m, 1)
    D = d + 2 * m
    W = np.zeros((D, D))
    W[d:d + m, d + m:] = float(lam) * np.eye(m)
    V = np.zeros((d, D))
    V[:, :d] = np.eye(d)
    return W, V


def seq2seq_errors(U: np.ndarray, Ysets: np.ndarray, lams, query: str = "sum",
                   X: np.ndarray | None = None, block: int = 512) -> dict:
    """Sequence-to-sequence qSA: token ``i`` attends with query ``w_{y_i}`` over all ``N``
    tokens (itself included) and should output ``(1/q) Σ_{j∈y_i} x_j``.

    Parameters
    ----------
    U : (N, m) position vectors;  Ysets : (N, q) int, row i = subset of token i
    lams : float or (n_λ,);  query : {"sum", "exact"}
    X : (N, d), optional — tokens; if given, ``err`` (n_λ, N) = ``‖f_i − target_i‖₂``
    block : rows per block (memory ``O(block · N)``).

    Returns
    -------
    dict: ``l1``, ``leak`` (n_λ, N); ``margin``, ``spread`` (N,); ``err`` if X given.
    """
    U = np.asarray(U, dtype=np.float64)
    Ysets = np.asarray(Ysets, dtype=np.int64)
    N = U.shape[0]
    if Ysets.ndim != 2 or Ysets.shape[0] != N:
        raise ValueError(f"Ysets must have shape (N, q) with N = {N}, got {Ysets.shape}")
    lams = np.atleast_1d(np.asarray(lams, dtype=np.float64))
    parts = []
    errs = []
    for s0 in range(0, N, block):
        Yb = Ysets[s0:s0 + block]
        G = subset_queries(U[Yb], query) @ U.T
        parts.append(selection_errors(G, Yb, lams))
        if X is not None:
            e = np.empty((lams.size, G.shape[0]))
            t = X[Yb].mean(axis=1)
            for k, lam in enumerate(lams):
                s = np.exp(lam * G - logsumexp(lam * G, axis=1, keepdims=True))
                e[k] = np.linalg.norm(s @ X - t, axis=1)
            errs.append(e)
    out = {k: np.concatenate([p[k] for p in parts], axis=-1) for k in parts[0]}
    if X is not None:
        out["err"] = np.concatenate(errs, axis=1)
    return out


# ======================================================================================
# 2. sparse attention patterns
# ======================================================================================
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
    _choice("kind", kind, TARGETS)
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
        keep = (cols >= 0) & (cols < L)
        rows, cols = rows[keep], cols[keep]
    elif kind == "permutation":
        rows, cols = np.arange(L), rng.permutation(L)
    else:
        blk = np.arange(L) // k
        rows = np.repeat(np.arange(L), k)
        cols = np.repeat(blk * k, k) + np.tile(np.arange(k), L)
        keep = cols < L
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
    A : (L, L) array or scipy.sparse — validated by :func:`check_pattern`.
    d : int >= 1 — head dimension (tokens have dimension 2d).
    rng : Generator — draws the keys ``r_1..r_L`` (near-orthogonal unit rows).
    k : int, optional — promised bound on non-zeros per row and column.
    scheme : {"exact", "jl"} — ``jl``: ``q_i = Σ_j c_ij r_j``; ``exact``: the minimum-norm
        ``q_i`` with ``q_iᵀ r_j = c_ij`` on the support (needs ``|S_i| <= d``).
    eps_off : float — off-support mass the design aims at; sets ``τ = 2 log(L/ε_off)``.
    tau : float, optional — overrides τ.
    family : {"sphere", "rademacher"} — law of the keys.
    block : rows solved at once (memory ``O(block · k · d)``).

    Returns
    -------
    Q : (L, d);  K : (L, d);  tau : float
    """
    A = check_pattern(A, k)
    d = check_int("d", d, 1)
    _choice("scheme", scheme, SCHEMES)
    L = A.shape[0]
    if tau is None:
        tau = 2.0 * math.log(max(L, 2) / _positive("eps_off", eps_off))
    tau = _positive("tau", tau)
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
            coef = _solve_gram(Gm, c[pos][:, :, None])
            Q[r] = (Rs.transpose(0, 2, 1) @ coef)[:, :, 0]
    return Q, K, tau


def pattern_errors(A, Q: np.ndarray, K: np.ndarray, block: int = 512) -> dict:
    """Per-row approximation errors of ``S = rowsoftmax(Q Kᵀ)`` against ``A``.

    Logits are formed ``block × L`` at a time (``L²`` dot products, memory
    ``O(block · L + L d)``; the ``L × L`` matrix is never stored).

    Returns
    -------
    dict of (L,) arrays: ``ratio`` ``max_{j,j'∈S_i} |log(S_ij/S_ij') − log(A_ij/A_ij')|``;
    ``off_mass`` ``Σ_{j∉S_i} S_ij``; ``tv`` ``½ Σ_j |S_ij − Â_ij|`` with ``Â`` = A
    row-normalised; ``off_max`` largest off-support logit minus the smallest on-support one.
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


# ======================================================================================
# width search and fits
# ======================================================================================
def smallest_passing(passes, lo: int, hi: int, start: int | None = None, rel: float = 0.0):
    """Smallest integer ``w`` in ``[lo, hi]`` with ``passes(w)`` true, assuming passing is
    monotone in ``w``: doubling / halving from ``start`` to bracket the boundary, then
    bisection until the bracket is ``<= max(1, rel · w)`` wide (``rel = 0``: exact; the
    returned ``w`` passes and ``w − max(1, rel·w)`` or less failed). Returns
    ``(w or None if hi fails, probes)`` with ``probes`` the list of ``(w, passed)`` in
    evaluation order."""
    lo, hi = check_int("lo", lo, 1), check_int("hi", hi, lo)
    w = min(max(start or lo, lo), hi)
    probes, seen = [], {}

    def ok(v):
        if v not in seen:
            seen[v] = bool(passes(v))
            probes.append((v, seen[v]))
        return seen[v]

    if ok(w):
        good, bad = w, None
        while bad is None:
            if good == lo:
                return lo, probes
            nxt = max(lo, good // 2)
            if ok(nxt):
                good = nxt
            else:
                bad = nxt
    else:
        bad, good = w, None
        while good is None:
            if bad >= hi:
                return None, probes
            nxt = min(hi, bad * 2)
            if ok(nxt):
                good = nxt
            else:
                bad = nxt
    while good - bad > max(1.0, rel * good):
        mid = (good + bad) // 2
        if ok(mid):
            good = mid
        else:
            bad = mid
    return good, probes


def fit_linear(x, y) -> dict:
    """Least squares ``y ≈ a x + b`` and through the origin ``y ≈ c x``.

    Returns ``a, b, r2, residuals`` (of the affine fit), ``max_rel_residual``, ``c``,
    ``max_rel_residual_origin``.
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if x.size < 2:
        raise ValueError(f"need at least 2 points to fit, got {x.size}")
    M = np.stack([x, np.ones_like(x)], axis=1)
    (a, b), *_ = np.linalg.lstsq(M, y, rcond=None)
    res = y - (a * x + b)
    ss = float(((y - y.mean()) ** 2).sum())
    c = float(x @ y / (x @ x))
    res0 = y - c * x
    return {"a": float(a), "b": float(b),
            "r2": 1.0 - float(res @ res) / ss if ss > 0 else 1.0,
            "residuals": res.tolist(), "max_rel_residual": float(np.max(np.abs(res) / y)),
            "c": c, "max_rel_residual_origin": float(np.max(np.abs(res0) / y))}
