r"""Reparameterised one-layer softmax attention and its analytic gradients (SPEC §3).

Parameters: a merged key-query matrix ``W ∈ R^{D×D}`` (rows: key side, columns: query
side) and a merged value-output matrix ``V ∈ R^{d×D}``, ``D = d + d_e``.

One sample, with token columns ``z_1..z_N`` (``N = T`` for the *theory* model; the
*practical* model appends the query token, ``z_{T+1} = z_q``, ``N = T + 1``) and query
``z_q = [x_q; p_q]``, ``x_q = 0`` by default, ``p_q = c Σ_{j∈y} p_j`` with ``c = 1``
(``query="sum"``) or ``c = 1/q`` (``query="mean"``)::

    a_i = z_iᵀ W z_q            s = softmax(a)            h = Σ_i s_i z_i
    f   = V h                   r = f − STS_q(X, y)       ℓ = ½ ‖r‖²

Backward (the derivative sits beside the forward formula)::

    ∂ℓ/∂V = r hᵀ
    g_i   = ∂ℓ/∂s_i = z_iᵀ Vᵀ r
    δ_i   = ∂ℓ/∂a_i = s_i (g_i − Σ_k s_k g_k)          (softmax Jacobian)
    ∂ℓ/∂W = Σ_i δ_i z_i z_qᵀ = (Z δ) z_qᵀ               (z_q depends on no parameter)

The batch loss is the batch mean of ℓ, and so are the gradients.

Two implementations of the same formulas:

* :func:`loss_and_grad` — the public reference, dense encodings ``P`` of shape (T, d_e)
  or (B, T, d_e). Also the production path for the dense (sphere / near-orthogonal)
  families. Block-wise (``X`` and ``P`` are never concatenated into ``Z``).
* the *index* path (one-hot, stochastic/slots) — ``p_i = e_{k_i}``: every product
  ``p_iᵀ m`` is a gather ``m[k_i]`` and every sum ``Σ_i s_i p_i`` is a write of ``s_i``
  at slot ``k_i`` (slots are distinct within a sample), so no ``d_e × T`` matrix is ever
  built. It agrees with the reference to ~1e-15.

Both are one function, :func:`_forward_backward`; the encodings enter it only through
the maps ``take`` (``m ↦ [p_iᵀ m]_i``), its adjoint ``put`` (``s ↦ Σ_i s_i p_i``), the
query encoding ``p_q`` and the query-side products ``W_xe p_q``, ``p_iᵀ W_ee p_q``,
``p_qᵀ W_ee p_q`` (gathers of ``W_ee[k_i, k_j]`` in the index form).
"""
from __future__ import annotations

import numpy as np
from scipy.sparse import csr_matrix
from scipy.special import softmax

from stsim.core.encodings import PEBatch
from stsim.core.task import sts_target
from stsim.util.validate import check_choice

__all__ = [
    "query_coef",
    "loss_and_grad",
    "forward_backward",
    "target_params",
    "cosine_to_target",
    "attention_weights",
    "softmax",
    "MODELS",
    "QUERIES",
]

MODELS = ("theory", "practical")
QUERIES = ("sum", "mean")


def _check_shapes(W, V, X, y, d_e, target=None, x_query=None):
    if X.ndim != 3:
        raise ValueError(f"X must have shape (B, T, d), got shape {X.shape}")
    B, T, d = X.shape
    D = d + d_e
    if W.shape != (D, D):
        raise ValueError(f"W must have shape (D, D) = ({D}, {D}) with D = d + d_e = {d} + {d_e}, "
                         f"got {W.shape}")
    if V.shape != (d, D):
        raise ValueError(f"V must have shape (d, D) = ({d}, {D}), got {V.shape}")
    if y.ndim != 2 or y.shape[0] != B:
        raise ValueError(f"y must have shape (B, q) = ({B}, q), got {y.shape}")
    if not np.issubdtype(y.dtype, np.integer):
        raise ValueError(f"y must hold integer positions, got dtype {y.dtype}")
    if y.size and (y.min() < 0 or y.max() >= T):
        raise ValueError(f"y must hold positions in [0, {T - 1}]")
    if target is not None and target.shape != (B, d):
        raise ValueError(f"target must have shape (B, d) = ({B}, {d}), got {target.shape}")
    if x_query is not None and np.shape(x_query) not in ((d,), (B, d)):
        raise ValueError(f"x_query must have shape (d,) or (B, d), got {np.shape(x_query)}")


def query_coef(query: str, q):
    """The query coefficient ``c`` of ``p_query = c Σ_{j∈y} p_j``: 1 for ``query="sum"``,
    ``1/q`` for ``"mean"``. A float for an integer ``q``, an array (same shape) for an
    array ``q`` (the closed forms of :mod:`stsim.theory.reduced` are vectorised in q)."""
    check_choice("query", query, QUERIES)
    if isinstance(q, (int, np.integer)):
        return 1.0 if query == "sum" else 1.0 / q
    qa = np.asarray(q, dtype=np.float64)
    return np.ones_like(qa) if query == "sum" else 1.0 / qa


def _prepare(X, y, target, x_query):
    """Default target (STS_q) and broadcast x_query to (B, d) or None when zero."""
    B, T, d = X.shape
    if target is None:
        target = sts_target(X, y)
    if x_query is not None:
        x_query = np.broadcast_to(np.asarray(x_query, dtype=np.float64), (B, d))
        if not np.any(x_query):
            x_query = None
    return target, x_query


def _softmax_rows(a):
    """Row softmax, in place on ``a`` (a fresh array owned by the caller). The row max is
    subtracted first, so logits of any size give no overflow (a row of equal ±1e4 logits
    is uniform); the same operations as ``scipy.special.softmax``."""
    a -= a.max(axis=1, keepdims=True)
    np.exp(a, out=a)
    a /= a.sum(axis=1, keepdims=True)
    return a


# --------------------------------------------------------------------------------------
# the encodings enter only through four linear maps between token space (B, T) and
# PE space (B, d_e); everything else is shared by the dense and the index form.
# ``take`` reads, and ``put`` writes, the PE part ``[:, d:]`` of a (B, D) array, so that
# ``h = Z s`` and ``u = Z δ`` are filled in place and ``Vᵀ r`` is read without a copy.
# --------------------------------------------------------------------------------------
class _DenseOps:
    """``P`` (T, d_e) shared or (B, T, d_e) per sample."""

    def __init__(self, P, y, c, d):
        self.P, self.shared, self.d = P, P.ndim == 2, d
        Py = P[y] if self.shared else np.take_along_axis(P, y[:, :, None], axis=1)
        self.pq = c * Py.sum(axis=1)                          # p_q = c Σ_{j∈y} p_j, (B, d_e)

    def take(self, m):
        """``[p_iᵀ m_b]_{b,i}``: (B, d_e) -> (B, T)."""
        if self.shared:
            return m @ self.P.T
        return np.einsum("bte,be->bt", self.P, m)

    def take_D(self, v):
        """``take`` of the PE part of a (B, D) array."""
        return self.take(v[:, self.d:])

    def put_D(self, s, out):
        """``out[:, d:] = Σ_i s_{bi} p_i`` (the adjoint of ``take``), s (B, T)."""
        if self.shared:
            np.matmul(s, self.P, out=out[:, self.d:])
        else:
            out[:, self.d:] = np.einsum("bt,bte->be", s, self.P)

    def query_terms(self, W, d):
        """``(W_xe p_q, [p_iᵀ W_ee p_q]_i, p_qᵀ W_ee p_q)``: (B, d), (B, T), (B,)."""
        m = self.pq @ W[d:, d:].T
        return self.pq @ W[:d, d:].T, self.take(m), np.einsum("be,be->b", self.pq, m)

    def grad_W(self, u, xq):
        """``Σ_b u_b z_qᵀ`` with ``z_q = [x_q; p_q]``: (B, D) -> (D, D)."""
        B, D = u.shape
        zq = np.zeros((B, D))
        if xq is not None:
            zq[:, :self.d] = xq
        zq[:, self.d:] = self.pq
        return u.T @ zq


class _IndexOps:
    """One-hot families ``p_i = e_{k_i}``, slots ``idx`` (T,) or (B, T), distinct within a
    sample. ``take`` is a gather and ``put`` a plain write (a sample's slots are distinct,
    so nothing accumulates), both through flat positions computed once per batch; ``p_q``
    is a sparse vector (``c`` at the q selected slots), so ``Σ_b u_b z_qᵀ`` is a sparse
    product. No d_e × T matrix is built."""

    def __init__(self, idx, d_e, y, c, d):
        B = y.shape[0]
        self.d, self.d_e, self.c = d, d_e, c
        idx = np.broadcast_to(idx, (B, idx.shape[-1]))
        self.idx = idx
        self.ky = np.take_along_axis(idx, y, axis=1)         # slots of the selected tokens
        D = d + d_e
        self.flat_e = idx + (d_e * np.arange(B))[:, None]      # positions in a (B, d_e) array
        self.flat_D = idx + (d + D * np.arange(B))[:, None]    # positions in a (B, D) array
        self._pq = None

    @property
    def pq(self):
        """Dense ``p_q`` (B, d_e), built only when asked (x_query / practical model)."""
        if self._pq is None:
            B = self.ky.shape[0]
            self._pq = np.zeros((B, self.d_e))
            np.put_along_axis(self._pq, self.ky, self.c, axis=1)
        return self._pq

    def take(self, m):
        return np.take(np.ascontiguousarray(m), self.flat_e)

    def take_D(self, v):
        return np.take(v, self.flat_D)                         # v: C-contiguous (B, D)

    def put_D(self, s, out):
        out[:, self.d:] = 0.0
        np.put(out, self.flat_D, s)                            # out: C-contiguous (B, D)

    def query_terms(self, W, d):
        # with m = W_ee p_q = c Σ_j W_ee[:, k_j]:  p_iᵀ m = c Σ_j W_ee[k_i, k_j] and
        # p_qᵀ m = c² Σ_{j,l} W_ee[k_l, k_j] are gathers of W itself at flat positions
        # (m is never formed, W_ee is never copied); W_xe p_q = c Σ_j W_xe[:, k_j]
        ky, c = self.ky, self.c
        q, D = ky.shape[1], W.shape[0]
        Wf = W.reshape(-1)                                     # W: C-contiguous (D, D)
        row = (d + self.idx) * D + d                           # start of row k_i of W_ee
        a_e = np.take(Wf, row + ky[:, :1])
        mx = W[:d, d + ky[:, 0]]
        for j in range(1, q):
            a_e += np.take(Wf, row + ky[:, j:j + 1])
            mx += W[:d, d + ky[:, j]]
        a_e *= c
        a_qq = np.take(Wf, ((d + ky) * D + d)[:, :, None] + ky[:, None, :]).sum(axis=(1, 2))
        return c * mx.T, a_e, (c * c) * a_qq

    def grad_W(self, u, xq):
        # z_q = [x_q; p_q], p_q = c Σ_j e_{k_j}: the PE columns are a sparse product
        # Σ_b c u_b 1_{k_bj}ᵀ (B·q nonzeros) instead of a dense (D×B)(B×D) one
        B, D = u.shape
        q = self.ky.shape[1]
        S = csr_matrix((np.full(B * q, self.c), self.ky.ravel(),
                        np.arange(0, B * q + 1, q)), shape=(B, self.d_e))   # = p_q, sparse
        dW = np.empty((D, D))
        dW[:, self.d:] = (S.T @ u).T
        if xq is None:
            dW[:, :self.d] = 0.0
        else:
            dW[:, :self.d] = u.T @ xq
        return dW


def _bmv(X, v):
    """``[x_{bt}ᵀ v_b]``: (B, T, d), (B, d) -> (B, T) (batched matmul; faster than einsum)."""
    return (X @ v[:, :, None])[:, :, 0]


def _bvm(s, X):
    """``Σ_t s_{bt} x_{bt}``: (B, T), (B, T, d) -> (B, d)."""
    return (s[:, None, :] @ X)[:, 0, :]


def _forward_backward(W, V, X, ops, practical, xq, target, need_grad):
    """The formulas of the module docstring, block-wise: ``Z = [X; P]`` is never built."""
    B, T, d = X.shape
    D = W.shape[0]
    # a_i = z_iᵀ W z_q = x_iᵀ m_x + p_iᵀ W_ee p_q (+ p_iᵀ W_ex x_q),  m_x = W_xe p_q (+ W_xx x_q)
    m_x, a_e, a_qq = ops.query_terms(W, d)
    if xq is not None:
        m_x = m_x + xq @ W[:d, :d].T
        m_e = xq @ W[d:, :d].T                     # W_ex x_q, (B, d_e)
        a_e = a_e + ops.take(m_e)
    a = _bmv(X, m_x)
    a += a_e
    zq = None
    if practical:                                  # the query column: a_q = z_qᵀ W z_q
        zq = np.concatenate([np.zeros((B, d)) if xq is None else xq, ops.pq], axis=1)
        a_q = a_qq if xq is None else (a_qq + np.einsum("bd,bd->b", xq, m_x)
                                       + np.einsum("be,be->b", ops.pq, m_e))
        a = np.concatenate([a, a_q[:, None]], axis=1)
    s = _softmax_rows(a)
    st = s[:, :T] if practical else s
    h = np.empty((B, D))                           # Z s
    h[:, :d] = _bvm(st, X)
    ops.put_D(st, h)
    if practical:
        h += s[:, T:] * zq
    r = h @ V.T
    r -= target                                    # f − target, (B, d)
    loss = 0.5 * float(np.einsum("bd,bd->", r, r)) / B
    if not need_grad:
        return loss, None, None
    r /= B                                         # folds the batch mean into the backward
    dV = r.T @ h                                   # Σ_b r hᵀ / B
    v = r @ V                                      # Vᵀ r, (B, D)
    g = _bmv(X, v[:, :d])
    g += ops.take_D(v)                             # g_i = z_iᵀ Vᵀ r
    if practical:
        g = np.concatenate([g, np.einsum("bD,bD->b", zq, v)[:, None]], axis=1)
    g -= np.einsum("bn,bn->b", s, g)[:, None]
    g *= s                                         # δ = s ⊙ (g − (sᵀg) 1)
    dt = g[:, :T] if practical else g
    u = h                                          # h is no longer needed: u = Z δ in place
    u[:, :d] = _bvm(dt, X)
    ops.put_D(dt, u)
    if practical:
        u += g[:, T:] * zq
    dW = ops.grad_W(u, xq)                         # Σ_b (Zδ) z_qᵀ
    return loss, dW, dV


# --------------------------------------------------------------------------------------
# public entry points
# --------------------------------------------------------------------------------------
def forward_backward(W, V, X, y, pe: PEBatch, *, model="theory", query="sum", x_query=None,
                     target=None, need_grad=True):
    """Batch-mean loss and (optionally) gradients, dispatching on the encoding's form.

    Parameters
    ----------
    W : (D, D) array
        Key-query matrix, ``D = d + d_e``.
    V : (d, D) array
        Value-output matrix.
    X : (B, T, d) array
        Tokens.
    y : (B, q) int array
        Selected positions.
    pe : PEBatch
        Encodings: the index form uses the gather/scatter path, the dense form the
        reference.
    model : {"theory", "practical"}
        The practical model also attends over the query token.
    query : {"sum", "mean"}
        The query convention.
    x_query : (d,) or (B, d) array, optional
        The query's token part (0 by default, as in Thm. 1).
    target : (B, d) array, optional
        Defaults to STS_q(X, y).
    need_grad : bool
        If False, return ``(loss, None, None)`` (cheaper).

    Returns
    -------
    loss : float
        The batch-mean loss.
    dW : (D, D) array or None
        Its gradient in ``W``.
    dV : (d, D) array or None
        Its gradient in ``V``.
    """
    check_choice("model", model, MODELS)
    c = query_coef(query, y.shape[1])
    target, xq = _prepare(X, y, target, x_query)
    d = X.shape[2]
    ops = _IndexOps(pe.idx, pe.d_e, y, c, d) if pe.is_index else _DenseOps(pe.P, y, c, d)
    return _forward_backward(W, V, X, ops, model == "practical", xq, target, need_grad)


def loss_and_grad(W, V, X, y, P, *, model="theory", query="sum", x_query=None, target=None):
    """Reference loss and analytic gradients with dense positional encodings.

    ``ℓ = ½‖V Z softmax(Zᵀ W z_q) − STS_q(X, y)‖²`` averaged over the batch (theory
    model; the practical model attends over ``[Z, z_q]``). See the module docstring for
    the backward formulas.

    Parameters
    ----------
    W : (D, D) array
        Key-query matrix, ``D = d + d_e``.
    V : (d, D) array
        Value-output matrix.
    X : (B, T, d) array
        Tokens.
    y : (B, q) int array
        Selected positions.
    P : (T, d_e) or (B, T, d_e) array
        Shared or per-sample encodings.
    model : {"theory", "practical"}
        The practical model also attends over the query token.
    query : {"sum", "mean"}
        The query convention.
    x_query : (d,) or (B, d) array, optional
        The query's token part (zero by default).
    target : (B, d) array, optional
        Defaults to STS_q(X, y).

    Returns
    -------
    loss : float
        The batch-mean loss.
    dW : (D, D) array
        Its gradient in ``W``.
    dV : (d, D) array
        Its gradient in ``V``.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((2, 6, 3)); y = np.array([[0, 4], [1, 2]]); P = np.eye(6)
    >>> loss, dW, dV = loss_and_grad(np.zeros((9, 9)), np.zeros((3, 9)), X, y, P)
    >>> dW.shape, dV.shape
    ((9, 9), (3, 9))
    """
    W = np.asarray(W, dtype=np.float64)
    V = np.asarray(V, dtype=np.float64)
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y)
    P = np.asarray(P, dtype=np.float64)
    if P.ndim not in (2, 3) or P.shape[-2] != X.shape[1] or (P.ndim == 3 and P.shape[0] != X.shape[0]):
        raise ValueError(f"P must have shape (T, d_e) or (B, T, d_e) with T = {X.shape[1]}, "
                         f"got {P.shape}")
    _check_shapes(W, V, X, y, P.shape[-1], target, x_query)
    return forward_backward(W, V, X, y, PEBatch(d_e=P.shape[-1], P=P), model=model,
                            query=query, x_query=x_query, target=target)


def target_params(d: int, d_e: int):
    """Ground truth of the paper's figures: ``W* = [[0,0],[0,I_{d_e}]]``, ``V* = [I_d, 0]``."""
    D = d + d_e
    Ws = np.zeros((D, D))
    Ws[d:, d:] = np.eye(d_e)
    Vs = np.zeros((d, D))
    Vs[:, :d] = np.eye(d)
    return Ws, Vs


def cosine_to_target(W, V, d: int):
    """``(cos(W, W*), cos(V, V*))`` with ``cos(A, B) = <A,B>/(|A|_F |B|_F)`` (0 if A = 0,
    NaN if A holds a non-finite entry).

    ``<W, W*> = tr W_ee`` and ``<V, V*> = tr V_x``, so no target matrix is built.
    """
    d_e = W.shape[0] - d
    nW, nV = np.linalg.norm(W), np.linalg.norm(V)

    def cos(tr, n, k):
        if not np.isfinite(n):
            return float("nan")
        return 0.0 if n == 0 else float(tr / (n * np.sqrt(k)))

    return cos(np.trace(W[d:, d:]), nW, d_e), cos(np.trace(V[:, :d]), nV, d)


def attention_weights(W, X, y, pe: PEBatch, *, model="theory", query="sum", x_query=None):
    """Softmax attention weights ``s = softmax(Zᵀ W z_q)`` of each sample (dense reference
    form; for inspection, not for training).

    Parameters
    ----------
    W : (D, D) array
        Key-query matrix, ``D = d + d_e``.
    X : (B, T, d) array
        Tokens.
    y : (B, q) int array
        The selected positions.
    pe : PEBatch
        Encodings (index or dense form), as from ``Encoding.sample``.
    model : {"theory", "practical"}
        The practical model also attends over the query token.
    query : {"sum", "mean"}
        The query convention.
    x_query : (d,) or (B, d) array, optional
        The query's token part (zero by default).

    Returns
    -------
    (B, T) or (B, T + 1) array
        The weights, each row summing to 1: (B, T) for the theory model, (B, T + 1) for
        the practical one (last column the query token).

    Examples
    --------
    >>> W = np.zeros((3 + 4, 3 + 4)); W[3:, 3:] = 10 * np.eye(4)       # W_ee = 10 I
    >>> X = np.ones((1, 4, 3)); y = np.array([[1, 2]])
    >>> attention_weights(W, X, y, PEBatch(d_e=4, idx=np.arange(4))).round(2)
    array([[0. , 0.5, 0.5, 0. ]])
    """
    check_choice("model", model, MODELS)
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y)
    B, T, d = X.shape
    P = np.broadcast_to(pe.dense(), (B, T, pe.d_e))
    c = query_coef(query, y.shape[1])
    pq = c * np.take_along_axis(P, y[:, :, None], axis=1).sum(axis=1)       # (B, d_e)
    xq = np.zeros((B, d)) if x_query is None else np.broadcast_to(x_query, (B, d))
    zq = np.concatenate([xq, pq], axis=1)                                   # (B, D)
    Z = np.concatenate([X, P], axis=2)                                      # (B, T, D)
    if model == "practical":
        Z = np.concatenate([Z, zq[:, None, :]], axis=1)
    a = np.einsum("bnD,bD->bn", Z, zq @ np.asarray(W).T)                    # z_iᵀ W z_q
    return _softmax_rows(a)
