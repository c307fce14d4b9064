"""``stsim expressivity``: explicit attention constructions and their width laws
(:mod:`stsim.studies.expressivity`)."""
from __future__ import annotations

from stsim.cli.common import add_contract_options, run_contract
from stsim.studies import expressivity

__all__ = ["add_arguments", "main"]

EPILOG = ("every part sweeps its points into raw/<table>.csv (resumable; --workers N runs\n"
          "them on N processes), then writes <part>.csv, <part>.png and <part>.json, and\n"
          "expressivity.json; part settings: --set width.eps=0.05 (dotted keys)\n"
          "examples: stsim expressivity                    # seconds\n"
          "          stsim expressivity --full --only width,patterns --out DIR\n"
          "          stsim expressivity --full --out DIR --analyse-only")

HELP = {"seed": "root seed of every part", "only": "the parts to run, a comma list"}


def add_arguments(p) -> None:
    """Options of ``stsim expressivity``."""
    add_contract_options(p, expressivity, help=HELP,
                         workers_help="worker processes for the points of each part, one "
                                      "BLAS thread each (default: 2); 0 or 1 runs in this "
                                      "process")


def main(args) -> int:
    """Run the selected parts; print the wall time of each and where the files are."""
    from stsim.cli.common import out_dir
    from stsim.util.verdict import summary_line
    res = run_contract(args, expressivity)
    times = ", ".join(f"{k} {v:.1f}s" if v is not None else f"{k} (no run record)"
                      for k, v in res["part_wall_time_s"].items())
    how = " (analysed only; the parts' times are their runs')" if res["analyse_only"] else ""
    print(f"expressivity{how}: {times} -> {out_dir(args)}")
    for name in res["incomplete"]:
        print(f"  {name}: incomplete (points missing from {out_dir(args)}/raw)")
    print(summary_line(res["checks"]))
    print(f"wall time {res['wall_time_s']:.1f}s")
    return res["exit_status"]
