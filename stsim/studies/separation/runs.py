"""The separation study's computations (:func:`run`): the family searches, the family at
the trained transformer cells, the tuning runs and the reported runs, each a resumable
:func:`stsim.sweep` into a raw table under ``<out>/raw/``."""
from __future__ import annotations

import os
import time

from stsim.studies.cells import SETTINGS, stamped, train_cells, tune_and_report  # noqa: F401
from stsim.studies.contract import RAW
from stsim.studies.separation.design import (FAMILY_ROOT, Precision, cells,
                                             family_crossing_point, family_settings,
                                             family_widths, n_mc, priority)
from stsim.sweeps import sweep
from stsim.theory.family import family_point
from stsim.util.io import write_json

__all__ = ["run", "raw_dir", "RAW_TABLES", "tune_and_report", "train_cells"]

RAW_TABLES = ("family.csv", "family_cells.csv", "tune.csv", "runs.csv")


def raw_dir(out) -> str:
    """Where the raw tables, their journals and the run record ``run.json`` live:
    ``<out>/raw``. ``ValueError`` for a folder in the earlier layout (raw tables at
    the top of ``out``), so that a resume does not silently recompute them."""
    raw = os.path.join(out, RAW)
    old = [t for t in RAW_TABLES if os.path.exists(os.path.join(out, t + ".journal.jsonl"))]
    if old and not os.path.isdir(raw):
        raise ValueError(f"out={out!r} holds raw tables at its top ({', '.join(old)}): move "
                         f"them and their journals into {raw!r} (the current layout)")
    return raw


def run(config, out, executor, log=None) -> None:
    """Run the family's crossings, the tuning runs and the reported runs on ``executor``.

    Stage 1: the family's located crossings (all ``family_qs`` × ``family_Ts`` ×
    ``levels``; :func:`~.design.family_crossing_point`) → ``raw/family.csv``. Stage 2:
    every trained cell, in :func:`~.design.priority` order, tuned equally and reported
    (:func:`stsim.studies.cells.train_cells`): tuning sweep (``lrs`` × 1 tuning seed) →
    ``raw/tune.csv``, the rate picked per budget and extended past an end
    (:func:`stsim.studies.cells.extend_rates`, the same rule for both arms); reported
    sweep (``seeds`` at the picked rate) → ``raw/runs.csv``; before them, the family loss
    at the trained transformer cells → ``raw/family_cells.csv``. Resumable (sweep
    journals). The run record (``workers``, ``wall_time_s``) goes to ``raw/run.json``.
    """
    cfg = config
    raw = raw_dir(out)
    os.makedirs(raw, exist_ok=True)
    t0 = time.perf_counter()
    say = log or (lambda m: None)
    ex = executor
    workers = getattr(ex, "_max_workers", 1)
    prec = Precision.from_cfg(cfg)
    # the longest first; the replicates' seeds are the library's (from the family's key)
    fpoints = [dict(q=q, T=T, level=lv, cap=cfg["family_max_width"])
               for T in sorted(cfg["family_Ts"], reverse=True) for q in cfg["family_qs"]
               for lv in cfg["levels"] if T > q]
    # a row carries the precision that made it: another precision computes other rows
    made = family_settings(cfg)
    fn, fpoints = stamped(lambda q, T, level, cap, seed: family_crossing_point(
        q, T, level, cap, prec), fpoints, made)
    fam = sweep(fn, fpoints, seeds=1, executor=ex, out=os.path.join(raw, "family.csv"))
    rows = [r for r in fam.rows if r.get(SETTINGS) == made]
    bad = [r for r in rows if r["status"] != "ok"]
    if bad:
        raise RuntimeError(f"family search failed: {bad[0]['error']}")
    say(f"family searches done ({len(rows)} rows, {fam.n_run} run now), "
        f"{time.perf_counter() - t0:.0f}s")
    fw = family_widths(rows, cfg["level"])
    todo = sorted(cells(cfg, fw), key=lambda c: priority(c, cfg))
    fixed = dict(d=cfg["d"], batch=cfg["batch"], n_val=cfg["n_val"])
    # the family's loss at every trained transformer cell (the agreement check)
    tfc = sorted({(c["q"], c["T"], c["width"]) for c in todo if c["arch"] == "transformer"})
    fc = [dict(q=q, T=T, d_e=w, n_mc=n_mc(T, cfg)) for q, T, w in tfc]
    if fc:
        sweep(family_point, fc, seeds=prec.replicates, root_seed=FAMILY_ROOT, executor=ex,
              out=os.path.join(raw, "family_cells.csv"))
    tune_t, runs_t = os.path.join(raw, "tune.csv"), os.path.join(raw, "runs.csv")
    n_runs = train_cells([(c, dict(c, **fixed)) for c in todo], cfg, ex, tune_t, runs_t,
                         say, t0)
    wall = time.perf_counter() - t0
    say(f"trainings done: {n_runs} runs now, {wall:.0f}s")
    write_json(os.path.join(raw, "run.json"), {"workers": workers, "wall_time_s": wall})


