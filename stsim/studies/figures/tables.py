"""Markdown tables of the settings and claim checks written by ``stsim figures``.

:func:`render` (command line: ``stsim figures --report DIR``) gives, for every
``<fig>.json`` in ``DIR``, the settings and a table ``claim | measured | SE | target |
critical | verdict (margin)``;
``docs/reproduction.md`` quotes these tables, so the numbers in the report are the numbers
in the JSON files.
"""
from __future__ import annotations

import os

import numpy as np

from stsim.studies.figures.common import FIGURES
from stsim.util.io import read_json

SETTING_KEYS = ("T", "q", "d", "d_e", "d_e_list", "sampler", "model", "query",
                "optimizer", "lr", "steps", "batch", "init", "init_scale", "seeds")


def settings_row(name, s, summary):
    """One markdown row of the settings table: ``name``, the values of ``SETTING_KEYS`` in
    the settings ``s`` (empty where absent) and the training time summed over the figure's
    runs in minutes (``summary["total_train_time_s"]``)."""
    cells = [name] + [str(s.get(k, "")) for k in SETTING_KEYS]
    cells.append(f"{summary['total_train_time_s'] / 60:.1f}")
    return "| " + " | ".join(cells) + " |"


def verdict_text(c) -> str:
    """The verdict of a check as the tables show it: **held** / **failed** /
    inconclusive, with its margin in standard errors, and the stability label."""
    m = c.get("margin_se")
    margin = f" ({m:+.1f} SE)" if m is not None and np.isfinite(m) else ""
    if c.get("stability", "stable") != "stable":
        return f"unstable → inconclusive{margin}"
    if c.get("unmeasured"):
        return "unmeasured (diverged) → inconclusive"
    if "verdict" not in c:          # written before verdicts existed: no standard error
        return f"{'met' if c.get('ok') else 'not met'} (no SE recorded)"
    v = c["verdict"]
    return (f"**{v}**" if v in ("held", "failed") else v) + margin


def checks_table(summary) -> str:
    """Markdown table ``claim | measured | SE | target | critical | verdict (margin)`` of
    ``summary["checks"]`` (:func:`verdict_text`; critical: the check's critical value,
    "exact" for se = 0)."""
    lines = ["| claim | measured | SE | target | critical | verdict (margin) |",
             "|---|---|---|---|---|---|"]
    for c in summary["checks"]:
        se = c.get("se", float("nan"))
        k = c.get("critical")
        crit = "" if k is None else ("exact" if k == 0 else f"{k:.2f}")
        lines.append(f"| {c['claim']} | {c['measured']:.4g} | {se:.2g} | {c['op']} "
                     f"{c['threshold']:.4g} | {crit} | {verdict_text(c)} |")
    return "\n".join(lines)


def render(folder) -> str:
    """Markdown report of the ``<fig>.json`` files in ``folder`` (figures without a file are
    skipped): one settings table (a row per figure, ``claims`` left out), the claims map's
    table if present, then each figure's checks table (:func:`checks_table`);
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
        out += ["", f"### {n}", "", checks_table(s)]
        if s.get("diverged"):
            out += ["", f"Runs that did not complete: {', '.join(s['diverged'])}."]
    return "\n".join(out)
