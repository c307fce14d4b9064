"""Statistics shared by the studies: one least-squares line, growth-law comparisons, one
width search.

* :func:`fit_linear` — ``y ≈ slope · x + intercept`` by least squares, with standard
  errors, 95% confidence intervals (Student t, ``n − 2`` degrees of freedom), residuals,
  R² and n (:class:`LinearFit`).
* :func:`law_fit`, :func:`power_law_fit`, :func:`compare_growth` — the log / linear /
  power-law comparison of a measured size against a growing parameter (used by the
  separation and sparse studies).
* :func:`fit_growth_law` / :func:`compare_growth_laws` — the separation study's
  comparison: ``log2 T``, ``T`` (weighted by ``1/width²``) and a power law on the same
  points, each with Student-t CIs and log residuals, ranked by the rms of
  ``log2(width/fit)``; censored points are left out and at least ``min_points`` are
  required.
* :func:`threshold_width` / :func:`bootstrap_threshold` — the smallest grid width whose
  median over seeds passes a target (and every larger grid width too), with a paired
  percentile bootstrap over seeds; censored when the largest width fails.
* :func:`wilson_interval` — the 95% Wilson score interval of a success probability
  (``scipy.stats.binomtest``).
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
           "WidthSearch", "smallest_passing", "fit_growth_law", "compare_growth_laws",
           "threshold_width", "bootstrap_threshold", "wilson_interval", "LAWS"]


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


def fit_linear(x, y, level: float = 0.95, weights=None) -> LinearFit:
    """Least squares ``y ≈ slope · x + intercept``.

    Standard errors from the residual variance ``s² = Σ r² / (n − 2)``:
    ``se(slope) = s / √Sxx``, ``se(intercept) = s √(1/n + x̄²/Sxx)``; intervals
    ``estimate ± t_{(1+level)/2, n−2} · se``. ``R² = 1 − Σ r² / Σ (y − ȳ)²`` (1 if ``y`` is
    constant). ``ValueError`` with fewer than two points or constant ``x``.

    With ``weights`` ``w`` (e.g. ``1/y`` for relative errors) it minimises
    ``Σ (w_i r_i)²``; the covariance is ``s² (AᵀA)⁻¹`` with ``A = w ⊙ [x, 1]`` and
    ``s² = Σ (w r)² / (n − 2)``; ``residuals`` and ``R²`` stay unweighted.
    """
    if weights is not None:
        return _fit_weighted(x, y, weights, level)
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


def _fit_weighted(x, y, w, level):
    x = np.asarray(x, dtype=np.float64).ravel()
    y = np.asarray(y, dtype=np.float64).ravel()
    w = np.broadcast_to(np.asarray(w, dtype=np.float64), x.shape)
    n = x.size
    if n < 2 or np.ptp(x) == 0:
        raise ValueError("need at least 2 points and a non-constant x to fit a line")
    A = np.stack([x, np.ones_like(x)], axis=1) * w[:, None]
    coef, *_ = np.linalg.lstsq(A, y * w, rcond=None)
    a, b = float(coef[0]), float(coef[1])
    rw = y * w - A @ coef
    res = y - (a * x + b)
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    r2 = 1.0 - float(np.sum(res ** 2)) / ss_tot if ss_tot > 0 else 1.0
    if n > 2:
        cov = float(rw @ rw) / (n - 2) * np.linalg.inv(A.T @ A)
        se_a, se_b = (float(v) for v in np.sqrt(np.diag(cov)))
        t = float(_st.t.ppf(0.5 + level / 2, n - 2))
    else:
        se_a = se_b = t = math.nan
    return LinearFit(slope=a, intercept=b, slope_se=se_a, intercept_se=se_b,
                     slope_ci=(a - t * se_a, a + t * se_a),
                     intercept_ci=(b - t * se_b, b + t * se_b), residuals=res, r2=r2, n=n)


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


def wilson_interval(k: int, n: int, level: float = 0.95) -> tuple:
    """Wilson score interval ``(lo, hi)`` of a success probability from ``k`` successes
    in ``n`` trials (``scipy.stats.binomtest(k, n).proportion_ci(level, "wilson")``);
    ``(0.0, 1.0)`` when ``n == 0``."""
    if n == 0:
        return 0.0, 1.0
    ci = _st.binomtest(int(k), int(n)).proportion_ci(confidence_level=level, method="wilson")
    return float(ci.low), float(ci.high)


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


# --------------------------------------------------------------------------------------
# growth laws with CIs, and threshold widths with bootstrap intervals (separation study)
# --------------------------------------------------------------------------------------
LAWS = ("log", "linear", "power")
_LAW_TEXT = {"log": "a·log2 T + b", "linear": "a·T + b", "power": "2^b · T^a"}


def fit_growth_law(T, width, law: str, level: float = 0.95) -> dict | None:
    """Fit one growth law to ``(T, width)``; ``None`` with fewer than 3 points.

    Returns ``{law, formula, a, b, a_ci, b_ci, level, n, T, width, fit, residuals_log2,
    rms_log2, max_abs_log2}``; ``residuals_log2 = log2(width / fit)`` (``nan`` where the
    fit is ≤ 0).
    """
    if law not in LAWS:
        raise ValueError(f"law must be one of {LAWS}, got {law!r}")
    T = np.asarray(T, float)
    w = np.asarray(width, float)
    if T.shape != w.shape or T.ndim != 1:
        raise ValueError("T and width must be 1-D arrays of equal length")
    if len(T) < 3 or np.ptp(T) == 0 or np.any(w <= 0) or np.any(T <= 0):
        return None
    if law == "power":
        x, y, wt = np.log2(T), np.log2(w), np.ones_like(w)
    else:   # relative errors: weights 1/width
        x = np.log2(T) if law == "log" else T
        y, wt = w, 1.0 / w
    lf = fit_linear(x, y, level, weights=wt)
    a, b = lf.slope, lf.intercept
    dof = len(T) - 2
    t = float(_st.t.ppf(0.5 + level / 2, dof)) if dof > 0 else float("nan")
    half = (t * lf.slope_se, t * lf.intercept_se)
    fit = 2.0 ** (a * x + b) if law == "power" else a * x + b
    with np.errstate(divide="ignore", invalid="ignore"):
        res = np.where(fit > 0, np.log2(w / np.where(fit > 0, fit, 1.0)), np.nan)
    ok = np.isfinite(res)
    rms = float(np.sqrt(np.mean(res[ok] ** 2))) if ok.all() else float("inf")
    return {"law": law, "formula": _LAW_TEXT[law], "a": a, "b": b,
            "a_ci": [a - float(half[0]), a + float(half[0])],
            "b_ci": [b - float(half[1]), b + float(half[1])], "level": level, "n": int(len(T)),
            "T": T.tolist(), "width": w.tolist(), "fit": np.asarray(fit, float).tolist(),
            "residuals_log2": [float(v) for v in res], "rms_log2": rms,
            "max_abs_log2": float(np.max(np.abs(res))) if ok.all() else float("inf")}


def compare_growth_laws(T, width, *, censored=None, min_points: int = 5, level: float = 0.95) -> dict:
    """Fit every law in :data:`LAWS` to the uncensored points and rank them.

    ``censored`` (bools, same length) marks points whose width is only a lower bound; they
    are left out of the fits and listed in ``censored_T``. With fewer than ``min_points``
    uncensored points no fit is made (``fits = {}``, ``note`` says why).
    Criterion: smallest ``rms_log2`` (equal parameter counts).
    """
    T = list(T)
    width = list(width)
    cen = [False] * len(T) if censored is None else [bool(c) for c in censored]
    keep = [i for i in range(len(T)) if not cen[i] and width[i] is not None]
    out = {"criterion": "rms of log2(width/fit) over the uncensored points (all laws have 2 "
                        "parameters; equivalent to AIC on log residuals)",
           "n_points": len(keep), "censored_T": [T[i] for i in range(len(T)) if cen[i]],
           "fits": {}, "ranking": [], "note": ""}
    if len(keep) < min_points:
        out["note"] = f"only {len(keep)} uncensored points (< {min_points}): not fitted"
        return out
    Tk = [T[i] for i in keep]
    wk = [width[i] for i in keep]
    for law in LAWS:
        f = fit_growth_law(Tk, wk, law, level)
        if f is not None:
            out["fits"][law] = f
    out["ranking"] = sorted(out["fits"], key=lambda k: out["fits"][k]["rms_log2"])
    return out


def threshold_width(widths, values, threshold):
    """Smallest width whose median value is ≤ threshold *and* every larger width's is too.

    ``widths`` ascending; ``values[i]`` the per-seed values at ``widths[i]`` (``nan`` =
    failed run, counted as not passing). Returns ``(width | None, censored)``: ``None,
    True`` when the largest width fails.
    """
    med = [np.median(np.where(np.isfinite(v), v, np.inf)) for v in values]
    passing = [m <= threshold for m in med]
    k = len(widths)
    while k > 0 and passing[k - 1]:
        k -= 1
    if k == len(widths):
        return None, True
    return widths[k], False


def bootstrap_threshold(widths, values, threshold, *, n_boot: int = 2000, level: float = 0.95,
                        rng=0) -> dict:
    """:func:`threshold_width` with a percentile bootstrap interval over seeds.

    ``values``: array-like ``(n_widths, n_seeds)``, seed j the same replicate at every
    width (paired; resampled jointly). The interval is on the grid; a censored resample
    counts as ``+inf`` (so an upper end ``None`` means "above the grid").
    Returns ``{width, censored, lo, hi, lo_censored, hi_censored, frac_censored,
    lower_censored}`` (``lower_censored``: the smallest grid width already passes, so the
    true threshold may be lower).
    """
    V = np.asarray(values, float)
    if V.ndim != 2 or V.shape[0] != len(widths):
        raise ValueError("values must have shape (len(widths), n_seeds)")
    w, cen = threshold_width(widths, V, threshold)
    g = np.random.default_rng(rng)
    n = V.shape[1]
    draws = np.empty(n_boot)
    for i in range(n_boot):
        idx = g.integers(0, n, n)
        wb, cb = threshold_width(widths, V[:, idx], threshold)
        draws[i] = math.inf if cb else wb
    lo, hi = np.quantile(draws, [(1 - level) / 2, (1 + level) / 2], method="inverted_cdf")
    return {"width": w, "censored": bool(cen),
            "lo": None if not np.isfinite(lo) else float(lo),
            "hi": None if not np.isfinite(hi) else float(hi),
            "frac_censored": float(np.mean(~np.isfinite(draws))),
            "lower_censored": bool(w is not None and w == widths[0]),
            "level": level, "n_boot": n_boot, "n_seeds": n}
