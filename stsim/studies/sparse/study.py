r"""Sample complexity of sparse Boolean functions against T: one attention head vs an FCN.

The claim probed (Edelman, Goel, Kakade & Zhang 2022): a bounded-norm attention
head represents s-sparse functions of a length-T sequence with sample complexity growing
only like ``log T``. For every function class, model and ``T`` this experiment measures the
success probability over ``seeds`` independent trials (fresh hidden positions, training
sample, test sample and initialisation per seed, :func:`stsim.studies.sparse.boolean.train_trial`) on a
geometric grid of training-set sizes ``m``, and from it

* ``m*(T)`` — the smallest ``m`` whose success probability is ≥ ``target`` (0.9),
  interpolated linearly in ``log m`` between the last grid size below ``target`` and the
  first at or above it (``censored="above"`` if no size reaches it, ``"below"`` if the
  smallest size already does); the same at success probability 1/2 (the typical trial),
  which separates the sample size a typical trial needs from the tail of unlucky ones;
* least-squares fits ``m* = a log2 T + b`` and ``m* = a T + b`` (residuals and relative
  rms), and the free power law ``m* = c T^γ``, for each (function, model), on the
  uncensored points.

**Paired design.** Replicate ``r`` uses the same seed for every cell, so both models and
every ``m`` of replicate ``r`` see the same hidden positions and test set, and the training
samples are nested in ``m``.

**Ladder.** The ``m`` grid is climbed level by level: each level is one
:func:`stsim.sweep.sweep` of the still-active (function, model, T) series × seeds into
the shared table ``trials.csv`` (resumable through its journal), on the executor the
caller passes. A series retires after
``stop_after`` consecutive levels with success probability ≥ ``target``; its larger ``m``
cells are *not run* (drawn hatched in the heat map, never imputed). This assumes success
is monotone in ``m`` above the threshold; set ``stop_after=0`` to run every cell.

**Restarts.** ``--restarts k`` trains ``k`` initialisations per trial and keeps the fit
of smallest norm (:func:`stsim.studies.sparse.boolean.train_trial`), a stand-in for the norm-bounded
empirical risk minimiser the claim is about.

**Top-up.** With ``topup = n`` (> ``seeds``), every cell whose success rate on the
``seeds`` ladder trials lies in ``topup_range`` (default [0.2, 0.95]: where 10 trials
cannot tell 0.5 from 0.8 or 0.9 from 0.7) gets replicates ``seeds … n − 1`` more (the
first ``seeds`` replicates are the ladder's, resumed from the table). The ladder's
retirement decisions are the ``seeds``-trial ones; rates, intervals and m* use every
trial of a cell. Each cell's rate carries a 95% Wilson interval (``ci_lo``, ``ci_hi``),
and m* a 95% bootstrap interval ``[m_star_lo, m_star_hi]`` (every cell's count redrawn
from its binomial, :func:`estimate_mstar`).

**Failure kinds.** A failed trial with training accuracy < ``fit_acc`` (0.99) did not fit
its own sample (an optimisation failure); one that fits but tests below ``threshold`` is
a statistical failure. Both are counted per cell.

**Contract.** The study follows :mod:`stsim.studies.contract`: ``PRESETS`` (``QUICK`` /
``FULL`` with the optional ``restarts``, ``table``, ``topup_range``), :func:`check` and
the design (:mod:`~stsim.studies.sparse.design`), :func:`run`
(:mod:`~stsim.studies.sparse.training`: ``trials.csv`` and the run record ``run.json``),
:func:`analyse` (:mod:`~stsim.studies.sparse.analysis`, from ``trials.csv`` alone; diverged
trials: :func:`~stsim.studies.sparse.analysis.divergence_of`) and :func:`report`
(:mod:`~stsim.studies.sparse.outputs`). The command line is :mod:`stsim.cli.sparse`.
"""
from __future__ import annotations

from stsim.studies.sparse.analysis import (analyse, cell_stats, crossing, estimate_mstar,
                                           fit_mstar)
from stsim.studies.sparse.design import (FULL, OPTIONAL, QUICK, check, m_grid, parse_fns,
                                         trials_path)
from stsim.studies.sparse.outputs import (format_fit, markdown_report, plot_heatmaps,
                                          plot_mstar, report, write_mstar_csv)
from stsim.studies.sparse.training import run

__all__ = ["NAME", "PRESETS", "check", "run", "analyse", "report", "FULL", "QUICK",
           "OPTIONAL", "m_grid", "parse_fns", "cell_stats", "crossing", "estimate_mstar",
           "fit_mstar", "plot_heatmaps", "plot_mstar", "markdown_report", "write_mstar_csv",
           "format_fit", "trials_path"]

NAME = "sparse"
# the presets of the contract; ``mode`` (reserved by the contract) names the preset in the outputs
PRESETS = {"quick": dict(QUICK, **OPTIONAL, mode="quick"),
           "full": dict(FULL, **OPTIONAL, mode="full")}
