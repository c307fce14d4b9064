"""Statistics shared by the studies: one least-squares line, one growth-law fitter, and
(re-exported from :mod:`stsim.util.thresholds`) the thresholds on a grid: the width search
and the one bootstrap threshold estimator.

* :func:`fit_linear` — ``y ≈ slope · x + intercept`` by least squares, with standard
  errors, 95% confidence intervals (Student t, ``n − 2`` degrees of freedom), residuals,
  R² and n (:class:`LinearFit`); optionally weighted.
* :func:`fit_growth_law` / :func:`compare_growth` — a growth law (``log2 T``, ``T``, a
  power law, or through the origin) fitted with CIs and residuals, and the comparison of
  several on the same points, ranked (separation widths, sparse m*, expressivity width
  laws). Two kinds of data: values known exactly (least squares; censored points left
  out), or thresholds known only to lie in an interval of a grid, with censored points
  (``lower=``: interval-censored maximum likelihood on ``log2 y``, profile-likelihood CIs
  that are never narrower than the grid resolves; every point enters).
* :func:`threshold_width`, :func:`bootstrap_threshold`, :class:`WidthSearch` /
  :func:`smallest_passing`, :func:`wilson_interval` — :mod:`stsim.util.thresholds`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

# scipy.stats, optimize and special are imported in the functions that use them: at the
# top they made each study command and each pool worker start about 0.5 s later
from stsim.util.thresholds import (RESAMPLES, WidthSearch, bootstrap_threshold,  # noqa: F401
                                   smallest_passing, threshold_width, wilson_interval)

__all__ = ["LinearFit", "fit_linear", "fit_growth_law", "compare_growth", "LAWS",
           "LOG_SQUARED", "fit_interval_law", "SIGMA_MIN", "threshold_width",
           "bootstrap_threshold", "wilson_interval", "WidthSearch", "smallest_passing", "law_value"]


# ---- the least-squares line ----------------------------------------------------------
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
    from scipy import stats as _st
    x = np.asarray(x, dtype=np.float64).ravel()
    y = np.asarray(y, dtype=np.float64).ravel()
    if x.shape != y.shape:
        raise ValueError(f"x and y must have the same length, got {x.size} and {y.size}")
    n = x.size
    if n < 2:
        raise ValueError(f"need at least 2 points to fit a line, got {n}")
    if np.ptp(x) == 0:
        raise ValueError("x must not be constant (the slope is undetermined)")
    w = np.ones_like(x) if weights is None else \
        np.broadcast_to(np.asarray(weights, dtype=np.float64), x.shape)
    A = np.stack([x, np.ones_like(x)], axis=1) * w[:, None]
    coef, *_ = np.linalg.lstsq(A, y * w, rcond=None)
    a, b = float(coef[0]), float(coef[1])
    res = y - (a * x + b)
    ss_res = float(np.sum(res ** 2))
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else 1.0
    if n > 2 and weights is None:
        s2 = ss_res / (n - 2)
        sxx = float(np.sum((x - x.mean()) ** 2))
        se_a = math.sqrt(s2 / sxx)
        se_b = math.sqrt(s2 * (1.0 / n + x.mean() ** 2 / sxx))
    elif n > 2:
        rw = y * w - A @ coef
        cov = float(rw @ rw) / (n - 2) * np.linalg.inv(A.T @ A)
        se_a, se_b = (float(v) for v in np.sqrt(np.diag(cov)))
    else:
        se_a = se_b = math.nan
    t = float(_st.t.ppf(0.5 + level / 2, n - 2)) if n > 2 else math.nan
    return LinearFit(slope=a, intercept=b, slope_se=se_a, intercept_se=se_b,
                     slope_ci=(a - t * se_a, a + t * se_a),
                     intercept_ci=(b - t * se_b, b + t * se_b), residuals=res, r2=r2, n=n)


# ---- growth laws: one fitter, one comparison -----------------------------------------
LAWS = ("log", "linear", "power")
#: a law a study may add to ``LAWS`` (``laws=``): ``y = a·(log2 T)² + b``
LOG_SQUARED = "log2"
_LAW_TEXT = {"log": "a·log2 T + b", "linear": "a·T + b", "power": "2^b · T^a",
             "proportional": "a·T", LOG_SQUARED: "a·(log2 T)^2 + b"}


def _regressor(law, T, scale):
    """The regressor ``x`` of a law (:func:`fit_growth_law`): ``log2 T`` (log),
    ``(log2 T)²`` (log2), ``s T`` (linear, proportional; the power law takes its log)."""
    if law == "log":
        return np.log2(T)
    if law == LOG_SQUARED:
        return np.log2(T) ** 2
    return T * scale
WEIGHTS = (None, "relative")


def fit_growth_law(T, y, law: str, *, weights=None, scale: float = 1.0,
                   level: float = 0.95, lower=None, censored=None) -> dict | None:
    """Fit one growth law of ``y`` in ``T``: by least squares, or — with ``lower`` — to
    interval-censored thresholds by maximum likelihood (:func:`fit_interval_law`).

    Laws (``x`` is the regressor, ``s = scale``):

    * ``"log"``: ``y = a·log2 T + b`` (``x = log2 T``);
    * ``"log2"`` (:data:`LOG_SQUARED`, not in ``LAWS``): ``y = a·(log2 T)² + b``
      (``x = (log2 T)²``);
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
    if law not in LAWS + ("proportional", LOG_SQUARED):
        raise ValueError(f"law must be one of {LAWS + ('proportional', LOG_SQUARED)}, "
                         f"got {law!r}")
    if lower is not None:
        return fit_interval_law(T, y, law, lower=lower, censored=censored, scale=scale,
                                level=level)
    if weights not in WEIGHTS:
        raise ValueError(f"weights must be one of {WEIGHTS}, got {weights!r}")
    T = np.asarray(T, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if T.shape != y.shape or T.ndim != 1:
        raise ValueError("T and y must be 1-D arrays of equal length")
    if len(T) < 2 or np.ptp(T) == 0:
        return None
    if ((law in ("log", LOG_SQUARED, "power") and np.any(T <= 0))
            or (law == "power" and np.any(y <= 0))):
        return None
    x = _regressor(law, T, scale)
    out = {"law": law, "formula": _LAW_TEXT[law], "level": level, "n": int(len(T)),
           "T": T.tolist(), "y": y.tolist()}
    if law == "proportional":
        a = float(x @ y / (x @ x))
        fit = a * x
        res = y - fit
        out.update(a=a, b=0.0, a_ci=[math.nan, math.nan], b_ci=[0.0, 0.0], fit=fit.tolist(),
                   residuals=res.tolist(), r2=math.nan)
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
                   what: str = "y", lower=None) -> dict:
    """Fit each of ``laws`` (:func:`fit_growth_law`) to the uncensored points and rank them
    — the one growth-law comparison of the studies.

    With ``lower`` (grid thresholds, :func:`fit_interval_law`): point ``i`` lies in
    ``(lower[i], y[i]]``, or above ``y[i]`` where ``censored[i]``; every point enters the
    likelihood, none is left out; at least ``min_points`` points, 3 of them bounded above,
    are needed; ``ranking`` by decreasing ``loglik`` (every law has ``a, b, σ``: AIC
    order), each fit with ``delta_2loglik`` (``2(ℓ_best − ℓ)``) to the first; ``tied``:
    the laws with ``delta_2loglik < 2`` (the data do not tell them apart).

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
    if lower is not None:
        return _compare_intervals(T, y, lower, censored, laws, min_points, scale, level, what)
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
    out["fits"] = {law: f for law in laws if (f := fit_growth_law(
        Tk, yk, law, weights=weights, scale=scale, level=level)) is not None}
    ranked = [k for k in out["fits"] if rank_by in out["fits"][k]]
    out["ranking"] = sorted(ranked, key=lambda k: out["fits"][k][rank_by])
    return out


# ---- growth laws of grid thresholds: interval-censored maximum likelihood ------------
SIGMA_MIN = 0.01      # floor of σ in log2 units (1/50 of a √2 grid step)


def law_value(law, a, b, T, scale: float = 1.0):
    """A fitted growth law at ``T`` (:func:`fit_growth_law`'s ``law``, ``a``, ``b``):
    ``a log2 T + b``, ``a (log2 T)² + b``, ``a sT + b`` or ``2^b (sT)^a``.

    >>> float(law_value("log2", 1.0, 3.0, 16)), float(law_value("power", 2.0, 0.0, 8))
    (19.0, 64.0)
    """
    T = np.asarray(T, dtype=float)
    if law == "power":
        return 2.0 ** (a * np.log2(T * scale) + b)
    return a * _regressor(law, T, scale) + b


def _mu(law, x, a, b):
    """``μ = log2 f``: ``a x + b`` (power; ``x = log2(sT)``), ``log2(a x + b)`` (log:
    ``x = log2 T``; linear: ``x = sT``); ``nan`` where ``a x + b ≤ 0``."""
    v = a * x + b
    if law == "power":
        return v
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(v > 0, np.log2(np.where(v > 0, v, 1.0)), np.nan)


def _loglik(mu, lo, hi, sigma):
    """``Σ log P(lo < τ ≤ hi)`` over the last axis, ``τ ~ N(μ, σ²)`` (arrays broadcast;
    ``lo``/``hi`` may be ``∓inf``); ``Φ(zu) − Φ(zl)`` is taken on the tail where it is not
    a difference of two numbers near 1 (``log_ndtr``), each term floored at ``log 1e-300``.
    ``-inf`` where ``μ`` is ``nan``."""
    from scipy.special import log_ndtr
    zl, zu = (lo - mu) / sigma, (hi - mu) / sigma
    flip = zl > 0                                # Φ(zu) − Φ(zl) = Φ(−zl) − Φ(−zu)
    lb = log_ndtr(np.where(flip, -zl, zu))
    t = np.sum(lb + np.log(np.maximum(-np.expm1(log_ndtr(np.where(flip, -zu, zl)) - lb),
                                      1e-300)), axis=-1)
    return np.where(np.isnan(t), -np.inf, t)


def _nelder_mead(f, x0, scale, restarts=1, tol=1e-7):
    """Minimise ``f`` from ``x0`` (Nelder–Mead to ``xatol = tol``, ``fatol = tol²``,
    restarted ``restarts`` times from its result with a fresh simplex)."""
    from scipy import optimize as _opt
    x0 = np.asarray(x0, float)
    for _ in range(restarts + 1):
        simplex = np.vstack([x0] + [x0 + np.eye(len(x0))[k] * scale[k] for k in range(len(x0))])
        r = _opt.minimize(lambda z: min(f(z), 1e300), x0, method="Nelder-Mead",  # no inf
                          options=dict(initial_simplex=simplex, xatol=tol, fatol=tol * tol,
                                       maxiter=4000))
        x0 = r.x
    return r.x, float(r.fun)


def _feasible(law, x, lo, hi, j):
    """``[min, max]`` of parameter ``j`` (0: a, 1: b) over the laws through every interval
    (``lo ≤ a x + b ≤ hi`` for the power law, ``2^lo ≤ a x + b ≤ 2^hi`` for the others:
    linear in (a, b)); ``None`` if there is none; an unbounded end is ``None``."""
    from scipy import optimize as _opt
    A = np.c_[x, np.ones_like(x)]
    up, dn = (hi, lo) if law == "power" else (np.exp2(hi), np.exp2(lo))
    ok_u, ok_d = np.isfinite(up), np.isfinite(dn)
    G, h = np.r_[A[ok_u], -A[ok_d]], np.r_[up[ok_u], -dn[ok_d]]
    ends = []
    for sgn in (1, -1):
        r = _opt.linprog(sgn * np.eye(2)[j], A_ub=G, b_ub=h, bounds=[(None, None)] * 2,
                         method="highs")
        if r.status == 2:
            return None
        ends.append(float(r.x[j]) if r.status == 0 else None)
    return ends


def fit_interval_law(T, y, law: str, *, lower, censored=None, scale: float = 1.0,
                     level: float = 0.95, ci=("a", "b")) -> dict | None:
    r"""Fit a growth law to thresholds known only to lie in grid intervals.

    Model: ``τ_i = log2(threshold_i) ~ N(μ_i, σ²)``, ``μ_i = log2 f(T_i; a, b)`` with ``f``
    the law of :func:`fit_growth_law` (power: ``μ = a log2(sT) + b``; log:
    ``log2(a log2 T + b)``; linear: ``log2(a sT + b)``); ``σ`` the scatter of the true
    thresholds about the law (seeds, lack of fit). Likelihood of an interval ``(l, u]``
    (``l, u`` in log2): ``Φ((u − μ)/σ) − Φ((l − μ)/σ)``; a censored point has ``u = ∞``;
    ``ℓ`` is their log-sum, maximised over ``(a, b, σ ≥ SIGMA_MIN)``. Where some law
    passes through every interval the likelihood is flat at its maximum (``σ̂ = SIGMA_MIN``,
    ``flat``): the estimate is then one of many equally likely ones — the least-squares fit
    to the interval midpoints (where the search starts) when it is one of them.

    CIs: profile likelihood, ``{v : D(v) ≤ c_n}`` with ``D(v) = 2[ℓ̂ − max_{other, σ} ℓ]``
    and ``c_n = n log(1 + t²/(n − 2))``, ``t`` the ``(1+level)/2`` Student quantile with
    ``n − 2`` degrees of freedom: for exactly observed Gaussian data
    ``D(v) = n log(RSS(v)/RSS_min) = n log(1 + t(v)²/(n−2))``, so this is the Student-t
    interval of least squares.
    ``n`` counts the points bounded above (a censored point is a bound, not an observation).
    ``max`` at fixed ``v``: the best of a grid (129 fitted ``μ`` at one end of the ``T``
    range × 22 ``σ``) polished by Nelder–Mead; an end the data do not bound is ``None``.
    Through every interval ``D ≈ 0`` (up to ``2 log 2`` per point touching an end); the CI
    is widened, if need be, to the range of ``v`` over all laws through every interval (a
    linear program: ``l ≤ log2 f ≤ u`` is linear in ``(a, b)``): never narrower than the grid.

    Parameters
    ----------
    T : array of float
        The sequence lengths (> 0; ``T > 1`` for the log law).
    y : array of float
        Each point's smallest passing grid width, or its cap (the largest grid width,
        which failed) where ``censored``.
    law : str
        ``"log"``, ``"linear"``, ``"power"`` or ``"log2"`` (:data:`LOG_SQUARED`).
    lower : array of float or None
        The largest failing grid width below ``y`` (the threshold is in ``(lower, y]``);
        ``0`` or ``None`` where the smallest grid width passes; ignored where censored.
    censored : array of bool, optional
        Right-censored points: no grid width passes, the threshold lies in ``(y, ∞)``.
    scale, level : float
        ``s`` in the laws, and the confidence level of the intervals.
    ci : tuple of str
        The parameters (``"a"``, ``"b"``) whose intervals are computed (the others ``None``).

    Returns
    -------
    dict or None
        ``law, formula, method, a, b, a_ci, b_ci, level, n, n_censored, T, y, lower,
        censored, sigma, flat, loglik, crit`` (``c_n``), ``fit`` (``f(T)``),
        ``residuals_log2`` (per point: 0 where the fit is in its interval, else the signed
        log2 distance to it, > 0 when the data lie above), with ``rms_log2`` and
        ``max_abs_log2``; ``None`` with < 3 points bounded above or a constant ``T``.
    """
    from scipy import optimize as _opt
    from scipy import stats as _st
    T = np.asarray(T, np.float64)
    y = np.asarray(y, np.float64)
    n = T.size
    cen = np.zeros(n, bool) if censored is None else np.asarray(censored, bool)
    low = np.array([0.0 if v is None else float(v) for v in lower])
    if not (T.shape == y.shape == cen.shape == low.shape) or T.ndim != 1:
        raise ValueError("T, y, lower and censored must be 1-D arrays of equal length")
    if np.any(T <= 0) or np.any(y <= 0) or np.any(low < 0) or np.any((low >= y) & ~cen):
        raise ValueError("need T > 0, y > 0 and 0 <= lower < y for every uncensored point")
    if int(np.sum(~cen)) < 3 or np.ptp(T) == 0:
        return None
    with np.errstate(divide="ignore"):
        lo = np.where(cen, np.log2(y), np.log2(low))
    hi = np.where(cen, math.inf, np.log2(y))
    x = np.log2(scale * T) if law == "power" else _regressor(law, T, scale)
    d = np.where(cen, lo + 0.5, np.where(np.isfinite(lo), (lo + hi) / 2, hi - 0.25))  # centres
    st = fit_growth_law(T, 2.0 ** d, law, weights="relative", scale=scale)
    ug = np.linspace(d.min() - 4, d.max() + 4, 129)           # fitted μ at the reference
    sg = np.log(np.geomspace(SIGMA_MIN, 8.0, 22))
    ref = (int(np.argmin(x)), int(np.argmax(x)))             # reference T: a fixed / b fixed

    def other(j, v, u):      # the free parameter when j is v and μ = u at the reference T
        w, xr = (u if law == "power" else 2.0 ** u), x[ref[j]]
        return w - v * xr if j == 0 else (w - v) / xr

    def ll(a, b, ls):
        return _loglik(_mu(law, x, a, b), lo, hi, np.maximum(np.exp(ls), SIGMA_MIN))

    def prof(j, v):
        """``(max ℓ, (a, b, log σ))`` over the other parameter and σ at parameter j = v."""
        p = other(j, v, ug)[:, None]
        a_, b_ = (v, p) if j == 0 else (p, v)
        L = ll(np.asarray(a_)[..., None], np.asarray(b_)[..., None], sg[None, :, None])
        i, k = np.unravel_index(int(np.argmax(L)), L.shape)

        def f(q):
            pq = other(j, v, q[0])
            return -float(ll(v, pq, q[1]) if j == 0 else ll(pq, v, q[1]))
        q, fv = _nelder_mead(f, [ug[i], sg[k]], [2 * (ug[1] - ug[0]), 0.3], 0, tol=1e-4)
        pq = other(j, v, q[0])
        return -fv, ((v, pq, q[1]) if j == 0 else (pq, v, q[1]))

    def nll(q):
        return -float(ll(*q))
    best, f0 = _nelder_mead(nll, [st["a"], st["b"], -1.0],
                            [0.1 * abs(st["a"]) + 1e-3, 0.1 * abs(st["b"]) + 1e-3, 0.5])
    best, lmax = list(best), -f0
    if -nll([st["a"], st["b"], math.log(SIGMA_MIN)]) >= lmax - 1e-9:
        best = [st["a"], st["b"], math.log(SIGMA_MIN)]   # flat: the midpoint fit is an MLE
    for j in (0, 1):                      # guard: the profile at the estimate is no better
        lp, q = prof(j, best[j])
        if lp > lmax + 1e-9:
            best, lmax = list(q), lp
    m = int(np.sum(~cen))                 # the points bounded above: the calibration's n
    t = float(_st.t.ppf(0.5 + level / 2, m - 2))
    crit = m * math.log1p(t * t / (m - 2))

    def interval(j):                  # the profile interval of parameter j, widened to the
        est = best[j]                 # laws through every interval (never below the grid)
        h0 = max(float(np.nan_to_num(abs(st["ab"[j] + "_ci"][1] - st["ab"[j]]) / 4)), 1e-3)
        ends = []
        for sgn in (-1, 1):
            h, prev, bracket = h0, est, None
            for _ in range(50):
                v = est + sgn * h
                if 2 * (lmax - prof(j, v)[0]) > crit:
                    bracket = (prev, v)
                    break
                prev, h = v, 2 * h
            ends.append(None if bracket is None else float(_opt.brentq(
                lambda v: 2 * (lmax - prof(j, v)[0]) - crit, *sorted(bracket),
                xtol=1e-4 * (1 + abs(est)))))
        fe = _feasible(law, x, lo, hi, j) or [est, est]
        return [None if ends[0] is None or fe[0] is None else min(ends[0], fe[0]),
                None if ends[1] is None or fe[1] is None else max(ends[1], fe[1])]
    cis = {name: interval(j) if name in ci else [None, None] for j, name in enumerate("ab")}
    a, b, ls = best
    mu = _mu(law, x, a, b)
    res = np.where(mu < lo, lo - mu, np.where(mu > hi, hi - mu, 0.0))
    sigma = max(math.exp(ls), SIGMA_MIN)
    return {"law": law, "formula": _LAW_TEXT[law], "method": "interval-censored ML",
            "a": float(a), "b": float(b), "a_ci": cis["a"], "b_ci": cis["b"],
            "level": level, "n": int(n), "n_censored": int(cen.sum()), "T": T.tolist(),
            "y": y.tolist(), "lower": low.tolist(), "censored": cen.tolist(),
            "sigma": sigma, "flat": bool(sigma <= 1.5 * SIGMA_MIN), "loglik": float(lmax),
            "crit": crit, "fit": (2.0 ** mu).tolist(), "residuals_log2": res.tolist(),
            "rms_log2": float(np.sqrt(np.mean(res ** 2))),
            "max_abs_log2": float(np.max(np.abs(res)))}


def _compare_intervals(T, y, lower, censored, laws, min_points, scale, level, what):
    n = len(T)
    cen = [False] * n if censored is None else [bool(c) for c in censored]
    out = {"criterion": f"interval-censored log-likelihood of log2({what}) (every law has "
                        f"a, b and σ: AIC order); censored points enter as censored",
           "n_points": n, "censored_T": [T[i] for i in range(n) if cen[i]], "fits": {},
           "ranking": [], "note": ""}
    if n < min_points or n - sum(cen) < 3:
        out["note"] = (f"{n} points, {n - sum(cen)} bounded above (need >= {min_points} "
                       f"and >= 3): not fitted")
        return out
    out["fits"] = {law: f for law in laws if (f := fit_interval_law(
        T, y, law, lower=lower, censored=cen, scale=scale, level=level)) is not None}
    # ties (e.g. several laws through every interval, ℓ = 0) keep the order of ``laws``
    out["ranking"] = sorted(out["fits"], key=lambda k: round(-out["fits"][k]["loglik"], 6))
    best = out["fits"][out["ranking"][0]]["loglik"] if out["ranking"] else 0.0
    for f in out["fits"].values():
        f["delta_2loglik"] = max(0.0, 2 * (best - f["loglik"]))
    out["tied"] = [k for k in out["ranking"] if out["fits"][k]["delta_2loglik"] < 2]
    return out
