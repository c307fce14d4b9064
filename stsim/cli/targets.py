"""``stsim targets``: does one attention layer represent, learn and generalise in length the
mean, Hermite moments and the variance of the selected tokens (:mod:`stsim.studies.targets`)."""
from __future__ import annotations

from stsim.cli.common import add_contract_options, out_dir, run_contract
from stsim.studies import targets

__all__ = ["add_arguments", "main"]

EPILOG = ("writes raw/represents.csv, raw/tune.csv, raw/runs.csv (a rerun with the same --out\n"
          "resumes) and raw/run.json, then targets.json (every check with se, critical,\n"
          "verdict), report.md, represents.png/.csv, learns.png with curves.csv,\n"
          "length.png/.csv (--analyse-only: from raw/)\n"
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
        "n_fit": "samples of the variance's least-squares fit (and as many held out)"}


def add_arguments(p) -> None:
    """Options of ``stsim targets``."""
    add_contract_options(p, targets, help=HELP)


def main(args) -> int:
    """Run the study and print its side-by-side table and the counts of its checks."""
    from stsim.studies.targets.outputs import table
    res = run_contract(args, targets)
    for row in table(res["config"], res):
        print(" | ".join(row))
    vs = [c["verdict"] for p in ("represents", "learns", "length") for t in res[p]
          for c in res[p][t]]
    print(f"{len(vs)} checks: {vs.count('held')} held, {vs.count('failed')} failed, "
          f"{vs.count('inconclusive')} inconclusive; wall time {res['wall_time_s']:.0f}s, "
          f"files in {out_dir(args)}")
    return res["exit_status"]
