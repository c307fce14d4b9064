"""``stsim figures``: the paper's Figures 1-5 and one beyond (:mod:`stsim.studies.figures`),
on the study contract (:func:`stsim.cli.common.run_contract`)."""
from __future__ import annotations

import argparse
import os

from stsim.cli.common import add_contract_options, run_contract
from stsim.studies import figures
from stsim.util.io import read_json

__all__ = ["add_arguments", "main"]

EPILOG = figures.EPILOG

_REMOVED = ("the runs of `stsim figures` live in OUT/runs, where a rerun with the same --out "
            "trains only what is missing (its journal); to redraw from them use --out OUT "
            "--analyse-only, to train afresh use a new --out")


#: the first and last line of ``stsim figures --quick``: what its scale decides and what
#: it does not
QUICK_SCOPE = ("quick scale (T = 20, two seeds, short runs) checks that every figure is drawn "
               "end to end; its [NOT] lines are expected and decide nothing about the paper's "
               "claims: stsim figures --full does (docs/reproduction.md)")


class _Removed(argparse.Action):
    """An option that no longer exists: refused with what replaces it."""

    def __call__(self, parser, namespace, values, option_string=None):
        parser.error(f"{option_string} was removed: {_REMOVED}")


def add_arguments(p) -> None:
    """Options of ``stsim figures``."""
    add_contract_options(p, figures, help=figures.HELP)
    g = p.add_argument_group("figure options")
    g.add_argument("--report", default=None, metavar="DIR",
                   help="only print the markdown tables of the <fig>.json files in DIR "
                        "(no training)")
    g.add_argument("--cache", nargs="?", action=_Removed, help=argparse.SUPPRESS)
    g.add_argument("--no-cache", nargs=0, action=_Removed, help=argparse.SUPPRESS)


def check_report_folder(folder) -> str:
    """``--report DIR`` checked before it is read: a folder holding at least one
    ``<fig>.json``, each of them JSON (``ValueError`` naming the folder or the file)."""
    from stsim.studies.figures import FIGURES
    if not os.path.isdir(folder):
        raise ValueError(f"--report {folder!r} is not a folder (give the --out of a run of "
                         f"stsim figures)")
    found = [os.path.join(folder, f"{n}.json") for n in FIGURES
             if os.path.exists(os.path.join(folder, f"{n}.json"))]
    if not found:
        raise ValueError(f"--report {folder!r} holds no figure summary "
                         f"({', '.join(f'{n}.json' for n in FIGURES)}): give the --out of a "
                         f"run of stsim figures")
    for path in found:
        if not isinstance(read_json(path, "figure summary"), dict):
            raise ValueError(f"figure summary {path!r} is not a JSON object")
    return folder


def main(args) -> int:
    """Run the selected figures (one sweep of their runs); print every figure's claim
    checks. Returns 1 if a figure could not be drawn (a run failed), else 0."""
    if args.report is not None:
        from stsim.studies.figures.tables import render
        print(render(check_report_folder(args.report)))
        return 0
    if args.mode == "quick":        # said before the [NOT] lines it explains, and after them
        print(QUICK_SCOPE, flush=True)
    res = run_contract(args, figures)
    for line in figures.console(res):
        print(line)
    trained = "" if res["analyse_only"] else f" ({res['n_trained']} trained now)"
    print(f"wall time {res['wall_time_s']:.1f}s, {res['n_runs']} runs{trained}, peak memory "
          f"per run {res['peak_rss_mb_max_run']} MB, files in {res['out']}")
    if args.mode == "quick":
        print(QUICK_SCOPE)
    return max(1 if res["missing"] else 0, res["exit_status"])
