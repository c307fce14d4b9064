"""Thresholds on a grid: finding one, the smallest width passing over seeds, and its
bootstrap interval; re-exported by :mod:`stsim.util.stats` (import them from there).

* :class:`WidthSearch` / :func:`smallest_passing` — the smallest grid value passing a
  monotone predicate: from a start, step up (down) until a failure and a pass bracket the
  boundary, then bisect; probes are recorded and a search whose largest value fails is
  *censored*.
* :func:`threshold_width` — the smallest grid width whose median over seeds passes a
  target (and every larger grid width too); :func:`bootstrap_threshold` — the percentile
  bootstrap interval of any such grid threshold, with paired (seed) or binomial
  resamples and censored draws at ``+inf`` (separation widths, sparse m*).
* :func:`wilson_interval` — the 95% Wilson score interval of a grid cell's success
  probability (``scipy.stats.binomtest``).
"""
from __future__ import annotations

import bisect
import math

import numpy as np

__all__ = ["WidthSearch", "smallest_passing", "threshold_width", "bootstrap_threshold",
           "RESAMPLES", "wilson_interval"]


# ---- the width search ----------------------------------------------------------------
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
    grid : sequence or range
        Sorted distinct values (a ``range`` for all integers in [lo, hi]).
    start : int or float
        First value probed (the grid value nearest to it in log scale).
    stride : int or "double"
        How to move while the boundary is not bracketed: an int ``k`` moves ``k`` grid
        places; ``"double"`` doubles (halves) the value, clipped to the grid.
    rel : float
        Once bracketed, bisect until the two neighbours are adjacent on the grid or their
        values differ by at most ``rel`` × the passing value.
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
            self.start = self.grid.index(min(max(start or self.grid[0], self.grid[0]),
                                             self.grid[-1]))
        else:
            self.start = int(np.argmin([abs(math.log(g / max(start, 1))) for g in self.grid]))
        self.lo = None   # largest failing index
        self.hi = None   # smallest passing index
        self.probes = []

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
        i = self.grid.index(value)
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


# ---- a threshold on a grid, and its bootstrap interval -------------------------------
def threshold_width(widths, values, threshold):
    """Smallest width whose median value is ≤ threshold *and* every larger width's is too.

    ``widths`` ascending; ``values[i]`` the per-seed values at ``widths[i]`` (``nan`` =
    failed run, counted as not passing). Returns ``(width | None, censored)``: ``None,
    True`` when the largest width fails. ``ValueError`` unless ``values`` has one row per
    width (shape ``(len(widths), n_seeds)``).
    """
    if len(values) != len(widths):
        raise ValueError(f"values must have shape (len(widths), n_seeds) = ({len(widths)}, "
                         f"n_seeds), got {len(values)} rows")
    med = [np.median(np.where(np.isfinite(v), v, np.inf)) for v in values]
    passing = [m <= threshold for m in med]
    k = len(widths)
    while k > 0 and passing[k - 1]:
        k -= 1
    if k == len(widths):
        return None, True
    return widths[k], False


RESAMPLES = ("paired", "binomial")


def bootstrap_threshold(statistic, data, *, resample: str = "paired", n=None,
                        n_boot: int = 2000, level: float = 0.95, rng=0) -> dict:
    """Percentile-bootstrap interval of a threshold located on a grid — the one bootstrap
    threshold estimator of the studies.

    ``statistic(sample)`` returns the threshold of a sample, or ``None`` when the sample
    never crosses it on the grid (censored: the threshold lies above the grid). The
    resamples:

    * ``"paired"``: ``data`` is an array ``(n_grid, n_rep)`` whose column ``j`` is one
      replicate at every grid point; a draw resamples the columns with replacement,
      jointly for every grid point (``rng.integers(0, n_rep, n_rep)``, one draw at a time);
    * ``"binomial"``: ``data`` are success rates per grid cell and ``n`` the trials per
      cell; a draw redraws every cell's count from ``Binomial(n, rate)`` (all ``n_boot``
      draws at once, ``rng.binomial(n, rate, size=(n_boot, n_grid))``).

    A censored draw counts as ``+inf``; the ends are the ``(1 ∓ level)/2`` quantiles of
    all draws taken as order statistics (``method="inverted_cdf"``: each end is a value
    some draw has, e.g. the 50th and 1950th of 2000), ``None`` when infinite.

    ``rng``: a seed (anything ``numpy.random.default_rng`` takes) or a ``Generator``
    (used, not copied: consecutive calls continue its stream).

    Returns ``{estimate, censored, lo, hi, frac_censored, level, n_boot}`` (``estimate``:
    the statistic of ``data`` itself).

    >>> stat = lambda V: threshold_width([4, 8, 16], V, 0.25)[0]
    >>> bootstrap_threshold(stat, [[0.9, 0.8], [0.2, 0.3], [0.1, 0.1]], n_boot=200)["lo"]
    8.0
    """
    if resample not in RESAMPLES:
        raise ValueError(f"resample must be one of {RESAMPLES}, got {resample!r}")
    n_boot = int(n_boot)
    if n_boot < 1:
        raise ValueError(f"n_boot must be an integer >= 1, got {n_boot}")
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level}")
    g = np.random.default_rng(rng)
    est = statistic(data)
    if resample == "paired":
        V = np.asarray(data, float)
        if V.ndim != 2:
            raise ValueError(f"data must have shape (n_grid, n_rep) for resample='paired', "
                             f"got shape {V.shape}")
        m = V.shape[1]
        samples = (V[:, g.integers(0, m, m)] for _ in range(n_boot))     # drawn one by one
    else:
        if n is None:
            raise ValueError("resample='binomial' needs n, the trials per cell")
        n = np.asarray(n)
        samples = g.binomial(n, np.asarray(data, float), size=(n_boot, len(n))) / n
    draws = np.array([math.inf if (s := statistic(x)) is None else s for x in samples], float)
    # (1 - level)/2 rounded: 0.025 itself, not 0.025000000000000022 (which would take the
    # 51st of 2000 draws instead of the 50th)
    q = round((1 - level) / 2, 12)
    lo, hi = np.quantile(draws, [q, 1 - q], method="inverted_cdf")
    return {"estimate": est, "censored": est is None,
            "lo": None if not np.isfinite(lo) else float(lo),
            "hi": None if not np.isfinite(hi) else float(hi),
            "frac_censored": float(np.mean(~np.isfinite(draws))), "level": level,
            "n_boot": n_boot}


# ---- success probabilities -----------------------------------------------------------
def wilson_interval(k: int, n: int, level: float = 0.95) -> tuple:
    """Wilson score interval ``(lo, hi)`` of a success probability from ``k`` successes
    in ``n`` trials (``scipy.stats.binomtest(k, n).proportion_ci(level, "wilson")``);
    ``(0.0, 1.0)`` when ``n == 0``."""
    if n == 0:
        return 0.0, 1.0
    from scipy import stats as _st
    ci = _st.binomtest(int(k), int(n)).proportion_ci(confidence_level=level, method="wilson")
    return float(ci.low), float(ci.high)
