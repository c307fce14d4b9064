r"""The expressivity study's outputs (:func:`report`): each complete part writes
``<part>.csv``, ``<part>.png`` and ``<part>.json``, then ``expressivity.json`` and
``report.md`` with the checks (:func:`write_overview`); and what ``stsim expressivity``
prints (:func:`console`).
"""
from __future__ import annotations

import os

from stsim.studies.expressivity.checks import checks as part_checks
from stsim.studies.expressivity.common import load_run_record
from stsim.studies.expressivity.design import PART_MODULES
from stsim.util.io import atomic_write, write_json
from stsim.util.verdict import checks_table, summary_line

__all__ = ["report", "write_overview", "console"]


def console(summary) -> list:
    """What ``stsim expressivity`` prints: the wall time of each part and the incomplete
    ones."""
    times = ", ".join(f"{k} {v:.1f}s" if v is not None else f"{k} (no run record)"
                      for k, v in summary["part_wall_time_s"].items())
    how = (" (analysed only; the parts' times are their runs')" if summary["analyse_only"]
           else "")
    return [f"expressivity{how}: {times}"] + [
        f"  {name}: incomplete (points missing from raw/)" for name in summary["incomplete"]]


def report(config, out, results) -> dict:
    """Each complete part writes its CSV, PNG and JSON; then ``expressivity.json``
    (:func:`write_overview`: ``mode``, ``seed``, ``parts``, per-part ``wall_time_s`` of the
    run that computed its points, ``summaries``, the ``incomplete`` parts, the
    ``checks``). Returns that overview, with the
    per-part times also as ``part_wall_time_s`` (the driver puts the command's total in
    ``wall_time_s``)."""
    record = load_run_record(out).get("parts", {})
    summaries, times, incomplete = {}, {}, []
    for name in config["only"]:
        if results[name] is None:
            incomplete.append(name)
            continue
        times[name] = record.get(name, {}).get("wall_time_s")
        summaries[name] = PART_MODULES[name].write(config[name], config["seed"], out,
                                               results[name], wall_time_s=times[name])
    overview = write_overview(config, out, summaries, times, incomplete,
                              {k: results[k] for k in ("diverged", "unmeasured") if k in results})
    return dict(overview, part_wall_time_s=times)


def write_overview(config, out, summaries, times, incomplete, extra=None) -> dict:
    """Write ``expressivity.json``: ``mode``, ``seed``, ``parts``, per-part ``wall_time_s``,
    ``summaries``, the ``incomplete`` parts, ``extra`` (diverged / unmeasured) and the
    ``checks`` of the complete parts, judged from the tables they wrote in ``out``
    (:mod:`~stsim.studies.expressivity.checks`), and ``report.md``, their table. Returns
    it."""
    done = [p for p in config["only"] if p not in incomplete]
    overview = {"mode": config.get("mode"), "seed": config["seed"],
                "parts": list(config["only"]), "wall_time_s": times, "summaries": summaries,
                "incomplete": incomplete, **(extra or {}), "checks": part_checks(out, done)}
    write_json(os.path.join(out, "expressivity.json"), overview)
    with atomic_write(os.path.join(out, "report.md"), "w") as fh:
        fh.write("\n".join([f"# Expressivity: checks ({config.get('mode')} run, parts "
                            f"{', '.join(done)})", "", summary_line(overview["checks"]), ""]
                           + checks_table(overview["checks"], ("part",))) + "\n")
    return overview
