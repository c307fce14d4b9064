r"""Sample complexity of sparse Boolean functions against T: one attention head vs an FCN.

The claim probed (Edelman, Goel, Kakade & Zhang 2022): a bounded-norm attention
head represents s-sparse functions of a length-T sequence with sample complexity growing
only like ``log T``. For every function class, model and ``T`` this experiment measures the
success probability over ``seeds`` trials (:func:`stsim.studies.sparse.boolean.train_trial`;
replicate ``r`` has the same seed in every cell: paired, training samples nested in ``m``)
on a geometric grid of training-set sizes ``m``, and from it ``m*(T)``, the smallest ``m``
whose success probability is ≥ ``level`` (and ≥ 1/2), interpolated in ``log m``, with
its growth-law fits (:mod:`~stsim.studies.sparse.analysis`).

The ``m`` grid is climbed as a ladder with an optional top-up
(:func:`~stsim.studies.sparse.runs.run`); a failed trial below ``FIT_ACC`` training
accuracy is an optimisation failure, else a statistical one. Every rule, with the
intervals of the rates and of ``m*``: docs/sparse-functions.md, "The grid and m*".

**Contract.** The study follows :mod:`stsim.studies.contract`: ``PRESETS`` (``QUICK`` /
``FULL`` with the optional ``restarts``, ``table``, ``topup_range``), :func:`check` and
the design (:mod:`~stsim.studies.sparse.design`), :func:`run`
(:mod:`~stsim.studies.sparse.runs`: ``trials.csv`` and the run record ``run.json``),
:func:`analyse` (:mod:`~stsim.studies.sparse.analysis`, from ``trials.csv`` alone; diverged
trials: :func:`~stsim.studies.sparse.analysis.divergence_of`) and :func:`report`
(:mod:`~stsim.studies.sparse.outputs`). The command line is :mod:`stsim.cli.study` (``stsim sparse``).
"""
from __future__ import annotations

from stsim.studies.sparse.analysis import (analyse, cell_stats, crossing, estimate_mstar,
                                           fit_mstar)
from stsim.studies.sparse.design import (EPILOG, FULL, HELP, OPTIONAL, QUICK, check, m_grid,
                                         parse_fns, trials_path)
from stsim.studies.sparse.outputs import (console, format_fit, markdown_report, plot_heatmaps,
                                          plot_mstar, report, write_mstar_csv)
from stsim.studies.sparse.runs import run

__all__ = ["NAME", "PRESETS", "HELP", "EPILOG", "check", "run", "analyse", "report", "console",
           "FULL", "QUICK", "OPTIONAL", "m_grid", "parse_fns", "cell_stats", "crossing",
           "estimate_mstar", "fit_mstar", "plot_heatmaps", "plot_mstar", "markdown_report",
           "write_mstar_csv", "format_fit", "trials_path"]

NAME = "sparse"
# the presets of the contract; ``mode`` (reserved by the contract) names the preset in the outputs
PRESETS = {"quick": dict(QUICK, **OPTIONAL, mode="quick"),
           "full": dict(FULL, **OPTIONAL, mode="full")}
