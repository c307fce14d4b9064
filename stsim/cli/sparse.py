"""``stsim sparse``: sample complexity of sparse Boolean functions against T, one
attention head vs an FCN (:mod:`stsim.studies.sparse`)."""
from __future__ import annotations

from stsim.cli.common import add_contract_options, run_contract
from stsim.studies import sparse

__all__ = ["add_arguments", "main"]

EPILOG = ("writes trials.csv (a rerun with the same --out resumes) and the run record\n"
          "run.json, then mstar.csv, fits.json, report.md, summary.json, sparse_heatmap.png\n"
          "and sparse_mstar.png (--analyse-only: from trials.csv alone)\n"
          "examples: stsim sparse                                   # seconds\n"
          "          stsim sparse --full --out runs/sparse\n"
          "          stsim sparse --fns table:3 --table 01101001      # any truth table")

HELP = {"Ts": "sequence lengths T", "m_min": "smallest training-set size",
        "m_max": "largest training-set size", "ratio": "ratio of the m grid",
        "fns": "functions with s, e.g. and:3,majority:3,parity:2 (table:3 with --table)",
        "models": "comma list of attention, fcn", "seeds": "trials per cell",
        "threshold": "success = test accuracy >= threshold",
        "target": "m* = smallest m with success probability >= target",
        "stop_after": "retire a series after this many levels at target (0: run every cell)",
        "max_steps": "full-batch Adam steps per trial", "lr": "learning rate",
        "weight_decay": "weight decay", "max_norm": "norm bound of a block",
        "d_v": "value width of the head", "hidden": "FCN hidden width",
        "n_test": "fresh test samples per trial",
        "topup": "trials per cell where the rate on the first --seeds trials is in "
                 "--topup_range (0: no top-up)", "pos": "position code: onehot | learned",
        "restarts": "initialisations per trial; keep the fit of smallest norm",
        "table": "truth table for fns table:s, first bit most significant, e.g. 01101001",
        "topup_range": "ladder success rates whose cells are topped up"}


def add_arguments(p) -> None:
    """Options of ``stsim sparse``."""
    add_contract_options(p, sparse, help=HELP)


def main(args) -> int:
    """Run the study and print m* for every (function, model, T) and the fits."""
    from stsim.cli.common import out_dir
    from stsim.studies.sparse.outputs import format_fit
    from stsim.util.verdict import summary_line
    res = run_contract(args, sparse)
    for r in res["mstar"]:
        ms = (f">{r['m_max']}" if r["censored"] == "above" else
              f"<={r['m_star']:.0f}" if r["censored"] == "below" else f"{r['m_star']:.0f}")
        print(f"{r['fn']:>8s} s={r['s']} {r['model']:>9s} T={r['T']:>4d}: m* {ms}")
    for key, e in res["fits"].items():
        print(f"{key}: log2T fit {format_fit(e['log_T'], 'log_T')}; "
              f"T fit {format_fit(e['linear_T'], 'linear_T')}")
    print(summary_line(res["checks"]))
    done = ("analysed only" if res["analyse_only"] or "n_run" not in res
            else f"{res['n_run']} trials run")
    print(f"wall time {res['wall_time_s']:.1f}s, {done}, {res['n_trials']} trials in the "
          f"table, files in {out_dir(args)}")
    return res["exit_status"]
