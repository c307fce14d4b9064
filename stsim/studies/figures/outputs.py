r"""The figures study's outputs (:func:`report`) and what ``stsim figures`` prints
(:func:`console`).

:func:`report` draws ``<fig>.png`` and writes ``<fig>.csv`` (every history), ``<fig>.json``
(settings, the resolved config of every run, measured numbers, claim checks),
``figures.json`` (wall time: the run step plus this analysis; peak memory; every check) and
``blocks.csv`` (every run's evaluation block means, from which every final estimate and its
SE are recomputed: :mod:`.blocks`).
"""
from __future__ import annotations

import json
import os
import time

from stsim.util.io import read_json, write_csv, write_json
from stsim.studies.figures.common import figure_module, load_runs, peak_rss_mb, runs_dir
from stsim.studies.figures.blocks import COLUMNS as BLOCK_COLUMNS, FILE as BLOCKS
from stsim.studies.figures.design import SESSION
from stsim.studies.figures.figure import write_figure
from stsim.studies.figures.runs import WRITTEN
from stsim.studies.figures.verdicts import verdict_counts
from stsim.util.verdict import check_line

__all__ = ["report", "console"]


def console(summary) -> list:
    """What ``stsim figures`` prints: every figure's checks, one line each
    (:func:`stsim.util.verdict.check_line`), and the figures not drawn."""
    out = []
    for s in summary["summaries"].values():
        out.append(f"== {s['figure']} ({s['mode']})")
        out += ["  " + check_line(c) for c in s["checks"]]
    for fig, runs in summary["missing"].items():
        out.append(f"== {fig}: NOT drawn, runs missing: "
                   + "; ".join(f"{name} ({why})" for name, why in runs.items()))
    return out


def _wall_of_runs(figures) -> float:
    """Seconds of training summed over every distinct run of the figures: each run's wall
    time in its worker (``wall_time_s``). Not CPU time: under load a run's wall time
    includes the time other processes held its core."""
    seen = {name: r.get("wall_time_s") or 0.0 for f in figures.values()
            for name, r in f["runs"].items()}
    return float(sum(seen.values()))


def report(config, out, results) -> dict:
    """Draw every analysed figure and write its files (module docstring) and
    ``figures.json``; return the overview with every summary under ``"summaries"``. A
    figure whose files :func:`run` wrote in this process from the same summary is not
    written again."""
    t0 = time.perf_counter()
    for n, summary in results["figures"].items():
        done = WRITTEN.pop((os.path.abspath(out), n), None)
        if done == json.dumps(summary, sort_keys=True) and all(
                os.path.exists(os.path.join(out, f"{n}.{ext}")) for ext in ("png", "json")):
            continue                  # drawn by run() in this process from the same numbers
        write_figure(config, out, n, load_runs(out, figure_module(n).jobs(config[n])), summary)
    path = os.path.join(runs_dir(out), SESSION)
    session = read_json(path) if os.path.exists(path) else {}
    analysis = results["analyse_s"] + time.perf_counter() - t0
    overview = {"mode": config["mode"],
                "wall_time_s": session.get("wall_time_s", 0.0) + analysis,
                "workers": session.get("workers"), "n_runs": results["n_runs"],
                "peak_rss_mb_max_run": results["peak_rss_mb_max_run"],
                "peak_rss_mb_driver": peak_rss_mb(),
                "runs_wall_time_sum_s": _wall_of_runs(results["figures"]),
                "diverged": {n: s["diverged"] for n, s in results["figures"].items()
                             if s["diverged"]},
                "unmeasured": {n: s["unmeasured"] for n, s in results["figures"].items()
                               if s["unmeasured"]},
                "verdicts": verdict_counts(c for f in results["figures"].values()
                                            for c in f["checks"]),
                "evaluation": results["evaluation"],
                "checks": {n: s["checks"] for n, s in results["figures"].items()}}
    write_json(os.path.join(out, "figures.json"), overview)
    write_csv(os.path.join(out, BLOCKS), BLOCK_COLUMNS, results["blocks"])
    return dict(overview, summaries=results["figures"], missing=results["missing"],
                n_trained=session.get("n_trained"), out=out)
