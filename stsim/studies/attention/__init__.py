"""Which attention mechanisms learn sparse token selection, and at what width: the study of
:mod:`stsim.studies.contract` (``stsim attention``, described in
:mod:`~stsim.studies.attention.study`; docs/attention.md)."""
from stsim.studies.attention.study import (NAME, PRESETS, analyse, check, report,  # noqa: F401
                                           run)
