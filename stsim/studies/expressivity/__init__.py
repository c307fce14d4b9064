"""Explicit attention constructions and their width laws: the constructions
(:mod:`~stsim.studies.expressivity.constructions`) and the experiment
(:mod:`~stsim.studies.expressivity.study`, ``stsim expressivity``)."""
