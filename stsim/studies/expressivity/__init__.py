"""Explicit attention constructions and their width laws: q-sparse averaging
(:mod:`~stsim.studies.expressivity.qsa`), sparse attention patterns
(:mod:`~stsim.studies.expressivity.patterns`) and the experiment
(:mod:`~stsim.studies.expressivity.study`, ``stsim expressivity``)."""
