r"""Statistics shared by the studies: growth-law fits with confidence intervals and
residuals, their comparison, and bootstrap intervals for a threshold width.

* :func:`fit_growth_law` — ``width = a · f(T) + b`` for ``f = log2 T`` (``"log"``) or
  ``f = T`` (``"linear"``), or ``log2 width = a · log2 T + b`` (``"power"``). The two
  affine laws are fitted by weighted least squares with weights ``1/width²`` (relative
  errors), so that all three laws minimise (to first order) the same quantity — the
  relative misfit — and are comparable. Parameters come with Student-t confidence
  intervals from the residual variance (``n − 2`` degrees of freedom).
* :func:`compare_growth_laws` — the three laws on the same points, ranked by the stated
  criterion: the rms of ``log2(width / fit)`` (all laws have two parameters, so this is
  equivalent to ranking by AIC on the log residuals). Fits need ``≥ min_points`` points.
* :func:`threshold_width` / :func:`bootstrap_threshold` — the smallest grid width whose
  median over seeds passes a target (and every larger grid width passes too), with a
  percentile bootstrap interval over seeds (paired: one resample of the seeds is used at
  every width). A width above the grid is *censored* (``None`` + ``censored=True``); a
  censored point is never fitted as if observed.
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ["fit_growth_law", "compare_growth_laws", "threshold_width", "bootstrap_threshold",
           "fit_line", "LAWS"]

LAWS = ("log", "linear", "power")
_LAW_TEXT = {"log": "a·log2 T + b", "linear": "a·T + b", "power": "2^b · T^a"}


def _t_quantile(p, dof):
    from scipy.stats import t
    return float(t.ppf(p, dof))


def fit_line(x, y):
    """Ordinary least squares ``y = a x + b``: ``{a, b, residuals, rel_rms}`` (residual =
    y − fit, rel_rms = rms of residual / y), ``None`` with < 2 points or constant x. (The
    helper the sparse study used from the former separation study.)"""
    x, y = np.asarray(x, float), np.asarray(y, float)
    if len(x) < 2 or np.ptp(x) == 0:
        return None
    A = np.stack([x, np.ones_like(x)], axis=1)
    (a, b), *_ = np.linalg.lstsq(A, y, rcond=None)
    res = y - (a * x + b)
    return {"a": float(a), "b": float(b), "residuals": res.tolist(),
            "rel_rms": float(np.sqrt(np.mean((res / y) ** 2)))}


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
    else:
        x = np.log2(T) if law == "log" else T
        y, wt = w, 1.0 / w
    A = np.stack([x, np.ones_like(x)], axis=1) * wt[:, None]
    yy = y * wt
    coef, *_ = np.linalg.lstsq(A, yy, rcond=None)
    r = yy - A @ coef
    dof = len(T) - 2
    s2 = float(r @ r) / dof if dof > 0 else float("nan")
    cov = s2 * np.linalg.inv(A.T @ A)
    half = _t_quantile(0.5 + level / 2, dof) * np.sqrt(np.diag(cov)) if dof > 0 else [np.nan] * 2
    a, b = float(coef[0]), float(coef[1])
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
