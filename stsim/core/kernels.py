"""Batch kernels shared by the two forms of :mod:`stsim.core.model` (dense encodings and
the index form of :mod:`stsim.core.index_form`): the logits, the row softmax, the softmax
Jacobian, the loss, two batched matrix-vector products and the quadratic readout. The formulas are those of
:mod:`stsim.core.model`'s docstring."""
import numpy as np

__all__ = []   # internal to stsim.core


def _softmax_rows(a):
    """Row softmax, in place on ``a`` (a fresh array owned by the caller). The row max is
    subtracted first, so logits of any size give no overflow (a row of equal ±1e4 logits
    is uniform); the same operations as ``scipy.special.softmax``."""
    a -= a.max(axis=1, keepdims=True)
    np.exp(a, out=a)
    a /= a.sum(axis=1, keepdims=True)
    return a


def _csr(data, indices, indptr, shape):
    """``scipy.sparse.csr_matrix((data, indices, indptr), shape=shape)``, scipy.sparse
    imported at the first call: at the top it made every ``import stsim`` (each command,
    each pool worker) 0.1 s slower."""
    from scipy.sparse import csr_matrix
    return csr_matrix((data, indices, indptr), shape=shape)


def _bmv(X, v):
    """``[x_{bt}ᵀ v_b]``: (B, T, d), (B, d) -> (B, T) (batched matmul; faster than einsum);
    tokens drawn through their statistics (:class:`stsim.core.token_stats.TokenStats`):
    its ``project``."""
    if type(X) is not np.ndarray:
        return X.project(v)
    return (X @ v[:, :, None])[:, :, 0]


def _bvm(s, X):
    """``Σ_t s_{bt} x_{bt}``: (B, T), (B, T, d) -> (B, d); a
    :class:`~stsim.core.token_stats.TokenStats`: its ``combine``."""
    if type(X) is not np.ndarray:
        return X.combine(s)
    return (s[:, None, :] @ X)[:, 0, :]


def _logits(W, X, ops):
    """``a_i = z_iᵀ W z_q`` = ``x_iᵀ m_x + p_iᵀ W_ee p_q (+ p_iᵀ W_ex x_q)`` with
    ``m_x = W_xe p_q (+ W_xx x_q)``, (B, T); the practical model appends the query
    token's ``a_q = z_qᵀ W z_q``."""
    d = X.shape[2]
    xq = ops.xq
    m_x, a_e, a_qq = ops.query_terms(W)
    if xq is not None:
        m_x = m_x + xq @ W[:d, :d].T
        e_tok, e_q = ops.xq_terms(W, xq)
        a_e = a_e + e_tok
    a = _bmv(X, m_x)
    a += a_e
    if ops.practical:
        a_q = a_qq if xq is None else (a_qq + np.einsum("bd,bd->b", xq, m_x) + e_q)
        a = np.concatenate([a, a_q[:, None]], axis=1)
    return a


def _jacobian(g, s):
    """``δ = s ⊙ (g − (sᵀg) 1)`` in place on ``g`` (the softmax Jacobian)."""
    g -= np.einsum("bn,bn->b", s, g)[:, None]
    g *= s
    return g


def _loss(r):
    return 0.5 * float(np.einsum("bd,bd->", r, r)) / r.shape[0]


def _residual(f, y_true, xent=False):
    """``(loss, r)`` of the outputs ``f`` (B, o) against ``y_true``, ``r = ∂ℓ_b/∂f_b`` in
    place of ``f``: squared, ``ℓ = ½|f − y|²`` and ``r = f − y``; cross entropy
    (``xent``; ``y`` a distribution over the ``o`` classes, a one-hot row for one class),
    ``ℓ = logsumexp(f) − f·y`` and ``r = softmax(f) − y`` (``Σ_o y_o = 1``). The loss is
    the batch mean; shifting ``f`` by its row maximum leaves both unchanged."""
    if not xent:
        f -= y_true
        return _loss(f), f
    m = f.max(axis=1, keepdims=True)
    fy = np.einsum("bo,bo->b", f, y_true)
    f -= m
    np.exp(f, out=f)
    Z = f.sum(axis=1, keepdims=True)
    loss = float(np.mean(np.log(Z[:, 0]) + m[:, 0] - fy))
    f /= Z
    f -= y_true
    return loss, f


def _quadratic(head, h_x, r):
    """``r += b + [h_φᵀ Q_o h_φ]_o`` in place (``head = {"b": (o,), "Q": (o, m, m)}``,
    ``h_x``: ``h_φ`` (B, m)); returns ``Q h_φ`` (B, o, m) for :func:`_quadratic_back`."""
    Qh = np.einsum("oij,bj->boi", head["Q"], h_x)
    r += head["b"]
    r += np.einsum("bi,boi->bo", h_x, Qh)
    return Qh


def _quadratic_back(head, h_x, r, Qh):
    """``({"b": Σ_b r, "Q": Σ_b r_o h_φ h_φᵀ}, Σ_o r_o (Q_o + Q_oᵀ) h_φ)`` for the batch
    rows ``r`` (the batch mean folded in): the quadratic readout's gradients and its term
    of ``∂ℓ/∂h_φ`` (:mod:`stsim.core.model`'s docstring)."""
    grads = {"b": r.sum(axis=0), "Q": np.einsum("bo,bi,bj->oij", r, h_x, h_x)}
    return grads, np.einsum("bo,boi->bi", r, Qh) + np.einsum("bo,oji,bj->bi", r, head["Q"], h_x)
