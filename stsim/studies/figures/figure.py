r"""One figure of the study from its runs: its summary, the checks labelled for stability
(:func:`figure_summary`), and its files (:func:`write_figure`);
:func:`~stsim.studies.figures.runs.run` makes a figure as soon as its runs are in,
:func:`~stsim.studies.figures.analysis.analyse` and
:func:`~stsim.studies.figures.outputs.report` the others.
"""
from __future__ import annotations

import os

from stsim.util.io import write_json
from stsim.studies.figures.common import figure_module, summarise, write_histories_csv
from stsim.studies.figures.stability import above_bound
from stsim.studies.figures.verdicts import relabel

__all__ = ["label_stability", "figure_summary", "write_figure"]


def label_stability(checks, twin_checks, options, results):
    """The checks (or cells) relabelled (:mod:`stsim.studies.figures.stability`,
    :func:`.verdicts.relabel`):
    unstable where a run they use is above its step bound, or where the check computed with
    the twins in place of their originals has another verdict; inconclusive where
    unmeasured (a run diverged: named in ``why``)."""
    out = []
    for k, c in enumerate(checks):
        why = [w for r in c.get("runs", ()) if r in options and (w := above_bound(options[r]))]
        if twin_checks is not None:
            t = twin_checks[k]
            if t["claim"] == c["claim"] and t["verdict"] != c["verdict"]:
                why.append(f"unstable: the verdict changes from {c['verdict']} to "
                           f"{t['verdict']} when the lr moves by one unit in the last place "
                           f"(measured {c['measured']:.4g} vs {t['measured']:.4g})")
        c = relabel(c, why[0] if why else None)
        if c["unmeasured"]:
            div = [r for r in c.get("runs", ()) if r in results
                   and results[r].status != "completed"]
            c["why_unmeasured"] = (f"runs did not complete: {div}" if div
                                   else "not finite")
        out.append(c)
    return out


def figure_summary(config, name, results):
    """The summary of figure ``name`` from ``results`` (``{run name: Result}``): its
    checks (and the claims map's cells) labelled for stability (:func:`label_stability`; the
    figure is measured again with each twin in place of its original), its diverged runs
    and its unmeasured checks."""
    mod, s = figure_module(name), config[name]
    js = mod.jobs(s)
    measured, checks = mod.measure(s, results)
    pairs = {j.name: t.name for j, t in ((j, j.twin()) for j in js) if t.name in results}
    tm, tc = None, None
    if pairs:
        alt = dict(results)
        alt.update({n: results[t] for n, t in pairs.items()})
        tm, tc = mod.measure(s, alt)
    options = {j.name: j.options for j in js}
    checks = label_stability(checks, tc, options, results)
    if "cells" in measured:
        measured["cells"] = label_stability(measured["cells"], tm and tm["cells"], options, results)
    names = [j.name for j in js] + list(pairs.values())
    runs = {n: results[n] for n in names if n in results}
    summary = summarise(name, s, config["mode"], runs, checks, measured)
    summary["twins"] = pairs
    summary["diverged"] = sorted(n for n, r in runs.items() if r.status != "completed")
    summary["unmeasured"] = [c["claim"] for c in checks if c["unmeasured"]]
    return summary


def write_figure(config, out, name, results, summary):
    """Draw figure ``name`` and write its ``.csv`` (histories) and ``.json`` (summary)."""
    mod, s = figure_module(name), config[name]
    os.makedirs(out, exist_ok=True)
    mod.draw(s, results, summary["measured"], out)
    runs = {j.name: results[j.name] for j in mod.jobs(s) if j.name in results}
    write_histories_csv(os.path.join(out, f"{name}.csv"), runs)
    write_json(os.path.join(out, f"{name}.json"), summary)
