"""The index form of :mod:`stsim.core.model` (one-hot and stochastic/slots encodings,
``p_i = e_{k_i}``): the maps of the module docstring there as gathers and scatters at the
tokens' slots, the mixtures kept in token space, the gradient of W as
:class:`stsim.core.sparse_grad.SparseGradW` (its support only), and the forward/backward
in cache-sized parts of the batch — a step linear in B·T, no (B, d_e) or (D, D)
array unless D is small (``_DENSE_W``)."""
import numpy as np

from stsim.core.attention import Softmax
from stsim.core.kernels import (_bmv, _bvm, _csr, _logits, _quadratic, _quadratic_back,
                                _residual)
from stsim.core.sparse_grad import SparseGradW, flat_view

__all__ = []   # internal to stsim.core (model.forward_backward dispatches here)

_PART = 1 << 17   # token numbers (B·T·d) per part of the index form's batch loop (1 MiB)
_DENSE_W = 4      # index form: a dense dW when D² <= _DENSE_W · B (d + T) (_IndexOps.grad_W)


class _IndexOps:
    """One-hot families ``p_i = e_{k_i}``, slots ``idx`` (T,) or (B, T), distinct within a
    sample; every map is a gather or a scatter at the slots (module docstring), and the
    mixtures are kept in token space: ``(h_x, h_e)`` with ``h = [h_x; Σ_i h_{e,i} e_{k_i}]``.
    For the practical model the query token ``z_q = [x_q; c Σ_j e_{κ_j}]`` sits at the slots
    of the selected tokens (``κ_j = k_{y_j}``), so its weight is added to theirs.

    The products with ``V`` take one of two routes, whichever needs the smaller arrays:
    ``rows`` (``d_e <= d T`` and ``x_q = 0``: e.g. the default ``d_e = 2T``, one-hot ``d_e = T``)
    writes ``h`` and ``Vᵀ r`` as (B, D) rows, as the dense form does — ``V h``, ``dV`` and
    ``Vᵀ r`` are then single matrix products, the same operations as the dense form; else
    the columns ``V[:, d + k_i]`` are gathered once per sample, (B, T, d)."""

    def __init__(self, idx, d_e, y, c, d, practical, xq):
        B, q = y.shape
        self.d, self.d_e, self.c, self.y = d, d_e, c, y
        self.practical, self.xq = practical, xq
        self.idx, self.shared = idx, idx.ndim == 1
        T = idx.shape[-1]
        self.ky = np.take_along_axis(np.broadcast_to(idx, (B, T)), y, axis=1)   # κ, (B, q)
        self.yflat = y + (T * np.arange(B))[:, None]       # the selected tokens in (B, T)
        self.rows = xq is None and d_e <= d * T
        self.G = self._flat_D = None
        self.keep_G = True
        self.order = "C"                                    # W's memory order (query_terms)

    def flat_D(self):
        """Positions of the slots in a C-contiguous (B, D) array."""
        if self._flat_D is None:
            B = self.y.shape[0]
            self._flat_D = self.idx + (self.d + (self.d + self.d_e) * np.arange(B))[:, None]
        return self._flat_D

    def dense_rows(self, h_x, h_e):
        """``h = [h_x; Σ_i h_{e,i} e_{k_i}]`` as (B, D) rows."""
        B, d = h_x.shape
        h = np.empty((B, d + self.d_e))
        h[:, :d] = h_x
        h[:, d:] = 0.0
        np.put(h, self.flat_D(), h_e)
        return h

    def parts(self, X):
        """``[(samples, ops)]``: the batch cut into parts of about ``_PART`` token numbers
        (a part's tokens and ``V_e`` rows stay in cache between the passes over them), or
        one part: a small batch, shared slots (one-hot: its products are matrix products
        over the batch) or ``x_q ≠ 0`` (``x_q W_xxᵀ`` is one product over the batch)."""
        B, T, d = X.shape
        # token numbers per sample: d, or T alone for tokens as statistics ((B, T) arrays)
        width = T * (d if isinstance(X, np.ndarray) else 1)
        if self.shared or self.xq is not None or B * width <= 4 * _PART:
            return [(slice(None), self)]
        n = max(1, _PART // width)
        out = []
        for s in range(0, B, n):
            sl = slice(s, s + n)
            part = _IndexOps(self.idx[sl], self.d_e, self.y[sl], self.c, d, self.practical, None)
            part.keep_G = False                            # gathered again in the backward
            out.append((sl, part))
        return out

    def query_terms(self, W):
        # with m = W_ee p_q = c Σ_j W_ee[:, κ_j]:  p_iᵀ m = c Σ_j W_ee[k_i, κ_j] and
        # p_qᵀ m = c² Σ_{j,l} W_ee[κ_l, κ_j] are gathers of W itself at flat positions
        # (m is never formed; in Fortran order a gather runs down a column of W);
        # W_xe p_q = c Σ_j W_xe[:, κ_j]
        ky, c, d = self.ky, self.c, self.d
        try:
            Wf, sr, sc = flat_view(W)
        except ValueError:
            W = np.ascontiguousarray(W)
            Wf, sr, sc = flat_view(W)
        self.order = "F" if sr == 1 and W.shape[0] > 1 else "C"
        row = (d + self.idx) * sr + d * sc                 # W_ee[k_i, 0]
        col = ky * sc
        a_e = np.take(Wf, row + col[:, :1])
        mx = W[:d, d + ky[:, 0]]
        for j in range(1, ky.shape[1]):
            a_e += np.take(Wf, row + col[:, j:j + 1])
            mx += W[:d, d + ky[:, j]]
        a_e *= c
        a_qq = np.take(Wf, ((d + ky) * sr + d * sc)[:, :, None] + col[:, None, :]).sum(axis=(1, 2))
        return c * mx.T, a_e, (c * c) * a_qq

    def xq_terms(self, W, xq):
        E = np.take(W[:, :self.d], self.d + self.idx, axis=0)   # rows k_i of W_ex
        e = (E @ xq.T).T if self.shared else _bmv(E, xq)
        return e, self.c * np.take(e, self.yflat).sum(axis=1)

    def mix(self, X, s, out=None, tokens=True):
        """``(h_x, h_e)``: ``Σ_i s_i x_i`` (B, d) and the weights at the slots (B, T);
        ``tokens=False``: ``h_x`` not formed (zeros)."""
        T = X.shape[1]
        if not self.practical:
            return (_bvm(s, X) if tokens else np.zeros((s.shape[0], self.d))), s
        st, sq = s[:, :T], s[:, T]
        h_x = _bvm(st, X) if tokens else np.zeros((s.shape[0], self.d))
        h_e = st.copy()
        h_e.reshape(-1)[self.yflat] += sq[:, None] * self.c
        if self.xq is not None:
            h_x += sq[:, None] * self.xq
        return h_x, h_e

    def _Ve(self, V):
        """``V_e`` read at the slots: (T, d) or (B, T, d), rows ``V[:, d + k_i]``."""
        G = self.G
        if G is None:
            G = np.take(np.ascontiguousarray(V[:, self.d:].T), self.idx, axis=0)
            self.G = G if self.keep_G else None
        return G

    def value_e(self, V, h_e):
        """``V_e Σ_i h_{e,i} e_{k_i}``, (B, d)."""
        G = self._Ve(V)
        return h_e @ G if self.shared else _bvm(h_e, G)

    def scatter(self, w, m):
        """``Σ_{b,i} w_{bi} e_{k_{bi}} m_bᵀ``: (B, T), (B, k) -> (d_e, k), a sparse product
        (B·T nonzeros)."""
        if self.shared:
            out = np.zeros((self.d_e, m.shape[1]))
            out[self.idx] = w.T @ m
            return out
        B, T = w.shape
        S = _csr(w.reshape(-1), self.idx.reshape(-1), np.arange(0, B * T + 1, T),
                 shape=(B, self.d_e))
        return S.T @ m

    def grad_V(self, r, h):
        h_x, h_e = h
        d = self.d
        dV = np.empty((r.shape[1], d + self.d_e))
        dV[:, :d] = r.T @ h_x
        dV[:, d:] = self.scatter(h_e, r).T
        return dV

    def back(self, V, X, r, v_x, v=None):
        """``g_i = z_iᵀ Vᵀ r`` (the practical model: also ``z_qᵀ Vᵀ r``), ``v_x = V_xᵀ r``;
        ``v``: ``Vᵀ r`` as (B, D) rows (the ``rows`` route)."""
        if v is not None:
            g = _bmv(X, v_x)
            g += np.take(v, self.flat_D())
            if self.practical:                             # z_q = [0; c Σ_j e_{κ_j}]
                zq = np.zeros_like(v)
                np.put_along_axis(zq[:, self.d:], self.ky, self.c, axis=1)
                g = np.concatenate([g, np.einsum("bD,bD->b", zq, v)[:, None]], axis=1)
            return g
        G = self._Ve(V)
        g_e = r @ G.T if self.shared else _bmv(G, r)       # p_iᵀ V_eᵀ r
        g = _bmv(X, v_x)
        g += g_e
        if self.practical:
            g_q = self.c * np.take(g_e, self.yflat).sum(axis=1)
            if self.xq is not None:
                g_q += np.einsum("bd,bd->b", self.xq, v_x)
            g = np.concatenate([g, g_q[:, None]], axis=1)
        return g

    def grad_W(self, u, sparse):
        """``Σ_b u_b z_qᵀ``: a :class:`SparseGradW` when ``sparse``, else a dense (D, D)
        array — also when ``D² <= _DENSE_W · B (d + T)`` (small d_e: the (D, D) array is
        then at most a few times the batch's own token arrays, and one sparse product is
        cheaper than the bookkeeping). Both hold the same entries, bit for bit."""
        u_x, u_e = u
        B, T = u_e.shape
        d, D = self.d, self.d + self.d_e
        xb = None
        if self.xq is not None:                           # columns 0..d-1: Σ_b u_b x_qᵀ
            xb = np.empty((D, d))
            xb[:d] = u_x.T @ self.xq
            xb[d:] = self.scatter(u_e, self.xq)
        if not sparse or D * D <= _DENSE_W * B * (d + T):
            return self._dense_grad_W(u_x, u_e, xb)
        return SparseGradW(D, d, self.idx, self.ky, self.c, u_x, u_e, xb)

    def _dense_grad_W(self, u_x, u_e, xb):
        """The dense ``dW``, in ``W``'s memory order: its encoding columns ``(Sᵀ u)ᵀ`` with
        ``S`` the sparse (B, d_e) matrix of ``p_q`` (``c`` at the query's slots) and ``u`` the
        dense (B, D) rows (scipy adds ``c u_b`` into a column in increasing ``b``, from 0)."""
        B, T = u_e.shape
        d, D, q = self.d, self.d + self.d_e, self.ky.shape[1]
        U = np.zeros((B, D))
        U[:, :d] = u_x
        np.put_along_axis(U[:, d:], np.broadcast_to(self.idx, (B, T)), u_e, axis=1)
        S = _csr(np.full(B * q, self.c), self.ky.reshape(-1), np.arange(0, B * q + 1, q),
                 shape=(B, self.d_e))
        dW = np.empty((D, D), order=self.order)          # W's order: the update streams
        dW.T[d:] = S.T @ U
        dW[:, :d] = 0.0 if xb is None else xb
        return dW


def _index_forward_backward(W, V, X, ops, y_true, need_grad, sparse_grad=False, att=None,
                            head=None, xent=False, token_rows=True):
    """The same formulas for index encodings, in token space and in parts of the batch
    (:meth:`_IndexOps.parts`): per part the logits, softmax, mixture (and ``V_e h_e`` on
    the gather route); then the products over the whole batch (``V h``, the loss, ``dV``,
    ``Vᵀ r``); then per part ``g``, ``δ`` and ``u = Z δ``. Every per-sample number is
    computed as on the whole batch and every product over the batch on the whole batch, so
    the parts change no bit. ``att``: the map from logits to weights
    (:mod:`stsim.core.attention`; None: softmax); ``head``: the quadratic readout's
    parameters (then a fourth value, their gradients); ``token_rows=False``: W's token rows
    of the gradient (``u_x``, what ``W_xe`` reads with ``x_q = 0``) are not formed: zeros."""
    if att is None:
        att = Softmax()
    B, T, d = X.shape
    parts = ops.parts(X)
    one = len(parts) == 1
    s = None if one else np.empty((B, T + ops.practical))
    h_x, r_e = np.empty((B, d)), np.empty((B, V.shape[0]))
    h_e = None if one or not ops.practical else np.empty((B, T))
    for sl, o in parts:
        s_c = att.weights(_logits(W, X[sl], o))
        hx_c, he_c = o.mix(X[sl], s_c)
        h_x[sl] = hx_c
        if not ops.rows:
            r_e[sl] = o.value_e(V, he_c)
        if one:
            s, h_e = s_c, he_c
        else:
            s[sl] = s_c
            if h_e is not None:
                h_e[sl] = he_c
    if h_e is None:
        h_e = s                                    # theory model: the weights themselves
    if ops.rows:
        h = ops.dense_rows(h_x, h_e)               # (B, D): V h, dV, Vᵀ r as one product each
        r = h @ V.T
    else:
        r = h_x @ V[:, :d].T
        r += r_e
    Qh = None if head is None else _quadratic(head, h_x, r)
    loss, r = _residual(r, y_true, xent)
    if not need_grad:
        return (loss, None, None) + ((None,) if head is not None else ())
    r /= B
    if ops.rows:
        dV = r.T @ h
        v = r @ V
        v_x = v[:, :d]
    else:
        dV = ops.grad_V(r, (h_x, h_e))
        v, v_x = None, r @ V[:, :d]                # V_xᵀ r, (B, d)
    if head is not None:                           # the readout's term of ∂ℓ/∂h_x
        dh, extra = _quadratic_back(head, h_x, r, Qh)
        v_x += extra
    u_x = np.empty((B, d))
    u_e = None if one else np.empty((B, T))
    for sl, o in parts:
        g_c = att.backward(o.back(V, X[sl], r[sl], v_x[sl], None if v is None else v[sl]),
                           s[sl])
        ux_c, ue_c = o.mix(X[sl], g_c, tokens=token_rows)
        u_x[sl] = ux_c
        if one:
            u_e = ue_c
        else:
            u_e[sl] = ue_c
    out = (loss, ops.grad_W((u_x, u_e), sparse_grad), dV)
    return out if head is None else out + (dh,)
