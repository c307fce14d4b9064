"""``stsim targets``: does one attention layer represent, learn and generalise in length the
mean, Hermite moments and the variance of the selected tokens (:mod:`stsim.studies.targets`)."""
from __future__ import annotations

from stsim.cli.common import FAM_HELP, add_contract_options, out_dir, run_contract
from stsim.studies import targets

__all__ = ["add_arguments", "main"]

EPILOG = ("writes raw/represents.csv, raw/tune.csv, raw/runs.csv, raw/family_width.csv,\n"
          "raw/family_equal.csv, raw/fcn_tune.csv, raw/fcn_runs.csv (a rerun with the same\n"
          "--out resumes) and raw/run.json, then targets.json (every check with se,\n"
          "critical, verdict), report.md, represents.png/.csv, learns.png with curves.csv,\n"
          "length.png/.csv, widths.png/.csv (--analyse-only: from raw/)\n"
          "examples: stsim targets                       # quick, T = 20\n"
          "          stsim targets --full --out docs/figures/targets")

HELP = {"targets": "targets: mean, moment:k, variance", "T": "training length",
        "q": "subset size", "d": "token dimension", "batch": "batch size",
        "mults": "multipliers of each target's default step tried on the tuning seed",
        "ratio": "learns: final val <= ratio L(0)", "rep_T": "length of the constructions",
        "n_batches": "batches of 256 on which a construction is evaluated",
        "floor_tol": "the variance's linear fit within floor_tol of its floor",
        "steps": "steps of every run (0: the plan's default)", "seeds": "seeds per target",
        "T_test": "lengths of evaluation (<= 2T)",
        "n_fit": "samples of the variance's least-squares fit (and as many held out)",
        "width_d": "token dimension of the width parts", "reach": "widths reach reach L(0)",
        "fam_Ts": "T of the family's crossings", **FAM_HELP,
        "eq_Ts": "T where a separable target's family loss is compared with the mean's",
        "eq_n": "samples of that comparison", "eq_tol": "its tolerance on L/L(0)",
        "slope_tol": "the variance's family width like the mean's: |exponent| <= slope_tol",
        "fcn_Ts": "T of the trained FCN", "fcn_steps": "Adam steps of an FCN run",
        "fcn_batch": "FCN batch", "fcn_n_val": "FCN validation points",
        "fcn_seeds": "FCN seeds per cell", "fcn_lrs": "FCN rates tuned (separation's rule)",
        "fcn_lr_extra": "rates added past an end", "fcn_span": "FCN widths T/2 .. span T",
        "fcn_max_width": "largest FCN width", "n_boot": "bootstrap resamples of a width"}


def add_arguments(p) -> None:
    """Options of ``stsim targets``."""
    add_contract_options(p, targets, help=HELP)


def main(args) -> int:
    """Run the study and print its side-by-side table and the counts of its checks."""
    from stsim.studies.targets.outputs import PARTS, table
    res = run_contract(args, targets)
    for row in table(res["config"], res):
        print(" | ".join(row))
    vs = [c["verdict"] for p in PARTS for t in res[p] for c in res[p][t]]
    print(f"{len(vs)} checks: {vs.count('held')} held, {vs.count('failed')} failed, "
          f"{vs.count('inconclusive')} inconclusive; wall time {res['wall_time_s']:.0f}s, "
          f"files in {out_dir(args)}")
    return res["exit_status"]
