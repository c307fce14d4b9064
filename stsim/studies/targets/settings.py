"""The settings that make a row of each of ``stsim targets``' tables (its ``settings`` cell,
:func:`stsim.studies.cells.settings_text`): a rerun with others computes other rows, an
analysis refuses settings no row was made with. The FCN tables' rows carry every argument
of their run in their point instead."""
from __future__ import annotations

from stsim.studies.cells import settings_text
from stsim.studies.widths import Precision

__all__ = ["MADE_BY", "made_by"]

MADE_BY = {"represents": ("rep_T", "q", "d", "n_batches", "n_fit"),
           "tune": ("T", "q", "d", "batch", "steps", "T_test"),
           "runs": ("T", "q", "d", "batch", "steps", "T_test"),
           # a crossing's level (reach of the target's L_c, in units of its L(0)) is in its
           # point: another reach locates other points, and a row serves every reach
           # whose level it is
           "family_width": ("q", "width_d", *Precision().settings()),
           "family_equal": ("q", "width_d", "eq_n")}


def made_by(cfg, name) -> str:
    """The ``settings`` cell of the rows of table ``name`` made with ``cfg``."""
    return settings_text(**{k: cfg[k] for k in MADE_BY[name]})
