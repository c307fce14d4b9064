"""``stsim separation``: transformer vs fully-connected net, width needed against T, with
equal learning-rate tuning and the transformer's two-parameter family
(:mod:`stsim.studies.separation.study`)."""
from __future__ import annotations

from stsim.cli.common import (add_preset_options, add_study_arguments, logger, out_dir,
                              preset_from_args, workers)

__all__ = ["add_arguments", "main"]

EPILOG = ("writes points.csv (one row per training run and budget), fits.json, summary.json,\n"
          "report.md, separation.png, agreement.png; raw sweep tables (resumable) beside them\n"
          "examples: stsim separation                 # about 20 s of CPU\n"
          "          stsim separation --full --out runs/separation\n"
          "          stsim separation --full --out runs/separation --analyse-only")

HELP = {"qs": "subset sizes q of the trained arms", "d": "token dimension",
        "target": "a width passes when its median val loss <= target * d/(2q)",
        "targets": "targets of the family's width search (the main target is added)",
        "steps": "Adam steps of the common budget", "long_steps": "the FCN's second budget",
        "batch": "fresh samples per step", "n_val": "validation points",
        "seeds": "reported seeds per cell", "lrs": "the learning-rate grid of both arms",
        "fcn_Ts": "T of the trained FCN", "tf_Ts": "T of the trained transformer",
        "long_Ts": "T at which the FCN also gets long_steps",
        "family_qs": "q of the family", "family_Ts": "T of the family",
        "mc_seeds": "Monte-Carlo replicates of the family",
        "mc_budget": "family samples x T per evaluation", "n_mc_max": "cap on family samples",
        "family_max_width": "largest d_e of the family search",
        "max_width_fcn": "largest FCN width", "long_max_width": "largest FCN width at long_steps",
        "fcn_span": "FCN widths up to fcn_span * T", "n_boot": "bootstrap resamples"}

FLOAT_LISTS = ("lrs", "targets")


def _floats(text):
    return tuple(float(v) for v in text.split(",") if v.strip())


def add_arguments(p) -> None:
    """Options of ``stsim separation``."""
    from stsim.studies.separation.study import FULL, QUICK
    add_study_arguments(p, "separation")
    drop = lambda d: {k: v for k, v in d.items() if k not in FLOAT_LISTS}
    add_preset_options(p, drop(QUICK), drop(FULL), help=HELP,
                       extra=[(k, _floats, f"{HELP[k]}, comma list (default: quick "
                               f"{','.join(map(str, QUICK[k]))}, full "
                               f"{','.join(map(str, FULL[k]))})") for k in FLOAT_LISTS])
    p.add_argument("--analyse-only", "--analyse_only", dest="analyse_only", action="store_true",
                   help="train nothing: analyse the runs already in --out (a partial or "
                        "interrupted run) and write the files")


def main(args) -> int:
    """Run the study and print the smallest width of every series point."""
    from stsim.studies.separation.study import FULL, QUICK, run_study, width_text
    cfg = preset_from_args(args, QUICK, FULL, extra=FLOAT_LISTS)
    out = out_dir(args)
    res = run_study(cfg, out, workers=workers(args), log=logger(args, "[separation] "),
                    mode=args.mode, analyse_only=args.analyse_only)
    for w in res["widths"]:
        print(f"q={w['q']} {w['series']:>10s} T={w['T']:>4d}: {width_text(w)}")
    for w in res["incomplete"]:
        print(f"q={w['q']} {w['series']:>10s} T={w['T']:>4d}: incomplete "
              f"(done {w['done']} of {w['designed']})")
    print(f"wall time {res['wall_time_s']:.1f}s, files in {out}")
    return 0
