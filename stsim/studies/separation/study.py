r"""Transformer vs fully-connected net: width needed to learn STS_q as T grows.

The paper's claim: a one-layer transformer learns STS_q with width ``O(d + q log T)``;
any fully-connected net needs first-layer width ``Ω(T d)``. For each ``q`` (d = 1 by
default) this study measures, against the same target ``target · L0`` (``L0 = d/(2q)``,
the loss of the zero function both models start from):

* **trained, both arms, equal tuning** — for every cell ``(arch, q, T, width)`` of a fixed
  width grid, the learning rate is picked from the same log-spaced grid ``lrs`` (extended
  by ``lr_extra``, see below) on a tuning seed (``SeedSequence(tune_root)``, never
  reported), separately for each step budget; then ``seeds`` reported seeds
  (``SeedSequence(0)``) are trained at the chosen rate. Both arms get the same budget
  ``steps`` (Adam, batch ``batch``, fresh samples); the FCN gets a second budget
  ``long_steps`` at ``T ∈ long_Ts`` (every T of the full design). A run with budgets (2000, 8000) is one 8000-step run evaluated at both
  (constant learning rate: its first 2000 steps are the 2000-step run).
* **the transformer's family** — the best population loss of ``W_ee = aI, V_x = γI`` (the
  family zero-initialised training converges to; :mod:`stsim.theory.family`), Monte
  Carlo over the sphere encodings, for ``T`` up to ``family_Ts[-1]``; the smallest grid
  ``d_e`` reaching each target (bisection, ``mc_seeds`` replicates). Where the
  transformer is also trained, the trained loss is set beside the family's at the same
  ``(T, d_e)`` (the agreement check).
* **the FCN's construction** — ``2Td`` (:func:`stsim.baselines.fcn.fcn_construction`).

Widths: the smallest grid width whose median over seeds reaches the target and above
which every grid width does too, with a paired percentile bootstrap over seeds — a grid
cell (the grid width below, this width]; a width whose largest grid value fails is
*censored* (above the cap). Fits (:func:`stsim.util.stats.compare_growth` with
``lower=``): ``log2 T``, ``T`` and a power law fitted to the cells by interval-censored
maximum likelihood, censored points entering as censored, on ≥ 5 T values, with profile
CIs never narrower than the grid and residuals to each cell. The learning rate of a cell
is tuned on ``lrs`` extended past an end by ``lr_extra`` while the chosen rate sits on it
(the same rule for both arms). Parameter counts:
FCN ``w(Td + T) + w + d w + d`` (:func:`stsim.baselines.fcn.fcn_param_count`); transformer
(theory model) ``(d + d_e)² + d (d + d_e)``.

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
