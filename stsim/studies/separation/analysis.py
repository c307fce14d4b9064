"""The separation study's analysis (:func:`analyse`), from the raw tables alone: every run
and budget as a point, the smallest widths with their bootstrap intervals, the family's
widths, the growth-law fits and the trained/family agreement."""
from __future__ import annotations

import os

import numpy as np

from stsim.core.targets import make_target
from stsim.studies import widths as wl
from stsim.studies.cells import made_with, read_rows
from stsim.studies.separation.checks import checks
from stsim.studies.separation.design import (budgets_of, cells, family_settings, family_width,
                                             family_widths, lr_edge, params_of, pick_lr,
                                             series, tf_params)
from stsim.studies.separation.divergence import divergence_of
from stsim.studies.separation.runs import raw_dir

__all__ = ["analyse"]


def analyse(config, out):
    """Read the raw tables in ``out``; return points, widths, family, fits, agreement, the
    incomplete series points and the checks (:mod:`~stsim.studies.separation.checks`;
    JSON-ready; nothing is written)."""
    cfg = config
    raw = raw_dir(out)
    tune, runs, famc = (read_rows(os.path.join(raw, n))
                        for n in ("tune.csv", "runs.csv", "family_cells.csv"))
    fam = made_with(os.path.join(raw, "family.csv"), family_settings(cfg), ok=True)
    # the runs made with these settings (a row carries every argument of its run)
    made = {k: cfg[k] for k in ("d", "batch", "n_val")}
    tune, runs = ([r for r in rows if all(r.get(k) == v for k, v in made.items())]
                  for rows in (tune, runs))
    # the designed widths of every series point: a point is analysed only when all are done
    design, designed = {}, set()
    for c in cells(cfg, family_widths(fam, cfg["level"])):
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
                bt = wl.trained_width(ws, vals, cfg["level"], cfg["n_boot"], [q, T, b])
                w = bt["width"]
                widths.append(dict(series=name, arch=arch, q=q, T=T, d=d, budget=b,
                                   grid=ws, medians=[float(np.nanmedian(v)) for v in vals],
                                   lr=[chosen.get((arch, q, T, x, b)) for x in ws],
                                   lr_edge=[edge.get((arch, q, T, x, b), "") for x in ws],
                                   params=None if w is None else params_of(arch, T, d, w),
                                   **bt))
    # the family: per (q, T, level), its located crossing (the widths library's)
    family = []
    for r in sorted(fam, key=lambda r: (r["q"], r["T"], -float(r["level"]))):
        cens = bool(int(r["censored"]))
        w = family_width(r)
        family.append(dict(series="family", q=int(r["q"]), T=int(r["T"]), d=d,
                           level=float(r["level"]), crossing=None if cens else r["d_e"],
                           se=None if cens else r["se"], lo=r["lo"], hi=r["hi"],
                           censored=cens, n=int(r["n"]), precise=int(r["precise"]),
                           replicates=str(r["replicates"]), width=w, cap=int(r["cap"]),
                           params=None if w is None else tf_params(d, w)))
    # growth-law fits, per q, per series, at the main level; the family's at each level
    fits = {}
    for q in sorted(set(cfg["qs"]) | set(cfg["family_qs"])):
        e = fits.setdefault(str(q), {})
        for name, arch, b in series(cfg):
            ws = [w for w in widths if w["q"] == q and w["series"] == name]
            if ws:
                e[name] = wl.fit([w["T"] for w in ws],
                                 [w["grid"][-1] if w["censored"] else w["width"] for w in ws],
                                 [w["censored"] for w in ws], [w["below"] for w in ws])
        for lv in cfg["levels"]:
            fs = [f for f in family if f["q"] == q and f["level"] == lv]
            if fs:
                e[f"family@{lv:g}"] = wl.fit_rows(fs)
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
    res = {"points": points, "widths": widths, "family": family, "fits": fits,
           "agreement": agreement, "incomplete": incomplete,
           **divergence_of(cfg, tune, runs, widths, incomplete)}
    res["checks"] = checks(cfg, res)
    return res
