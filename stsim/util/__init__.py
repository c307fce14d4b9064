"""Plumbing shared by every layer: input validation (:mod:`~stsim.util.validate`), atomic
files and tables (:mod:`~stsim.util.io`), fits and searches (:mod:`~stsim.util.stats`) and
figures (:mod:`~stsim.util.plotting`). Imports nothing else from stsim."""
