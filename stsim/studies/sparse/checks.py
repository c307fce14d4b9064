"""The sparse-Boolean study's checks (:func:`checks`): the statements
docs/sparse-functions.md makes about its data, each judged by
:func:`stsim.util.verdict.judge` from ``trials.csv`` alone.

* **which law fits m* better** (the page tests "log T" only as "better fitted by log T
  than by T"): the relative rms of ``m* = a·log2 T + b`` minus that of ``m* = a·T + b``
  over the uncensored T (:func:`~stsim.studies.sparse.analysis.fit_mstar`), ``< 0`` where
  the page says the log fit wins (the head of AND and majority at success 1/2), ``> 0``
  where it says the linear fit wins (the head of AND and majority at the other level;
  every FCN series, "linear in T");
* **the head needs fewer samples than the FCN** (AND and majority, at each T where the
  head reaches the level): ``log2(m*_FCN / m*_head) > 0``; an FCN that never reaches the
  level enters at its largest m run (a lower bound);
* **parity is a wall for the head**: at T ≥ 128 its m* at success 1/2 is censored (no
  m ≤ m_max reaches it); exact, a count of the trials' outcomes.

The se of a fit difference or ratio is the spread of that statistic over ``N_BOOT``
redraws of every cell's count from ``Binomial(n, rate)`` (the bootstrap of m*'s interval,
:func:`~stsim.studies.sparse.analysis.estimate_mstar`; its own generator, so the
published intervals do not move), on ``n − 1`` degrees of freedom for the fewest trials
``n`` of a cell it uses (10 trials: 9). Redraws in which a fitted point never reaches the
level are left out of the fit's spread (their fraction is in the note); redraws that do
not vary give no standard error (the check is inconclusive), not an exact value.
"""
from __future__ import annotations

import math

import numpy as np

from stsim.studies.sparse.analysis import crossing
from stsim.studies.sparse.design import MEDIAN
from stsim.util.verdict import judge

__all__ = ["checks", "series_draws", "N_BOOT", "WALL_T"]

N_BOOT = 2000
SEED = 1            # the generator of these redraws (m*'s own interval uses 0)
WALL_T = 128        # "for T >= 128 it never reaches 0.5"
PAIRED_FNS = ("and", "majority")


def series_draws(stats, grid, key, level, rng, n_boot=N_BOOT):
    """``(m*, draws, n_min)`` of the series ``key = (fn, s, model, T)``: its m*
    (:func:`crossing`; None when censored above), ``n_boot`` redrawn m* (``inf``: the
    redraw never reaches ``level``) and the fewest trials of a cell."""
    ms = [m for m in grid if key + (m,) in stats]
    if not ms:
        return None, np.full(n_boot, np.inf), 0
    cells = [stats[key + (m,)] for m in ms]
    n = np.array([c["n"] for c in cells])
    m_star = crossing(ms, [c["rate"] for c in cells], level)[0]
    rates = rng.binomial(n, [c["rate"] for c in cells], size=(n_boot, len(n))) / n
    draws = np.array([np.inf if (x := crossing(ms, r, level)[0]) is None else x
                      for r in rates])
    return m_star, draws, int(n.min())


def _rel_rms_gap(x_log, x_lin, Y):
    """rel rms of the least-squares line in ``x_log`` minus that in ``x_lin``, per row of
    ``Y`` (rows: redraws; columns: T)."""
    out = []
    for x in (x_log, x_lin):
        X = np.column_stack([x, np.ones_like(x)])
        res = Y - (np.linalg.pinv(X) @ Y.T).T @ X.T
        out.append(np.sqrt(np.mean((res / Y) ** 2, axis=1)))
    return out[0] - out[1]


def _spread(x):
    """The standard deviation of the redraws ``x``; NaN (no standard error) below 3 of
    them or when they do not vary (every cell at 0/n or n/n: the redraws cannot show how
    far the statistic may be off, so it is not an exact value either)."""
    x = np.asarray(x, float)
    sd = float(np.std(x, ddof=1)) if len(x) > 2 else math.nan
    return sd if sd > 1e-12 * max(1.0, float(np.abs(x).mean())) else math.nan  # rounding


def _law_claim(model, level):
    """'log' or 'linear': the law the page says wins for this series."""
    if model == "fcn":
        return "linear"
    return "log" if level == MEDIAN else "linear"


def checks(stats, grid, panels) -> list:
    """The check records from the cell statistics ``stats``, the m grid and the analysis
    ``panels`` (per level: ``mstar`` rows and ``fits``)."""
    rng = np.random.default_rng(SEED)
    out = []
    series = sorted({k[:4] for k in stats})
    models = {k[2] for k in series}
    for pn in panels:
        lv = pn["level"]
        draws = {k: series_draws(stats, grid, k, lv, rng) for k in series}
        for (fn, s, model) in sorted({k[:3] for k in series}):
            if model == "attention" and fn not in PAIRED_FNS:
                continue
            e = pn["fits"].get(f"{fn}:{s}/{model}", {})
            law = _law_claim(model, lv)
            claim = (f"{fn} s={s}, {model}, success >= {lv:g}: m* is better fitted by "
                     f"{'log T' if law == 'log' else 'T'} than by "
                     f"{'T' if law == 'log' else 'log T'} (rel rms of a·log2 T + b − that "
                     f"of a·T + b {'<' if law == 'log' else '>'} 0)")
            op = "<" if law == "log" else ">"
            if not e.get("log_T") or not e.get("linear_T"):
                out.append(judge(claim, math.nan, op, 0.0, math.nan,
                                 note=f"{len(e.get('T', []))} uncensored T (< 3): not fitted",
                                 level=lv, model=model, fn=fn))
                continue
            Ts = e["T"]
            Y = np.column_stack([draws[(fn, s, model, T)][1] for T in Ts])
            ok = np.all(np.isfinite(Y), axis=1)
            gap = _rel_rms_gap(np.log2(Ts), np.asarray(Ts, float), Y[ok])
            n_min = min(draws[(fn, s, model, T)][2] for T in Ts)
            se = _spread(gap)
            out.append(judge(claim, e["log_T"]["rel_rms"] - e["linear_T"]["rel_rms"], op,
                             0.0, se, n_min - 1,
                             note=f"rel rms {e['log_T']['rel_rms']:.3f} (log T) against "
                                  f"{e['linear_T']['rel_rms']:.3f} (T) over T = {Ts}; "
                                  f"{1 - ok.mean():.1%} of the redraws censored",
                             level=lv, model=model, fn=fn))
        if {"attention", "fcn"} <= models:
            for (fn, s, model, T) in series:
                if model != "attention" or fn not in PAIRED_FNS:
                    continue
                mh, dh, nh = draws[(fn, s, "attention", T)]
                if mh is None or (fn, s, "fcn", T) not in draws:
                    continue
                mf, df_, nf = draws[(fn, s, "fcn", T)]
                m_max = max(m for m in grid if (fn, s, "fcn", T, m) in stats)
                lower = mf is None
                f_val, f_draw = (m_max, np.full_like(df_, m_max)) if lower else (mf, df_)
                d = np.log2(f_draw) - np.log2(dh)
                d = d[np.isfinite(d)]
                out.append(judge(
                    f"{fn} s={s}, T = {T}, success >= {lv:g}: the head needs fewer samples "
                    f"than the FCN (log2(m*_FCN / m*_head) > 0)",
                    math.log2(f_val / mh), ">", 0.0,
                    _spread(d), min(nh, nf) - 1,
                    note=f"{mh:.0f} against {'> ' if lower else ''}{f_val:.0f}"
                         + (" (the FCN never reaches it: its largest m)" if lower else ""),
                    level=lv, fn=fn, T=T))
        if lv == MEDIAN:
            wall = [k for k in series if k[0] == "parity" and k[2] == "attention"
                    and k[3] >= WALL_T]
            if wall:
                reached = [f"T = {k[3]}: {m:.0f}" for k in wall
                           if (m := draws[k][0]) is not None]
                out.append(judge(f"parity, attention: for T >= {WALL_T} the head never "
                                 f"reaches success {MEDIAN:g} within m <= {grid[-1]} (the "
                                 f"number of such T where it does <= 0)", len(reached), "<=",
                                 0, note="; ".join(reached) or
                                 f"T = {sorted(k[3] for k in wall)}: censored",
                                 level=lv, model="attention", fn="parity"))
    return out
