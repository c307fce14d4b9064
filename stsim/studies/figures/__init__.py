"""Experiments reproducing the figures of Wang, Wei, Hsu & Lee (ICML 2024), plus one beyond
the paper — the study ``figures`` (command line: ``stsim figures [--quick|--full] --out
DIR [--only LIST] [--set FIG.KEY=VALUE]``), on the study contract
(:mod:`stsim.studies.contract`; the driver is :mod:`.study`):

========  ==============================================================================
module    figure
========  ==============================================================================
fig1      training loss, inverse loss, cosine similarity (practical model, stochastic PE)
fig2      OOD loss at longer T_test: stochastic vs fixed PE, analytic fixed-PE floor
fig3      heat maps of W and V at random initialisation and after training
fig4      length generalisation and unseen q_test (same runs as fig2)
fig5      figs 2 and 4 with Adam
beyond    sphere PE width sweep (loss floor vs d_e); theory vs practical model
claims    claims map: each statement of Figs. 1-5, where it holds and fails (reduced
          dynamics + simulations); also :func:`.claims.run_claims`
========  ==============================================================================

All runs of all figures are the rows of one :func:`stsim.sweep` (shared runs trained
once); how they are run, resumed and drawn: :mod:`.runs`; the files written:
:mod:`.outputs`.

>>> from stsim.studies import figures
>>> from stsim.studies.contract import resolve_config
>>> cfg = resolve_config(figures, "quick", {"fig2.lr": 1.5, "only": ["fig4"]})
>>> cfg["fig4"]["lr"], cfg["only"]          # Fig. 4 shares Fig. 2's runs and settings
(1.5, ['fig4'])
"""
from __future__ import annotations

from stsim.studies.figures.common import FIGURES, NAME

__all__ = ["NAME", "FIGURES", "PRESETS", "HELP", "EPILOG", "check", "run", "analyse",
           "report", "console"]
_CONTRACT = ("PRESETS", "HELP", "EPILOG", "check", "run", "analyse", "report", "console")


def __getattr__(name):
    # the contract's members live in .study (from its rooms), loaded on first use: a worker
    # process that unpickles a run (.common.train_job) imports neither the figure code nor
    # matplotlib
    if name in _CONTRACT:
        from stsim.studies.figures import study
        return getattr(study, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
