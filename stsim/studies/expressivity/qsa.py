r"""q-sparse averaging by construction (Sanford, Hsu & Telgarsky 2023): an explicit
attention solution of STS_q and its width law, as pure vectorised functions (float64;
randomness only through the generators / seeds passed in). The sparse attention
patterns are in :mod:`stsim.studies.expressivity.patterns`.

Tokens ``z_i = [x_i; u_i] ∈ R^{d+m}`` with *position vectors* ``u_1..u_N ∈ R^m`` drawn
from a near-orthogonal family (:data:`FAMILIES`: ``"sphere"`` = i.i.d. uniform unit
vectors, the law of ``stochastic/sphere`` in :mod:`stsim.core.encodings`; ``"rademacher"`` =
i.i.d. entries ``±1/√m``). For a subset ``y`` (``|y| = q``) the query token is
``z_q = [0; w_y]`` and the parameters are the paper's ground truth scaled by ``λ``::

    W = λ [[0, 0], [0, I_m]]        V = [I_d, 0]          (a_i = z_iᵀ W z_q = λ <u_i, w_y>)

Two query vectors (:data:`QUERIES`, :func:`subset_queries`): ``"sum"``
``w_y = Σ_{j∈y} u_j`` (the paper's ``p_query``) and ``"exact"``
``w_y = U_yᵀ (U_y U_yᵀ)^{-1} 1_q``, the minimum-norm vector with ``<u_j, w_y> = 1`` on
``y`` (its selected logits are exactly ``λ``; needs ``q ≤ m``).

The error bound (``‖s − u‖₁ ≤ 2ρ + (e^{λσ} − 1)``, ``ρ`` the leak), the design λ
(:func:`design_lambda`), the width law ``m = O(q log N)`` of the exact query, the
``log² N / ε²`` law of the sum query, the streamed :class:`PositionTable` (no ``N×N``
Gram is built) and the sequence-to-sequence qSA: docs/expressivity.md, §1.2–1.5.
"""
from __future__ import annotations

from dataclasses import dataclass
import math

import numpy as np
from scipy.special import logsumexp

from stsim.core.encodings import StochasticSphere
from stsim.core.constructions import target_params
from stsim.core.task import sts_target
from stsim.util.validate import check_choice, check_int, check_real

__all__ = [
    "FAMILIES", "QUERIES", "PositionTable", "position_vectors", "subset_queries", "solve_gram",
    "qsa_params", "design_lambda", "selection_errors", "qsa_errors", "qsa_output",
    "seq2seq_params", "seq2seq_errors",
]

FAMILIES = ("sphere", "rademacher")
QUERIES = ("sum", "exact")


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
    N : int
        Number of positions.
    m : int
        Their dimension.
    family : {"sphere", "rademacher"}
        The law of the vectors.
    seed : int or tuple of ints
        ``SeedSequence`` entropy (the experiments key it by the point's sizes, e.g.
        ``(seed, 2, N, q, m, family)``).
    chunk : int
        Rows per chunk (default 2048).

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
        check_choice("family", self.family, FAMILIES)

    @property
    def n_chunks(self) -> int:
        """Number of row chunks of the table."""
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
    return _draw_rows(rng, N, m, check_choice("family", family, FAMILIES))


def subset_queries(Uy: np.ndarray, query: str = "sum") -> np.ndarray:
    """Query vectors ``w_y`` from the selected position vectors.

    Parameters
    ----------
    Uy : (B, q, m) array
        ``U[y_b]`` for each of ``B`` subsets.
    query : {"sum", "exact"}
        ``sum``: ``w = Σ_j u_j``.  ``exact``: ``w = U_yᵀ G⁻¹ 1_q`` with ``G = U_y U_yᵀ``
        (q × q), so ``<u_j, w> = 1`` for every selected ``j`` (needs ``q <= m``).

    Returns
    -------
    (B, m) array
        The query vectors.
    """
    check_choice("query", query, QUERIES)
    Uy = np.asarray(Uy, dtype=np.float64)
    if query == "sum":
        return Uy.sum(axis=1)
    B, q, m = Uy.shape
    if q > m:
        raise ValueError(f"the exact query needs q <= m (a q×q Gram of rank <= m), "
                         f"got q={q}, m={m}")
    G = Uy @ Uy.transpose(0, 2, 1)
    coef = solve_gram(G, np.ones((B, q, 1)))
    return (Uy.transpose(0, 2, 1) @ coef)[:, :, 0]


def solve_gram(G: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Solve the stacked Gram systems ``G x = c``; if one is singular (e.g. two equal
    ``±1/√m`` vectors at small m) fall back to the pseudo-inverse (least-squares
    minimum-norm solution) for the whole stack."""
    try:
        return np.linalg.solve(G, c)
    except np.linalg.LinAlgError:
        return np.linalg.pinv(G, hermitian=True) @ c


def qsa_params(d: int, m: int, lam: float):
    """``W = λ [[0,0],[0,I_m]]`` ((d+m) × (d+m), rows key side) and ``V = [I_d, 0]``.

    The paper's ground truth ``(W*, V*)`` (:func:`stsim.core.constructions.target_params`) scaled by λ.
    """
    d, m = check_int("d", d, 1), check_int("m", m, 1)
    W, V = target_params(d, m)
    return float(lam) * W, V


def design_lambda(N: int, q: int, eps: float, gamma: float = 0.5) -> float:
    """``λ = log(2(N−q)/(qε)) / γ``: with the ``exact`` query, every input whose margin is
    ``Δ ≥ γ`` then has weight error ``‖s − u‖₁ = 2ρ ≤ 2((N−q)/q) e^{−λΔ} ≤ ε``."""
    N, q = check_int("N", N, 1), check_int("q", q, 1, N)
    eps, gamma = check_real("eps", eps, lo=0.0, lo_open=True), check_real("gamma", gamma, lo=0.0, lo_open=True)
    return math.log(max(2.0 * (N - q) / (q * eps), 1.0)) / gamma


# ======================================================================================
# 1b. errors of the q-sparse averaging construction
# ======================================================================================
def selection_errors(G: np.ndarray, Y: np.ndarray, lams) -> dict:
    """Weight errors of ``s = softmax(λ g)`` against ``u = 1_y/q``, for several λ.

    Parameters
    ----------
    G : (B, N) array
        ``g_{bi} = <u_i, w_{y_b}>`` (logits divided by λ).
    Y : (B, q) int array
        The subsets.
    lams : float or (n_λ,) array
        Scales λ (``np.inf`` gives the hard-max limit).

    Returns
    -------
    dict
        Arrays ``l1`` (n_λ, B) ``‖s − u‖₁``, ``leak`` (n_λ, B) ``Σ_{i∉y} s_i``,
        ``margin`` (B,) ``Δ = min_y g − max_{∉y} g``, ``spread`` (B,)
        ``σ = max_y g − min_y g``.
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
    """Weight errors of the q-sparse averaging construction on a position table: those of
    :func:`selection_errors` for the subsets ``Y`` (B, q) and the scales ``lams``, with the
    queries of :func:`subset_queries` (``query``). Only the selected rows ``U[y]`` (hence
    the q×q Gram blocks) and the ``N`` logits per input are computed; the table is streamed
    (memory ``O(B N + chunk · m)``)."""
    Y = np.asarray(Y, dtype=np.int64)
    Wq = subset_queries(table.rows(Y), query)
    return selection_errors(_logits_streamed(table, Wq), Y, lams)


def qsa_output(X: np.ndarray, U: np.ndarray, Y: np.ndarray, lam: float, query: str = "sum"):
    """Output ``f_b = V Z_b softmax(Z_bᵀ W z_q)`` of the construction on the tokens ``X``
    (B, N, d) with the shared position vectors ``U`` (N, m), the subsets ``Y`` (B, q), the
    scale ``lam`` and the queries of :func:`subset_queries` (``query``): ``(f, err)``, the
    outputs (B, d) and the token errors ``‖f − STS_q(X, y)‖₂`` (B,)."""
    X = np.asarray(X, dtype=np.float64)
    Y = np.asarray(Y, dtype=np.int64)
    Wq = subset_queries(np.asarray(U)[Y], query)
    a = lam * (Wq @ U.T)
    s = np.exp(a - logsumexp(a, axis=1, keepdims=True))
    f = (s[:, None, :] @ X)[:, 0, :]
    return f, np.linalg.norm(f - sts_target(X, Y), axis=1)


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
    U : (N, m) array
        Position vectors.
    Ysets : (N, q) int array
        Row i is the subset of token i.
    lams : float or (n_λ,) array
        Scales λ.
    query : {"sum", "exact"}
        The query construction (:func:`subset_queries`).
    X : (N, d) array, optional
        Tokens; if given, ``err`` (n_λ, N) = ``‖f_i − target_i‖₂``.
    block : int
        Rows per block (memory ``O(block · N)``).

    Returns
    -------
    dict
        ``l1``, ``leak`` (n_λ, N), ``margin``, ``spread`` (N,), and ``err`` if ``X`` is
        given.
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
            t = sts_target(np.broadcast_to(X, (Yb.shape[0],) + X.shape), Yb)
            for k, lam in enumerate(lams):
                s = np.exp(lam * G - logsumexp(lam * G, axis=1, keepdims=True))
                e[k] = np.linalg.norm(s @ X - t, axis=1)
            errs.append(e)
    out = {k: np.concatenate([p[k] for p in parts], axis=-1) for k in parts[0]}
    if X is not None:
        out["err"] = np.concatenate(errs, axis=1)
    return out
