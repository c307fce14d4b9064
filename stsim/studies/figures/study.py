r"""The figures study on the study contract (:mod:`stsim.studies.contract`).

The figures of Wang, Wei, Hsu & Lee (ICML 2024), plus one beyond the paper (the figure
modules: :mod:`stsim.studies.figures`), in four rooms: the presets, ``HELP``, ``EPILOG``
and :func:`check` (the settings the figures share, resolved) in
:mod:`~stsim.studies.figures.design`, :func:`run` (every run trained once, as the rows of
one sweep) in :mod:`~stsim.studies.figures.runs`, :func:`analyse` (every figure's numbers
from the ``.npz`` files alone) in :mod:`~stsim.studies.figures.analysis`, :func:`report`
(the figures and their files) and :func:`console` in :mod:`~stsim.studies.figures.outputs`;
one figure's summary and files: :mod:`~stsim.studies.figures.figure`. The command line is
:mod:`stsim.cli.figures` (``stsim figures``).
"""
from __future__ import annotations

from stsim.studies.contract import MODES
from stsim.studies.figures.analysis import analyse
from stsim.studies.figures.common import FIGURES, NAME
from stsim.studies.figures.design import EPILOG, HELP, preset, check
from stsim.studies.figures.outputs import console, report
from stsim.studies.figures.runs import run

__all__ = ["NAME", "FIGURES", "PRESETS", "HELP", "EPILOG", "check", "run", "analyse",
           "report", "console"]

PRESETS = {m: preset(m) for m in MODES}
