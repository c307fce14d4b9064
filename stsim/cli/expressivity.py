"""``stsim expressivity``: explicit attention constructions and their width laws
(:mod:`stsim.studies.expressivity.study`)."""
from __future__ import annotations

from stsim.cli.common import add_study_arguments, logger, out_dir

__all__ = ["add_arguments", "main"]

EPILOG = ("every part writes <part>.csv, <part>.png and <part>.json as soon as it is done,\n"
          "then expressivity.json\n"
          "examples: stsim expressivity                    # seconds\n"
          "          stsim expressivity --full --only width,patterns --out DIR")


def add_arguments(p) -> None:
    """Options of ``stsim expressivity``."""
    from stsim.studies.expressivity.study import PARTS
    add_study_arguments(p, "expressivity", workers_help="accepted for the common convention; "
                        "this study runs in one process")
    g = p.add_argument_group("expressivity options")
    g.add_argument("--only", default=None, metavar="LIST",
                   help=f"comma-separated subset of {','.join(PARTS)} (default: all)")
    g.add_argument("--seed", type=int, default=0, help="root seed (default: 0)")


def main(args) -> int:
    """Run the selected parts; print the wall time of each."""
    from stsim.studies.expressivity.study import FULL, PARTS, QUICK, run_study
    only = [x.strip() for x in args.only.split(",")] if args.only else PARTS
    out = out_dir(args)
    res = run_study(QUICK if args.mode == "quick" else FULL, out, only=only, seed=args.seed,
                    log=logger(args, "[expressivity] "), mode=args.mode)
    times = res["wall_time_s"]
    print(f"expressivity: {', '.join(f'{k} {v:.1f}s' for k, v in times.items())} -> {out}")
    return 0
