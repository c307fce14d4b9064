"""Explicit attention constructions and their width laws: q-sparse averaging
(:mod:`~stsim.studies.expressivity.qsa`), sparse attention patterns
(:mod:`~stsim.studies.expressivity.patterns`) and the study of
:mod:`stsim.studies.contract` (``stsim expressivity``, described in
:mod:`~stsim.studies.expressivity.study`; its parts in
:mod:`~stsim.studies.expressivity.parts`)."""
from stsim.studies.expressivity.study import (EPILOG, HELP, NAME, PRESETS, analyse,  # noqa: F401
                                              check, console, report, run)
from stsim.studies.expressivity.study import WORKERS_HELP  # noqa: F401
