"""Sparse Boolean functions: the task and models (:mod:`~stsim.studies.sparse.boolean`) and
the sample-complexity experiment (:mod:`~stsim.studies.sparse.study`, ``stsim sparse``)."""
