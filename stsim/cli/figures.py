"""``stsim figures``: the paper's Figures 1-5 and one beyond (:mod:`stsim.studies.figures`)."""
from __future__ import annotations

import os

from stsim.cli.common import (add_study_arguments, logger, out_dir, parse_set, print_checks,
                              workers)

__all__ = ["add_arguments", "main"]

EPILOG = ("examples: stsim figures                      # all figures, small problem (seconds)\n"
          "          stsim figures --full --only fig2,fig4 --set fig2.lr=3\n"
          "          stsim figures --report docs/figures   # tables of a finished run")


def add_arguments(p) -> None:
    """Options of ``stsim figures``."""
    from stsim.studies.figures import FIGURES
    add_study_arguments(p, "figures")
    g = p.add_argument_group("figure options")
    g.add_argument("--only", default=None, metavar="LIST",
                   help=f"comma-separated subset of {','.join(FIGURES)} (default: all)")
    g.add_argument("--set", dest="set", action="append", default=[], metavar="FIG.KEY=VALUE",
                   help="override a setting of a figure, e.g. --set fig1.lr=2 "
                        "--set fig2.seeds=[0,1,2] (repeatable)")
    g.add_argument("--cache", default=None, metavar="DIR",
                   help="folder for per-run results (.npz, reused if the config matches; "
                        "default: OUT/runs)")
    g.add_argument("--no-cache", dest="no_cache", action="store_true",
                   help="always train; keep no per-run files")
    g.add_argument("--report", default=None, metavar="DIR",
                   help="only print the markdown tables of the <fig>.json files in DIR "
                        "(no training)")


def main(args) -> int:
    """Run the selected figures in one pool; print every figure's claim checks."""
    from stsim.studies.figures import resolve_all, run_figures
    if args.report:
        from stsim.studies.figures.report import render
        print(render(args.report))
        return 0
    only = [x.strip() for x in args.only.split(",")] if args.only else None
    settings = resolve_all(args.mode, parse_set(args.set), only)
    out = out_dir(args)
    cache = None if args.no_cache else (args.cache or os.path.join(out, "runs"))
    res = run_figures(settings, out, workers=workers(args), cache=cache, log=logger(args),
                      mode=args.mode)
    for summary in res["summaries"].values():
        print_checks(summary)
    print(f"wall time {res['wall_time_s']:.1f}s, {res['n_runs']} runs, peak memory per run "
          f"{res['peak_rss_mb_max_run']} MB, files in {out}")
    return 0
