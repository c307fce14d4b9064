r"""Transformer vs fully-connected net: width needed to learn STS_q as T grows.

The paper's claim: a one-layer transformer learns STS_q with width ``O(d + q log T)``;
any fully-connected net needs first-layer width ``Ω(T d)``. For each ``q`` (d = 1 by
default) this study measures, against the same target ``target · L0`` (``L0 = d/(2q)``,
the loss of the zero function both models start from):

* **trained, both arms, equal tuning** — every cell ``(arch, q, T, width)`` of a fixed
  width grid gets its learning rate from the same grid ``lrs`` (extended past an end by
  ``lr_extra`` while the chosen rate sits on it) on a tuning seed, per step budget
  (``steps``; the FCN also ``long_steps`` at ``long_Ts``), then ``seeds`` reported seeds;
* **the transformer's family** (:mod:`stsim.theory.family`) — the smallest grid ``d_e``
  whose best population loss reaches each target (``mc_seeds`` Monte-Carlo replicates), set
  beside the trained loss at the same ``(T, d_e)``;
* **the FCN's construction** — ``2Td`` (:func:`stsim.baselines.fcn.fcn_construction`).

The smallest width is a grid cell (the grid width below, this width] with a paired
bootstrap over seeds, or censored above the cap; its growth laws are interval-censored
fits (:func:`stsim.util.stats.compare_growth` with ``lower=``). Every rule, with the
parameter counts: docs/separation.md, "Design".

The study follows :mod:`stsim.studies.contract`: ``PRESETS`` (``QUICK`` / ``FULL``),
:func:`check` and the design (:mod:`~stsim.studies.separation.design`), :func:`run`
(:mod:`~stsim.studies.separation.training`; raw tables, their journals and the run record
``run.json`` in ``<out>/raw/``), :func:`analyse` (:mod:`~stsim.studies.separation.analysis`,
from the raw tables alone; diverged runs: :mod:`~stsim.studies.separation.divergence`) and
:func:`report` (:mod:`~stsim.studies.separation.outputs`). The command line is
:mod:`stsim.cli.separation`.
"""
from __future__ import annotations

from stsim.studies.separation.analysis import analyse
from stsim.studies.separation.design import (FULL, QUICK, cells, check, tf_params, train_point,
                                             width_grid)
from stsim.studies.separation.outputs import (markdown_report, plot_agreement, plot_separation,
                                              report, width_text)
from stsim.studies.separation.training import run

__all__ = ["NAME", "PRESETS", "check", "run", "analyse", "report", "QUICK", "FULL",
           "train_point", "width_grid", "tf_params", "cells", "plot_separation",
           "plot_agreement", "markdown_report", "width_text"]

NAME = "separation"
# the presets of the contract; ``mode`` (reserved by the contract) names the preset in the outputs
PRESETS = {"quick": dict(QUICK, mode="quick"), "full": dict(FULL, mode="full")}
