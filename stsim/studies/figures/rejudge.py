"""Judge the checks of a finished ``stsim figures`` run again with the one verdict
(:mod:`stsim.util.verdict`, through :func:`.verdicts.rejudge`) from the numbers its JSON
files hold: ``python -m stsim.studies.figures.rejudge DIR`` rewrites the checks of every
``<fig>.json``, the claims map's cells (and its ``claims.png``, ``claims_map.csv``,
``claims.md``) and ``figures.json`` in ``DIR``, and prints each verdict that changed."""
from __future__ import annotations

import json
import os
import sys

from stsim.studies.figures import FIGURES
from stsim.studies.figures.verdicts import rejudge, verdict_counts
from stsim.util.io import write_json

__all__ = ["rejudge_folder", "main"]


def rejudge_folder(folder) -> list:
    """Rewrite the checks in ``folder`` (module docstring); return the changes as
    ``[(figure, claim, old verdict, new verdict, margin, critical)]``."""
    changes, figs = [], {}
    for n in FIGURES:
        path = os.path.join(folder, f"{n}.json")
        if not os.path.exists(path):
            continue
        with open(path) as fh:
            summary = json.load(fh)
        new = [rejudge(c) for c in summary["checks"]]
        for o, c in zip(summary["checks"], new):
            if o["verdict"] != c["verdict"]:
                changes.append((n, c["claim"], o["verdict"], c["verdict"], c["margin_se"],
                                c["critical"]))
        summary["checks"] = figs[n] = new
        cells = summary.get("measured", {}).get("cells")
        if isinstance(cells, list):
            new_cells = [rejudge(c) for c in cells]
            for o, c in zip(cells, new_cells):
                if o["verdict"] != c["verdict"]:
                    changes.append((f"{n} map {c.get('column', '')}", c["claim"],
                                    o["verdict"], c["verdict"], c["margin_se"], c["critical"]))
            summary["measured"]["cells"] = new_cells
            from stsim.studies.figures.claims import draw       # claims.png, _map.csv, .md
            draw(summary["settings"], None, summary["measured"], folder)
        write_json(path, summary)
    path = os.path.join(folder, "figures.json")
    if os.path.exists(path) and figs:
        with open(path) as fh:
            overview = json.load(fh)
        overview["checks"] = {n: figs.get(n, c) for n, c in overview["checks"].items()}
        overview["verdicts"] = verdict_counts(c for cs in overview["checks"].values()
                                              for c in cs)
        write_json(path, overview)
    return changes


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or not os.path.isdir(argv[0]):
        print("usage: python -m stsim.studies.figures.rejudge DIR", file=sys.stderr)
        return 2
    for fig, claim, old, new, m, k in rejudge_folder(argv[0]):
        print(f"{fig}: {claim}: {old} -> {new} (margin {m:+.2f} SE, critical {k:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
