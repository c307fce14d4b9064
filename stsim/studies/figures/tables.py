"""Markdown tables of the settings and claim checks written by ``stsim figures``.

:func:`render` (command line: ``stsim figures --report DIR``) gives, for every
``<fig>.json`` in ``DIR``, the settings and the one table of its checks
(:func:`stsim.util.verdict.checks_table`);
``docs/reproduction.md`` quotes these tables, so the numbers in the report are the numbers
in the JSON files.
"""
from __future__ import annotations

import os


from stsim.studies.figures.common import FIGURES
from stsim.util.io import read_json
from stsim.util.verdict import checks_table

SETTING_KEYS = ("T", "q", "d", "d_e", "d_e_list", "sampler", "model", "query",
                "optimizer", "lr", "steps", "batch", "init", "init_scale", "seeds")


def settings_row(name, s, summary):
    """One markdown row of the settings table: ``name``, the values of ``SETTING_KEYS`` in
    the settings ``s`` (empty where absent) and the training time summed over the figure's
    runs in minutes (``summary["total_train_time_s"]``)."""
    cells = [name] + [str(s.get(k, "")) for k in SETTING_KEYS]
    cells.append(f"{summary['total_train_time_s'] / 60:.1f}")
    return "| " + " | ".join(cells) + " |"


def render(folder) -> str:
    """Markdown report of the ``<fig>.json`` files in ``folder`` (figures without a file are
    skipped): one settings table (a row per figure, ``claims`` left out), the claims map's
    table if present, then each figure's checks (:func:`stsim.util.verdict.checks_table`);
    ``ValueError`` naming the folder if it holds none."""
    from stsim.studies.figures.claims import claims_markdown
    out = ["| figure | " + " | ".join(SETTING_KEYS) + " | train time (min, summed over runs) |",
           "|" + "---|" * (len(SETTING_KEYS) + 2)]
    summaries = {}
    for n in FIGURES:
        path = os.path.join(folder, f"{n}.json")
        if os.path.exists(path):
            summaries[n] = read_json(path)
            if n != "claims":           # its settings are grids, shown in its own table
                out.append(settings_row(n, summaries[n]["settings"], summaries[n]))
    if not summaries:
        raise ValueError(f"report: no <figure>.json in {folder!r} (run `stsim figures --out "
                         f"{folder}` first)")
    if "claims" in summaries:
        c = summaries["claims"]
        out += ["", "### claims map", ""]
        if "cells" in c["measured"]:
            out.append(claims_markdown(c["settings"], c["measured"]))
        else:                       # written before verdicts existed: no labelled cells
            out.append("(claims.json predates the labelled verdicts: rerun the claims map)")
    for n, s in summaries.items():
        out += ["", f"### {n}", ""] + checks_table(s["checks"])
        if s.get("diverged"):
            out += ["", f"Runs that did not complete: {', '.join(s['diverged'])}."]
    return "\n".join(out)
