"""Figures of the command line and the studies (matplotlib, Agg backend, written to files;
never ``show()``). A run's own figure, which a notebook shows, is
:func:`stsim.util.figure.history_figure`: it touches no backend."""
from __future__ import annotations

import os
import sys

import matplotlib

# headless by default (the command line and the studies write files), but a notebook's or
# a script's own backend choice (pyplot already imported, or MPLBACKEND) is left alone
if "matplotlib.pyplot" not in sys.modules and not os.environ.get("MPLBACKEND"):
    matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from stsim.util.figure import history_figure, save_figure  # noqa: E402

__all__ = ["history_figure", "plot_history", "savefig"]


def savefig(fig, path, dpi=120):
    """:func:`~stsim.util.figure.save_figure` (atomic; PNG by the file's extension), then
    close the figure."""
    save_figure(fig, path, dpi)
    plt.close(fig)
    return path


def plot_history(res, path):
    """Write :func:`history_figure` of ``res`` to ``path`` (the ``stsim run`` figure,
    ``loss.png``) and return ``path``."""
    return savefig(history_figure(res), path)
