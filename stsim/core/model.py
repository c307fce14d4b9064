r"""Reparameterised one-layer softmax attention and its analytic gradients.

Parameters: a merged key-query matrix ``W ∈ R^{D×D}`` (rows: key side, columns: query
side) and a merged value-output matrix ``V ∈ R^{d×D}``, ``D = d + d_e``.

One sample, with token columns ``z_1..z_N`` (``N = T`` for the *theory* model; the
*practical* model appends the query token, ``z_{T+1} = z_q``, ``N = T + 1``) and query
``z_q = [x_q; p_q]``, ``x_q = 0`` by default, ``p_q = c Σ_{j∈y} p_j`` with ``c = 1``
(``query="sum"``) or ``c = 1/q`` (``query="mean"``):

.. math::

    \begin{gathered}
    a_i = z_i^\top W z_q, \qquad s = \operatorname{softmax}(a), \qquad
    h = \sum_i s_i z_i, \\
    f = V h, \qquad r = f - \mathrm{STS}_q(X, y), \qquad
    \ell = \tfrac12 \lVert r \rVert^2 .
    \end{gathered}

Another target (:mod:`stsim.core.targets`) replaces the token's content part ``x`` by fixed
features ``φ(x)`` (``z_i = [φ(x_i); p_i]``, ``X`` holding them; the query's content part
stays 0), ``V`` has the target's output dimension as its rows, and its readout may be
quadratic in the feature part ``h_φ`` of ``h``, with parameters ``b`` and ``Q_o``
(``readout=`` below):

.. math::

    f_o = (V h)_o + b_o + h_\varphi^\top Q_o h_\varphi, \qquad
    \partial\ell/\partial b = r, \qquad \partial\ell/\partial Q_o = r_o h_\varphi h_\varphi^\top,
    \qquad \partial\ell/\partial h_\varphi \mathrel{+}= \textstyle\sum_o r_o (Q_o + Q_o^\top) h_\varphi,

the last term added to ``Vᵀ r`` in ``g`` below. Linear in ``(b, Q)``: zero is no
stationary point of the readout (``∂ℓ/∂Q_o = −target_o h_φ h_φᵀ`` at zero).

Backward (the derivative sits beside the forward formula):

.. math::

    \begin{aligned}
    \partial\ell/\partial V &= r h^\top, \\
    g_i &= \partial\ell/\partial s_i = z_i^\top \partial\ell/\partial h
      = z_i^\top V^\top r, \\
    \delta_i &= \partial\ell/\partial a_i = s_i \big(g_i - \textstyle\sum_k s_k g_k\big)
      && \text{(softmax Jacobian)}, \\
    \partial\ell/\partial W &= \textstyle\sum_i \delta_i z_i z_q^\top = (Z\delta)\, z_q^\top
      && (z_q \text{ depends on no parameter}).
    \end{aligned}

A readout into classes (``loss="xent"``: the masked-character task, :mod:`stsim.core.text`)
reads ``f = V h`` as logits over ``V``'s rows and ``target`` as a distribution ``y`` over
them (a one-hot row for one class):

.. math::

    \ell = \log\textstyle\sum_o e^{f_o} - f^\top y, \qquad
    r = \partial\ell/\partial f = \operatorname{softmax}(f) - y ,

and the backward above is unchanged with this ``r`` (every line is linear in ``r``).

The batch loss is the batch mean of ℓ, and so are the gradients. Other mechanisms (linear,
ReLU and sigmoid attention, a temperature, a key/query pair of rank r) replace ``softmax``
and its Jacobian by their own map and vector-Jacobian product (:mod:`stsim.core.attention`;
``attention=``, ``temperature=``, ``rank=`` below).

Two implementations of the same formulas, sharing the logits, the softmax and its Jacobian
(:mod:`stsim.core.kernels`): :func:`loss_and_grad`, the public reference, with dense
encodings ``P`` of shape (T, d_e) or (B, T, d_e) (also the production path of the dense
families, ``_DenseOps``), and the *index* path (one-hot, stochastic/slots;
:mod:`stsim.core.index_form`), where ``p_i = e_{k_i}`` makes every ``p_iᵀ m`` a gather
``m[k_i]`` and ``Σ_i s_i p_i`` a write of ``s_i`` at slot ``k_i``, so that no ``d_e × T``,
(B, d_e) or (D, D) array is built: its cost is linear in B·T. The encodings enter only
through the maps ``take`` (``m ↦ [p_iᵀ m]_i``), its adjoint ``put`` (``s ↦ Σ_i s_i p_i``),
the query encoding ``p_q`` and the query-side products ``W_xe p_q``, ``p_iᵀ W_ee p_q``,
``p_qᵀ W_ee p_q`` (docs/model.md, "Two forms of the same formulas"; how closely the two
agree: "What changed in the numbers").
"""
from __future__ import annotations

import numpy as np

from stsim.core.attention import Softmax, check_rank, lowrank_W, lowrank_grad, make_attention
from stsim.core.encodings import PEBatch
from stsim.core.index_form import _index_forward_backward, _IndexOps
from stsim.core.kernels import _bmv, _bvm, _logits, _quadratic, _quadratic_back, _residual
from stsim.core.task import sts_target
from stsim.util.validate import check_choice

__all__ = [
    "query_coef",
    "loss_and_grad",
    "forward_backward",
    "forward_backward_unchecked",
    "attention_weights",
    "MODELS",
    "QUERIES",
    "LOSSES",
]

MODELS = ("theory", "practical")
QUERIES = ("sum", "mean")
LOSSES = ("squared", "xent")     # ½|f − target|², or the cross entropy of logits f
_SOFTMAX = Softmax()


def _check_shapes(W, V, X, y, d_e, y_true=None, x_query=None):
    if X.ndim != 3:
        raise ValueError(f"X must have shape (B, T, d), got shape {X.shape}")
    B, T, d = X.shape
    D = d + d_e
    if W.shape != (D, D):
        raise ValueError(f"W must have shape (D, D) = ({D}, {D}) with D = d + d_e = {d} + {d_e}, "
                         f"got {W.shape}")
    if V.ndim != 2 or V.shape[1] != D or (y_true is None and V.shape[0] != d):
        raise ValueError(f"V must have shape (o, D) with D = {D} (o = d = {d} for the default "
                         f"target STS_q), got {V.shape}")
    if y.ndim != 2 or y.shape[0] != B:
        raise ValueError(f"y must have shape (B, q) = ({B}, q), got {y.shape}")
    if not np.issubdtype(y.dtype, np.integer):
        raise ValueError(f"y must hold integer positions, got dtype {y.dtype}")
    if y.size and (y.min() < 0 or y.max() >= T):
        raise ValueError(f"y must hold positions in [0, {T - 1}]")
    if y_true is not None and y_true.shape != (B, V.shape[0]):
        raise ValueError(f"target must have shape (B, o) = ({B}, {V.shape[0]}) (o: V's rows), "
                         f"got {y_true.shape}")
    if x_query is not None and np.shape(x_query) not in ((d,), (B, d)):
        raise ValueError(f"x_query must have shape (d,) or (B, d), got {np.shape(x_query)}")


def query_coef(query: str, q):
    """The query coefficient ``c`` of ``p_query = c Σ_{j∈y} p_j``: 1 for ``query="sum"``,
    ``1/q`` for ``"mean"``. A float for an integer ``q``, an array (same shape) for an
    array ``q`` (the closed forms of :mod:`stsim.theory.reduced` are vectorised in q)."""
    return _coef(check_choice("query", query, QUERIES), q)


def _coef(query, q):
    if isinstance(q, (int, np.integer)):
        return 1.0 if query == "sum" else 1.0 / q
    qa = np.asarray(q, dtype=np.float64)
    return np.ones_like(qa) if query == "sum" else 1.0 / qa


def _prepare(X, y, y_true, x_query):
    """The batch's target values ``y_true`` (default: STS_q) and x_query broadcast to
    (B, d) or None when zero."""
    B, T, d = X.shape
    if y_true is None:
        y_true = sts_target(X, y)
    if x_query is not None:
        x_query = np.broadcast_to(np.asarray(x_query, dtype=np.float64), (B, d))
        if not np.any(x_query):
            x_query = None
    return y_true, x_query


class _DenseOps:
    """The encoding maps of the dense form (module docstring; the index form's:
    ``stsim.core.index_form._IndexOps``): ``P`` (T, d_e) shared or (B, T, d_e) per sample;
    the mixtures ``h = Z s`` and ``u = Z δ`` as (B, D) arrays."""

    def __init__(self, P, y, c, d, practical, xq):
        self.P, self.shared, self.d = P, P.ndim == 2, d
        self.practical, self.xq = practical, xq
        Py = P[y] if self.shared else np.take_along_axis(P, y[:, :, None], axis=1)
        self.pq = c * Py.sum(axis=1)                          # p_q = c Σ_{j∈y} p_j, (B, d_e)
        self._zq = None

    @property
    def zq(self):
        """``z_q = [x_q; p_q]``, (B, D)."""
        if self._zq is None:
            B = self.pq.shape[0]
            xq = np.zeros((B, self.d)) if self.xq is None else self.xq
            self._zq = np.concatenate([xq, self.pq], axis=1)
        return self._zq

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

    def query_terms(self, W):
        """``(W_xe p_q, [p_iᵀ W_ee p_q]_i, p_qᵀ W_ee p_q)``: (B, d), (B, T), (B,)."""
        d = self.d
        m = self.pq @ W[d:, d:].T
        return self.pq @ W[:d, d:].T, self.take(m), np.einsum("be,be->b", self.pq, m)

    def xq_terms(self, W, xq):
        """``([p_iᵀ W_ex x_q]_i, p_qᵀ W_ex x_q)``: (B, T), (B,)."""
        m_e = xq @ W[self.d:, :self.d].T                      # W_ex x_q, (B, d_e)
        return self.take(m_e), np.einsum("be,be->b", self.pq, m_e)

    def mix(self, X, s, out=None, tokens=True):
        """``Z s`` (the practical model: ``[Z, z_q] s``) as a (B, D) array (``out`` reused);
        ``tokens=False``: its token part is not formed (zeros)."""
        B, T, d = X.shape
        st = s[:, :T] if self.practical else s
        h = np.empty((B, d + self.pq.shape[1])) if out is None else out
        h[:, :d] = _bvm(st, X) if tokens else 0.0
        self.put_D(st, h)
        if self.practical:
            h += s[:, T:] * self.zq
        return h

    def value(self, V, h):
        """``V h``, (B, d)."""
        return h @ V.T

    def grad_V(self, r, h):
        """``Σ_b r_b h_bᵀ``, (d, D)."""
        return r.T @ h

    def back(self, V, X, r, extra=None):
        """``g_i = z_iᵀ v``, ``v = Vᵀ r`` (+ ``extra`` in its token part: the quadratic
        readout's) (the practical model: also ``z_qᵀ v``), (B, N)."""
        v = r @ V                                             # Vᵀ r, (B, D)
        if extra is not None:
            v[:, :self.d] += extra
        g = _bmv(X, v[:, :self.d])
        g += self.take_D(v)
        if self.practical:
            g = np.concatenate([g, np.einsum("bD,bD->b", self.zq, v)[:, None]], axis=1)
        return g

    def grad_W(self, u, sparse):
        """``Σ_b u_b z_qᵀ``, (D, D) (dense encodings: always dense)."""
        return u.T @ self.zq


def _forward_backward(W, V, X, ops, y_true, need_grad, sparse_grad=False, att=_SOFTMAX,
                      head=None, xent=False, token_rows=True):
    """The formulas of the module docstring, dense encodings; ``Z = [X; P]`` is never
    built. ``att``: the map from logits to weights (:mod:`stsim.core.attention`);
    ``head``: the quadratic readout's ``{"b", "Q"}`` (then a fourth value, their
    gradients); ``token_rows=False``: W's token rows of the gradient (``u_x``) are not
    formed (zeros)."""
    B, d = X.shape[0], X.shape[2]
    s = att.weights(_logits(W, X, ops))
    h = ops.mix(X, s)                              # Z s
    r = ops.value(V, h)
    Qh = None if head is None else _quadratic(head, h[:, :d], r)
    loss, r = _residual(r, y_true, xent)           # r = ∂ℓ/∂f: f − target, or softmax − y
    if not need_grad:
        return (loss, None, None) + ((None,) if head is not None else ())
    r /= B                                         # folds the batch mean into the backward
    dV = ops.grad_V(r, h)                          # Σ_b r hᵀ / B
    dh, extra = (None, None) if head is None else _quadratic_back(head, h[:, :d], r, Qh)
    g = att.backward(ops.back(V, X, r, extra), s)  # δ from g_i = z_iᵀ ∂ℓ/∂h
    u = ops.mix(X, g, out=h, tokens=token_rows)    # u = Z δ (h is no longer needed)
    out = (loss, ops.grad_W(u, sparse_grad), dV)   # Σ_b (Zδ) z_qᵀ
    return out if head is None else out + (dh,)


# --------------------------------------------------------------------------------------
# public entry points
# --------------------------------------------------------------------------------------
def forward_backward(W, V, X, y, pe: PEBatch, *, model="theory", query="sum", x_query=None,
                     target=None, need_grad=True, sparse_grad=False, attention=None,
                     temperature=1.0, rank=None, readout=None, loss="squared"):
    """Batch-mean loss and (optionally) gradients, dispatching on the encoding's form.

    Parameters
    ----------
    W : (D, D) array
        Merged key-query matrix (C or Fortran order; index encodings gather down its
        columns, which Fortran order keeps contiguous).
    V : (d, D) array
        Merged value-output matrix.
    X : (B, T, d) array
        Tokens (their features ``φ(x)`` for another target, :mod:`stsim.core.targets`).
    y : (B, q) int array
        Selected positions.
    pe : PEBatch
        Encodings; the index form uses the gather/scatter path, the dense form products.
    model : {"theory", "practical"}
        The practical model also attends over the query token.
    query : {"sum", "mean"}
        ``p_q = c Σ_{j∈y} p_j`` with ``c = 1`` or ``1/q``.
    x_query : None, (d,) or (B, d)
        The query's token part (0 by default, as in Thm. 1).
    target : (B, o), optional
        Defaults to ``STS_q(X, y)`` (``o = d``).
    need_grad : bool
        If False, returns ``(loss, None, None)`` (cheaper).
    sparse_grad : bool
        For index encodings, return ``dW`` as a
        :class:`stsim.core.sparse_grad.SparseGradW` (its support only: linear in B·T)
        instead of a dense (D, D) array; ignored for dense encodings (and with ``rank``).
    attention : str or Attention, optional
        The map from logits to weights (:mod:`stsim.core.attention`): ``"softmax"`` (the
        default), ``"linear"``, ``"relu"``, ``"sigmoid"``, ``"relu-norm"``,
        ``"sigmoid-norm"``, or an :class:`~stsim.core.attention.Attention` object.
    temperature : float
        The logits are divided by ``τ > 0`` (1: the paper's model).
    rank : int, optional
        ``W`` is then the pair ``(W_K, W_Q)`` of shape ``(rank, D)`` each, ``W = W_Kᵀ W_Q``,
        and ``dW`` is returned as the pair ``(∂/∂W_K, ∂/∂W_Q)``.
    readout : dict, optional
        The quadratic readout's ``{"b": (o,), "Q": (o, d, d)}`` (module docstring); then a
        fourth value is returned, their gradients as a dict (None without ``need_grad``).
    loss : {"squared", "xent"}
        ``½|V h − target|²`` (the paper's), or the cross entropy of the logits ``V h``
        against ``target``, a distribution over V's rows per sample (a one-hot row names
        one class; module docstring).

    Returns
    -------
    loss : float
        The batch-mean loss.
    dW : (D, D) array, SparseGradW, pair of (rank, D) arrays, or None
        Its gradient in ``W`` (a :class:`stsim.core.sparse_grad.SparseGradW` when
        ``sparse_grad`` and the encodings are index ones; the pair with ``rank``).
    dV : (d, D) array or None
        Its gradient in ``V``.
    """
    check_choice("model", model, MODELS)
    check_choice("query", query, QUERIES)
    check_choice("loss", loss, LOSSES)
    if loss == "xent" and (target is None or readout is not None):
        raise ValueError("loss='xent' needs target (class distributions, (B, o)) and the "
                         "linear readout (no readout=)")
    att = _SOFTMAX if attention is None and temperature == 1.0 else \
        make_attention(attention, temperature)
    if rank is not None:
        W_K, _ = W
        check_rank(rank, np.shape(W_K)[-1])
        if np.shape(W_K)[0] != rank:
            raise ValueError(f"W_K and W_Q must have shape (rank, D) = ({rank}, D), got "
                             f"{np.shape(W_K)}")
    return forward_backward_unchecked(W, V, X, y, pe, model == "practical", query, x_query,
                                      target, need_grad, sparse_grad, att, rank is not None,
                                      readout, loss == "xent")


def forward_backward_unchecked(W, V, X, y, pe, practical, query, x_query, target, need_grad,
                               sparse_grad, att, pair, head=None, xent=False, token_rows=True):
    """:func:`forward_backward` without its checks, for a run's step (its config checked
    the options once): ``practical`` a bool, ``query`` ``"sum"`` or ``"mean"``, ``att`` an
    :class:`~stsim.core.attention.Attention` or None (softmax), ``pair``: ``W`` is the pair
    ``(W_K, W_Q)``; ``head``: the quadratic readout's parameters; ``xent``: the cross
    entropy of ``V h`` as logits against ``target`` (class distributions); ``token_rows=False``
    (a run holding ``W_xe`` with ``x_q = 0``): the rows of ``dW`` that only ``W``'s token
    rows read, ``u_x z_qᵀ``, are left 0 instead of formed — the held block's gradient,
    which no step uses."""
    att = _SOFTMAX if att is None else att
    if pair:
        W_K, W_Q = W
        out = forward_backward_unchecked(lowrank_W(W_K, W_Q), V, X, y, pe, practical, query,
                                         x_query, target, need_grad, False, att, False, head,
                                         xent)
        G = out[1]
        return (out[0], None if G is None else lowrank_grad(W_K, W_Q, G)) + out[2:]
    c = _coef(query, y.shape[1])
    y_true, xq = _prepare(X, y, target, x_query)
    d = X.shape[2]
    if pe.is_index:
        ops = _IndexOps(pe.idx, pe.d_e, y, c, d, practical, xq)
        return _index_forward_backward(W, V, X, ops, y_true, need_grad, sparse_grad, att,
                                       head, xent, token_rows)
    ops = _DenseOps(pe.P, y, c, d, practical, xq)
    return _forward_backward(W, V, X, ops, y_true, need_grad, sparse_grad, att, head, xent,
                             token_rows)


def loss_and_grad(W, V, X, y, P, *, model="theory", query="sum", x_query=None, target=None,
                  attention=None, rank=None, temperature=1.0, readout=None) -> tuple:
    """Reference loss and analytic gradients with dense positional encodings.

    ``ℓ = ½‖V Z softmax(Zᵀ W z_q) − STS_q(X, y)‖²`` averaged over the batch (theory
    model; the practical model attends over ``[Z, z_q]``). See the module docstring for
    the backward formulas; ``attention``, ``temperature`` and ``rank`` select another
    mechanism, the logits divided by ``τ``, and ``W = W_Kᵀ W_Q`` (their formulas:
    :mod:`stsim.core.attention`).

    Parameters
    ----------
    W : (D, D) array or pair of arrays
        Key-query matrix, ``D = d + d_e``; with ``rank``, the pair ``(W_K, W_Q)`` of
        (rank, D) arrays.
    P : (T, d_e) or (B, T, d_e) array
        Shared or per-sample encodings.
    V, X, y, model, query, x_query, target, attention, rank, temperature, readout
        As for :func:`forward_backward` (with ``readout``, a fourth value).

    Returns
    -------
    loss : float
        The batch-mean loss.
    dW : (D, D) array or pair of arrays
        Its gradient in ``W`` (with ``rank``: the pair ``(dW_K, dW_Q)``).
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
    V = np.asarray(V, dtype=np.float64)
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y)
    P = np.asarray(P, dtype=np.float64)
    if P.ndim not in (2, 3) or P.shape[-2] != X.shape[1] or (P.ndim == 3 and P.shape[0] != X.shape[0]):
        raise ValueError(f"P must have shape (T, d_e) or (B, T, d_e) with T = {X.shape[1]}, "
                         f"got {P.shape}")
    if X.ndim == 3:
        rank = check_rank(rank, X.shape[2] + P.shape[-1])
    att = make_attention(attention, temperature)
    if rank is None:
        W = np.asarray(W, dtype=np.float64)
        Wfull = W
    else:
        if not (isinstance(W, (tuple, list)) and len(W) == 2):
            raise ValueError("with rank, W must be the pair (W_K, W_Q) of (rank, D) arrays")
        W = tuple(np.asarray(w, dtype=np.float64) for w in W)
        Wfull = lowrank_W(*W)
    _check_shapes(Wfull, V, X, y, P.shape[-1], target, x_query)
    return forward_backward(W, V, X, y, PEBatch(d_e=P.shape[-1], P=P), model=model,
                            query=query, x_query=x_query, target=target, attention=att,
                            rank=rank, readout=readout)


def attention_weights(W, X, y, pe: PEBatch, *, model="theory", query="sum", x_query=None,
                      attention=None, temperature=1.0):
    """Attention weights ``s = softmax(Zᵀ W z_q)`` of each sample, or those of another
    mechanism (dense reference form; for inspection, not for training).

    Parameters
    ----------
    W : (D, D) array
        Key-query matrix, ``D = d + d_e``.
    X, y, pe, model, query, x_query, attention, temperature
        As for :func:`forward_backward` (``pe`` in index or dense form).

    Returns
    -------
    (B, T) or (B, T + 1) array
        The weights (softmax: each row summing to 1): (B, T) for the theory model,
        (B, T + 1) for the practical one (last column the query token).

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
    return make_attention(attention, temperature).weights(a)
