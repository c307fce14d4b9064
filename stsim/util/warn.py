"""Warnings attributed to the user's line, not to the stsim line that raised them.

``warnings.warn(msg, stacklevel=k)`` needs the number of frames between the warning and
the caller, which changes with every refactoring (and differs between ``stsim.run``,
``Config.from_options`` and ``Config.resolve``). :func:`warn` counts them: the warning is
attributed to the first frame outside the ``stsim`` package (the line of the user's
script, notebook cell or test that called into stsim).
"""
from __future__ import annotations

import os
import sys
import warnings

__all__ = ["warn"]

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def warn(message: str, category=UserWarning) -> None:
    """``warnings.warn(message, category)`` attributed to the first caller outside stsim
    (the outermost frame if every frame is stsim's, e.g. the ``stsim`` command).

    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as w:
    ...     warnings.simplefilter("always")
    ...     warn("look")
    >>> w[0].filename.endswith("warn.py")     # attributed to this doctest, not to warn.py
    False
    """
    frame, level = sys._getframe(1), 2          # stacklevel 2: the caller of warn()
    while frame.f_back is not None and \
            os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)
