r"""Transformer vs fully-connected net: width needed to learn STS_q as T grows (SPEC §7).

The paper's claim: a one-layer transformer learns STS_q with width ``O(d + q log T)``;
any fully-connected net needs first-layer width ``Ω(T d)``. For each ``q`` (d = 1 by
default) this study measures, against the same target ``target · L0`` (``L0 = d/(2q)``,
the loss of the zero function both models start from):

* **trained, both arms, equal tuning** — for every cell ``(arch, q, T, width)`` of a fixed
  width grid, the learning rate is picked from the same log-spaced grid ``lrs`` on a
  tuning seed (``SeedSequence(tune_root)``, never reported), separately for each step
  budget; then ``seeds`` reported seeds (``SeedSequence(0)``) are trained at the chosen
  rate. Both arms get the same budget ``steps`` (Adam, batch ``batch``, fresh samples);
  the FCN gets a second budget ``long_steps`` at ``T ∈ long_Ts`` (the points the first
  budget censors). A run with budgets (2000, 8000) is one 8000-step run evaluated at both
  (constant learning rate: its first 2000 steps are the 2000-step run).
* **the transformer's family** — the best population loss of ``W_ee = aI, V_x = γI`` (the
  family zero-initialised training converges to; :mod:`stsim.theory.family`), Monte
  Carlo over the sphere encodings, for ``T`` up to ``family_Ts[-1]``; the smallest grid
  ``d_e`` reaching each target (bisection, ``mc_seeds`` replicates). Where the
  transformer is also trained, the trained loss is set beside the family's at the same
  ``(T, d_e)`` (the agreement check).
* **the FCN's construction** — ``2Td`` (:func:`stsim.baselines.fcn.fcn_construction`).

Widths: the smallest grid width whose median over seeds reaches the target and above
which every grid width does too, with a paired percentile bootstrap over seeds; a width
whose largest grid value fails is *censored* (drawn at the cap, never fitted).
Fits (:func:`stsim.util.stats.compare_growth_laws`): ``log2 T``, ``T`` and a power law,
on ≥ 5 uncensored T values, with CIs and log residuals. Parameter counts:
FCN ``w(Td + T) + w + d w + d``; transformer (theory model) ``(d + d_e)² + d (d + d_e)``.

The logic is in plain functions of a config dict (:func:`run_trainings`, :func:`analyse`,
:func:`write_outputs`, all three in :func:`run_study`); the command line is
:mod:`stsim.cli.separation`.
"""
from __future__ import annotations

import concurrent.futures as cf
import math
import os
import threading
import time

import numpy as np

from stsim.core.config import Config
from stsim.core.run import run
from stsim.sweep import InlineExecutor, OneThreadProcessPool, read_table, sweep
from stsim.sweep.journal import build_table, journal_path, load_journal
from stsim.theory.family import family_point, family_search
from stsim.theory.family import width_grid as _wgrid
from stsim.util.io import atomic_write, write_csv, write_json
from stsim.util.stats import bootstrap_threshold, compare_growth_laws
from stsim.util.validate import check_int

__all__ = ["train_point", "width_grid", "fcn_params", "tf_params", "cells", "run_trainings",
           "analyse", "plot_separation", "plot_agreement", "markdown_report", "write_outputs",
           "check_config", "run_study", "QUICK", "FULL"]

TUNE_ROOT = 1        # root seed of the tuning replicate (the reported seeds use root 0)
FAMILY_ROOT = 2      # root seed of the family's Monte-Carlo replicates

# documented configuration (estimated cost in docs/separation.md); overridable from the CLI
FULL = dict(qs=(2, 3), d=1, target=0.25, targets=(0.25, 0.1), steps=2000, long_steps=8000,
            batch=256, n_val=2048, seeds=3, lrs=(1e-3, 3e-3, 1e-2, 3e-2),
            fcn_Ts=(8, 16, 32, 64, 128), tf_Ts=(8, 16, 32, 64, 128), long_Ts=(64, 128),
            family_qs=(2, 3, 4), family_Ts=(8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096),
            mc_seeds=3, mc_budget=2 ** 20, n_mc_max=16384, family_max_width=1024,
            max_width_fcn=2048, long_max_width=512, fcn_span=4, n_boot=2000)
QUICK = dict(qs=(2,), d=1, target=0.25, targets=(0.25,), steps=300, long_steps=600,
             batch=64, n_val=256, seeds=3, lrs=(3e-3, 1e-2), fcn_Ts=(4, 8), tf_Ts=(4, 8),
             long_Ts=(8,), family_qs=(2,), family_Ts=(4, 8, 16, 32, 64), mc_seeds=2,
             mc_budget=2 ** 13, n_mc_max=512, family_max_width=256, max_width_fcn=64,
             long_max_width=32, fcn_span=2, n_boot=200)


def width_grid(max_width: int, min_width: int = 1) -> list:
    """Integer widths ``round(2^{k/2})`` in ``[min_width, max_width]`` (ratio √2)."""
    check_int("max_width", max_width, 1)
    return _wgrid(max_width, min_width)


def fcn_params(T, d, w):
    """Parameters of the one-hidden-layer FCN on ``[vec(X); 1_y]``."""
    return w * (T * d + T) + w + d * w + d


def tf_params(d, d_e):
    """Parameters of the theory-model transformer: ``W`` (D×D) and ``V`` (d×D), D = d + d_e."""
    return (d + d_e) ** 2 + d * (d + d_e)


# --------------------------------------------------------------------------------------
# one training run = one table row
# --------------------------------------------------------------------------------------
def _options(arch, T, d, width, q, steps, batch, lr, n_val, seed, eval_every):
    opts = dict(T=T, q=q, d=d, steps=steps, batch=batch, optimizer="adam", lr=lr,
                n_val=n_val, seed=seed, eval_every=eval_every)
    if arch == "fcn":
        opts.update(arch="fcn", width=width)
    elif arch == "transformer":
        opts.update(arch="transformer", pe="stochastic", sampler="sphere", d_e=width,
                    model="theory", query="sum", init="zero")
    else:
        raise ValueError(f"arch must be one of ('fcn', 'transformer'), got {arch!r}")
    return opts


def _budgets(budgets, steps):
    b = sorted({int(v) for v in str(budgets).split(",") if v.strip()} | {int(steps)})
    if b[0] < 1 or any(steps % v for v in b):
        raise ValueError(f"budgets must divide steps={steps}, got {budgets!r}")
    return b


def train_point(arch, T, d, width, q=3, steps=2000, budgets="", batch=256, lr=3e-3, n_val=512,
                seed=0, target=None):
    """Train one model; report its validation loss after each budget.

    ``arch``: ``"fcn"`` (``width`` = hidden width) | ``"transformer"`` (``width`` = ``d_e``,
    stochastic sphere PE, theory model, sum query, zero init). Adam, constant ``lr``,
    ``steps`` steps on fresh batches; ``budgets`` (comma-separated step counts dividing
    ``steps``, ``steps`` always included) are the evaluation points.

    Returns ``final_val`` (at ``steps``), ``val_<b>`` for each budget, ``rel`` (final /
    L0), ``init_val``, ``diverged`` (0/1), ``wall_time_s``, ``cpu_time_s``; with
    ``target`` also ``reached`` (``final_val ≤ target · L0``).
    """
    validate_point(dict(arch=arch, T=T, d=d, width=width, q=q, steps=steps, budgets=budgets,
                        batch=batch, lr=lr, n_val=n_val, target=target))
    bs = _budgets(budgets, steps)
    every = math.gcd(*bs) if len(bs) > 1 else steps
    t0, c0 = time.perf_counter(), time.process_time()
    res = run(**_options(arch, T, d, width, q, steps, batch, lr, n_val, seed, every))
    L0 = d / (2 * q)
    h = res.history
    at = {int(s): float(v) for s, v in zip(h["step"], h["val"])}
    out = {"init_val": at.get(0, float("nan")), "diverged": int(not res.success),
           "wall_time_s": time.perf_counter() - t0, "cpu_time_s": time.process_time() - c0}
    for b in bs:
        v = at.get(b)
        out[f"val_{b}"] = v if v is not None and math.isfinite(v) else None
    final = out[f"val_{steps}"]
    out["final_val"] = final
    out["rel"] = None if final is None else final / L0
    if target is not None:
        out["reached"] = int(final is not None and final <= target * L0)
    return out


def validate_point(point):
    """Reject a bad point before any work (``ValueError`` naming the parameter)."""
    p = dict(point)
    check_int("width", p.get("width"), 1)
    tgt = p.get("target")
    if tgt is not None and not 0 < float(tgt) < 1:
        raise ValueError(f"target must lie in (0, 1), got {tgt}")
    steps = p.get("steps", 2000)
    _budgets(p.get("budgets", ""), steps)
    Config.from_options(**_options(p.get("arch", "fcn"), p["T"], p["d"], p["width"],
                                   p.get("q", 3), steps, p.get("batch", 256),
                                   p.get("lr", 3e-3), p.get("n_val", 512), 0, steps))


train_point.validate = validate_point


# --------------------------------------------------------------------------------------
# the design
# --------------------------------------------------------------------------------------
def _family_grid(cfg):
    return width_grid(cfg["family_max_width"], 2)


def _tf_widths(dstar, T, cfg):
    """Trained transformer widths around the family's smallest d_e (√2 steps):
    ×{1/√2, 1, √2, 2} for T ≤ 32, ×{1/√2, 1, √2} above (trained is at most a step worse)."""
    g = _family_grid(cfg)
    i = g.index(dstar) if dstar in g else len(g) - 1
    ks = (-1, 0, 1, 2) if T <= 32 else (-1, 0, 1)
    return sorted({g[min(max(i + k, 0), len(g) - 1)] for k in ks})


def _fcn_widths(T, cfg, long=False):
    """FCN widths on the √2 grid: T/2 … ``fcn_span``·T at the first budget (at T ≥ 64 only
    T, 2T … 8T, to the cap ``max_width_fcn``); T/2 … 2√2·T (≤ ``long_max_width``) at the
    long budget (it reaches the target at width T already at T = 64, so the grid goes below
    T to resolve the smallest width rather than bound it)."""
    if long:
        return [w for w in width_grid(cfg["long_max_width"]) if T / 2 <= w <= 2.9 * T]
    cap = cfg["max_width_fcn"]
    ws = [w for w in width_grid(cap) if max(1, T // 2) <= w <= cfg["fcn_span"] * T]
    if T >= 64:      # the first budget censors large T: probe up to 8T
        ws = sorted({w for w in ws if w >= 2 * T or w == T} | {w for w in (8 * T,) if w <= cap})
    return ws


def cells(cfg, family_widths=None):
    """Every trained cell: dicts ``arch, q, T, width, steps, budgets`` (FCN widths fixed; the
    transformer's around ``family_widths[(q, T)]`` = the family's smallest d_e)."""
    out = []
    b = str(cfg["steps"])
    for q in cfg["qs"]:
        for T in cfg["fcn_Ts"]:
            if T <= q:
                continue
            short = _fcn_widths(T, cfg)
            long = _fcn_widths(T, cfg, long=True) if T in cfg["long_Ts"] else []
            for w in sorted(set(short) | set(long)):
                if w in long:
                    out.append(dict(arch="fcn", q=q, T=T, width=w, steps=cfg["long_steps"],
                                    budgets=f"{cfg['steps']},{cfg['long_steps']}"))
                else:
                    out.append(dict(arch="fcn", q=q, T=T, width=w, steps=cfg["steps"],
                                    budgets=b))
        for T in cfg["tf_Ts"]:
            if T <= q:
                continue
            dstar = (family_widths or {}).get((q, T))
            if dstar is None:
                dstar = _family_grid(cfg)[-1]
            for w in _tf_widths(dstar, T, cfg):
                out.append(dict(arch="transformer", q=q, T=T, width=w, steps=cfg["steps"],
                                budgets=b))
    return out


def _priority(c):
    """Order of the cells: by T, the FCN before the transformer from T = 32 on (the
    transformer's larger T are covered by the family; its small T check the agreement
    with it), cheaper first within a rank."""
    rank = c["T"] if (c["arch"] == "fcn" or c["T"] <= 16) else 1000 + c["T"]
    return (rank, _cost(c))


def _cost(c):
    """Rough relative cost of a cell (for scheduling the dear ones first)."""
    if c["arch"] == "transformer":
        return c["steps"] * (c["T"] * c["width"] * 4.6e-6 + 5e-4)
    return c["steps"] * (c["T"] * c["width"] * 1e-7 + 4e-4)


# --------------------------------------------------------------------------------------
# running
# --------------------------------------------------------------------------------------
def _n_mc(T, cfg):
    return int(max(64, min(cfg["n_mc_max"], cfg["mc_budget"] // T)))


def _family_widths(rows, target):
    """Median over MC replicates of the family's smallest d_e per (q, T) (None: censored)."""
    out = {}
    key = f"d_e@{target:g}"
    for r in rows:
        out.setdefault((r["q"], r["T"]), []).append(r.get(key))
    res = {}
    for k, v in out.items():
        vals = [math.inf if x is None else x for x in v]
        m = float(np.median(vals))
        res[k] = None if not math.isfinite(m) else int(min(x for x in vals if x >= m))
    return res


def run_trainings(cfg, out, executor=None, max_workers=2, log=None):
    """Run the family searches, the tuning runs and the reported runs; raw tables in ``out``.

    Stage 1: the family searches (all ``family_qs`` × ``family_Ts`` × ``mc_seeds``) →
    ``family.csv``. Stage 2: every trained cell (``max_workers + 1`` at a time, in :func:`_priority` order): tuning
    sweep (``lrs`` × 1 tuning seed) → ``tune.csv``, pick the rate per budget, reported
    sweep (``seeds`` at the picked rate) → ``runs.csv``; before them, the family loss at
    the trained transformer cells → ``family_cells.csv``. Resumable (sweep journals).
    """
    os.makedirs(out, exist_ok=True)
    t0 = time.perf_counter()
    say = log or (lambda m: None)
    own = executor is None
    ex = OneThreadProcessPool(min(max_workers, os.cpu_count() or 1)) if own else executor
    try:
        fpoints = [dict(q=q, T=T, targets=",".join(f"{t:g}" for t in cfg["targets"]),
                        n_mc=_n_mc(T, cfg), max_width=cfg["family_max_width"])
                   for q in cfg["family_qs"] for T in cfg["family_Ts"] if T > q]
        fam = sweep(_family_search_point, fpoints, seeds=cfg["mc_seeds"], root_seed=FAMILY_ROOT,
                    executor=ex, out=os.path.join(out, "family.csv"))
        bad = [r for r in fam.rows if r["status"] != "ok"]
        if bad:
            raise RuntimeError(f"family search failed: {bad[0]['error']}")
        say(f"family searches done ({len(fam.rows)} rows), {time.perf_counter() - t0:.0f}s")
        fw = _family_widths(fam.rows, cfg["target"])
        todo = sorted(cells(cfg, fw), key=_priority)
        fixed = dict(d=cfg["d"], batch=cfg["batch"], n_val=cfg["n_val"])
        for c in todo:
            validate_point(dict(c, lr=cfg["lrs"][0], **fixed))
        # the family's loss at every trained transformer cell (the agreement check)
        tfc = sorted({(c["q"], c["T"], c["width"]) for c in todo if c["arch"] == "transformer"})
        fc = [dict(q=q, T=T, d_e=w, n_mc=_n_mc(T, cfg)) for q, T, w in tfc]
        if fc:
            sweep(family_point, fc, seeds=cfg["mc_seeds"], root_seed=FAMILY_ROOT, executor=ex,
                  out=os.path.join(out, "family_cells.csv"))
        tune_t, runs_t = os.path.join(out, "tune.csv"), os.path.join(out, "runs.csv")
        lock = threading.Lock()
        done = [0]

        def drive(c, e):
            base = dict(c, **fixed)
            tp = [dict(base, lr=lr) for lr in cfg["lrs"]]
            tr = sweep(train_point, tp, seeds=1, root_seed=TUNE_ROOT, executor=e, out=tune_t)
            mine = tr.select(**base)          # the table holds every cell's rows
            chosen = set()
            for b in _budgets(c["budgets"], c["steps"]):
                chosen.add(_pick_lr(mine, b))
            rp = [dict(base, lr=lr) for lr in sorted(chosen)]
            rr = sweep(train_point, rp, seeds=cfg["seeds"], executor=e, out=runs_t)
            errs = [r["error"] for r in mine + rr.select(**base) if r["status"] != "ok"]
            if errs:
                raise RuntimeError(f"run failed at {c}: {errs[0]}")
            with lock:
                done[0] += 1
                say(f"{c['arch']} q={c['q']} T={c['T']} w={c['width']}: lr {sorted(chosen)}; "
                    f"{done[0]}/{len(todo)} cells, {time.perf_counter() - t0:.0f}s")

        if isinstance(ex, InlineExecutor):
            for c in todo:
                drive(c, ex)
        else:
            # a few cells at a time, in priority order, so that an interrupted run has whole
            # cells (tuning + reported seeds) for the small T and both arms first
            with cf.ThreadPoolExecutor(max(1, min(len(todo), max_workers + 1))) as drivers:
                futs = [drivers.submit(drive, c, ex) for c in todo]
                errors = [f.exception() for f in futs]
            for e in errors:
                if e is not None:
                    raise e
    finally:
        if own:
            ex.shutdown(wait=True)
    return {"wall_time_s": time.perf_counter() - t0}


def _family_search_point(q, T, targets, n_mc, max_width, seed):
    """Sweep wrapper of :func:`stsim.theory.family.family_search` on the √2 grid [2, max_width]."""
    return family_search(q, T, [float(t) for t in str(targets).split(",")], n_mc, seed,
                         width_grid(max_width, 2))


def _pick_lr(rows, budget):
    """The rate with the lowest tuning-seed loss at ``budget`` (a diverged run loses)."""
    best = None
    for r in rows:
        v = r.get(f"val_{budget}")
        v = math.inf if v is None or r["status"] != "ok" else v
        if best is None or v < best[0]:
            best = (v, r["lr"])
    return best[1]


# --------------------------------------------------------------------------------------
# analysis
# --------------------------------------------------------------------------------------
def _series(cfg):
    """(name, arch, budget, Ts) of every trained series."""
    out = [("transformer", "transformer", cfg["steps"]), ("fcn", "fcn", cfg["steps"])]
    if cfg["long_Ts"]:
        out.append((f"fcn@{cfg['long_steps']}", "fcn", cfg["long_steps"]))
    return out


def analyse(cfg, out):
    """Read the raw tables; return points, widths, fits, agreement (and write nothing)."""
    def table(name):
        """Rows of one raw table, from its journal (complete even after a hard kill)."""
        path = os.path.join(out, name)
        recs = list(load_journal(journal_path(path)).values())
        if recs:
            rows = build_table(recs, [])[0]
        else:
            rows = read_table(path) if os.path.exists(path) else []
        return [r for r in rows if r["status"] == "ok"]

    tune, runs, fam, famc = (table(n) for n in ("tune.csv", "runs.csv", "family.csv",
                                                  "family_cells.csv"))
    # the designed widths of every series point: a point is analysed only when all are done
    design = {}
    for c in cells(cfg, _family_widths(fam, cfg["target"])):
        for b in _budgets(c["budgets"], c["steps"]):
            design.setdefault((c["arch"], c["q"], c["T"], b), set()).add(c["width"])
    incomplete = []
    d = cfg["d"]
    bud = [cfg["steps"], cfg["long_steps"]]
    # lr chosen per (arch, q, T, width, budget) from the tuning seed
    chosen = {}
    groups = {}
    for r in tune:
        groups.setdefault((r["arch"], r["q"], r["T"], r["width"]), []).append(r)
    for k, rs in groups.items():
        for b in bud:
            if any(r.get(f"val_{b}") is not None for r in rs):
                chosen[k + (b,)] = _pick_lr(rs, b)
    points = []
    for role, rows in (("tune", tune), ("report", runs)):
        for r in rows:
            for b in bud:
                v = r.get(f"val_{b}")
                if v is None and f"val_{b}" not in r:
                    continue
                if b > r["steps"]:
                    continue
                L0 = d / (2 * r["q"])
                sel = chosen.get((r["arch"], r["q"], r["T"], r["width"], b)) == r["lr"]
                points.append(dict(role=role, arch=r["arch"], q=r["q"], T=r["T"], d=r["d"],
                                   width=r["width"], budget=b, lr=r["lr"],
                                   seed_index=r["seed_index"], seed=r["seed"],
                                   final_loss=v, rel=None if v is None else v / L0,
                                   lr_chosen=int(sel), run_steps=r["steps"],
                                   params=(fcn_params(r["T"], d, r["width"]) if r["arch"] == "fcn"
                                           else tf_params(d, r["width"])),
                                   cpu_time_s=r.get("cpu_time_s")))
    points.sort(key=lambda p: (p["role"], p["arch"], p["q"], p["T"], p["width"], p["budget"],
                               p["lr"], p["seed_index"]))
    widths = []
    for q in cfg["qs"]:
        for name, arch, b in _series(cfg):
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
                bt = bootstrap_threshold(ws, vals, cfg["target"], n_boot=cfg["n_boot"],
                                         rng=[q, T, b])
                w = bt["width"]
                widths.append(dict(series=name, arch=arch, q=q, T=T, d=d, budget=b,
                                   grid=ws, medians=[float(np.nanmedian(v)) for v in vals],
                                   lr=[chosen.get((arch, q, T, x, b)) for x in ws],
                                   params=None if w is None else (
                                       fcn_params(T, d, w) if arch == "fcn" else tf_params(d, w)),
                                   **bt))
    # the family: per (q, T, target), median over MC replicates + bootstrap over them
    family = []
    for q in sorted({r["q"] for r in fam}):
        for T in sorted({r["T"] for r in fam if r["q"] == q}):
            rs = [r for r in fam if r["q"] == q and r["T"] == T]
            for t in cfg["targets"]:
                vals = [r.get(f"d_e@{t:g}") for r in rs]
                finite = [math.inf if v is None else v for v in vals]
                med = float(np.median(finite))
                w = None if not math.isfinite(med) else int(min(v for v in finite if v >= med))
                family.append(dict(series="family", q=q, T=T, d=d, target=t, width=w,
                                   censored=w is None, lo=min(finite), hi=max(finite),
                                   replicates=vals,
                                   params=None if w is None else tf_params(d, w)))
    # growth-law fits, per q, per series, at the main target
    fits = {}
    for q in sorted(set(cfg["qs"]) | set(cfg["family_qs"])):
        e = fits.setdefault(str(q), {})
        for name, arch, b in _series(cfg):
            ws = [w for w in widths if w["q"] == q and w["series"] == name]
            if ws:
                e[name] = compare_growth_laws([w["T"] for w in ws], [w["width"] for w in ws],
                                              censored=[w["censored"] for w in ws])
        for t in cfg["targets"]:
            fs = [f for f in family if f["q"] == q and f["target"] == t]
            if fs:
                e[f"family@{t:g}"] = compare_growth_laws(
                    [f["T"] for f in fs], [f["width"] for f in fs],
                    censored=[f["censored"] for f in fs])
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
            "agreement": agreement, "incomplete": incomplete}


# --------------------------------------------------------------------------------------
# figures and report
# --------------------------------------------------------------------------------------
_STYLE = {"transformer": ("o", "C0", "transformer d_e (trained)"),
          "fcn": ("s", "C3", "FCN width (trained, {steps} steps)"),
          "long": ("s", "C1", "FCN width (trained, {long} steps)")}


def plot_separation(A, cfg, path):
    """Per q (columns): smallest width (top) and parameter count (bottom) against T."""
    import matplotlib.pyplot as plt

    from stsim.util.plotting import savefig
    qs = sorted(set(cfg["qs"]) | {f["q"] for f in A["family"]})
    fig, axes = plt.subplots(2, len(qs), figsize=(5.2 * len(qs), 8.4), squeeze=False)
    d = cfg["d"]
    for j, q in enumerate(qs):
        for row, what in enumerate(("width", "params")):
            ax = axes[row, j]
            fam = [f for f in A["family"] if f["q"] == q and f["target"] == cfg["target"]]
            if fam:
                Tf = [f["T"] for f in fam if not f["censored"]]
                yf = [f["width"] if what == "width" else f["params"] for f in fam
                      if not f["censored"]]
                lo = [f["lo"] if what == "width" else tf_params(d, f["lo"]) for f in fam
                      if not f["censored"]]
                hi = [f["hi"] if what == "width" else tf_params(d, f["hi"]) for f in fam
                      if not f["censored"] and math.isfinite(f["hi"])]
                ax.plot(Tf, yf, "-", color="C2", marker=".", label="transformer family "
                        "W=aI, V=γI: smallest d_e (best population loss)")
                if len(hi) == len(lo):
                    ax.fill_between(Tf, lo, hi, color="C2", alpha=0.2, lw=0)
            for name, arch, b in _series(cfg):
                key = "long" if name.startswith("fcn@") else arch
                mk, col, lab = _STYLE[key]
                lab = lab.format(steps=cfg["steps"], long=cfg["long_steps"])
                ws = [w for w in A["widths"] if w["q"] == q and w["series"] == name]
                ok = [w for w in ws if not w["censored"]]
                sh = {"long": 1.05, "fcn": 1.0, "transformer": 0.95}[key]
                if ok:
                    y = [w["width"] if what == "width" else w["params"] for w in ok]
                    conv = (lambda v, T: v) if what == "width" else (
                        (lambda v, T: fcn_params(T, d, v)) if arch == "fcn"
                        else (lambda v, T: tf_params(d, v)))
                    lo = [conv(w["lo"], w["T"]) for w in ok]
                    hi = [conv(w["hi"], w["T"]) if w["hi"] is not None else conv(w["grid"][-1], w["T"])
                          for w in ok]
                    ax.errorbar([w["T"] * sh for w in ok], y,
                                yerr=[np.subtract(y, lo), np.subtract(hi, y)], fmt=mk,
                                color=col, mfc="none" if key == "long" else col, ms=7,
                                capsize=3, label=lab)
                    low = [w for w in ok if w["lower_censored"]]
                    if low:
                        ax.plot([w["T"] * sh for w in low],
                                [w["width"] if what == "width" else w["params"] for w in low],
                                "v", color=col, ms=6, alpha=0.6)
                cen = [w for w in ws if w["censored"]]
                if cen:
                    cap = [w["grid"][-1] for w in cen]
                    y = cap if what == "width" else [
                        fcn_params(w["T"], d, c) if arch == "fcn" else tf_params(d, c)
                        for w, c in zip(cen, cap)]
                    ax.plot([w["T"] * sh for w in cen], y, "^", color=col, mfc="none", ms=10,
                            mew=1.5, label=f"  censored: > cap ({name})")
                fit = A["fits"].get(str(q), {}).get(name, {})
                if what == "width" and fit.get("ranking"):
                    best = fit["fits"][fit["ranking"][0]]
                    Tg = np.geomspace(min(best["T"]), max(best["T"]), 60)
                    x = np.log2(Tg) if best["law"] in ("log", "power") else Tg
                    yv = 2.0 ** (best["a"] * x + best["b"]) if best["law"] == "power" else \
                        best["a"] * x + best["b"]
                    ax.plot(Tg, yv, "--", color=col, lw=1,
                            label=f"  best fit: {best['formula']} (a={best['a']:.2g})")
            ff = A["fits"].get(str(q), {}).get(f"family@{cfg['target']:g}", {})
            if what == "width" and ff.get("ranking"):
                best = ff["fits"][ff["ranking"][0]]
                Tg = np.array(best["T"])
                ax.plot(Tg, best["fit"], ":", color="C2", lw=1.2,
                        label=f"  family best fit: {best['formula']} (a={best['a']:.2g})")
            Ts = np.array(sorted(set(cfg["fcn_Ts"]) | set(cfg["family_Ts"])), float)
            yc = 2 * Ts * d if what == "width" else fcn_params(Ts, d, 2 * Ts * d)
            ax.plot(Ts, yc, ":", color="0.4", lw=1.2,
                    label="FCN exact construction: width 2Td")
            ax.set_xscale("log", base=2)
            ax.set_yscale("log", base=2)
            ax.grid(True, which="both", alpha=0.3)
            ax.set_xlabel("sequence length T")
            ax.set_ylabel("smallest width reaching the target" if what == "width"
                          else "parameters at that width")
            ax.set_title(f"q = {q}, d = {d}: {'width' if what == 'width' else 'parameter count'}"
                         f" reaching {cfg['target']:g}·L0", fontsize=9)
            if row == 0:
                ax.legend(fontsize=6, loc="upper left")
    fig.tight_layout()
    return savefig(fig, path)


def plot_agreement(A, cfg, path):
    """Trained transformer loss (median over seeds, chosen lr) against the family's best
    loss at the same (q, T, d_e)."""
    import matplotlib.pyplot as plt

    from stsim.util.plotting import savefig
    ag = A["agreement"]
    fig, ax = plt.subplots(figsize=(5.6, 5.0))
    for i, T in enumerate(sorted({a["T"] for a in ag})):
        for q, mk in zip(sorted({a["q"] for a in ag}), "os^D"):
            pts = [a for a in ag if a["T"] == T and a["q"] == q]
            if not pts:
                continue
            ax.errorbar([a["family"] for a in pts], [a["trained_median"] for a in pts],
                        yerr=[[a["trained_median"] - min(a["trained"]) for a in pts],
                              [max(a["trained"]) - a["trained_median"] for a in pts]],
                        fmt=mk, color=f"C{i}", capsize=2, label=f"T={T}, q={q}")
    if ag:
        lim = [min(a["family"] for a in ag) * 0.8, max(max(a["trained"]) for a in ag) * 1.2]
        ax.plot(lim, lim, "k-", lw=0.8, label="equal")
        ax.axhline(cfg["target"], color="0.5", ls=":", lw=1)
        ax.axvline(cfg["target"], color="0.5", ls=":", lw=1)
        ax.set_xscale("log")
        ax.set_yscale("log")
    ax.set_xlabel("family W=aI, V=γI: best population loss / L0 (MC)")
    ax.set_ylabel(f"trained transformer: val loss / L0 after {cfg['steps']} steps")
    ax.set_title("trained vs family at the same (T, d_e); bars: seed range", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return savefig(fig, path)


def _wtxt(w):
    if w["censored"]:
        return f">{w['grid'][-1]}"
    lo = "?" if w["lo"] is None else f"{w['lo']:g}"
    hi = f">{w['grid'][-1]}" if w["hi"] is None else f"{w['hi']:g}"
    pre = "≤" if w["lower_censored"] else ""
    return f"{pre}{w['width']} [{lo}, {hi}]"


def markdown_report(A, cfg) -> str:
    """Markdown tables: widths (with interval, params, grid medians), family, fits, agreement."""
    L = [f"Target: {cfg['target']:g}·L0. Widths: smallest grid width whose median over "
         f"{cfg['seeds']} seeds reaches it (and every larger grid width too); "
         f"[95% paired bootstrap over seeds]; ≤: the smallest grid width already passes.", "",
         "| q | series | T | smallest width [95%] | params | grid: median loss/L0 (lr) |",
         "|---|---|---|---|---|---|"]
    for w in A["widths"]:
        g = ", ".join(f"{x}: {m:.3f} ({lr:g})" for x, m, lr in zip(w["grid"], w["medians"], w["lr"]))
        L.append(f"| {w['q']} | {w['series']} | {w['T']} | {_wtxt(w)} | "
                 f"{w['params'] if w['params'] is not None else '–'} | {g} |")
    L += ["", "Family W_ee = aI, V_x = γI: smallest grid d_e (median over MC replicates; "
          "[min, max] over replicates):", "",
          "| q | target | " + " | ".join(f"T={T}" for T in cfg["family_Ts"]) + " |",
          "|---|---|" + "---|" * len(cfg["family_Ts"])]
    for q in sorted({f["q"] for f in A["family"]}):
        for t in cfg["targets"]:
            cellsq = {f["T"]: f for f in A["family"] if f["q"] == q and f["target"] == t}
            row = []
            for T in cfg["family_Ts"]:
                f = cellsq.get(T)
                if f is None:
                    row.append("–")
                elif f["censored"]:
                    row.append(f">{cfg['family_max_width']}")
                else:
                    hi = "∞" if not math.isfinite(f["hi"]) else f"{f['hi']:g}"
                    row.append(f"{f['width']} [{f['lo']:g}, {hi}]")
            L.append(f"| {q} | {t:g} | " + " | ".join(row) + " |")
    L += ["", "Fits (uncensored points only; 95% CIs; residuals log2(width/fit)):", "",
          "| q | series | n | law | a [95% CI] | b [95% CI] | rms log2 | residuals by T | rank |",
          "|---|---|---|---|---|---|---|---|---|"]
    for q, e in sorted(A["fits"].items()):
        for name, c in sorted(e.items()):
            if not c["fits"]:
                L.append(f"| {q} | {name} | {c['n_points']} | – | – | – | – | {c['note']}"
                         f"{'; censored T: ' + str(c['censored_T']) if c['censored_T'] else ''} | – |")
                continue
            for rank, law in enumerate(c["ranking"], 1):
                f = c["fits"][law]
                res = ", ".join(f"{int(T)}: {r:+.2f}" for T, r in zip(f["T"], f["residuals_log2"]))
                L.append(f"| {q} | {name} | {f['n']} | {f['formula']} | {f['a']:.3g} "
                         f"[{f['a_ci'][0]:.3g}, {f['a_ci'][1]:.3g}] | {f['b']:.3g} "
                         f"[{f['b_ci'][0]:.3g}, {f['b_ci'][1]:.3g}] | {f['rms_log2']:.3f} | "
                         f"{res} | {rank} |")
    if A["agreement"]:
        L += ["", "Trained transformer vs family at the same (q, T, d_e) (loss / L0):", "",
              "| q | T | d_e | trained (median; seeds) | family (MC mean ± sd) | ratio |",
              "|---|---|---|---|---|---|"]
        for a in A["agreement"]:
            L.append(f"| {a['q']} | {a['T']} | {a['d_e']} | {a['trained_median']:.3f} "
                     f"({', '.join(f'{x:.3f}' for x in a['trained'])}) | {a['family']:.3f} ± "
                     f"{a['family_sd']:.3f} | {a['ratio']:.2f} |")
    return "\n".join(L) + "\n"


def write_outputs(cfg, out, A, extra=None):
    """points.csv, widths.json, fits.json, summary.json, report.md, separation.png,
    agreement.png into ``out``."""
    cols = ["role", "arch", "q", "T", "d", "width", "budget", "lr", "lr_chosen", "seed_index",
            "seed", "final_loss", "rel", "params", "run_steps", "cpu_time_s"]
    write_csv(os.path.join(out, "points.csv"), cols, A["points"])
    write_json(os.path.join(out, "fits.json"), A["fits"])
    cpu = sum(p["cpu_time_s"] or 0.0 for p in A["points"] if p["budget"] == p["run_steps"])
    summary = {"config": {k: list(v) if isinstance(v, tuple) else v for k, v in cfg.items()},
               "widths": A["widths"], "family": A["family"], "agreement": A["agreement"],
               "incomplete": A["incomplete"],
               "cpu_time_training_s": cpu, **(extra or {})}
    write_json(os.path.join(out, "summary.json"), summary)
    with atomic_write(os.path.join(out, "report.md"), "w") as fh:
        fh.write(markdown_report(A, cfg))
    plot_separation(A, cfg, os.path.join(out, "separation.png"))
    if A["agreement"]:
        plot_agreement(A, cfg, os.path.join(out, "agreement.png"))


# --------------------------------------------------------------------------------------
# the whole study (the command line is stsim.cli.separation)
# --------------------------------------------------------------------------------------
def check_config(cfg):
    """Validate a config dict (``ValueError`` naming the field)."""
    for k in ("qs", "fcn_Ts", "tf_Ts", "family_qs", "family_Ts", "lrs", "targets"):
        if not cfg[k]:
            raise ValueError(f"{k} must hold at least one value")
    for k in ("qs", "family_qs"):
        for v in cfg[k]:
            check_int(k, v, 1)
    for k in ("fcn_Ts", "tf_Ts", "family_Ts", "long_Ts"):
        for v in cfg[k]:
            check_int("T", v, 2)
    for k in ("d", "steps", "long_steps", "batch", "seeds", "n_val", "mc_seeds", "mc_budget",
              "fcn_span",
              "n_mc_max", "family_max_width", "max_width_fcn", "long_max_width", "n_boot"):
        check_int(k, cfg[k], 1)
    if cfg["long_steps"] % cfg["steps"]:
        raise ValueError(f"long_steps must be a multiple of steps={cfg['steps']}")
    for t in (cfg["target"],) + tuple(cfg["targets"]):
        if not 0 < t < 1:
            raise ValueError(f"target must lie in (0, 1), got {t}")
    if cfg["target"] not in cfg["targets"]:
        cfg["targets"] = (cfg["target"],) + tuple(cfg["targets"])
    return cfg


def run_study(cfg: dict, out: str, *, workers: int = 2, log=None, mode=None,
              analyse_only: bool = False) -> dict:
    """The whole study for the settings ``cfg`` (``QUICK`` or ``FULL`` with any keys
    changed): the runs (unless ``analyse_only``: then only what is already in ``out``),
    the analysis, and the files of :func:`write_outputs`. ``workers <= 1`` runs in this
    process. Returns the summary (analysis included)."""
    cfg = check_config(dict(cfg))
    workers = check_int("workers", workers, 0)
    t0 = time.perf_counter()
    if not analyse_only:
        executor = InlineExecutor() if workers <= 1 else None
        run_trainings(cfg, out, executor=executor, max_workers=max(workers, 1), log=log)
    A = analyse(cfg, out)
    extra = {"mode": mode, "workers": workers, "analyse_only": analyse_only,
             "wall_time_s": time.perf_counter() - t0}
    write_outputs(cfg, out, A, extra)
    return dict(A, **extra)


def width_text(w) -> str:
    """``width [lo, hi]`` of one series point (``>cap`` when censored)."""
    return _wtxt(w)
