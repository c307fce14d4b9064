"""Judge the checks of a finished ``stsim figures`` run again with the small-sample
verdicts of :mod:`.verdicts` (:func:`~.verdicts.rejudge`), from the numbers its JSON files
hold: ``python -m stsim.studies.figures.rejudge DIR`` rewrites the checks of every
``<fig>.json``, the claims map's cells (and its ``claims.png``, ``claims_map.csv``,
``claims.md``) and ``figures.json`` in ``DIR``, and prints each verdict that changed.

The re-judged SE is the stored bootstrap SE times ``√(S/(S−1))``, which is what
:func:`~.verdicts.boot_check` now computes from the same (seeded, reproducible) bootstrap
replicates, so re-judging equals re-running the analysis."""
from __future__ import annotations

import json
import os
import sys

from stsim.studies.figures import FIGURES
from stsim.studies.figures.verdicts import rejudge, verdict_counts
from stsim.util.io import write_json

__all__ = ["rejudge_folder", "main"]


#: the evaluation's stopping rule: every set stops once its SE <= rel_se of its mean
#: (``.evaluate.EVALUATE``; none of the committed sets reached n_max), so rel_se x mean
#: bounds each run's SE — a conservative SE where the per-run one was not stored
def _systematic(name, summary) -> list:
    """The systematic-misfit checks (:func:`.fig2.systematic_check`) of a summary written
    before they existed, from its per-seed agreement rows; each seed's SE bounded by
    ``rel_se`` times its measured value where the rows do not hold it."""
    from stsim.studies.figures.evaluate import EVALUATE
    from stsim.studies.figures.fig2 import systematic_check
    have = {c["claim"] for c in summary["checks"]}
    out = []
    tag = "Adam: " if name == "fig5" else ""
    for key, row in summary.get("measured", {}).items():
        rows = row.get("onehot_exact_agreement") if isinstance(row, dict) else None
        if not rows or not key.startswith("val/T="):
            continue
        bound = "se" not in rows[0]
        rows = [dict(r, se=r.get("se", EVALUATE["rel_se"] * r["measured"])) for r in rows]
        c = systematic_check(rows, int(key.split("=")[1]), tag,
                             "each seed's SE bounded by the evaluation's stopping rule (SE <= "
                             f"{EVALUATE['rel_se']:g} x mean): a conservative SE" if bound
                             else "")
        if c["claim"] not in have:
            out.append(c)
    return out


def _tails(name, summary, folder) -> list:
    """Fig. 4's S5 tail checks (:func:`.fig4.tail_check`) of a summary written before
    them, from the validation curves of its ``<fig>.csv``."""
    if name != "fig4" or not os.path.exists(os.path.join(folder, "fig4.csv")):
        return []
    import csv
    from stsim.studies.figures.fig4 import tail_check
    from stsim.studies.figures.ood import pe_label
    with open(os.path.join(folder, "fig4.csv")) as fh:
        rows = list(csv.DictReader(fh))
    T_test = summary["settings"]["T_test"]
    runs = {}
    for r in rows:
        runs.setdefault(r["run"], []).append([float(r[f"val/T={t}"]) for t in T_test])
    have = {c["claim"] for c in summary["checks"]}
    out = []
    for pe in ["onehot"] + [f"near{k}" for k in summary["settings"].get("near_d_e", [])]:
        names = sorted(n for n in runs if n.startswith(f"ood/theory-sum-sgd-{pe}-s"))
        if not names:
            continue
        c = tail_check(pe_label(pe), [runs[n] for n in names])
        c["runs"] = names
        if c["claim"] not in have:
            out.append(c)
    return out


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
        new = [rejudge(c) for c in summary["checks"]] + _systematic(n, summary) + \
            _tails(n, summary, folder)
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
