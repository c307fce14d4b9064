"""Studies built on the simulator, each a subpackage with its own command:

* :mod:`~stsim.studies.figures` — the paper's Figs. 1–5 (``stsim figures``);
* :mod:`~stsim.studies.separation` — transformer vs FCN width (``stsim separation``);
* :mod:`~stsim.studies.expressivity` — explicit constructions (``stsim expressivity``);
* :mod:`~stsim.studies.sparse` — sparse Boolean functions (``stsim sparse``);
* :mod:`~stsim.studies.attention` — other attention mechanisms (``stsim attention``).

Studies import the core, the theory, the baselines and the sweep; nothing imports a study
except the command line.
"""
