"""Models the paper compares against: the fully-connected network (:mod:`~stsim.baselines.fcn`).
Built on :mod:`stsim.core`; registers ``arch="fcn"`` with :func:`stsim.run`."""
