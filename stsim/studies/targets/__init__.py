"""Does one attention layer represent, learn and generalise in length the task's other
targets: the study of :mod:`stsim.studies.contract` (``stsim targets``, described in
:mod:`~stsim.studies.targets.study`; docs/targets.md, "The study")."""
from stsim.studies.targets.study import (EPILOG, HELP, NAME, PRESETS, analyse,  # noqa: F401
                                         check, console, report, run)
