"""``stsim attention``: which attention mechanisms learn sparse token selection, and at what
width (:mod:`stsim.studies.attention`)."""
from __future__ import annotations

from stsim.cli.common import add_contract_options, run_contract

__all__ = ["add_arguments", "main"]

EPILOG = ("writes raw/runs.csv (a rerun with the same --out resumes) and raw/run.json, then\n"
          "attention.json (every check with se, critical, verdict), report.md, width.csv,\n"
          "temperature.csv, curves.csv, curves.png, width.png (--analyse-only: from raw/)\n"
          "examples: stsim attention                       # quick, T = 12\n"
          "          stsim attention --full --out docs/figures/attention")

HELP = {"T": "training length", "q": "subset size", "d": "token dimension",
        "seeds": "seeds per mechanism", "mechanisms": "names, rank=r, tau=t",
        "steps": "steps per run (0: the default schedule)", "batch": "batch size",
        "T_test": "out-of-distribution lengths", "target": "learns: loss <= target L(0)",
        "ood_target": "generalises: loss <= ood_target L(0)",
        "width_target": "width law: loss <= width_target L(0)",
        "width_T": "lengths of the width law", "taus": "temperatures of the reduced map",
        "tau_T": "length of the reduced map"}


def add_arguments(p) -> None:
    """Options of ``stsim attention``."""
    from stsim.studies import attention
    add_contract_options(p, attention, help=HELP)


def main(args) -> int:
    """Run the study and print every check."""
    from stsim.studies import attention
    res = run_contract(args, attention)
    print(f"{res['checks']} checks: {res['held']} held, {res['failed']} failed, "
          f"{res['inconclusive']} inconclusive; files in {res['out']}")
    return res.get("exit_status", 0)
