"""Statistics shared by the studies: one least-squares line, one growth-law comparison,
one bootstrap threshold estimator, one width search.

* :func:`fit_linear` — ``y ≈ slope · x + intercept`` by least squares, with standard
  errors, 95% confidence intervals (Student t, ``n − 2`` degrees of freedom), residuals,
  R² and n (:class:`LinearFit`); optionally weighted.
* :func:`fit_growth_law` / :func:`compare_growth` — a growth law (``log2 T``, ``T``, a
  power law, or through the origin) fitted with CIs and residuals, and the comparison of
  several on the same uncensored points, ranked (separation widths, sparse m*,
  expressivity width laws).
* :func:`threshold_width` — the smallest grid width whose median over seeds passes a
  target (and every larger grid width too); :func:`bootstrap_threshold` — the percentile
  bootstrap interval of any such grid threshold, with paired (seed) or binomial
  resamples and censored draws at ``+inf`` (separation widths, sparse m*).
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

__all__ = ["LinearFit", "fit_linear", "fit_growth_law", "compare_growth", "LAWS",
           "threshold_width", "bootstrap_threshold", "wilson_interval", "WidthSearch",
           "smallest_passing"]


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
# success probabilities
# --------------------------------------------------------------------------------------
def wilson_interval(k: int, n: int, level: float = 0.95) -> tuple:
    """Wilson score interval ``(lo, hi)`` of a success probability from ``k`` successes
    in ``n`` trials (``scipy.stats.binomtest(k, n).proportion_ci(level, "wilson")``);
    ``(0.0, 1.0)`` when ``n == 0``."""
    if n == 0:
        return 0.0, 1.0
    ci = _st.binomtest(int(k), int(n)).proportion_ci(confidence_level=level, method="wilson")
    return float(ci.low), float(ci.high)


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
# growth laws: one fitter, one comparison
# --------------------------------------------------------------------------------------
LAWS = ("log", "linear", "power")
_LAW_TEXT = {"log": "a·log2 T + b", "linear": "a·T + b", "power": "2^b · T^a",
             "proportional": "a·T"}
WEIGHTS = (None, "relative")


def fit_growth_law(T, y, law: str, *, weights=None, scale: float = 1.0,
                   level: float = 0.95) -> dict | None:
    """Fit one growth law of ``y`` in ``T`` by least squares.

    Laws (``x`` is the regressor, ``s = scale``):

    * ``"log"``: ``y = a·log2 T + b`` (``x = log2 T``);
    * ``"linear"``: ``y = a·(s T) + b`` (``x = s T``);
    * ``"power"``: ``y = 2^b (s T)^a``, i.e. ``log2 y = a·log2(s T) + b``;
    * ``"proportional"``: ``y = a·(s T)`` (through the origin, ``a = x·y / x·x``; no CI).

    ``weights``: ``None`` (ordinary least squares, :func:`fit_linear`) or ``"relative"``
    (relative errors: ``log`` and ``linear`` weighted by ``1/y``; ``power`` is already
    relative and goes through the weighted solver with unit weights).

    Returns ``None`` with fewer than two points, a constant ``T``, or ``T ≤ 0`` / ``y ≤ 0``
    where a logarithm is taken; else a dict with ``law, formula, a, b, a_ci, b_ci``
    (Student-t, ``level``; ``nan`` with two points), ``level, n, T, y, r2``, ``fit`` (the
    fitted ``y``), ``residuals`` (in the fitted space: ``y − fit``, for ``power``
    ``log2 y − (a x + b)``), ``residuals_log2 = log2(y / fit)`` (``nan`` where the fit
    is ≤ 0) with ``rms_log2`` (``inf`` if any is ``nan``) and ``max_abs_log2``;
    ``rel_rms`` (rms of ``residuals / y``) and ``max_rel_residual`` (max of
    ``|residuals| / y``) for the laws fitted in ``y`` itself; ``residuals_ratio``
    (``y / fit = 2^residuals``) for ``power``.

    >>> f = fit_growth_law([8, 16, 32, 64], [10, 13, 16, 19], "log")
    >>> round(f["a"], 12), round(f["b"], 12), f["rms_log2"] < 1e-12
    (3.0, 1.0, True)
    """
    if law not in LAWS + ("proportional",):
        raise ValueError(f"law must be one of {LAWS + ('proportional',)}, got {law!r}")
    if weights not in WEIGHTS:
        raise ValueError(f"weights must be one of {WEIGHTS}, got {weights!r}")
    T = np.asarray(T, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if T.shape != y.shape or T.ndim != 1:
        raise ValueError("T and y must be 1-D arrays of equal length")
    if len(T) < 2 or np.ptp(T) == 0:
        return None
    if (law in ("log", "power") and np.any(T <= 0)) or (law == "power" and np.any(y <= 0)):
        return None
    x = np.log2(T) if law == "log" else T * scale
    out = {"law": law, "formula": _LAW_TEXT[law], "level": level, "n": int(len(T)),
           "T": T.tolist(), "y": y.tolist()}
    if law == "proportional":
        a = float(x @ y / (x @ x))
        res = y - a * x
        out.update(a=a, b=0.0, a_ci=[math.nan, math.nan], b_ci=[0.0, 0.0], fit=(a * x).tolist(),
                   residuals=res.tolist(), r2=math.nan)
        fit = a * x
    else:
        if law == "power":
            x, yy = np.log2(x), np.log2(y)
        else:
            yy = y
        wt = None if weights is None else (np.ones_like(y) if law == "power" else 1.0 / y)
        lf = fit_linear(x, yy, level, weights=wt)
        a, b = lf.slope, lf.intercept
        fit = 2.0 ** (a * x + b) if law == "power" else a * x + b
        out.update(a=a, b=b, a_ci=[float(v) for v in lf.slope_ci],
                   b_ci=[float(v) for v in lf.intercept_ci], fit=np.asarray(fit, float).tolist(),
                   residuals=lf.residuals.tolist(), r2=lf.r2)
        res = lf.residuals
    if law == "power":
        out["residuals_ratio"] = [float(2.0 ** r) for r in res]
    else:
        with np.errstate(divide="ignore", invalid="ignore"):
            out["rel_rms"] = float(np.sqrt(np.mean((res / y) ** 2)))
            out["max_rel_residual"] = float(np.max(np.abs(res) / y))
    with np.errstate(divide="ignore", invalid="ignore"):
        rl = np.where(fit > 0, np.log2(y / np.where(fit > 0, fit, 1.0)), np.nan)
    ok = np.isfinite(rl)
    out.update(residuals_log2=[float(v) for v in rl],
               rms_log2=float(np.sqrt(np.mean(rl[ok] ** 2))) if ok.all() else float("inf"),
               max_abs_log2=float(np.max(np.abs(rl))) if ok.all() else float("inf"))
    return out


def compare_growth(T, y, *, laws=LAWS, censored=None, min_points: int = 2, weights=None,
                   scale: float = 1.0, level: float = 0.95, rank_by: str = "rms_log2",
                   what: str = "y") -> dict:
    """Fit each of ``laws`` (:func:`fit_growth_law`) to the uncensored points and rank them
    — the one growth-law comparison of the studies.

    ``censored`` (bools, same length) marks points known only as a bound; they, and points
    whose ``y`` is ``None``, are left out of the fits and their ``T`` listed in
    ``censored_T`` / counted out of ``n_points``. With fewer than ``min_points`` kept points
    nothing is fitted (``fits = {}``, ``note`` says why). ``ranking``: the fitted laws by
    increasing ``rank_by`` (``"rms_log2"``: all laws have two parameters, so this ranks
    them as AIC on log residuals would; ``"rel_rms"``: the laws fitted in ``y`` itself, by
    the rms of their relative residuals); ties keep the order of ``laws``. ``what`` names
    ``y`` in the ``criterion`` text.

    >>> c = compare_growth([8, 16, 32, 64, 128], [6, 8, 10, 12, 14])
    >>> c["ranking"][0], round(c["fits"]["log"]["a"], 12)
    ('log', 2.0)
    """
    if rank_by not in ("rms_log2", "rel_rms"):
        raise ValueError(f"rank_by must be 'rms_log2' or 'rel_rms', got {rank_by!r}")
    T, y = list(T), list(y)
    cen = [False] * len(T) if censored is None else [bool(c) for c in censored]
    keep = [i for i in range(len(T)) if not cen[i] and y[i] is not None]
    crit = (f"rms of log2({what}/fit) over the uncensored points (all laws have 2 parameters; "
            f"equivalent to AIC on log residuals)" if rank_by == "rms_log2" else
            f"rms of the relative residuals ({what} − fit)/{what} over the uncensored points")
    out = {"criterion": crit, "n_points": len(keep),
           "censored_T": [T[i] for i in range(len(T)) if cen[i]], "fits": {}, "ranking": [],
           "note": ""}
    if len(keep) < min_points:
        out["note"] = f"only {len(keep)} uncensored points (< {min_points}): not fitted"
        return out
    Tk, yk = [T[i] for i in keep], [y[i] for i in keep]
    for law in laws:
        f = fit_growth_law(Tk, yk, law, weights=weights, scale=scale, level=level)
        if f is not None:
            out["fits"][law] = f
    ranked = [k for k in out["fits"] if rank_by in out["fits"][k]]
    out["ranking"] = sorted(ranked, key=lambda k: out["fits"][k][rank_by])
    return out


# --------------------------------------------------------------------------------------
# a threshold on a grid, and its bootstrap interval
# --------------------------------------------------------------------------------------
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
    draws = np.empty(n_boot)
    if resample == "paired":
        V = np.asarray(data, float)
        if V.ndim != 2:
            raise ValueError(f"data must have shape (n_grid, n_rep) for resample='paired', "
                             f"got shape {V.shape}")
        m = V.shape[1]
        for i in range(n_boot):
            s = statistic(V[:, g.integers(0, m, m)])
            draws[i] = math.inf if s is None else s
    else:
        if n is None:
            raise ValueError("resample='binomial' needs n, the trials per cell")
        n = np.asarray(n)
        R = g.binomial(n, np.asarray(data, float), size=(n_boot, len(n))) / n
        for i, r in enumerate(R):
            s = statistic(r)
            draws[i] = math.inf if s is None else s
    # (1 - level)/2 rounded: 0.025 itself, not 0.025000000000000022 (which would take the
    # 51st of 2000 draws instead of the 50th)
    q = round((1 - level) / 2, 12)
    lo, hi = np.quantile(draws, [q, 1 - q], method="inverted_cdf")
    return {"estimate": est, "censored": est is None,
            "lo": None if not np.isfinite(lo) else float(lo),
            "hi": None if not np.isfinite(hi) else float(hi),
            "frac_censored": float(np.mean(~np.isfinite(draws))), "level": level,
            "n_boot": n_boot}
