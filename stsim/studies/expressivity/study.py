r"""Expressivity experiments: explicit attention constructions and their width laws.

``stsim expressivity [--quick|--full] [--only a,b] [--workers N] --out DIR`` runs six
parts (:mod:`~stsim.studies.expressivity.parts`; what each measures: its module, and
docs/expressivity.md): ``curves``, ``width``, ``seq2seq``, ``trained``, ``patterns``,
``jl``. The constructions are in :mod:`~stsim.studies.expressivity.qsa` and
:mod:`~stsim.studies.expressivity.patterns`.

The study follows :mod:`stsim.studies.contract`, in four rooms: the presets, ``HELP``,
``EPILOG`` and :func:`check` in :mod:`~stsim.studies.expressivity.design`, :func:`run` in
:mod:`~stsim.studies.expressivity.runs`, :func:`analyse` in
:mod:`~stsim.studies.expressivity.analysis`, :func:`report` and :func:`console` in
:mod:`~stsim.studies.expressivity.outputs`. The command line is :mod:`stsim.cli.study`
(``stsim expressivity``).
"""
from __future__ import annotations

from stsim.studies.expressivity.analysis import analyse
from stsim.studies.expressivity.design import (EPILOG, FULL, HELP, PARTS, QUICK, WORKERS_HELP,
                                               check, part_module)
from stsim.studies.expressivity.outputs import console, report, write_overview
from stsim.studies.expressivity.parts.patterns import predicted_d, search_pattern_dim
from stsim.studies.expressivity.parts.width import predicted_m, search_width
from stsim.studies.expressivity.runs import run

__all__ = ["NAME", "PRESETS", "PARTS", "QUICK", "FULL", "check", "run", "analyse", "report",
           "predicted_m", "predicted_d", "search_width", "search_pattern_dim", "part_module",
           "write_overview", "HELP", "EPILOG", "WORKERS_HELP", "console"]

NAME = "expressivity"

# the presets of the contract: one dict per part, the root seed, the parts to run
# (``--only``); ``mode`` (reserved by the contract) names the preset in the outputs
PRESETS = {"quick": dict(QUICK, seed=0, only=PARTS, mode="quick"),
           "full": dict(FULL, seed=0, only=PARTS, mode="full")}
