r"""The figures study's computations (:func:`run`): every run of the selected figures
trained once, as the rows of one :func:`stsim.sweep`, each figure drawn as soon as its runs
are in.

:func:`run` trains every run of the selected figures once, longest first, as the rows of
one :func:`stsim.sweep` into ``<out>/runs/jobs.csv`` (:func:`.common.train_job`; resumed
and never reused: docs/reproduction.md, "How to run"), drawing each figure as soon as its
runs are in; ``<out>/runs/run.json`` records the workers and the wall time of the run step.
"""
from __future__ import annotations

import functools
import json
import os
import time

from stsim.util.io import write_json
from stsim.sweeps import sweep
from stsim.sweeps.grid import point_key
from stsim.sweeps.journal import journal_path, load_journal
from stsim.studies.figures.common import (Job, figure_jobs, load_current, load_runs, runs_dir,
                                          train_job, unique_jobs)
from stsim.studies.figures.design import SESSION, TABLE
from stsim.studies.figures.figure import figure_summary, write_figure

__all__ = ["run", "WRITTEN"]

# (folder, figure) -> the summary (JSON text) whose files run() wrote in this process:
# report() does not write the same files twice
WRITTEN: dict = {}


def _still_current(rec, runs):
    """Sweep ``keep``: a finished row stands while its file holds its config's result."""
    return load_current(runs, Job.from_point(rec["point"])) is not None


def _finished(table, jobs, runs) -> set:
    """The names of ``jobs`` the sweep into ``table`` will skip: finished in its journal,
    and still current (:func:`_still_current`)."""
    records = load_journal(journal_path(table))
    return {j.name for j in jobs if (rec := records.get((point_key(j.point()), 0)))
            is not None and rec["status"] == "ok" and _still_current(rec, runs)}


def run(config, out, executor, log=None) -> None:
    """Train every run of the selected figures (module docstring) on ``executor``; draw
    each figure as soon as its runs are in. ``log``: callable(str) or None."""
    t0 = time.perf_counter()
    say = log or (lambda msg: None)
    runs = runs_dir(out)
    os.makedirs(runs, exist_ok=True)
    per_fig = figure_jobs(config)
    needs = {n: {j.name for j in js} for n, js in per_fig.items()}
    order = sorted(unique_jobs(config), key=Job.estimated_seconds, reverse=True)
    table = os.path.join(runs, TABLE)
    done = _finished(table, order, runs)
    drawn = {n for n, names in needs.items() if names <= done}   # report draws these
    say(f"{len(done)} of {len(order)} runs already finished in {runs}; training "
        f"{len(order) - len(done)}, longest first")

    def progress(k, total, rec):
        name, r = rec["point"]["job"], rec["result"]
        if rec["status"] == "ok":
            done.add(name)
            say(f"[{time.perf_counter() - t0:7.1f}s] done   {name}: {r.get('message')}, "
                f"final loss {r.get('final_loss', float('nan')):.4g}, "
                f"{r.get('wall_time_s') or 0:.1f}s, peak {r.get('peak_rss_mb') or 0:.0f} MB")
        else:
            say(f"[{time.perf_counter() - t0:7.1f}s] FAILED {name}: {rec['error']}")
        if k == total:          # the last run: report draws what is left, right after
            return
        for n, names in needs.items():
            if n not in drawn and names <= done:
                drawn.add(n)
                results = load_runs(out, per_fig[n])
                summary = figure_summary(config, n, results)
                write_figure(config, out, n, results, summary)
                WRITTEN[(os.path.abspath(out), n)] = json.dumps(summary, sort_keys=True)
                say(f"drew {n} -> {os.path.join(out, n + '.png')}")

    res = sweep(functools.partial(train_job, runs=runs), [j.point() for j in order],
                executor=executor, out=table,
                keep=functools.partial(_still_current, runs=runs), progress=progress)
    write_json(os.path.join(runs, SESSION), {
        "mode": config["mode"], "workers": getattr(executor, "workers", None),
        "wall_time_s": time.perf_counter() - t0, "n_runs": len(order),
        "n_trained": res.n_run, "n_failed": res.n_failed})
