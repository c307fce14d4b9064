"""Sparse Boolean functions: the task (:mod:`~stsim.studies.sparse.boolean`), the models
(:mod:`~stsim.studies.sparse.models`) and the sample-complexity study of
:mod:`stsim.studies.contract` (``stsim sparse``, described in
:mod:`~stsim.studies.sparse.study`)."""
from stsim.studies.sparse.study import (EPILOG, HELP, NAME, PRESETS, analyse,  # noqa: F401
                                        check, console, report, run)
