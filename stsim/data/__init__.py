"""The corpora stsim ships (:mod:`stsim.core.corpus`): data, no code."""
