"""Transformer vs fully-connected net: the smallest width reaching a target loss as T grows
(``stsim separation``; the experiment is :mod:`~stsim.studies.separation.study`)."""
