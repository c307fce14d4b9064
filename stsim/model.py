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
* the *index* path (one-hot, stochastic/slots) — ``p_i = e_{k_i}``: every product with a
  ``p_i`` is a gather ``M[:, k_i]`` and every outer product with one is a scatter-add, so
  no ``d_e × T`` matrix is ever built. It agrees with the reference to ~1e-15.
"""
from __future__ import annotations

import numpy as np
from scipy.special import softmax

from .encodings import PEBatch

__all__ = [
    "loss_and_grad",
    "forward_backward",
    "target_params",
    "cosine_to_target",
    "softmax",
    "MODELS",
    "QUERIES",
]

MODELS = ("theory", "practical")
QUERIES = ("sum", "mean")


def _check_choice(name, value, allowed):
    if value not in allowed:
        raise ValueError(f"{name} must be one of {allowed}, got {value!r}")


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


def _query_coef(query: str, q: int) -> float:
    _check_choice("query", query, QUERIES)
    return 1.0 if query == "sum" else 1.0 / q


def _prepare(X, y, target, x_query):
    """Default target (STS_q) and broadcast x_query to (B, d) or None when zero."""
    B, T, d = X.shape
    if target is None:
        target = np.take_along_axis(X, y[:, :, None], axis=1).mean(axis=1)
    if x_query is not None:
        x_query = np.broadcast_to(np.asarray(x_query, dtype=np.float64), (B, d))
        if not np.any(x_query):
            x_query = None
    return target, x_query


def _softmax_rows(a):
    """Row softmax; ``scipy.special.softmax`` subtracts the row max, so logits of any size
    give no overflow (a row of equal ±1e4 logits is uniform)."""
    return softmax(a, axis=1)


# --------------------------------------------------------------------------------------
# dense path (the reference)
# --------------------------------------------------------------------------------------
def _dense(W, V, X, y, P, c, practical, xq, target, need_grad):
    B, T, d = X.shape
    shared = P.ndim == 2
    Py = P[y] if shared else np.take_along_axis(P, y[:, :, None], axis=1)  # (B, q, d_e)
    zq = np.concatenate([np.zeros((B, d)) if xq is None else xq, c * Py.sum(axis=1)], axis=1)
    w = zq @ W.T                                   # W z_q, (B, D)
    w_x, w_e = w[:, :d], w[:, d:]
    # a_i = x_iᵀ (W z_q)_x + p_iᵀ (W z_q)_e
    a = np.einsum("btd,bd->bt", X, w_x)
    a += (w_e @ P.T) if shared else np.einsum("bte,be->bt", P, w_e)
    if practical:
        a = np.concatenate([a, np.einsum("bD,bD->b", zq, w)[:, None]], axis=1)
    s = _softmax_rows(a)
    st = s[:, :T]
    h = np.concatenate([np.einsum("bt,btd->bd", st, X),
                        (st @ P) if shared else np.einsum("bt,bte->be", st, P)], axis=1)
    if practical:
        h += s[:, T:] * zq
    r = h @ V.T - target                           # f − target, (B, d)
    loss = 0.5 * float(np.einsum("bd,bd->", r, r)) / B
    if not need_grad:
        return loss, None, None
    rb = r / B                                     # folds the batch mean into the backward
    dV = rb.T @ h                                  # Σ_b r hᵀ / B
    v = rb @ V                                     # Vᵀ r, (B, D)
    g = np.einsum("btd,bd->bt", X, v[:, :d])
    g += (v[:, d:] @ P.T) if shared else np.einsum("bte,be->bt", P, v[:, d:])
    if practical:
        g = np.concatenate([g, np.einsum("bD,bD->b", zq, v)[:, None]], axis=1)
    delta = s * (g - np.einsum("bn,bn->b", s, g)[:, None])
    dt = delta[:, :T]
    u = np.concatenate([np.einsum("bt,btd->bd", dt, X),
                        (dt @ P) if shared else np.einsum("bt,bte->be", dt, P)], axis=1)
    if practical:
        u += delta[:, T:] * zq                     # Z δ, (B, D)
    dW = u.T @ zq                                  # Σ_b (Zδ) z_qᵀ
    return loss, dW, dV


# --------------------------------------------------------------------------------------
# index path (one-hot families): gathers and scatter-adds
# --------------------------------------------------------------------------------------
def _scatter_cols(ids, vals, n):
    """``out[:, k] = Σ_{ids == k} vals`` — ids of any shape S, vals of shape S + (m,),
    returns (m, n). One ``bincount`` over flattened (id, component) pairs."""
    m = vals.shape[-1]
    flat = (np.asarray(ids)[..., None] * m + np.arange(m)).ravel()
    out = np.bincount(flat, weights=np.ascontiguousarray(vals).ravel(), minlength=n * m)
    return out.reshape(n, m).T


def _index(W, V, X, y, idx, d_e, c, practical, xq, target, need_grad):
    B, T, d = X.shape
    idx = np.broadcast_to(idx, (B, T))
    ky = np.take_along_axis(idx, y, axis=1)               # slots of the selected tokens (B, q)
    WT = W.T                                              # row k of WT = column k of W
    # w = W z_q = W_{:,x} x_q + c Σ_j W_{:, d+k_j}
    w = c * WT[d + ky].sum(axis=1)                        # (B, D)
    if xq is not None:
        w += xq @ W[:, :d].T
    w_x, w_e = w[:, :d], w[:, d:]
    a = np.einsum("btd,bd->bt", X, w_x) + np.take_along_axis(w_e, idx, axis=1)
    if practical:
        a_q = c * np.take_along_axis(w_e, ky, axis=1).sum(axis=1)
        if xq is not None:
            a_q += np.einsum("bd,bd->b", xq, w_x)
        a = np.concatenate([a, a_q[:, None]], axis=1)
    s = _softmax_rows(a)
    st = s[:, :T]
    VeT = V[:, d:].T                                      # (d_e, d); row k = V e_k
    Ve_tok = VeT[idx]                                     # V_e p_i, (B, T, d)
    h_x = np.einsum("bt,btd->bd", st, X)
    f = h_x @ V[:, :d].T + np.einsum("bt,btd->bd", st, Ve_tok)
    if practical:
        vq = c * VeT[ky].sum(axis=1)                      # V z_q, (B, d)
        if xq is not None:
            vq += xq @ V[:, :d].T
            h_x += s[:, T:] * xq
        f += s[:, T:] * vq
    r = f - target
    loss = 0.5 * float(np.einsum("bd,bd->", r, r)) / B
    if not need_grad:
        return loss, None, None
    rb = r / B
    D = d + d_e
    dV = np.empty((d, D))
    dV[:, :d] = rb.T @ h_x
    # ∂/∂V_e: Σ_i s_i r e_{k_i}ᵀ (+ s_q c Σ_j r e_{k_j}ᵀ) — scatter-add into columns
    dV[:, d:] = _scatter_cols(idx, st[:, :, None] * rb[:, None, :], d_e)
    if practical:
        dV[:, d:] += _scatter_cols(ky, np.broadcast_to((c * s[:, T:] * rb)[:, None, :],
                                                       (B, ky.shape[1], d)), d_e)
    # g_i = x_iᵀ V_xᵀ r + (V e_{k_i})ᵀ r
    g = np.einsum("btd,bd->bt", X, rb @ V[:, :d]) + np.einsum("btd,bd->bt", Ve_tok, rb)
    if practical:
        g = np.concatenate([g, np.einsum("bd,bd->b", vq, rb)[:, None]], axis=1)
    delta = s * (g - np.einsum("bn,bn->b", s, g)[:, None])
    dt = delta[:, :T]
    u_x = np.einsum("bt,btd->bd", dt, X)                  # x-part of Z δ
    if practical and xq is not None:
        u_x += delta[:, T:] * xq
    # ∂/∂W = (Zδ) z_qᵀ, block by block; e-rows of Zδ are Σ_i δ_i e_{k_i} (+ δ_q c Σ_j e_{k_j})
    q = ky.shape[1]
    dW = np.zeros((D, D))
    # rows x, columns e: u_x (c Σ_j e_{k_j})ᵀ
    dW[:d, d:] = _scatter_cols(ky, np.broadcast_to((c * u_x)[:, None, :], (B, q, d)), d_e)
    # rows e, columns e: Σ_i Σ_j c δ_i e_{k_i} e_{k_j}ᵀ (+ c² δ_q Σ_{j,j'} e_{k_j'} e_{k_j}ᵀ)
    flat = (idx[:, :, None] * d_e + ky[:, None, :]).ravel()
    wts = np.broadcast_to(c * dt[:, :, None], (B, T, q)).ravel()
    if practical:
        flat = np.concatenate([flat, (ky[:, :, None] * d_e + ky[:, None, :]).ravel()])
        wts = np.concatenate([wts, np.broadcast_to((c * c * delta[:, T])[:, None, None],
                                                   (B, q, q)).ravel()])
    dW[d:, d:] = np.bincount(flat, weights=wts, minlength=d_e * d_e).reshape(d_e, d_e)
    if xq is not None:
        # columns x: (Zδ) x_qᵀ
        dW[:d, :d] = u_x.T @ xq
        dW[d:, :d] = _scatter_cols(idx, dt[:, :, None] * xq[:, None, :], d_e).T
        if practical:
            dW[d:, :d] += _scatter_cols(
                ky, np.broadcast_to((c * delta[:, T:] * xq)[:, None, :], (B, q, d)), d_e).T
    return loss, dW, dV


# --------------------------------------------------------------------------------------
# public entry points
# --------------------------------------------------------------------------------------
def forward_backward(W, V, X, y, pe: PEBatch, *, model="theory", query="sum", x_query=None,
                     target=None, need_grad=True):
    """Batch-mean loss and (optionally) gradients, dispatching on the encoding's form.

    Parameters
    ----------
    W : (D, D) array;  V : (d, D) array
    X : (B, T, d) array;  y : (B, q) int array
    pe : PEBatch — index form uses the gather/scatter path, dense form the reference.
    model : {"theory", "practical"};  query : {"sum", "mean"}
    x_query : None, (d,) or (B, d) — the query's token part (0 by default, as in Thm. 1)
    target : (B, d), optional — defaults to STS_q(X, y)
    need_grad : bool — if False, returns ``(loss, None, None)`` (cheaper).

    Returns
    -------
    loss : float;  dW : (D, D) or None;  dV : (d, D) or None
    """
    _check_choice("model", model, MODELS)
    c = _query_coef(query, y.shape[1])
    target, xq = _prepare(X, y, target, x_query)
    practical = model == "practical"
    if pe.is_index:
        return _index(W, V, X, y, pe.idx, pe.d_e, c, practical, xq, target, need_grad)
    return _dense(W, V, X, y, pe.P, c, practical, xq, target, need_grad)


def loss_and_grad(W, V, X, y, P, *, model="theory", query="sum", x_query=None, target=None):
    """Reference loss and analytic gradients with dense positional encodings.

    ``ℓ = ½‖V Z softmax(Zᵀ W z_q) − STS_q(X, y)‖²`` averaged over the batch (theory
    model; the practical model attends over ``[Z, z_q]``). See the module docstring for
    the backward formulas.

    Parameters
    ----------
    W : (D, D);  V : (d, D);  X : (B, T, d);  y : (B, q) int
    P : (T, d_e) shared or (B, T, d_e) per-sample encodings
    model : {"theory", "practical"};  query : {"sum", "mean"}
    x_query : None (zero), (d,) or (B, d);  target : (B, d), default STS_q(X, y)

    Returns
    -------
    (loss, dW, dV) : float, (D, D), (d, D)

    Example
    -------
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
    """``(cos(W, W*), cos(V, V*))`` with ``cos(A, B) = <A,B>/(|A|_F |B|_F)`` (0 if A = 0).

    ``<W, W*> = tr W_ee`` and ``<V, V*> = tr V_x``, so no target matrix is built.
    """
    d_e = W.shape[0] - d
    nW, nV = np.linalg.norm(W), np.linalg.norm(V)
    cw = float(np.trace(W[d:, d:]) / (nW * np.sqrt(d_e))) if nW > 0 else 0.0
    cv = float(np.trace(V[:, :d]) / (nV * np.sqrt(d))) if nV > 0 else 0.0
    return cw, cv
