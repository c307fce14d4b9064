"""The separation study's computations (:func:`run`): the family searches, the family at
the trained transformer cells, the tuning runs and the reported runs, each a resumable
:func:`stsim.sweep` into a raw table under ``<out>/raw/``."""
from __future__ import annotations

import concurrent.futures as cf
import os
import threading
import time

from stsim.studies.separation.design import (FAMILY_ROOT, TUNE_ROOT, budgets_of, cells,
                                             extend_rates, family_search_point,
                                             family_widths, n_mc, pick_lr, priority,
                                             train_point)
from stsim.sweep import InlineExecutor, sweep
from stsim.theory.family import family_point
from stsim.util.io import write_json

__all__ = ["run", "raw_dir", "RAW_TABLES", "tune_and_report", "train_cells"]

RAW_TABLES = ("family.csv", "family_cells.csv", "tune.csv", "runs.csv")


def raw_dir(out) -> str:
    """Where the raw tables, their journals and the run record ``run.json`` live:
    ``<out>/raw``. ``ValueError`` for a folder in the earlier layout (raw tables at
    the top of ``out``), so that a resume does not silently recompute them."""
    raw = os.path.join(out, "raw")
    old = [t for t in RAW_TABLES if os.path.exists(os.path.join(out, t + ".journal.jsonl"))]
    if old and not os.path.isdir(raw):
        raise ValueError(f"out={out!r} holds raw tables at its top ({', '.join(old)}): move "
                         f"them and their journals into {raw!r} (the current layout)")
    return raw


def run(config, out, executor, log=None) -> None:
    """Run the family searches, the tuning runs and the reported runs on ``executor``.

    Stage 1: the family searches (all ``family_qs`` × ``family_Ts`` × ``mc_seeds``) →
    ``raw/family.csv``. Stage 2: every trained cell, in :func:`~.design.priority` order
    (``workers + 1`` cells in flight on a process pool, one at a time inline): tuning sweep
    (``lrs`` × 1 tuning seed) → ``raw/tune.csv``, pick the rate per budget; while a chosen
    rate sits on an end of the rates tried, add the nearest rate of ``lr_extra`` beyond it
    and tune again (:func:`~.design.extend_rates`; the same rule for both arms); reported sweep
    (``seeds`` at the picked rate) → ``raw/runs.csv``; before them, the family loss at the
    trained transformer cells → ``raw/family_cells.csv``. Resumable (sweep journals). The
    run record (``workers``, ``wall_time_s``) goes to ``raw/run.json``.
    """
    cfg = config
    raw = raw_dir(out)
    os.makedirs(raw, exist_ok=True)
    t0 = time.perf_counter()
    say = log or (lambda m: None)
    ex = executor
    workers = getattr(ex, "_max_workers", 1)
    fpoints = [dict(q=q, T=T, targets=",".join(f"{t:g}" for t in cfg["targets"]),
                    n_mc=n_mc(T, cfg), max_width=cfg["family_max_width"])
               for q in cfg["family_qs"] for T in cfg["family_Ts"] if T > q]
    fam = sweep(family_search_point, fpoints, seeds=cfg["mc_seeds"], root_seed=FAMILY_ROOT,
                executor=ex, out=os.path.join(raw, "family.csv"))
    bad = [r for r in fam.rows if r["status"] != "ok"]
    if bad:
        raise RuntimeError(f"family search failed: {bad[0]['error']}")
    say(f"family searches done ({len(fam.rows)} rows, {fam.n_run} run now), "
        f"{time.perf_counter() - t0:.0f}s")
    fw = family_widths(fam.rows, cfg["target"])
    todo = sorted(cells(cfg, fw), key=lambda c: priority(c, cfg))
    fixed = dict(d=cfg["d"], batch=cfg["batch"], n_val=cfg["n_val"])
    # the family's loss at every trained transformer cell (the agreement check)
    tfc = sorted({(c["q"], c["T"], c["width"]) for c in todo if c["arch"] == "transformer"})
    fc = [dict(q=q, T=T, d_e=w, n_mc=n_mc(T, cfg)) for q, T, w in tfc]
    if fc:
        sweep(family_point, fc, seeds=cfg["mc_seeds"], root_seed=FAMILY_ROOT, executor=ex,
              out=os.path.join(raw, "family_cells.csv"))
    tune_t, runs_t = os.path.join(raw, "tune.csv"), os.path.join(raw, "runs.csv")
    n_runs = train_cells([(c, dict(c, **fixed)) for c in todo], cfg, ex, tune_t, runs_t,
                         say, t0)
    wall = time.perf_counter() - t0
    say(f"trainings done: {n_runs} runs now, {wall:.0f}s")
    write_json(os.path.join(raw, "run.json"), {"workers": workers, "wall_time_s": wall})


def tune_and_report(base, cfg, executor, tune_t, runs_t):
    """One cell's equal tuning and its reported runs (:func:`run`, stage 2): the rates
    ``cfg["lrs"]`` on the tuning seed (root ``TUNE_ROOT``) into ``tune_t``, the rate of
    each budget chosen (:func:`~.design.pick_lr`) and, while one sits on an end of the
    rates tried, the nearest rate of ``cfg["lr_extra"]`` beyond it added and tuned
    (:func:`~.design.extend_rates`); then ``cfg["seeds"]`` reported runs at each chosen
    rate into ``runs_t``. ``base``: the :func:`~.design.train_point` arguments but ``lr``.
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
