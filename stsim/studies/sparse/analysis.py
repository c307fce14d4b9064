"""The sparse-Boolean study's analysis (:func:`analyse`), from ``trials.csv`` alone: per
cell success rates with Wilson intervals and failure kinds, m* at each level with its
bootstrap interval, and the growth-law fits of m* against T."""
from __future__ import annotations

import math
import os
from collections import Counter

import numpy as np

from stsim.studies.contract import divergence
from stsim.studies.sparse.design import FIT_ACC, MEDIAN, made_with, plan, trials_path
from stsim.sweeps import read_table
from stsim.util.stats import bootstrap_threshold, compare_growth, wilson_interval

__all__ = ["analyse", "cell_stats", "estimate_mstar", "fit_mstar", "crossing",
           "cells_of", "stats_of", "divergence_of"]


def _mean(values):
    values = [v for v in values if v is not None]
    return float(np.mean(values)) if values else None


def cell_stats(rows, seeds=None) -> dict:
    """``{(fn, s, model, T, m): {rate, n, ci_lo, ci_hi, opt_fail, stat_fail, test_acc,
    attn, ...}}`` over the rows (restricted to the replicate seeds in ``seeds`` if given);
    ``ci_lo, ci_hi``: the 95% Wilson interval of the success probability."""
    cells = {}
    for r in rows:
        if seeds is not None and r["seed"] not in seeds:
            continue
        cells.setdefault((r["fn"], r["s"], r["model"], r["T"], r["m"]), []).append(r)
    out = {}
    for key, rs in cells.items():
        fit = [r["train_acc"] is not None and r["train_acc"] >= FIT_ACC for r in rs]
        ok = [bool(r["success"]) for r in rs]
        attn = [r["attn_on_support"] for r in rs if r.get("attn_on_support") is not None]
        ci_lo, ci_hi = wilson_interval(int(sum(ok)), len(rs))
        out[key] = {"rate": float(np.mean(ok)), "n": len(rs), "ci_lo": ci_lo, "ci_hi": ci_hi,
                    "opt_fail": int(sum((not o) and (not f) for o, f in zip(ok, fit))),
                    "stat_fail": int(sum((not o) and f for o, f in zip(ok, fit))),
                    "test_acc": float(np.mean([r["test_acc"] or 0.0 for r in rs])),
                    "attn": float(np.mean(attn)) if attn else None,
                    "norm_success": _mean([r["max_block_norm"] for r in rs if r["success"]]),
                    "norm_fail": _mean([r["max_block_norm"] for r in rs if not r["success"]]),
                    "cpu_s": float(sum(r.get("cpu_time_s") or 0.0 for r in rs))}
    return out


def crossing(ms, rates, level):
    """(m*, first grid m at level, censored): m* interpolated linearly in ``log m`` between
    the last grid size below ``level`` and the first at or above it; censored ``"above"``
    if none reaches it, ``"below"`` if the smallest already does."""
    first = next((i for i, r in enumerate(rates) if r >= level), None)
    if first is None:
        return None, None, "above"
    if first == 0:
        return float(ms[0]), ms[0], "below"
    m0, m1, r0, r1 = ms[first - 1], ms[first], rates[first - 1], rates[first]
    frac = (level - r0) / (r1 - r0)
    return float(math.exp(math.log(m0) + frac * math.log(m1 / m0))), m1, None


def estimate_mstar(stats: dict, grid, level: float = 0.9, *, n_boot: int = 2000,
                   seed: int = 0) -> list:
    """m* per (fn, s, model, T) from the per-cell success rates (:func:`crossing`).

    ``m_star_lo`` / ``m_star_hi``: a 95% percentile-bootstrap interval of m* — each cell's
    count is redrawn ``Binomial(n, rate)`` (``n_boot`` times, generator seeded by
    ``seed``; :func:`stsim.util.stats.bootstrap_threshold` with binomial resamples) and the
    crossing recomputed; a draw that never reaches ``level`` counts as
    m* = +∞, and the ends are the 2.5% and 97.5% quantiles of all draws taken as order
    statistics (``method="inverted_cdf"``: each end is a crossing some draw has, never an
    interpolation between two); ``m_star_hi`` is None when more than 2.5% of the draws
    never reach ``level`` (the interval is open above ``m_max``). A cell at
    0/n or n/n does not vary in the bootstrap; its Wilson interval (``cell_stats``) says
    how far it may be off. ``n`` lists the trials per cell, ``m_max`` the largest m run."""
    series = sorted({k[:4] for k in stats})
    rng = np.random.default_rng(seed)
    out = []
    for key in series:
        ms = [m for m in grid if key + (m,) in stats]
        cells = [stats[key + (m,)] for m in ms]
        rates = [c["rate"] for c in cells]
        row = dict(zip(("fn", "s", "model", "T"), key), level=level, m_star=None, m_grid=None,
                   censored=None, m_star_lo=None, m_star_hi=None,
                   rates=" ".join(f"{m}:{r:.2f}" if c.get("n", 0) > 10 else f"{m}:{r:.1f}"
                                  for m, r, c in zip(ms, rates, cells)),
                   n=" ".join(str(c.get("n", "")) for c in cells))
        m_star, m_grid, censored = crossing(ms, rates, level)
        row.update(m_star=m_star, m_grid=m_grid, censored=censored)
        row["m_max"] = ms[-1] if ms else None   # the largest m run in the series
        if cells and n_boot and all("n" in c for c in cells):
            bt = bootstrap_threshold(lambda r: crossing(ms, r, level)[0], rates,
                                     resample="binomial", n=[c["n"] for c in cells],
                                     n_boot=n_boot, rng=rng)
            row["m_star_lo"], row["m_star_hi"] = bt["lo"], bt["hi"]
        out.append(row)
    return out


def _published_fit(f, kind):
    """One law of :func:`stsim.util.stats.compare_growth` as ``fits.json`` has published it
    (the committed copies): ``{a, b, residuals, rel_rms}``; the power law ``{a, b,
    residuals_ratio, rms_log2}`` (rms of ``log2`` of the ratios)."""
    if f is None:
        return None
    if kind == "power":
        return {"a": f["a"], "b": f["b"], "residuals_ratio": f["residuals_ratio"],
                "rms_log2": float(np.sqrt(np.mean(np.log2(f["residuals_ratio"]) ** 2)))}
    return {"a": f["a"], "b": f["b"], "residuals": f["residuals"], "rel_rms": f["rel_rms"]}


def fit_mstar(mstar: list) -> dict:
    """Per ``"fn:s/model"``: fits of ``m*`` against ``log2 T`` and ``T`` (``{a, b,
    residuals, rel_rms}``) and the power law ``log2 m* = γ log2 T + b`` (``{a=γ, b,
    residuals_ratio, rms_log2}``), on the points with ``censored != "above"`` (points
    censored below enter at the smallest grid size: an upper bound), from
    :func:`stsim.util.stats.compare_growth` (least squares, ≥ 3 points); ``better``: the
    one of ``log_T`` / ``linear_T`` with the smaller relative rms residual."""
    out = {}
    for r in mstar:
        e = out.setdefault(f"{r['fn']}:{r['s']}/{r['model']}", {"T": [], "m_star": [],
                                                                "censored_above": []})
        if r["m_star"] is None:
            e["censored_above"].append(r["T"])
            continue
        e["T"].append(r["T"])
        e["m_star"].append(r["m_star"])
    for e in out.values():
        c = compare_growth(e["T"], e["m_star"], min_points=3, rank_by="rel_rms")
        for law in ("log", "linear", "power"):
            e[f"{law}_T"] = _published_fit(c["fits"].get(law), law)
        if "log" in c["fits"] and "linear" in c["fits"]:
            e["better"] = c["ranking"][0] + "_T"
    return out


def cells_of(stats) -> list:
    """The per-cell statistics as a JSON-ready list (keys ``fn, s, model, T, m`` first)."""
    return [dict(zip(("fn", "s", "model", "T", "m"), k), **c) for k, c in sorted(stats.items())]


def stats_of(cells) -> dict:
    """The inverse of :func:`cells_of`: ``{(fn, s, model, T, m): statistics}``."""
    keys = ("fn", "s", "model", "T", "m")
    return {tuple(c[k] for k in keys): {k: v for k, v in c.items() if k not in keys}
            for c in cells}


def analyse(config, out) -> dict:
    """Read ``<out>/trials.csv``; return the cells (:func:`cell_stats` over every replicate
    seed of the design, as :func:`cells_of`), the m grid, ``n_trials``,
    ``cpu_time_trials_s`` and, per success level (``level`` and 1/2), m*
    (:func:`estimate_mstar`) and its fits (:func:`fit_mstar`). Nothing is written."""
    p = plan(config)
    path = trials_path(out)
    rows = made_with([r for r in read_table(path) if r["status"] == "ok"]
                     if os.path.exists(path) else [], p)
    stats = cell_stats(rows, set(p["seeds"]))
    lv0 = float(config["level"])
    panels = []
    for lv in [lv0] + ([MEDIAN] if lv0 != MEDIAN else []):
        ms_ = estimate_mstar(stats, p["grid"], lv)
        panels.append({"level": lv, "mstar": ms_, "fits": fit_mstar(ms_)})
    seeds = set(p["seeds"])
    return {"grid": p["grid"], "cells": cells_of(stats), "panels": panels,
            "n_trials": sum(c["n"] for c in stats.values()),
            "cpu_time_trials_s": sum(c["cpu_s"] for c in stats.values()),
            **divergence_of([r for r in rows if r["seed"] in seeds], panels)}


def divergence_of(rows, panels) -> dict:
    """The ``diverged`` and ``unmeasured`` entries of the summary
    (:func:`stsim.studies.contract.divergence`): the trials that diverged, and every m*
    censored above (no m reached the level) in a series where some trial diverged — a
    failure of the optimiser, not a measured sample complexity."""
    def series(r):
        return (r["fn"], r["s"], r["model"], r["T"])
    bad = [r for r in rows if r.get("diverged")]
    where = [f"{r['model']} {r['fn']}:{r['s']} T={r['T']} m={r['m']}" for r in bad]
    hit = Counter(series(r) for r in bad)
    unmeasured = []
    for pn in panels:
        for ms in pn["mstar"]:
            key = series(ms)
            if ms["censored"] == "above" and key in hit:
                n = sum(series(r) == key for r in rows)
                unmeasured.append(f"m* at success {pn['level']:g} of {ms['model']} "
                                  f"{ms['fn']}:{ms['s']} at T={ms['T']}: no m reached it, "
                                  f"and {hit[key]} of {n} trials diverged")
    return divergence(where, len(rows), unmeasured)

