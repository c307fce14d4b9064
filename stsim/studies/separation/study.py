r"""Transformer vs fully-connected net: width needed to learn STS_q as T grows.

For each ``q``, against the same loss level ``level · L0`` (``L0 = d/(2q)``): the smallest
width of both arms trained with equal tuning (:func:`~stsim.studies.separation.runs.run`),
the transformer's family (:mod:`stsim.theory.family`) and the FCN's construction ``2Td``
(:func:`stsim.baselines.fcn.fcn_construction`); each smallest width is a grid cell with a
paired bootstrap over seeds, its growth laws interval-censored fits
(:func:`stsim.util.stats.compare_growth` with ``lower=``). Every rule, with the parameter
counts: docs/separation.md, "Design".

The study follows :mod:`stsim.studies.contract`: ``PRESETS`` (``QUICK`` / ``FULL``),
:func:`check` and the design (:mod:`~stsim.studies.separation.design`), :func:`run`
(:mod:`~stsim.studies.separation.runs`; raw tables, their journals and the run record
``run.json`` in ``<out>/raw/``), :func:`analyse` (:mod:`~stsim.studies.separation.analysis`,
from the raw tables alone; diverged runs: :mod:`~stsim.studies.separation.divergence`) and
:func:`report` (:mod:`~stsim.studies.separation.outputs`). The command line is
:mod:`stsim.cli.study` (``stsim separation``).
"""
from __future__ import annotations

from stsim.studies.separation.analysis import analyse
from stsim.studies.separation.design import (EPILOG, FULL, HELP, QUICK, cells, check,
                                             tf_params, train_point, width_grid)
from stsim.studies.separation.outputs import (console, markdown_report, plot_agreement,
                                              plot_separation, report, width_text)
from stsim.studies.separation.runs import run

__all__ = ["NAME", "PRESETS", "HELP", "EPILOG", "check", "run", "analyse", "report", "console",
           "QUICK", "FULL", "train_point", "width_grid", "tf_params", "cells", "plot_separation",
           "plot_agreement", "markdown_report", "width_text"]

NAME = "separation"
# the presets of the contract; ``mode`` (reserved by the contract) names the preset in the outputs
PRESETS = {"quick": dict(QUICK, mode="quick"), "full": dict(FULL, mode="full")}
