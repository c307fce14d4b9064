"""Markdown tables of the settings and claim checks written by ``stsim figures``.

:func:`render` (command line: ``stsim figures --report DIR``) gives, for every
``<fig>.json`` in ``DIR``, the settings and a table ``claim | measured | target | met``;
``docs/reproduction.md`` quotes these tables, so the numbers in the report are the numbers
in the JSON files.
"""
from __future__ import annotations

import json
import os

from stsim.studies.figures import FIGURES

SETTING_KEYS = ("T", "q", "d", "d_e", "d_e_list", "sampler", "model", "query",
                "optimizer", "lr", "steps", "batch", "init", "init_scale", "seeds")


def settings_row(name, s, summary):
    """One markdown row of the settings table: ``name``, the values of ``SETTING_KEYS`` in
    the settings ``s`` (empty where absent) and the training time summed over the figure's
    runs in minutes (``summary["total_train_time_s"]``)."""
    cells = [name] + [str(s.get(k, "")) for k in SETTING_KEYS]
    cells.append(f"{summary['total_train_time_s'] / 60:.1f}")
    return "| " + " | ".join(cells) + " |"


def checks_table(summary) -> str:
    """Markdown table ``claim | measured | target | met`` of ``summary["checks"]`` (an
    unmet claim shows a bold **no**)."""
    lines = ["| claim | measured | target | met |", "|---|---|---|---|"]
    for c in summary["checks"]:
        lines.append(f"| {c['claim']} | {c['measured']:.4g} | {c['op']} {c['threshold']:.4g} | "
                     f"{'yes' if c['ok'] else '**no**'} |")
    return "\n".join(lines)


def render(folder) -> str:
    """Markdown report of the ``<fig>.json`` files in ``folder`` (figures without a file are
    skipped): one settings table (a row per figure, ``claims`` left out), the claims map's
    table if present, then each figure's checks table (:func:`checks_table`)."""
    out = ["| figure | " + " | ".join(SETTING_KEYS) + " | train time (min, summed over runs) |",
           "|" + "---|" * (len(SETTING_KEYS) + 2)]
    summaries = {}
    for n in FIGURES:
        path = os.path.join(folder, f"{n}.json")
        if os.path.exists(path):
            with open(path) as fh:
                summaries[n] = json.load(fh)
            if n != "claims":           # its settings are grids, shown in its own table
                out.append(settings_row(n, summaries[n]["settings"], summaries[n]))
    if "claims" in summaries:
        out += ["", "### claims map", "", summaries["claims"]["measured"]["table_markdown"]]
    for n, s in summaries.items():
        out += ["", f"### {n}", "", checks_table(s)]
    return "\n".join(out)

