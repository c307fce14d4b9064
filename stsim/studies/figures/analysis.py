r"""The figures study's analysis (:func:`analyse`): every selected figure's numbers and
checks from the ``.npz`` files alone (a figure whose runs are missing is left out and
named), with the runs' evaluation blocks and peak memory.
"""
from __future__ import annotations

import json
import os
import time

from stsim.sweeps.journal import journal_path, load_journal
from stsim.studies.figures.common import figure_jobs, load_runs, npz_path, runs_dir, unique_jobs
from stsim.studies.figures.blocks import block_rows
from stsim.studies.figures.evaluate import evaluation_stats
from stsim.studies.figures.design import TABLE
from stsim.studies.figures.figure import figure_summary

__all__ = ["analyse"]


def _why_missing(out, job, records) -> str:
    for rec in records.values():
        if rec["point"] == job.point() and rec["status"] != "ok":
            return f"failed: {rec['error']}"
    if os.path.exists(npz_path(runs_dir(out), job.name)):
        return "its file holds a run with other settings (or is unreadable)"
    return "not trained"


def analyse(config, out) -> dict:
    """Every selected figure's summary (settings, configs, measured numbers, checks) from
    the ``.npz`` files in ``<out>/runs`` alone. A figure with a run missing or stale is
    left out and named under ``"missing"`` (``{figure: {run: why}}``); ``ValueError`` if
    no figure can be analysed."""
    t0 = time.perf_counter()
    jobs = unique_jobs(config)
    results = load_runs(out, jobs)
    records = load_journal(journal_path(os.path.join(runs_dir(out), TABLE)))
    figures, missing = {}, {}
    for n, js in figure_jobs(config).items():
        lack = {j.name: _why_missing(out, j, records) for j in js if j.name not in results}
        if lack:
            missing[n] = lack
            continue
        figures[n] = figure_summary(config, n, results)
    if not figures:
        raise ValueError(f"no figure can be analysed: their runs are not in "
                         f"{runs_dir(out)} ({json.dumps(missing)[:300]}); run `stsim "
                         "figures` without --analyse-only first")
    rss = [r.info.get("peak_rss_mb") for r in results.values() if r.info.get("peak_rss_mb")]
    return {"figures": figures, "missing": missing, "n_runs": len(jobs),
            "blocks": block_rows(results),
            "peak_rss_mb_max_run": max(rss, default=None),
            "evaluation": evaluation_stats({n: r.info.get("evaluation", {})
                                          for n, r in results.items()}),
            "analyse_s": time.perf_counter() - t0}
