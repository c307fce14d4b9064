"""Which attention mechanisms learn sparse token selection, and at what width: the study of
:mod:`stsim.studies.contract` (``stsim attention``, described in
:mod:`~stsim.studies.attention.study`; docs/attention.md)."""
from stsim.studies.attention.study import (EPILOG, HELP, NAME, PRESETS, analyse,  # noqa: F401
                                           check, console, report, run)
