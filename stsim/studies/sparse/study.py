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
(:func:`~stsim.studies.sparse.training.run`); a failed trial below ``FIT_ACC`` training
accuracy is an optimisation failure, else a statistical one. Every rule, with the
intervals of the rates and of ``m*``: docs/sparse-functions.md, "The grid and m*".

**Contract.** The study follows :mod:`stsim.studies.contract`: ``PRESETS`` (``QUICK`` /
``FULL`` with the optional ``restarts``, ``table``, ``topup_range``), :func:`check` and
the design (:mod:`~stsim.studies.sparse.design`), :func:`run`
(:mod:`~stsim.studies.sparse.training`: ``trials.csv`` and the run record ``run.json``),
:func:`analyse` (:mod:`~stsim.studies.sparse.analysis`, from ``trials.csv`` alone; diverged
trials: :func:`~stsim.studies.sparse.analysis.divergence_of`) and :func:`report`
(:mod:`~stsim.studies.sparse.outputs`). The command line is :mod:`stsim.cli.study` (``stsim sparse``).
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

EPILOG = ("writes trials.csv (a rerun with the same --out resumes) and the run record\n"
          "run.json, then mstar.csv, fits.json, report.md, summary.json, sparse_heatmap.png\n"
          "and sparse_mstar.png (--analyse-only: from trials.csv alone)\n"
          "examples: stsim sparse                                   # seconds\n"
          "          stsim sparse --full --out runs/sparse\n"
          "          stsim sparse --fns table:3 --table 01101001      # any truth table")

HELP = {"Ts": "sequence lengths T", "m_min": "smallest training-set size",
        "m_max": "largest training-set size", "ratio": "ratio of the m grid",
        "fns": "functions with s, e.g. and:3,majority:3,parity:2 (table:3 with --table)",
        "models": "comma list of attention, fcn", "seeds": "trials per cell",
        "threshold": "success = test accuracy >= threshold",
        "level": "m* = smallest m with success probability >= level",
        "stop_after": "retire a series after this many grid sizes in a row at or above level "
                      "(0: run every cell)",
        "max_steps": "full-batch Adam steps per trial", "lr": "learning rate",
        "weight_decay": "weight decay", "max_norm": "norm bound of a block",
        "d_v": "value width of the head", "hidden": "FCN hidden width",
        "n_test": "fresh test samples per trial",
        "topup": "trials per cell where the rate on the first --seeds trials is in "
                 "--topup_range (0: no top-up)", "pos": "position code: onehot | learned",
        "restarts": "initialisations per trial; keep the fit of smallest norm",
        "table": "truth table for fns table:s, first bit most significant, e.g. 01101001",
        "topup_range": "ladder success rates whose cells are topped up"}



def console(summary) -> list:
    """What ``stsim sparse`` prints: m* for every (function, model, T), the fits and the
    trials run."""
    from stsim.studies.sparse.outputs import format_fit
    out = []
    for r in summary["mstar"]:
        ms = (f">{r['m_max']}" if r["censored"] == "above" else
              f"<={r['m_star']:.0f}" if r["censored"] == "below" else f"{r['m_star']:.0f}")
        out.append(f"{r['fn']:>8s} s={r['s']} {r['model']:>9s} T={r['T']:>4d}: m* {ms}")
    out += [f"{key}: log2T fit {format_fit(e['log_T'], 'log_T')}; T fit "
            f"{format_fit(e['linear_T'], 'linear_T')}" for key, e in summary["fits"].items()]
    done = ("analysed only" if summary["analyse_only"] or "n_run" not in summary
            else f"{summary['n_run']} trials run")
    return out + [f"{done}, {summary['n_trials']} trials in the table"]
