"""``stsim separation``: transformer vs fully-connected net, width needed against T
(:mod:`stsim.studies.separation.study`)."""
from __future__ import annotations

from stsim.cli.common import (add_preset_options, add_study_arguments, logger, out_dir,
                              preset_from_args, workers)

__all__ = ["add_arguments", "main"]

EPILOG = ("writes points.csv (one row per training run; a rerun with the same --out resumes),\n"
          "searches.csv, fits.json, report.md, summary.json and separation.png\n"
          "examples: stsim separation                 # seconds\n"
          "          stsim separation --full --out runs/separation")

HELP = {"Ts": "sequence lengths T", "ds": "token dimensions d", "q": "subset size",
        "steps": "Adam steps per run", "batch": "fresh samples per step",
        "seeds": "replicates per width", "lr_fcn": "FCN learning rate",
        "lr_tf": "transformer learning rate",
        "target": "pass when median final val loss <= target * d/(2q)",
        "n_val": "validation points", "max_width_fcn": "largest FCN width searched",
        "max_width_tf": "largest transformer d_e searched"}


def add_arguments(p) -> None:
    """Options of ``stsim separation``."""
    from stsim.studies.separation.study import FULL, QUICK
    add_study_arguments(p, "separation")
    add_preset_options(p, QUICK, FULL, help=HELP)


def main(args) -> int:
    """Run the experiment and print the width found for every (arch, d, T)."""
    from stsim.studies.separation.study import FULL, QUICK, run_study
    cfg = preset_from_args(args, QUICK, FULL)
    out = out_dir(args)
    res = run_study(cfg, out, workers=workers(args), log=logger(args, "[separation] "),
                    mode=args.mode)
    for s in res["searches"]:
        w = f">{s['max_width']}" if s["censored"] else s["width"]
        print(f"{s['arch']:>12s} d={s['d']} T={s['T']:>4d}: {w}")
    print(f"wall time {res['wall_time_s']:.1f}s, {res['n_runs']} runs, files in {out}")
    return 0
