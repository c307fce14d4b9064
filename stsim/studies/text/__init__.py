"""Do stochastic positional encodings generalise in length on real text: the study of
:mod:`stsim.studies.contract` (``stsim text``, described in
:mod:`~stsim.studies.text.study`; docs/text.md, "The study")."""
from stsim.studies.text.study import (EPILOG, HELP, NAME, PRESETS, analyse,  # noqa: F401
                                      check, console, report, run)
