r"""``stsim text``: do the paper's stochastic positional encodings generalise in length on
real text (docs/text.md, "The study")?

Each task (the Gaussian mean task as the reference, selection on Tiny Shakespeare, the
masked character) is trained at ``T`` with each encoding, the step multiplier tuned the
same way for every arm, and judged in distribution and at every longer ``T_test``.

The study follows :mod:`stsim.studies.contract`; its rooms: the design
(:mod:`~stsim.studies.text.design`: constants, presets with their help, :func:`check`,
the arms), the runs (:mod:`~stsim.studies.text.runs`: one run of an arm, the tuning,
:func:`run`), the analysis (:mod:`~stsim.studies.text.analysis`: :func:`analyse` and its
checks) and the outputs (:mod:`~stsim.studies.text.outputs`: :func:`report`, the files,
:func:`console`).
"""
from __future__ import annotations

from stsim.studies.text.analysis import analyse
from stsim.studies.text.design import ENCODINGS, EPILOG, FULL, HELP, QUICK, TASKS, check
from stsim.studies.text.outputs import console, report
from stsim.studies.text.runs import run, train_one

__all__ = ["NAME", "PRESETS", "HELP", "EPILOG", "check", "run", "analyse", "report",
           "console", "ENCODINGS", "TASKS", "train_one"]

NAME = "text"
PRESETS = {"quick": QUICK, "full": FULL}
