"""The separation study's analysis (:func:`analyse`), from the raw tables alone: every run
and budget as a point, the smallest widths with their bootstrap intervals, the family's
widths, the growth-law fits and the trained/family agreement."""
from __future__ import annotations

import math
import os

import numpy as np

from stsim.core.targets import make_target
from stsim.studies.separation.design import (budgets_of, cells, family_widths, lr_edge,
                                             params_of, pick_lr, series, tf_params, width_grid)
from stsim.studies.separation.divergence import divergence_of
from stsim.studies.separation.training import raw_dir
from stsim.sweep import read_table
from stsim.sweep.journal import build_table, journal_path, load_journal
from stsim.util.stats import LAWS, bootstrap_threshold, compare_growth, threshold_width

__all__ = ["analyse", "read_rows", "widths_fit", "width_interval", "FIT_KEYS"]

# the fields of a growth-law fit in fits.json (y is published as "width": the smallest
# passing grid width, or the cap where censored; the threshold lies in (lower, width])
FIT_KEYS = ("law", "formula", "method", "a", "b", "a_ci", "b_ci", "level", "n", "n_censored",
            "T", "y", "lower", "censored", "sigma", "flat", "loglik", "delta_2loglik", "crit",
            "fit", "residuals_log2", "rms_log2", "max_abs_log2")


def read_rows(path) -> list:
    """The ``ok`` rows of one raw table, from its journal (complete even after a hard
    kill), else from the CSV, else none."""
    recs = list(load_journal(journal_path(path)).values())
    if recs:
        rows = build_table(recs, [])[0]
    else:
        rows = read_table(path) if os.path.exists(path) else []
    return [r for r in rows if r["status"] == "ok"]


def widths_fit(T, w, censored, lower, laws=LAWS):
    """:func:`stsim.util.stats.compare_growth` as the study publishes it: each smallest
    width is a grid cell ``(lower, width]`` (``lower`` = the grid width below, 0 where the
    smallest grid width passes) or censored above its cap; interval-censored maximum
    likelihood on ``log2 width``, ≥ 5 points (3 bounded above), every point entering;
    ``laws`` those of :func:`~stsim.util.stats.fit_growth_law` to compare."""
    c = compare_growth(T, w, censored=censored, lower=lower, min_points=5, what="width",
                       laws=laws)
    c["fits"] = {law: {("width" if k == "y" else k): f[k] for k in FIT_KEYS}
                 for law, f in c["fits"].items()}
    return c


def width_interval(ws, vals, target, n_boot, rng):
    """Smallest width with a paired bootstrap over seeds (``threshold_width`` on each
    resample of the seed columns)."""
    bt = bootstrap_threshold(lambda V: threshold_width(ws, V, target)[0], vals,
                             resample="paired", n_boot=n_boot, rng=rng)
    w = bt["estimate"]
    below = None if w is None or w == ws[0] else ws[ws.index(w) - 1]
    return {"width": w, "censored": bt["censored"], "lo": bt["lo"], "hi": bt["hi"],
            "frac_censored": bt["frac_censored"], "below": below,
            "lower_censored": bool(w is not None and w == ws[0]), "level": bt["level"],
            "n_boot": bt["n_boot"], "n_seeds": len(vals[0])}


def analyse(config, out):
    """Read the raw tables in ``out``; return points, widths, family, fits, agreement and
    the incomplete series points (JSON-ready; nothing is written)."""
    cfg = config
    raw = raw_dir(out)
    tune, runs, fam, famc = (read_rows(os.path.join(raw, n))
                             for n in ("tune.csv", "runs.csv", "family.csv", "family_cells.csv"))
    # the designed widths of every series point: a point is analysed only when all are done
    design, designed = {}, set()
    for c in cells(cfg, family_widths(fam, cfg["target"])):
        designed.add((c["arch"], c["q"], c["T"], c["width"], c["steps"]))
        for b in budgets_of(c["budgets"], c["steps"]):
            design.setdefault((c["arch"], c["q"], c["T"], b), set()).add(c["width"])
    # only the rows of designed cells (a row of another design, e.g. a 2000-step run that
    # an 8000-step cell replaced, is not analysed)
    tune, runs = ([r for r in rows if (r["arch"], r["q"], r["T"], r["width"], r["steps"])
                   in designed] for rows in (tune, runs))
    incomplete = []
    d = cfg["d"]
    bud = [cfg["steps"], cfg["long_steps"]]
    # lr chosen per (arch, q, T, width, budget) from the tuning seed
    chosen, edge = {}, {}
    groups = {}
    for r in tune:
        groups.setdefault((r["arch"], r["q"], r["T"], r["width"]), []).append(r)
    for k, rs in groups.items():
        tried = sorted({r["lr"] for r in rs})
        for b in bud:
            if any(r.get(f"val_{b}") is not None for r in rs):
                chosen[k + (b,)] = pick_lr(rs, b)
                edge[k + (b,)] = lr_edge(tried, chosen[k + (b,)], cfg["lr_extra"])
    points = []
    for role, rows in (("tune", tune), ("report", runs)):
        for r in rows:
            for b in bud:
                v = r.get(f"val_{b}")
                if v is None and f"val_{b}" not in r:
                    continue
                if b > r["steps"] or b not in budgets_of(r.get("budgets") or "", r["steps"]):
                    continue              # a run read at the long budget only
                L0 = make_target(r.get("task", "mean")).zero_loss(d, r["q"])
                sel = chosen.get((r["arch"], r["q"], r["T"], r["width"], b)) == r["lr"]
                points.append(dict(role=role, arch=r["arch"], q=r["q"], T=r["T"], d=r["d"],
                                   width=r["width"], budget=b, lr=r["lr"],
                                   seed_index=r["seed_index"], seed=r["seed"],
                                   final_loss=v, rel=None if v is None else v / L0,
                                   lr_chosen=int(sel), run_steps=r["steps"],
                                   params=params_of(r["arch"], r["T"], d, r["width"]),
                                   cpu_time_s=r.get("cpu_time_s")))
    points.sort(key=lambda p: (p["role"], p["arch"], p["q"], p["T"], p["width"], p["budget"],
                               p["lr"], p["seed_index"]))
    widths = []
    for q in cfg["qs"]:
        for name, arch, b in series(cfg):
            for T in sorted({p["T"] for p in points if p["arch"] == arch and p["q"] == q}):
                sel = [p for p in points if p["role"] == "report" and p["arch"] == arch
                       and p["q"] == q and p["T"] == T and p["budget"] == b and p["lr_chosen"]]
                ws = sorted({p["width"] for p in sel})
                if not ws:
                    continue
                vals = []
                for w in ws:
                    v = sorted((p["seed_index"], p["rel"]) for p in sel if p["width"] == w)
                    vals.append([np.nan if x is None else x for _, x in v])
                want = design.get((arch, q, T, b), set(ws))
                if set(ws) != want or {len(v) for v in vals} != {cfg["seeds"]}:
                    incomplete.append(dict(series=name, q=q, T=T, done=ws,
                                           designed=sorted(want)))
                    continue
                bt = width_interval(ws, vals, cfg["target"], cfg["n_boot"], [q, T, b])
                w = bt["width"]
                widths.append(dict(series=name, arch=arch, q=q, T=T, d=d, budget=b,
                                   grid=ws, medians=[float(np.nanmedian(v)) for v in vals],
                                   lr=[chosen.get((arch, q, T, x, b)) for x in ws],
                                   lr_edge=[edge.get((arch, q, T, x, b), "") for x in ws],
                                   params=None if w is None else params_of(arch, T, d, w),
                                   **bt))
    # the family: per (q, T, target), median over MC replicates + bootstrap over them
    family, fgrid = [], width_grid(cfg["family_max_width"], 2)
    medians = {t: family_widths(fam, t) for t in cfg["targets"]}
    for q in sorted({r["q"] for r in fam}):
        for T in sorted({r["T"] for r in fam if r["q"] == q}):
            rs = [r for r in fam if r["q"] == q and r["T"] == T]
            for t in cfg["targets"]:
                vals = [r.get(f"d_e@{t:g}") for r in rs]
                finite = [math.inf if v is None else v for v in vals]
                w = medians[t][(q, T)]
                below = None if w is None or w == fgrid[0] else fgrid[fgrid.index(w) - 1]
                family.append(dict(series="family", q=q, T=T, d=d, target=t, width=w,
                                   censored=w is None, lo=min(finite), hi=max(finite),
                                   below=below, cap=fgrid[-1],
                                   replicates=vals,
                                   params=None if w is None else tf_params(d, w)))
    # growth-law fits, per q, per series, at the main target
    fits = {}
    for q in sorted(set(cfg["qs"]) | set(cfg["family_qs"])):
        e = fits.setdefault(str(q), {})
        for name, arch, b in series(cfg):
            ws = [w for w in widths if w["q"] == q and w["series"] == name]
            if ws:
                e[name] = widths_fit([w["T"] for w in ws],
                                      [w["grid"][-1] if w["censored"] else w["width"] for w in ws],
                                      [w["censored"] for w in ws], [w["below"] for w in ws])
        for t in cfg["targets"]:
            fs = [f for f in family if f["q"] == q and f["target"] == t]
            if fs:
                e[f"family@{t:g}"] = widths_fit(
                    [f["T"] for f in fs], [f["cap"] if f["censored"] else f["width"] for f in fs],
                    [f["censored"] for f in fs], [f["below"] for f in fs])
    # agreement: trained transformer (median over seeds, chosen lr) vs family at (q, T, d_e)
    agreement = []
    for (q, T, w) in sorted({(p["q"], p["T"], p["width"]) for p in points
                             if p["arch"] == "transformer"}):
        tr = [p["rel"] for p in points if p["role"] == "report" and p["arch"] == "transformer"
              and p["q"] == q and p["T"] == T and p["width"] == w and p["lr_chosen"]
              and p["budget"] == cfg["steps"] and p["rel"] is not None]
        fm = [r["rel"] for r in famc if r["q"] == q and r["T"] == T and r["d_e"] == w]
        if tr and fm:
            agreement.append(dict(q=q, T=T, d_e=w, trained_median=float(np.median(tr)),
                                  trained=tr, family=float(np.mean(fm)),
                                  family_sd=float(np.std(fm)),
                                  ratio=float(np.median(tr) / np.mean(fm))))
    return {"points": points, "widths": widths, "family": family, "fits": fits,
            "agreement": agreement, "incomplete": incomplete,
            **divergence_of(cfg, tune, runs, widths, incomplete)}
