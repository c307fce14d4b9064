"""The one command line of every study (:mod:`stsim.studies.contract`): ``stsim <study>``.

Its options come from the study itself — one ``--key VALUE`` per preset setting with the
help written beside the preset (the study's ``HELP``), the common options and ``--set``
(:func:`stsim.cli.common.add_contract_options`) — and its epilog is the study's
``EPILOG``. A run (:func:`stsim.cli.common.run_contract`, every check before any work)
prints the study's own lines (``console(summary)``), then the counts of its checks
(:func:`stsim.util.verdict.summary_line`), the wall time and where the files are; each run
that raised an error on stderr. Exit status 1 when a run raised or a result could not be
measured because runs diverged, else 0.
"""
from __future__ import annotations

import importlib
import sys

from stsim.cli.common import add_contract_options, out_dir, run_contract
from stsim.util.verdict import summary_line

__all__ = ["STUDIES", "study_of", "add_arguments", "main"]

#: the study commands built here: ``stsim <name>`` runs ``stsim.studies.<name>``
STUDIES = ("separation", "expressivity", "sparse", "attention", "targets", "text")


def study_of(name: str):
    """The study module of ``stsim <name>``."""
    return importlib.import_module(f"stsim.studies.{name}")


def add_arguments(p, study) -> None:
    """The options of ``stsim <study>``: its presets' settings with their help."""
    add_contract_options(p, study, help=study.HELP,
                         workers_help=getattr(study, "WORKERS_HELP", None))


def main(args, study) -> int:
    """Run the study; print its lines, the counts of its checks, the time and the folder;
    each failed run on stderr. Returns the exit status (module docstring)."""
    res = run_contract(args, study)
    for line in study.console(res):
        print(line)
    how = " (analysed only)" if res.get("analyse_only") else ""
    print(f"{summary_line(res['checks'])}; wall time {res['wall_time_s']:.1f}s{how}, "
          f"files in {out_dir(args)}")
    errors = res.get("errors") or []
    if errors:
        print(f"stsim: error: {len(errors)} run(s) failed (the checks that needed them are "
              f"inconclusive; a rerun resumes): {'; '.join(map(str, errors[:3]))}",
              file=sys.stderr)
    return max(res.get("exit_status", 0), 1 if errors else 0)
