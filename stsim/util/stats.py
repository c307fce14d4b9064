"""Statistics shared by the studies: one least-squares line, growth-law comparisons, one
width search.

* :func:`fit_linear` — ``y ≈ slope · x + intercept`` by least squares, with standard
  errors, 95% confidence intervals (Student t, ``n − 2`` degrees of freedom), residuals,
  R² and n (:class:`LinearFit`).
* :func:`law_fit`, :func:`power_law_fit`, :func:`compare_growth` — the log / linear /
  power-law comparison of a measured size against a growing parameter (used by the
  separation and sparse studies).
* :class:`WidthSearch` / :func:`smallest_passing` — the smallest grid value passing a
  monotone predicate: from a start, step up (down) until a failure and a pass bracket the
  boundary, then bisect; probes are recorded and a search whose largest value fails is
  *censored*.
"""
from __future__ import annotations

import bisect
import math
from dataclasses import dataclass

import numpy as np
from scipy import stats as _st

__all__ = ["LinearFit", "fit_linear", "law_fit", "power_law_fit", "compare_growth",
           "WidthSearch", "smallest_passing"]


# --------------------------------------------------------------------------------------
# the least-squares line
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LinearFit:
    """Result of :func:`fit_linear`. ``residuals = y − (slope · x + intercept)``;
    standard errors and intervals are ``nan`` with fewer than three points (no degree of
    freedom left for the residual variance)."""

    slope: float
    intercept: float
    slope_se: float
    intercept_se: float
    slope_ci: tuple
    intercept_ci: tuple
    residuals: np.ndarray
    r2: float
    n: int

    def predict(self, x):
        """``slope · x + intercept`` (x scalar or array)."""
        return self.slope * np.asarray(x, dtype=float) + self.intercept


def fit_linear(x, y, level: float = 0.95) -> LinearFit:
    """Least squares ``y ≈ slope · x + intercept``.

    Standard errors from the residual variance ``s² = Σ r² / (n − 2)``:
    ``se(slope) = s / √Sxx``, ``se(intercept) = s √(1/n + x̄²/Sxx)``; intervals
    ``estimate ± t_{(1+level)/2, n−2} · se``. ``R² = 1 − Σ r² / Σ (y − ȳ)²`` (1 if ``y`` is
    constant). ``ValueError`` with fewer than two points or constant ``x``.
    """
    x = np.asarray(x, dtype=np.float64).ravel()
    y = np.asarray(y, dtype=np.float64).ravel()
    if x.shape != y.shape:
        raise ValueError(f"x and y must have the same length, got {x.size} and {y.size}")
    n = x.size
    if n < 2:
        raise ValueError(f"need at least 2 points to fit a line, got {n}")
    if np.ptp(x) == 0:
        raise ValueError("x must not be constant (the slope is undetermined)")
    M = np.stack([x, np.ones_like(x)], axis=1)
    (a, b), *_ = np.linalg.lstsq(M, y, rcond=None)
    res = y - (a * x + b)
    ss_res = float(np.sum(res ** 2))
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else 1.0
    if n > 2:
        s2 = ss_res / (n - 2)
        sxx = float(np.sum((x - x.mean()) ** 2))
        se_a = math.sqrt(s2 / sxx)
        se_b = math.sqrt(s2 * (1.0 / n + x.mean() ** 2 / sxx))
        t = float(_st.t.ppf(0.5 + level / 2, n - 2))
    else:
        se_a = se_b = t = math.nan
    return LinearFit(slope=float(a), intercept=float(b), slope_se=se_a, intercept_se=se_b,
                     slope_ci=(float(a) - t * se_a, float(a) + t * se_a),
                     intercept_ci=(float(b) - t * se_b, float(b) + t * se_b),
                     residuals=res, r2=r2, n=n)


# --------------------------------------------------------------------------------------
# growth laws
# --------------------------------------------------------------------------------------
def law_fit(x, y):
    """``y = a x + b``: ``{a, b, residuals, rel_rms}`` (residual = y − fit, ``rel_rms`` the
    rms of residual / y), or ``None`` with fewer than two points or constant ``x``."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    if len(x) < 2 or np.ptp(x) == 0:
        return None
    f = fit_linear(x, y)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel_rms = float(np.sqrt(np.mean((f.residuals / y) ** 2)))
    return {"a": f.slope, "b": f.intercept, "residuals": f.residuals.tolist(),
            "rel_rms": rel_rms}


def power_law_fit(x, y):
    """``y = 2^b x^a`` (least squares of ``log2 y`` on ``log2 x``): ``{a, b,
    residuals_ratio (y / fit), rms_log2}``, or ``None`` as :func:`law_fit`."""
    p = law_fit(np.log2(np.asarray(x, float)), np.log2(np.asarray(y, float)))
    if p is None:
        return None
    ratio = [float(2.0 ** r) for r in p["residuals"]]
    return {"a": p["a"], "b": p["b"], "residuals_ratio": ratio,
            "rms_log2": float(np.sqrt(np.mean(np.log2(ratio) ** 2)))}


def compare_growth(t, y, scale: float = 1, min_points: int = 2) -> dict:
    """Compare three growth laws of ``y`` in ``t``: ``linear`` ``y = a·(scale t) + b``,
    ``log`` ``y = a·log2 t + b``, ``power`` ``y = 2^b (scale t)^a``; each ``None`` with
    fewer than ``min_points`` points. ``better`` names the one of ``log`` / ``linear`` with
    the smaller relative rms residual (absent unless both were fitted)."""
    t, y = np.asarray(t, float), np.asarray(y, float)
    enough = len(t) >= min_points
    out = {"linear": law_fit(t * scale, y) if enough else None,
           "log": law_fit(np.log2(t), y) if enough else None,
           "power": power_law_fit(t * scale, y) if enough else None}
    if out["log"] and out["linear"]:
        out["better"] = "log" if out["log"]["rel_rms"] < out["linear"]["rel_rms"] else "linear"
    return out


# --------------------------------------------------------------------------------------
# the width search
# --------------------------------------------------------------------------------------
class WidthSearch:
    """Smallest value of a sorted ``grid`` for which a monotone predicate passes.

    Drive it with :meth:`propose` (the next value to test, ``None`` when done) and
    :meth:`update` (its outcome), or let :func:`smallest_passing` drive it.

    ``result`` is the smallest passing value found (``None`` while running or when
    censored), ``censored`` is True when the largest grid value fails, ``probes`` lists
    ``(value, passed)`` in order. An outcome contradicting monotonicity raises
    ``RuntimeError``.

    Parameters
    ----------
    grid : sorted sequence of distinct values (a ``range`` for all integers in [lo, hi]).
    start : first value probed (the grid value nearest to it in log scale).
    stride : how to move while the boundary is not bracketed: an int ``k`` moves ``k``
        grid places; ``"double"`` doubles (halves) the value, clipped to the grid.
    rel : once bracketed, bisect until the two neighbours are adjacent on the grid or
        their values differ by at most ``rel`` × the passing value.
    """

    def __init__(self, grid, start, stride=2, rel: float = 0.0):
        if len(grid) == 0:
            raise ValueError("grid must not be empty")
        if not (stride == "double" or (isinstance(stride, int) and stride >= 1)):
            raise ValueError(f"stride must be an int >= 1 or 'double', got {stride!r}")
        self.grid = grid if isinstance(grid, range) else list(grid)
        self.stride = stride
        self.rel = float(rel)
        if isinstance(self.grid, range):
            self.start = self._index(min(max(start or self.grid[0], self.grid[0]),
                                         self.grid[-1]))
        else:
            self.start = int(np.argmin([abs(math.log(g / max(start, 1))) for g in self.grid]))
        self.lo = None   # largest failing index
        self.hi = None   # smallest passing index
        self.probes = []

    def _index(self, value):
        return self.grid.index(value)

    def _step(self, i, up: bool):
        n = len(self.grid)
        if self.stride != "double":
            return min(i + self.stride, n - 1) if up else max(i - self.stride, 0)
        v = self.grid[i]
        if up:   # smallest grid value >= 2v
            return min(bisect.bisect_left(self.grid, 2 * v), n - 1)
        return max(bisect.bisect_right(self.grid, v // 2) - 1, 0)

    def propose(self):
        """The next grid value to test, or ``None`` when the search is over."""
        n = len(self.grid)
        if self.lo is None and self.hi is None:
            return self.grid[self.start]
        if self.hi is None:
            return None if self.lo == n - 1 else self.grid[self._step(self.lo, True)]
        if self.lo is None:
            return None if self.hi == 0 else self.grid[self._step(self.hi, False)]
        if self.hi - self.lo <= 1 or self.grid[self.hi] - self.grid[self.lo] <= \
                self.rel * self.grid[self.hi]:
            return None
        return self.grid[(self.lo + self.hi) // 2]

    @property
    def done(self) -> bool:
        """``True`` when :meth:`propose` has nothing left to test."""
        return self.propose() is None

    def update(self, value, passed: bool):
        """Record the outcome of testing ``value`` (``RuntimeError`` if it contradicts
        monotonicity)."""
        i = self._index(value)
        self.probes.append((value, bool(passed)))
        if passed:
            self.hi = i if self.hi is None else min(self.hi, i)
        else:
            self.lo = i if self.lo is None else max(self.lo, i)
        if self.lo is not None and self.hi is not None and self.lo >= self.hi:
            raise RuntimeError(f"non-monotone outcome: {self.grid[self.lo]} fails but "
                               f"{self.grid[self.hi]} passes; probes {self.probes}")

    @property
    def censored(self) -> bool:
        """``True`` when even the largest grid value fails."""
        return self.hi is None and self.lo == len(self.grid) - 1

    @property
    def result(self):
        """The smallest passing value found, or ``None`` (running, or censored)."""
        return None if self.hi is None else self.grid[self.hi]

    def run(self, passes):
        """Probe ``passes(value)`` until done; return ``(result, probes)``."""
        while (v := self.propose()) is not None:
            self.update(v, passes(v))
        return self.result, self.probes


def smallest_passing(passes, lo: int, hi: int, start: int | None = None, rel: float = 0.0):
    """Smallest integer ``w`` in ``[lo, hi]`` with ``passes(w)``, assuming passing is
    monotone in ``w``: doubling / halving from ``start`` to bracket the boundary, then
    bisection until the bracket is ``<= max(1, rel · w)`` wide. Returns ``(w or None if
    hi fails, probes)``, ``probes`` the ``(w, passed)`` in evaluation order."""
    lo, hi = int(lo), int(hi)
    if lo < 1 or hi < lo:
        raise ValueError(f"need 1 <= lo <= hi, got lo={lo}, hi={hi}")
    return WidthSearch(range(lo, hi + 1), start, stride="double", rel=rel).run(passes)
