"""Transformer vs fully-connected net: the smallest width reaching a loss level as T grows
(``stsim separation``): a study of :mod:`stsim.studies.contract`, described in
:mod:`~stsim.studies.separation.study`."""
from stsim.studies.separation.study import (EPILOG, HELP, NAME, PRESETS, analyse,  # noqa: F401
                                            check, console, report, run)
