r"""The expressivity study's computations (:func:`run`): each part's heavy loop is one or
two resumable :func:`stsim.sweep` over its points into raw tables ``<out>/raw/<table>.csv``
on the executor the caller passes (an interrupted run keeps every finished point), and the
run record ``<out>/raw/run.json``.

The point functions are the parts' own (``<table>_point``,
:mod:`~stsim.studies.expressivity.parts`).
"""
from __future__ import annotations

import time

from stsim.studies.expressivity.common import raw_table, update_run_record
from stsim.studies.expressivity.design import PART_MODULES
from stsim.sweeps import sweep

__all__ = ["run"]


def run(config, out, executor, log=None) -> None:
    """Run the parts in ``only``: every sweep of a part on ``executor``, its points
    submitted dearest first where the part says so, into ``<out>/raw/<table>.csv``
    (resumable); a failed point stops the study (``RuntimeError``). The run record
    (per part: ``wall_time_s``, ``n_run``, ``workers``) goes to ``<out>/raw/run.json``."""
    say = log or (lambda m: None)
    workers = getattr(executor, "_max_workers", 1)
    for name in config["only"]:
        mod, cfg = PART_MODULES[name], config[name]
        t0, n_run = time.perf_counter(), 0
        for table, points in mod.design(cfg, config["seed"]).items():
            def progress(done, total, rec, _t=table):
                say(f"{_t}: {mod.describe(rec['point'], rec['result'])} ({done}/{total}, "
                    f"{rec['time_s']:.1f}s)" if rec["status"] == "ok" else
                    f"{_t}: FAILED at {rec['point']}: {rec['error']}")
            res = sweep(getattr(mod, f"{table}_point"), points, seeds=1, executor=executor,
                        out=raw_table(out, table), progress=progress)
            bad = [r for r in res.rows if r["status"] != "ok"]
            if bad:
                raise RuntimeError(f"{table} failed: {bad[0]['error']}")
            n_run += res.n_run
        seconds = time.perf_counter() - t0
        update_run_record(out, name, workers, seconds, n_run)
        say(f"{name}: {seconds:.1f}s, {n_run} points computed now")
