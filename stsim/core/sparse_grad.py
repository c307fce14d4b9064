r"""The gradient of ``W`` of a batch with one-hot (index) encodings, held exactly in its
support.

With one-hot encodings at slots, ``p_i = e_{k_i}``, the query token is
``z_q = [x_q; c Σ_{j∈y} e_{κ_j}]`` (``κ_j = k_{y_j}``, the query's slots) and the token
mixture ``u = Z δ = [u_x; Σ_i δ_i e_{k_i}]``, so the batch-mean gradient

.. math::

    ∂L/∂W = \frac1B Σ_b u_b z_{q,b}ᵀ

is nonzero only in

* the columns ``d + κ_{bj}`` (at most ``B q``): column ``d + κ_{bj}`` receives ``c u_b``,
  i.e. ``c u_{x,b}`` in rows ``0..d−1`` and ``c δ_{bi}`` in rows ``d + k_{bi}`` — at most
  ``d + T`` nonzeros;
* the first ``d`` columns (only when ``x_q ≠ 0``): ``Σ_b u_b x_{q,b}ᵀ``, a dense
  ``(D, d)`` block.

:class:`SparseGradW` keeps exactly that: the columns hit by a single pair ``(b, j)`` as
references to the token-space arrays (``u_x`` (B, d), ``u_e`` (B, T), the slots),
the columns hit by two or more pairs summed into a dense block on the rows those pairs
touch, and the ``x`` block: ``O(B (d + T))`` numbers, plus the shared block (at most
about ``(Bq)²/2`` entries when ``d_e ≫ B q``). Its
entries are those of the dense product ``Σ_b (c u_b) 1_{κ_b}ᵀ`` formed the old way
(``scipy``'s sparse-times-dense, which adds ``c u_b`` into a column in increasing ``b``
from 0): a single contribution is ``c u_b`` itself, and a shared column is summed by
``np.bincount`` in the same order, so the entries agree bit for bit (tested).
:meth:`SparseGradW.axpy` adds ``α·dW`` (or ``α·dW⊙dW``) to an array in place, touching
only the support; for ``α = −η`` it is the SGD update ``W ← W − η dW`` with the same
roundings as the dense ``W -= η * dW`` (IEEE: ``x + (−y) = x − y``; zeros add exactly).
"""
from __future__ import annotations

import numpy as np

from stsim.core.kernels import _csr

__all__ = ["SparseGradW", "flat_view"]

_DENSE_ROWS = 4      # shared columns over all rows when 4 × their entries >= B'·D (SparseGradW)
_CHUNK = 1 << 13      # entries updated at once by SparseGradW.axpy (64 KiB per temporary:
                      # what it gathers from W is still in cache when it writes back)


def flat_view(A: np.ndarray):
    """``(flat, sr, sc)``: a 1-D view of the contiguous 2-D array ``A`` and the strides (in
    elements) of its rows and columns, so that ``A[r, k] = flat[r*sr + k*sc]``.

    C order gives ``(A.reshape(-1), ncols, 1)``, Fortran order ``(A.T.reshape(-1), 1,
    nrows)``. ``ValueError`` for an array that is neither (e.g. a strided slice).
    """
    if A.ndim != 2:
        raise ValueError(f"A must be a 2-D array, got shape {A.shape}")
    if A.flags.c_contiguous:
        return A.reshape(-1), A.shape[1], 1
    if A.flags.f_contiguous:
        return A.T.reshape(-1), 1, A.shape[0]
    raise ValueError("A must be C- or Fortran-contiguous")


def _add_at(out, pos, v, c, alpha, square, owned=False):
    """``out[pos] += alpha * (c v)`` (``square``: ``(alpha * (c v)) * (c v)``), ``pos``
    distinct flat positions (None: all of ``out``); ``owned``: ``v`` is a copy that may be
    overwritten."""
    if c != 1.0:
        v, owned = c * v, True
    w = np.multiply(v, alpha, out=v) if (owned and not square) else v * alpha
    if square:
        w *= v
    if pos is None:
        out += w
    else:
        out[pos] += w


class SparseGradW:
    """``∂L/∂W`` of an index batch in exact sparse form (module docstring).

    Parameters
    ----------
    D : int
        ``d + d_e``, the side of ``W``.
    d : int
        Token dimension.
    idx : ndarray of int, shape (T,) or (B, T)
        Slots of the tokens (``p_i = e_{idx[i]}``), distinct within a sample.
    ky : ndarray of int, shape (B, q)
        Slots of the query's selected tokens (``κ``), distinct within a sample.
    c : float
        Query coefficient (``p_q = c Σ_j e_{κ_j}``).
    u_x : ndarray, shape (B, d)
        Token part of ``u_b = Z_b δ_b`` (already divided by the batch size).
    u_e : ndarray, shape (B, T)
        Encoding part of ``u_b`` at the slots ``idx`` (``δ``, plus the query token's term
        for the practical model).
    x_block : ndarray, shape (D, d), or None
        The first ``d`` columns ``Σ_b u_b x_{q,b}ᵀ`` (None when ``x_q = 0``).
    """

    def __init__(self, D, d, idx, ky, c, u_x, u_e, x_block=None):
        B, q = ky.shape
        self.D, self.d, self.c = int(D), int(d), float(c)
        self.idx = np.broadcast_to(idx, (B, u_e.shape[1]))
        self.ky, self.u_x, self.u_e, self.x_block = ky, u_x, u_e, x_block
        cols = ky.reshape(-1)
        order = np.argsort(cols, kind="stable")        # pairs by column, b increasing within
        sc = cols[order]
        new = np.ones(sc.size + 1, dtype=bool)
        new[1:-1] = sc[1:] != sc[:-1]                  # a column starts at i / ends before i+1
        single = new[:-1] & new[1:]
        self.b1 = order[single] // q                    # columns hit by one pair: its sample
        self.c1 = self.d + sc[single]
        multi = ~single
        self.c2 = self.d + sc[multi & new[:-1]]         # columns hit by >= 2 pairs
        self.block2 = self._sum_shared(order[multi] // q, np.cumsum(new[:-1][multi]) - 1)

    def _sum_shared(self, b, g):
        """Dense block of the shared columns, (k2, |R|) on the rows ``R`` (``self.rows2``;
        None: all D rows), summed over the pairs in column order, ``b`` increasing within a
        column (``g``: each pair's column number). Two ways, the same additions in the same
        order: when the pairs' entries are many against ``D`` (small d_e), the sparse product
        ``S u`` of the pairs' (k2, B') matrix of ``c`` with the dense rows ``u_b`` of their
        B' samples (scipy adds ``c u_b`` row by row, as the dense product did); otherwise
        ``np.bincount`` on the rows the pairs touch."""
        k2, d, D = self.c2.size, self.d, self.D
        self.rows2 = np.arange(0)
        if k2 == 0:
            return np.zeros((0, 0))
        T = self.u_e.shape[1]
        samples, which = np.unique(b, return_inverse=True)
        if _DENSE_ROWS * b.size * (d + T) >= samples.size * D:
            U = np.zeros((samples.size, D))
            U[:, :d] = self.u_x[samples]
            np.put_along_axis(U[:, d:], self.idx[samples], self.u_e[samples], axis=1)
            ptr = np.searchsorted(g, np.arange(k2 + 1))
            S = _csr(np.full(b.size, self.c), which, ptr, shape=(k2, samples.size))
            self.rows2 = None
            return S @ U
        slots = self.idx[b]                            # (n2, T) slots of each pair's sample
        mask = np.zeros(D, dtype=bool)
        mask[:d] = True
        mask[d + slots] = True
        self.rows2 = np.flatnonzero(mask)              # R, increasing
        where = np.cumsum(mask) - 1                    # row -> its place in R
        base = (g * self.rows2.size)[:, None]
        flat = np.concatenate([base + np.arange(d), base + where[d + slots]], axis=1)
        w = np.concatenate([self._scaled(self.u_x[b]), self._scaled(self.u_e[b])], axis=1)
        out = np.bincount(flat.reshape(-1), weights=w.reshape(-1),
                          minlength=k2 * self.rows2.size)
        return out.reshape(k2, self.rows2.size)

    def _scaled(self, v):
        return v if self.c == 1.0 else self.c * v

    @property
    def shape(self):
        """``(D, D)``."""
        return (self.D, self.D)

    @property
    def nnz(self) -> int:
        """Number of entries stored (the support, zeros inside it included)."""
        n = self.c1.size * (self.d + self.u_e.shape[1]) + self.block2.size
        return n + (0 if self.x_block is None else self.x_block.size)

    def all_finite(self) -> bool:
        """Whether every entry of ``dW`` is finite — as ``np.all(np.isfinite(dW))`` on the
        dense form: every ``u_b`` enters some column (times ``c ≠ 0``), and a shared column
        is non-finite when one of its terms, or its sum, is."""
        parts = (self.u_x, self.u_e, self.block2) + (
            () if self.x_block is None else (self.x_block,))
        return all(bool(np.isfinite(p).all()) for p in parts)

    def axpy(self, A: np.ndarray, alpha: float, square: bool = False) -> None:
        """``A += alpha * dW`` (``square``: ``A += alpha * dW * dW``) in place, on the
        support of ``dW`` only; ``A``: (D, D), C- or Fortran-contiguous. The roundings are
        those of the dense expression (``(alpha * dW) * dW`` for ``square``)."""
        if A.shape != self.shape:
            raise ValueError(f"A must have shape {self.shape}, got {A.shape}")
        flat, sr, sc = flat_view(A)
        d, T = self.d, self.u_e.shape[1]
        step = max(1, _CHUNK // (d + T))
        for s in range(0, self.b1.size, step):       # columns hit by one pair
            b, col = self.b1[s:s + step], (self.c1[s:s + step] * sc)[:, None]
            rows = self.idx[b]                         # a copy: made the positions in place
            if sr != 1:
                rows *= sr
            rows += col + d * sr
            _add_at(flat, col + np.arange(d) * sr, self.u_x[b], self.c, alpha, square, True)
            _add_at(flat, rows, self.u_e[b], self.c, alpha, square, True)
        if self.block2.size and self.rows2 is None:   # shared columns, all rows
            w = alpha * self.block2
            if square:
                w *= self.block2
            A[:, self.c2] += w.T
        elif self.block2.size:                        # shared columns, the rows R
            pos = (self.c2 * sc)[:, None] + self.rows2 * sr
            _add_at(flat, pos, self.block2, 1.0, alpha, square)
        if self.x_block is not None:
            _add_at(A[:, :d], None, self.x_block, 1.0, alpha, square)

    def todense(self) -> np.ndarray:
        """The dense ``(D, D)`` gradient (C order)."""
        out = np.zeros(self.shape)
        self.axpy(out, 1.0)
        return out

    def __array__(self, dtype=None, copy=None):
        out = self.todense()
        return out if dtype is None else out.astype(dtype)

    def __repr__(self):
        return (f"SparseGradW(D={self.D}, single columns={self.c1.size}, shared columns="
                f"{self.c2.size}, x block={'yes' if self.x_block is not None else 'no'})")
