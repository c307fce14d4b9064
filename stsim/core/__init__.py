"""The simulator: task → encodings → model (+ analytic gradients) → optimisers → the run
loop and its :class:`~stsim.core.run.Result`. Imports only :mod:`stsim.util`."""
