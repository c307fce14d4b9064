"""Judge the checks of a finished ``stsim figures`` run again with the one verdict
(:mod:`stsim.util.verdict`, through :func:`.verdicts.rejudge`) from the numbers its JSON
files hold: ``python -m stsim.studies.figures.rejudge DIR`` rewrites the checks of every
``<fig>.json``, the claims map's cells (and its ``claims.png``, ``claims_map.csv``,
``claims.md``) and ``figures.json`` in ``DIR``, and prints each verdict that changed."""
from __future__ import annotations

import os
import sys

from stsim.studies.figures.common import FIGURES
from stsim.studies.figures.verdicts import rejudge, verdict_counts
from stsim.util.io import read_json, write_json

__all__ = ["rejudge_folder", "main"]


def rejudge_folder(folder) -> list:
    """Rewrite the checks in ``folder`` (module docstring); return the changes as
    ``[(figure, claim, old verdict, new verdict, margin, critical)]``."""
    changes, figs = [], {}

    def judged(checks, where):
        new = [rejudge(c) for c in checks]
        changes.extend((where(c), c["claim"], o["verdict"], c["verdict"], c["margin_se"],
                        c["critical"]) for o, c in zip(checks, new)
                       if o["verdict"] != c["verdict"])
        return new

    for n in FIGURES:
        path = os.path.join(folder, f"{n}.json")
        if not os.path.exists(path):
            continue
        summary = read_json(path)
        summary["checks"] = figs[n] = judged(summary["checks"], lambda c: n)
        cells = summary.get("measured", {}).get("cells")
        if isinstance(cells, list):
            summary["measured"]["cells"] = judged(cells,
                                                  lambda c: f"{n} map {c.get('column', '')}")
            from stsim.studies.figures.claims import draw       # claims.png, _map.csv, .md
            draw(summary["settings"], None, summary["measured"], folder)
        write_json(path, summary)
    path = os.path.join(folder, "figures.json")
    if os.path.exists(path) and figs:
        overview = read_json(path)
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
