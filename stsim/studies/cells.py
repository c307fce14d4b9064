"""The trained cells shared by the studies that train models against width: one training
run (:func:`train_point`, one row of a sweep table), the trained cells of a width design
(:func:`cells`: the FCN's widths on the √2 grid and the transformer's around the family's
crossing), their equal tuning and reported runs (:func:`tune_and_report`,
:func:`train_cells`: the same rates chosen the same way for every arm and cell) and a raw
table's rows (:func:`read_rows`) and the settings that made each (:func:`settings_text`,
:func:`stamped`, :func:`made_with`). Parameter counts: :func:`params_of`."""
from __future__ import annotations

import concurrent.futures as cf
import csv
import json
import math
import os
import threading
import time

from stsim.baselines.fcn import fcn_param_count
from stsim.core.config import Config
from stsim.core.run import run
from stsim.core.targets import make_target
from stsim.studies.widths import width_grid
from stsim.sweeps import InlineExecutor, expand_grid, read_table, sweep
from stsim.sweeps.journal import build_table, journal_path, load_journal
from stsim.util.io import to_jsonable
from stsim.util.validate import check_int

__all__ = ["TUNE_ROOT", "tf_params", "params_of", "budgets_of", "train_point",
           "validate_point", "cells", "pick_lr", "extend_rates", "lr_edge", "tune_and_report",
           "train_cells", "read_rows", "SETTINGS", "settings_text", "stamped", "made_with"]

TUNE_ROOT = 1        # root seed of the tuning replicate (the reported seeds use root 0)
#: the column of a study's raw table holding the settings that made a row (JSON text)
SETTINGS = "settings"


def tf_params(d, d_e):
    """Parameters of the theory-model transformer: ``W`` (D×D) and ``V`` (d×D), D = d + d_e."""
    return (d + d_e) ** 2 + d * (d + d_e)


def params_of(arch, T, d, width):
    """Parameters of a trained model of width ``width`` (FCN hidden width or ``d_e``)."""
    return fcn_param_count(T, d, width) if arch == "fcn" else tf_params(d, width)


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
                seed=0, level=None, task="mean"):
    """Train one model; report its validation loss after each budget.

    ``arch``: ``"fcn"`` (``width`` = hidden width) | ``"transformer"`` (``width`` = ``d_e``,
    stochastic sphere PE, theory model, sum query, zero init). Adam, constant ``lr``,
    ``steps`` steps on fresh batches; ``budgets`` (comma-separated step counts dividing
    ``steps``, ``steps`` always included) are the evaluation points. ``task``: the task's
    target (:func:`stsim.core.targets.make_target`'s names; the paper's ``"mean"`` by
    default), whose ``L0`` (:meth:`~stsim.core.targets.Target.zero_loss`) the losses are
    relative to; ``level`` is the reach ratio.

    Returns ``final_val`` (at ``steps``), ``val_<b>`` for each budget, ``rel`` (final /
    L0), ``init_val``, ``diverged`` (0/1), ``wall_time_s``, ``cpu_time_s``; with
    ``level`` also ``reached`` (``final_val ≤ level · L0``).
    """
    validate_point(dict(arch=arch, T=T, d=d, width=width, q=q, steps=steps, budgets=budgets,
                        batch=batch, lr=lr, n_val=n_val, level=level, task=task))
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
    if level is not None:
        out["reached"] = int(final is not None and final <= level * L0)
    return out


def validate_point(point):
    """Reject a bad point before any work (``ValueError`` naming the parameter)."""
    p = dict(point)
    check_int("width", p.get("width"), 1)
    level = p.get("level")          # the reach ratio
    if level is not None and not 0 < float(level) < 1:
        raise ValueError(f"level must lie in (0, 1), got {level}")
    steps = p.get("steps", 2000)
    budgets_of(p.get("budgets", ""), steps)
    Config.from_options(**_options(p.get("arch", "fcn"), p["T"], p["d"], p["width"],
                                   p.get("q", 3), steps, p.get("batch", 256),
                                   p.get("lr", 3e-3), p.get("n_val", 512), 0, steps,
                                   p.get("task", "mean")))


train_point.validate = validate_point


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


def tune_and_report(base, cfg, executor, tune_t, runs_t):
    """One cell's equal tuning and its reported runs (the separation study's stage 2): the rates
    ``cfg["lrs"]`` on the tuning seed (root ``TUNE_ROOT``) into ``tune_t``, the rate of
    each budget chosen (:func:`pick_lr`) and, while one sits on an end of the
    rates tried, the nearest rate of ``cfg["lr_extra"]`` beyond it added and tuned
    (:func:`extend_rates`); then ``cfg["seeds"]`` reported runs at each chosen
    rate into ``runs_t``. ``base``: the :func:`train_point` arguments but ``lr``.
    Returns ``(chosen, rates tried, runs made now)``; ``RuntimeError`` when a run failed."""
    rates, n_tuned = sorted(cfg["lrs"]), 0
    while True:
        tp = [dict(base, lr=lr) for lr in rates]
        tr = sweep(train_point, tp, seeds=1, root_seed=TUNE_ROOT, executor=executor,
                   out=tune_t)
        n_tuned += tr.n_run
        mine = tr.select(**base)          # the table holds every cell's rows
        chosen = {pick_lr(mine, b) for b in budgets_of(base["budgets"], base["steps"])}
        add = extend_rates(sorted({r["lr"] for r in mine}), chosen, cfg["lr_extra"])
        if not add:
            break
        rates = sorted(set(rates) | set(add))
    rp = [dict(base, lr=lr) for lr in sorted(chosen)]
    rr = sweep(train_point, rp, seeds=cfg["seeds"], executor=executor, out=runs_t)
    errs = [r["error"] for r in mine + rr.select(**base) if r["status"] != "ok"]
    if errs:
        raise RuntimeError(f"run failed at {base}: {errs[0]}")
    return chosen, rates, n_tuned + rr.n_run


def train_cells(todo, cfg, executor, tune_t, runs_t, say, t0) -> int:
    """:func:`tune_and_report` of every ``(cell, base)`` of ``todo`` in order (``workers +
    1`` cells in flight when ``executor`` is a pool, so that an interrupted run has whole
    cells first; threads only drive the sweeps, the runs go to ``executor``); returns the
    runs made now."""
    workers = getattr(executor, "_max_workers", 1)
    lock = threading.Lock()
    done = [0, 0]

    def drive(c, base):
        chosen, rates, n = tune_and_report(base, cfg, executor, tune_t, runs_t)
        with lock:
            done[0] += 1
            done[1] += n
            say(f"{c['arch']} q={c['q']} T={c['T']} w={c['width']} steps={c['steps']}"
                f"{'' if base.get('task', 'mean') == 'mean' else ' ' + base['task']}: lr "
                f"{sorted(chosen)} of {rates}; {done[0]}/{len(todo)} cells, {n} runs now, "
                f"{time.perf_counter() - t0:.0f}s")

    if isinstance(executor, InlineExecutor) or workers <= 1:
        for c, base in todo:
            drive(c, base)
    else:
        with cf.ThreadPoolExecutor(max(1, min(len(todo), workers + 1))) as drivers:
            futs = [drivers.submit(drive, c, base) for c, base in todo]
            errors = [f.exception() for f in futs]
        for e in errors:
            if e is not None:
                raise e
    return done[1]


def read_rows(path, ok=True) -> list:
    """The rows of one raw table (only the ``ok`` ones unless ``ok`` is False), from its
    journal (complete even after a hard kill, one row a point and replicate), else from the
    CSV, else none. A CSV that cannot be read as a table raises ``ValueError`` naming it."""
    recs = list(load_journal(journal_path(path)).values())
    if recs:
        rows = build_table(recs, [])[0]
    elif os.path.exists(path):
        try:
            rows = read_table(path)
            keys = [json.dumps([r.get(k) for k in list(r)[:list(r).index("seed_index") + 1]])
                    for r in rows]
        except (ValueError, TypeError, csv.Error) as exc:
            raise ValueError(f"cannot read the table {os.fspath(path)!r} ({exc}) and it has "
                             f"no journal: rerun without --analyse-only to compute it again "
                             f"in another --out") from None
        if len(set(keys)) != len(keys):
            raise ValueError(f"the table {os.fspath(path)!r} holds two rows of one point and "
                             f"replicate, and no journal to say which is the run's: rerun "
                             f"without --analyse-only to compute it again in another --out")
    else:
        rows = []
    return [r for r in rows if r.get("status") == "ok"] if ok else rows


def settings_text(**settings) -> str:
    """The :data:`SETTINGS` cell of a row made with ``settings`` (sorted JSON, lists for
    tuples): what a rerun and an analysis compare, so that a row serves only the settings
    that made it.

    >>> settings_text(T=20, T_test=(25, 30))
    '{"T": 20, "T_test": [25, 30]}'
    """
    return json.dumps(to_jsonable(settings), sort_keys=True)


def stamped(fn, points, text):
    """``(fn, points)`` for a sweep whose rows carry the settings ``text``
    (:func:`settings_text`): each point with its :data:`SETTINGS` cell, and ``fn`` called
    without it (a rerun with other settings computes other rows; the same ones are
    resumed)."""

    def made(seed, **point):
        point.pop(SETTINGS)
        return fn(seed=seed, **point)
    return made, [dict(p, **{SETTINGS: text}) for p in expand_grid(points)]


def _differing(rows, text) -> str:
    """What differs between the settings of ``rows`` and ``text`` (for a refusal)."""
    want = json.loads(text)
    seen = [r.get(SETTINGS) for r in rows]
    if not any(isinstance(v, str) and v.startswith("{") for v in seen):
        return ("its rows do not record the settings that made them (a table of an earlier "
                "version)")
    there = json.loads(next(v for v in seen if isinstance(v, str) and v.startswith("{")))
    diff = [f"{k}: {there.get(k)!r} there, {want.get(k)!r} here"
            for k in sorted(set(want) | set(there)) if there.get(k) != want.get(k)]
    return "its rows were made with other settings (" + "; ".join(diff) + ")"


def made_with(path, text, needed=(), ok=False) -> list:
    """The rows of the raw table ``path`` (:func:`read_rows`) made with the settings
    ``text`` (:func:`settings_text`). ``ValueError`` naming the table when it holds rows but
    none made with them (saying which settings differ), or when a point of ``needed`` (dicts
    of column values) has no row made with them: an analysis reports only what its
    settings made."""
    rows = read_rows(path, ok=False)
    mine = [r for r in rows if r.get(SETTINGS) == text]
    name = os.path.join(os.path.basename(os.path.dirname(path)), os.path.basename(path))
    if rows and not mine:
        raise ValueError(f"{name}: {_differing(rows, text)}; rerun without --analyse-only "
                         f"to compute rows with these settings (the table keeps both), or "
                         f"give the settings that made them")
    for p in needed:
        if not any(all(_same(r.get(k), v) for k, v in p.items()) for r in mine):
            what = ", ".join(f"{k}={v!r}" for k, v in p.items())
            raise ValueError(f"{name} has no row of {what} made with these settings: rerun "
                             f"without --analyse-only to compute it")
    return [r for r in mine if r.get("status") == "ok"] if ok else mine


def _same(a, b) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return float(a) == float(b)
    return a == b
