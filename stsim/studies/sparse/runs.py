"""The sparse-Boolean study's computations (:func:`run`): the m ladder and the top-up, each
level one resumable :func:`stsim.sweep` into ``<out>/trials.csv``."""
from __future__ import annotations

import os
import time

import numpy as np

from stsim.studies.sparse.analysis import cell_stats
from stsim.studies.sparse.boolean import train_trial, validate_point
from stsim.studies.sparse.design import made_with, plan, run_record_path, trials_path
from stsim.sweeps import read_table, sweep
from stsim.util.io import write_json

__all__ = ["run"]


def run(config, out, executor, log=None) -> None:
    """Climb the m ladder for every (function, model, T), then top up; trials in
    ``<out>/trials.csv``.

    Each level of the grid is one sweep of the still-active series × ``seeds`` replicates;
    a series retires after ``stop_after`` consecutive levels whose success rate over the
    ladder's own replicates is ≥ ``level`` (the ladder decides on them only, so a rerun
    after a top-up retires the same series). With ``topup`` > ``seeds``, every cell of the
    design whose ladder rate lies in ``topup_range`` gets replicates up to ``topup``. A
    failed trial stops the study (``RuntimeError``). The run record (``workers``,
    ``wall_time_s``, ``n_run`` = trials computed now, ``levels``: per level m, series,
    trials, run_now, seconds; the top-up last, as m ``"topup"``) goes to ``<out>/run.json``.
    """
    cfg = config
    p = plan(cfg)
    series, ms, fixed, extra = p["series"], p["grid"], p["fixed"], p["extra"]
    seeds, level = int(cfg["seeds"]), float(cfg["level"])
    stop_after, topup = int(cfg["stop_after"]), int(cfg.get("topup") or 0)
    lo, hi = (float(v) for v in cfg["topup_range"])
    os.makedirs(out, exist_ok=True)
    path = trials_path(out)
    t0 = time.perf_counter()
    say = log or (lambda msg: None)

    def run_cells(cells, n_seeds):
        """Sweep the cells ``(fn, s, model, T, m)`` × ``n_seeds`` replicates into the
        table; a failed trial stops the study."""
        keys = set(cells)
        points = [dict(fn=fn, s=s, model=model, T=T, m=m, **fixed, **extra.get((fn, s), {}))
                  for fn, s, model, T, m in cells]
        res = sweep(train_trial, points, seeds=n_seeds, executor=executor, out=path,
                    validate=validate_point)
        errs = [r for r in res.rows if r["status"] != "ok"
                and (r["fn"], r["s"], r["model"], r["T"], r["m"]) in keys]
        if errs:
            where = {k: errs[0][k] for k in ("fn", "model", "T", "m")}
            raise RuntimeError(f"trial failed at {where}: {errs[0]['error']}")
        return res

    streak = {key: 0 for key in series}
    # the ladder decides on its own replicates only: after a top-up the table holds more
    # trials of some cells, and a resumed run must retire the same series as the first
    ladder_seeds = p["ladder_seeds"]
    levels, n_run = [], 0
    for m in ms:
        active = [key for key in series if stop_after == 0 or streak[key] < stop_after]
        if not active:
            break
        tl = time.perf_counter()
        res = run_cells([key + (m,) for key in active], seeds)
        n_run += res.n_run
        for fn, s, model, T in active:
            rows = [r for r in res.select(fn=fn, s=s, model=model, T=T, m=m)
                    if r["seed"] in ladder_seeds]
            rate = float(np.mean([r["success"] for r in rows]))
            streak[(fn, s, model, T)] = streak[(fn, s, model, T)] + 1 if rate >= level else 0
        levels.append({"m": m, "series": len(active), "trials": len(active) * seeds,
                       "run_now": res.n_run, "seconds": time.perf_counter() - tl})
        say(f"m={m}: {len(active)} series × {seeds} seeds, {res.n_run} run now, "
            f"{time.perf_counter() - tl:.1f}s (total {time.perf_counter() - t0:.0f}s)")
    if topup > seeds:
        tl = time.perf_counter()
        rows = made_with([r for r in read_table(path) if r["status"] == "ok"], p)
        stats = cell_stats(rows, ladder_seeds)
        in_design = set(series)
        cells = sorted(k for k, c in stats.items() if lo <= c["rate"] <= hi
                       and k[:4] in in_design and k[4] in ms)
        if cells:
            res = run_cells(cells, topup)
            n_run += res.n_run
            levels.append({"m": "topup", "series": len(cells), "trials": len(cells) * topup,
                           "run_now": res.n_run, "seconds": time.perf_counter() - tl})
            say(f"top-up: {len(cells)} cells with rate in [{lo:g}, {hi:g}] to {topup} "
                f"trials, {res.n_run} run now, {time.perf_counter() - tl:.1f}s")
    write_json(run_record_path(out), {"workers": getattr(executor, "_max_workers", 1),
                                      "wall_time_s": time.perf_counter() - t0,
                                      "n_run": n_run, "levels": levels})
