"""``stsim attention``: which attention mechanisms learn sparse token selection, and at what
width (:mod:`stsim.studies.attention`)."""
from __future__ import annotations

from stsim.cli.common import FAM_HELP, add_contract_options, run_contract
from stsim.studies import attention

__all__ = ["add_arguments", "main"]

EPILOG = ("writes raw/tune.csv, raw/runs.csv, raw/rank.csv, raw/width.csv (a rerun with the\n"
          "same --out resumes) and raw/run.json, then attention.json (every check with se,\n"
          "critical, verdict), report.md, width.csv, rank.csv, temperature.csv, curves.csv,\n"
          "curves.png, width.png (--analyse-only: from raw/)\n"
          "examples: stsim attention                       # quick, T = 12\n"
          "          stsim attention --full --out docs/figures/attention")

HELP = {"T": "training length", "q": "subset size", "d": "token dimension",
        "seeds": "seeds per mechanism", "mechanisms": "names, rank=r (r <= d + d_e), "
        "tau=t (1e-100 <= t <= 1e100: tau^2 and 1/tau^2 scale the steps, and stay 1e108 "
        "inside float64's range)",
        "steps": "the budget: steps of every reported run", "batch": "batch size",
        "T_test": "out-of-distribution lengths", "target": "learns: loss <= target L(0)",
        "ood_target": "generalises: loss <= ood_target L(0)",
        "width_target": "width law: loss <= width_target L(0)",
        "width_T": "lengths of the width law", "taus": "temperatures of the reduced "
        "map (1e-100 ... 1e100, as tau=t)",
        "tau_T": "length of the reduced map (q < "
        "tau_T; 20 tau_T steps, within memory)",
        "tune_steps": "steps of a tuning run", "tune_mults": "multipliers of the base "
        "step tried per mechanism", "tune_base": "the base step: own (each mechanism's "
        "default) or paper (the paper model's for every one)", "rank_T": "lengths of the rank grid",
        "rank_q": "subset sizes of the rank grid", "rank_r": "ranks of the rank grid (each "
        "<= 2 max(rank_T), one <= 2 min(rank_T): d_e = 2T)",
        "rank_steps": "steps of a rank run (0: its default)",
        "width_mechs": "mechanisms of the width law",
        **FAM_HELP, "width_max": "largest d_e a family crossing is searched to (at most 8T)",
        "train_mechs": "mechanisms trained on the sphere against d_e",
        "train_T": "length of the trained width check",
        "train_widths": "d_e of the trained width check",
        "train_steps": "steps of a trained width run (0: its default)"}


def add_arguments(p) -> None:
    """Options of ``stsim attention``."""
    add_contract_options(p, attention, help=HELP)


def main(args) -> int:
    """Run the study and print the counts of its checks; each failed run on stderr, and
    then exit status 1 (else that of :func:`~stsim.cli.common.run_contract`)."""
    import sys

    res = run_contract(args, attention)
    print(f"{res['checks']} checks: {res['held']} held, {res['failed']} failed, "
          f"{res['inconclusive']} inconclusive; files in {res['out']}")
    errors = res.get("errors", [])
    if errors:
        print(f"stsim: error: {len(errors)} run(s) failed (the checks that needed them are "
              f"inconclusive; a rerun resumes): {'; '.join(errors[:3])}", file=sys.stderr)
    return max(res.get("exit_status", 0), 1 if errors else 0)
