"""``stsim separation``: transformer vs fully-connected net, width needed against T, with
equal learning-rate tuning and the transformer's two-parameter family
(:mod:`stsim.studies.separation`)."""
from __future__ import annotations

from stsim.cli.common import FAM_HELP, add_contract_options, run_contract
from stsim.studies import separation

__all__ = ["add_arguments", "main"]

EPILOG = ("writes points.csv (one row per training run and budget), fits.json, summary.json,\n"
          "report.md, separation.png, agreement.png; the raw sweep tables (resumable), their\n"
          "journals and the run record run.json in raw/\n"
          "examples: stsim separation                 # about 20 s of CPU\n"
          "          stsim separation --full --out runs/separation\n"
          "          stsim separation --full --out docs/figures/separation --analyse-only")

HELP = {"qs": "subset sizes q of the trained arms", "d": "token dimension",
        "target": "a width passes when its median val loss <= target * d/(2q)",
        "targets": "targets of the family's width search (the main target is added)",
        "steps": "Adam steps of the common budget", "long_steps": "the FCN's second budget",
        "batch": "fresh samples per step", "n_val": "validation points",
        "seeds": "reported seeds per cell", "lrs": "the learning-rate grid of both arms",
        "lr_extra": "rates tuned past an end of lrs, one at a time, while the chosen rate "
                    "sits on that end (both arms)",
        "fcn_Ts": "T of the trained FCN", "tf_Ts": "T of the trained transformer",
        "long_Ts": "T at which the FCN also gets long_steps",
        "family_qs": "q of the family", "family_Ts": "T of the family",
        **FAM_HELP,
        "family_max_width": "largest d_e of the family search",
        "max_width_fcn": "largest FCN width", "long_max_width": "largest FCN width at long_steps",
        "fcn_span": "FCN widths up to fcn_span * T", "n_boot": "bootstrap resamples"}


def add_arguments(p) -> None:
    """Options of ``stsim separation``."""
    add_contract_options(p, separation, help=HELP)


def main(args) -> int:
    """Run the study and print the smallest width of every series point."""
    from stsim.cli.common import out_dir
    from stsim.studies.separation.outputs import width_text
    from stsim.util.verdict import summary_line
    res = run_contract(args, separation)
    for w in res["widths"]:
        print(f"q={w['q']} {w['series']:>10s} T={w['T']:>4d}: {width_text(w)}")
    for w in res["incomplete"]:
        print(f"q={w['q']} {w['series']:>10s} T={w['T']:>4d}: incomplete "
              f"(done {w['done']} of {w['designed']})")
    print(summary_line(res["checks"]))
    how = "analysed only" if res["analyse_only"] else "run and analysed"
    print(f"wall time {res['wall_time_s']:.1f}s ({how}), files in {out_dir(args)}")
    return res["exit_status"]
