"""The sparse token selection task STS_q (docs/model.md, 'Task').

Tokens ``x_1..x_T`` are i.i.d. ``N(0, I_d)``; a subset ``y ⊂ [T]`` of size ``q`` is
uniform over all q-subsets; the target is ``STS_q(X, y) = (1/q) Σ_{j∈y} x_j``.

Shapes (batch first, float64): ``X`` (B, T, d), ``y`` (B, q) int64 with distinct entries
per row, ``target`` (B, d).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from stsim.util.validate import check_int

__all__ = ["Batch", "sample_batch", "sample_subsets", "sts_target", "draw_batch", "draw_subsets"]


def sample_subsets(rng: np.random.Generator, B: int, T: int, q: int) -> np.ndarray:
    """Draw ``B`` independent uniform q-subsets of ``{0..T-1}``, shape (B, q).

    Vectorised Floyd algorithm: for ``j = T-q .. T-1`` draw ``t ~ U{0..j}`` and add ``t``,
    or ``j`` if ``t`` is already taken. Each set is uniform over the C(T, q) subsets
    (Floyd 1987); the order inside a row carries no meaning. Cost O(B q²).
    """
    B, T = check_int("B", B, 1), check_int("T", T, 1)
    return draw_subsets(rng, B, T, check_int("q", q, 1, T))


def draw_subsets(rng: np.random.Generator, B: int, T: int, q: int) -> np.ndarray:
    """:func:`sample_subsets` without its checks (ints, ``1 <= q <= T``): for the callers
    that checked the sizes once, as a run's config does."""
    out = np.empty((B, q), dtype=np.int64)
    for col, j in enumerate(range(T - q, T)):
        t = rng.integers(0, j + 1, size=B)
        taken = (out[:, :col] == t[:, None]).any(axis=1)
        out[:, col] = np.where(taken, j, t)
    return out


def sts_target(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``STS_q(X, y) = (1/q) Σ_{j∈y} x_j`` for a batch: X (B, T, d), y (B, q) -> (B, d)."""
    sel = np.take_along_axis(X, y[:, :, None], axis=1)
    return sel.mean(axis=1)


@dataclass(frozen=True)
class Batch:
    """One batch of the task: ``X`` (B, T, d), ``y`` (B, q), ``target`` (B, d)."""

    X: np.ndarray
    y: np.ndarray
    target: np.ndarray

    @property
    def B(self) -> int:
        """Batch size."""
        return self.X.shape[0]

    @property
    def T(self) -> int:
        """Sequence length."""
        return self.X.shape[1]

    @property
    def q(self) -> int:
        """Subset size."""
        return self.y.shape[1]


def sample_batch(rng: np.random.Generator, B: int, T: int, q: int, d: int) -> Batch:
    """Draw a batch of STS_q problems.

    Parameters
    ----------
    rng : numpy.random.Generator
        Draws the tokens and the subsets.
    B, T, q, d : int
        Batch size, sequence length, subset size (``1 <= q <= T``), token dimension.

    Example
    -------
    >>> b = sample_batch(np.random.default_rng(0), B=4, T=10, q=3, d=5)
    >>> b.X.shape, b.y.shape, b.target.shape
    ((4, 10, 5), (4, 3), (4, 5))
    """
    B, T = check_int("B", B, 1), check_int("T", T, 1)
    return draw_batch(rng, B, T, check_int("q", q, 1, T), check_int("d", d, 1))


def draw_batch(rng: np.random.Generator, B: int, T: int, q: int, d: int) -> Batch:
    """:func:`sample_batch` without its checks (ints, ``1 <= q <= T``): a run's step, whose
    sizes its config checked once."""
    X = rng.standard_normal((B, T, d))
    y = draw_subsets(rng, B, T, q)
    return Batch(X=X, y=y, target=sts_target(X, y))
