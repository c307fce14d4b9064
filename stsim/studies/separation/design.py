r"""The separation study's design: presets, one training run, the trained cells, checks.

A training run is one row of a sweep table (:func:`train_point`); the cells
(:func:`cells`) are the ``(arch, q, T, width, steps, budgets)`` trained, the transformer's
placed around the family's smallest ``d_e``; :func:`check` validates a config before any
work. Parameter counts: :func:`params_of`.
"""
from __future__ import annotations

import math
import time
import warnings

import numpy as np

from stsim.baselines.fcn import fcn_param_count
from stsim.core.config import Config
from stsim.core.run import run
from stsim.core.cost import estimated_seconds
from stsim.theory.family import family_search
from stsim.theory.family import width_grid as _wgrid
from stsim.util.validate import check_int, check_memory

__all__ = ["QUICK", "FULL", "TUNE_ROOT", "FAMILY_ROOT", "width_grid", "tf_params",
           "params_of", "train_point", "validate_point", "cells", "priority", "check",
           "family_widths", "pick_lr", "series", "n_mc", "budgets_of", "family_search_point",
           "extend_rates", "lr_edge", "family_memory"]

TUNE_ROOT = 1        # root seed of the tuning replicate (the reported seeds use root 0)
FAMILY_ROOT = 2      # root seed of the family's Monte-Carlo replicates

# documented configuration (estimated cost in docs/separation.md); overridable from the CLI
FULL = dict(qs=(2, 3), d=1, target=0.25, targets=(0.25, 0.1), steps=2000, long_steps=8000,
            batch=256, n_val=2048, seeds=3, lrs=(1e-3, 3e-3, 1e-2, 3e-2),
            lr_extra=(1e-4, 3e-4, 1e-1, 3e-1),
            fcn_Ts=(8, 16, 32, 64, 128), tf_Ts=(8, 16, 32, 64, 128), long_Ts=(8, 16, 32, 64, 128),
            family_qs=(2, 3, 4), family_Ts=(8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096),
            mc_seeds=3, mc_budget=2 ** 20, n_mc_max=16384, family_max_width=1024,
            max_width_fcn=2048, long_max_width=512, fcn_span=4, n_boot=2000,
            extra_long=((3, 256, (512,)),))
QUICK = dict(qs=(2,), d=1, target=0.25, targets=(0.25,), steps=300, long_steps=600,
             batch=64, n_val=256, seeds=3, lrs=(3e-3, 1e-2), lr_extra=(1e-3, 3e-2),
             fcn_Ts=(4, 8), tf_Ts=(4, 8),
             long_Ts=(8,), family_qs=(2,), family_Ts=(4, 8, 16, 32, 64), mc_seeds=2,
             mc_budget=2 ** 13, n_mc_max=512, family_max_width=256, max_width_fcn=64,
             long_max_width=32, fcn_span=2, n_boot=200, extra_long=())


def width_grid(max_width: int, min_width: int = 1) -> list:
    """Integer widths ``round(2^{k/2})`` in ``[min_width, max_width]`` (ratio √2)."""
    check_int("max_width", max_width, 1)
    return _wgrid(max_width, min_width)


def tf_params(d, d_e):
    """Parameters of the theory-model transformer: ``W`` (D×D) and ``V`` (d×D), D = d + d_e."""
    return (d + d_e) ** 2 + d * (d + d_e)


def params_of(arch, T, d, width):
    """Parameters of a trained model of width ``width`` (FCN hidden width or ``d_e``)."""
    return fcn_param_count(T, d, width) if arch == "fcn" else tf_params(d, width)


# --------------------------------------------------------------------------------------
# one training run = one table row
# --------------------------------------------------------------------------------------
def _options(arch, T, d, width, q, steps, batch, lr, n_val, seed, eval_every, task="mean"):
    opts = dict(T=T, q=q, d=d, steps=steps, batch=batch, optimizer="adam", lr=lr,
                n_val=n_val, seed=seed, eval_every=eval_every)
    if task != "mean":              # the paper's task: the config as it always was
        opts["target"] = task
    if arch == "fcn":
        opts.update(arch="fcn", width=width)
    elif arch == "transformer":
        opts.update(arch="transformer", pe="stochastic", sampler="sphere", d_e=width,
                    model="theory", query="sum", init="zero")
    else:
        raise ValueError(f"arch must be one of ('fcn', 'transformer'), got {arch!r}")
    return opts


def budgets_of(budgets, steps):
    """The evaluation budgets of a run: the step counts in ``budgets`` (comma text) and
    ``steps``, sorted; ``ValueError`` unless each divides ``steps``."""
    b = sorted({int(v) for v in str(budgets).split(",") if v.strip()} | {int(steps)})
    if b[0] < 1 or any(steps % v for v in b):
        raise ValueError(f"budgets must divide steps={steps}, got {budgets!r}")
    return b


def train_point(arch, T, d, width, q=3, steps=2000, budgets="", batch=256, lr=3e-3, n_val=512,
                seed=0, target=None, task="mean"):
    """Train one model; report its validation loss after each budget.

    ``arch``: ``"fcn"`` (``width`` = hidden width) | ``"transformer"`` (``width`` = ``d_e``,
    stochastic sphere PE, theory model, sum query, zero init). Adam, constant ``lr``,
    ``steps`` steps on fresh batches; ``budgets`` (comma-separated step counts dividing
    ``steps``, ``steps`` always included) are the evaluation points. ``task``: the task's
    target (:func:`stsim.core.targets.make_target`'s names; the paper's ``"mean"`` by
    default), whose ``L0`` (:meth:`~stsim.core.targets.Target.zero_loss`) the losses are
    relative to; ``target`` is the reach ratio, not the task's target.

    Returns ``final_val`` (at ``steps``), ``val_<b>`` for each budget, ``rel`` (final /
    L0), ``init_val``, ``diverged`` (0/1), ``wall_time_s``, ``cpu_time_s``; with
    ``target`` also ``reached`` (``final_val ≤ target · L0``).
    """
    from stsim.core.targets import make_target
    validate_point(dict(arch=arch, T=T, d=d, width=width, q=q, steps=steps, budgets=budgets,
                        batch=batch, lr=lr, n_val=n_val, target=target, task=task))
    bs = budgets_of(budgets, steps)
    every = math.gcd(*bs) if len(bs) > 1 else steps
    t0, c0 = time.perf_counter(), time.process_time()
    res = run(**_options(arch, T, d, width, q, steps, batch, lr, n_val, seed, every, task))
    L0 = make_target(task).zero_loss(d, q)
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
    level = p.get("target")          # the reach ratio
    if level is not None and not 0 < float(level) < 1:
        raise ValueError(f"target must lie in (0, 1), got {level}")
    steps = p.get("steps", 2000)
    budgets_of(p.get("budgets", ""), steps)
    Config.from_options(**_options(p.get("arch", "fcn"), p["T"], p["d"], p["width"],
                                   p.get("q", 3), steps, p.get("batch", 256),
                                   p.get("lr", 3e-3), p.get("n_val", 512), 0, steps,
                                   p.get("task", "mean")))


train_point.validate = validate_point


def family_search_point(q, T, targets, n_mc, max_width, seed):
    """Sweep wrapper of :func:`stsim.theory.family.family_search` on the √2 grid [2, max_width]."""
    return family_search(q, T, [float(t) for t in str(targets).split(",")], n_mc, seed,
                         width_grid(max_width, 2))


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
    transformer's around ``family_widths[(q, T)]`` = the family's smallest d_e). The
    ``extra_long`` entries ``(q, T, widths)`` add FCN cells trained and read at the long
    budget only (full design: q = 3, T = 256, width 512 = 2T, the 8000-step width at
    T = 128: reaching it bounds the threshold to ``(0, 2T]``, missing it censors it above
    ``2T``)."""
    out = []
    b = str(cfg["steps"])
    for q in cfg["qs"]:
        for T in cfg["fcn_Ts"]:
            if T <= q:
                continue
            short = _fcn_widths(T, cfg)
            long = _fcn_widths(T, cfg, long=True) if T in cfg["long_Ts"] else []
            for w in sorted(set(short) | set(long)):
                steps, budgets = ((cfg["long_steps"], f"{cfg['steps']},{cfg['long_steps']}")
                                  if w in long else (cfg["steps"], b))
                out.append(dict(arch="fcn", q=q, T=T, width=w, steps=steps, budgets=budgets))
        for qq, T, ws in cfg.get("extra_long", ()):
            if qq == q and T > q:
                out += [dict(arch="fcn", q=q, T=T, width=w, steps=cfg["long_steps"],
                             budgets=str(cfg["long_steps"])) for w in sorted(ws)]
        for T in cfg["tf_Ts"]:
            if T <= q:
                continue
            dstar = (family_widths or {}).get((q, T)) or _family_grid(cfg)[-1]
            for w in _tf_widths(dstar, T, cfg):
                out.append(dict(arch="transformer", q=q, T=T, width=w, steps=cfg["steps"],
                                budgets=b))
    return out


def priority(c, cfg):
    """Order of the cells: by T, the FCN before the transformer from T = 32 on (the
    transformer's larger T are covered by the family; its small T check the agreement
    with it), cheaper first within a rank (the one cost model,
    :func:`stsim.core.cost.estimated_seconds`)."""
    rank = c["T"] if (c["arch"] == "fcn" or c["T"] <= 16) else 1000 + c["T"]
    opts = _options(c["arch"], c["T"], cfg["d"], c["width"], c["q"], c["steps"], cfg["batch"],
                    cfg["lrs"][0], cfg["n_val"], 0, c["steps"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # the long-default-run warning
        return (rank, estimated_seconds(Config.from_options(**opts)))


def n_mc(T, cfg):
    """Monte-Carlo samples of one family evaluation at ``T``."""
    return int(max(64, min(cfg["n_mc_max"], cfg["mc_budget"] // T)))


def family_widths(rows, target):
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


def pick_lr(rows, budget):
    """The rate with the lowest tuning-seed loss at ``budget`` (a diverged run loses)."""
    best = None
    for r in rows:
        v = r.get(f"val_{budget}")
        v = math.inf if v is None or r["status"] != "ok" else v
        if best is None or v < best[0]:
            best = (v, r["lr"])
    return best[1]


def extend_rates(tried, chosen, extra):
    """The rates to add to a cell's tuning: for each chosen rate (one per budget) that sits
    on an end of the ``tried`` rates, the nearest rate of ``extra`` beyond that end (none
    when ``extra`` has nothing beyond it). Repeating tune → choose → extend until this is
    empty leaves every chosen rate interior to the tried rates or at an end of
    ``tried ∪ extra`` — the same rule for both arms and every cell.

    >>> extend_rates([1e-3, 3e-3, 1e-2], [1e-2], [1e-4, 3e-4, 3e-2, 1e-1])
    [0.03]
    >>> extend_rates([1e-3, 3e-3, 1e-2], [1e-3, 3e-3], [1e-4, 3e-4, 3e-2])
    [0.0003]
    """
    lo, hi = min(tried), max(tried)
    add = set()
    for c in chosen:
        if c == lo and [x for x in extra if x < lo]:
            add.add(max(x for x in extra if x < lo))
        if c == hi and [x for x in extra if x > hi]:
            add.add(min(x for x in extra if x > hi))
    return sorted(add)


def lr_edge(tried, chosen, extra):
    """Where a cell's chosen rate sits among its ``tried`` rates: ``""`` (interior),
    ``"low"`` / ``"high"`` (on the bottom / top end with a rate of ``extra`` still beyond
    it: the extension is not done), ``"low-end"`` / ``"high-end"`` (on the bottom / top end
    of ``tried ∪ extra``: nothing left to try on that side)."""
    if len(tried) < 2 or min(tried) < chosen < max(tried):
        return ""
    side = "low" if chosen == min(tried) else "high"
    beyond = [x for x in extra if (x < chosen if side == "low" else x > chosen)]
    return side if beyond else f"{side}-end"


def series(cfg):
    """(name, arch, budget) of every trained series."""
    out = [("transformer", "transformer", cfg["steps"]), ("fcn", "fcn", cfg["steps"])]
    if cfg["long_Ts"]:
        out.append((f"fcn@{cfg['long_steps']}", "fcn", cfg["long_steps"]))
    return out


# --------------------------------------------------------------------------------------
# the checks made before any work
# --------------------------------------------------------------------------------------
def check(cfg):
    """Validate a config (``ValueError`` naming the field) and return it with the main
    ``target`` added to ``targets`` if missing."""
    cfg = dict(cfg)
    for k in ("qs", "fcn_Ts", "tf_Ts", "family_qs", "family_Ts", "lrs", "targets"):
        if not cfg[k]:
            raise ValueError(f"{k} must hold at least one value")
    for lr in tuple(cfg["lrs"]) + tuple(cfg["lr_extra"]):
        if not 0 < lr < float("inf"):
            raise ValueError(f"lr must be a positive number (lrs, lr_extra), got {lr}")
    for k in ("qs", "family_qs"):
        for v in cfg[k]:
            check_int(k, v, 1)
    for k in ("fcn_Ts", "tf_Ts", "family_Ts", "long_Ts"):
        for v in cfg[k]:
            check_int("T", v, 2)
    for k in ("d", "steps", "long_steps", "batch", "seeds", "n_val", "mc_seeds", "mc_budget",
              "fcn_span", "n_mc_max", "family_max_width", "max_width_fcn", "long_max_width",
              "n_boot"):
        check_int(k, cfg[k], 1)
    for e in cfg.get("extra_long", ()):
        if len(e) != 3 or not e[2]:
            raise ValueError(f"extra_long entries must be (q, T, widths), got {e!r}")
        check_int("q", e[0], 1)
        check_int("T", e[1], 2)
        for w in e[2]:
            check_int("width", w, 1)
    if cfg["long_steps"] % cfg["steps"]:
        raise ValueError(f"long_steps must be a multiple of steps={cfg['steps']}")
    for t in (cfg["target"],) + tuple(cfg["targets"]):
        if not 0 < t < 1:
            raise ValueError(f"target must lie in (0, 1), got {t}")
    if cfg["target"] not in cfg["targets"]:
        cfg["targets"] = (cfg["target"],) + tuple(cfg["targets"])
    # every cell the design can train (the transformer at any grid d_e) is a valid run
    fixed = dict(d=cfg["d"], batch=cfg["batch"], n_val=cfg["n_val"])
    for lr in tuple(cfg["lrs"]) + tuple(cfg["lr_extra"]):
        for c in cells(cfg)[:1]:
            validate_point(dict(c, lr=lr, **fixed))
    # sizes beyond the machine, before any work: every cell (its run's Config refuses a
    # run larger than memory), and the family's largest Monte-Carlo evaluation
    for c in cells(cfg):
        try:
            validate_point(dict(c, lr=cfg["lrs"][0], **fixed))
        except ValueError as exc:
            which = "fcn_Ts" if c["arch"] == "fcn" else "tf_Ts"
            raise ValueError(f"separation: the {c['arch']} cell at T={c['T']} ({which}), "
                             f"width {c['width']}: {exc}") from None
    T = max(cfg["family_Ts"])
    check_memory(family_memory(T, cfg), f"separation: the family at T={T} (family_Ts), "
                 f"{n_mc(T, cfg)} Monte-Carlo samples (mc_budget, n_mc_max)")
    return cfg


def family_memory(T, cfg) -> dict:
    """Bytes of the largest arrays of one family evaluation at ``T``
    (:func:`stsim.theory.family.best_family_loss`: the scores and the softmax temporaries,
    5 arrays of ``n_mc × T`` float64), for :func:`check`."""
    return {"scores and softmax temporaries (n_mc x T, x5)": 5 * n_mc(T, cfg) * T * 8}
