r"""``stsim targets``: does one attention layer represent, learn and generalise in length the
task's other targets (:mod:`stsim.core.targets`; docs/targets.md, "The study")?

For each target of ``targets`` at ``q``, three parts, each a table under ``raw/`` written by
:func:`stsim.sweep` (its journal makes a rerun compute only what is missing):

- **represents** (``raw/represents.csv``): the exact construction
  (:func:`stsim.core.constructions.construction`, the ideal attention) on ``n_batches``
  batches of 256 at ``rep_T``: its largest loss, judged ``< 1e-20``; for the variance also the best
  readout linear in the attended vector, fitted by least squares on ``n_fit`` samples
  (:func:`stsim.theory.targets.variance_linear_fit`), its held-out loss against the derived
  floor ``d(q−1)/q³`` (:func:`~stsim.theory.targets.variance_linear_floor`), judged within
  ``floor_tol`` of it on its SE.
- **learns** (``raw/tune.csv``, ``raw/runs.csv``): :func:`stsim.run` at ``T`` from its
  natural initialisation with the target's features, readout and default plan; the plan's
  step times each multiplier of ``mults`` on one tuning replicate (root seed
  ``TUNE_ROOT``) at the full budget (the plan's step count, the same for every
  multiplier), the lowest final val/L(0) chosen per target (ties to the larger), then
  ``seeds`` replicates at it: the seed mean of the final val/L_c judged ``≤ ratio`` on
  ``seeds − 1`` degrees of freedom. Every target is judged on one footing, ``L_c =
  ½E‖target − E target‖²``, the best constant output's loss
  (:meth:`~stsim.core.targets.Target.constant_loss`, :func:`.widths.footing`); it is ``L(0) =
  ½E‖target‖²`` where ``E target = 0`` (the mean, the moments) and ``2/(q+1)`` of it for
  the variance, whose val/L(0) each check records beside (``rel_zero``).
- **length generalisation**: the same runs (the default encoding is the stochastic one,
  its width ``d_e = 2 max(T, T_test)``, :func:`encoding_width`) evaluated at each
  ``T_test``: the seed mean of val/L_c judged ``≤ ratio``.
- **widths** (:mod:`stsim.studies.targets.widths`; ``raw/family_width.csv``,
  ``raw/family_equal.csv``, ``raw/fcn_tune.csv``, ``raw/fcn_runs.csv``): the transformer's
  sphere-family width and the trained FCN's smallest width reaching ``reach``·L_c against
  T per target, their growth laws, and the separation per target.

The rooms: the design (:mod:`~stsim.studies.targets.design`: presets, ``HELP``,
``EPILOG``, :func:`check`, each table's ``settings`` stamp), the runs
(:mod:`~stsim.studies.targets.runs`: :func:`run`), the analysis
(:mod:`~stsim.studies.targets.analysis`: :func:`analyse`) and the outputs
(:mod:`~stsim.studies.targets.outputs`: :func:`report`, :func:`console`); the width parts
are :mod:`~stsim.studies.targets.widths`.
"""
from __future__ import annotations

from stsim.studies.targets.analysis import analyse, represents_checks
from stsim.studies.targets.design import EPILOG, FULL, HELP, QUICK, check
from stsim.studies.targets.outputs import console, report
from stsim.studies.targets.runs import choose, encoding_width, represents, run, train_one

__all__ = ["NAME", "PRESETS", "HELP", "EPILOG", "check", "run", "analyse", "report",
           "console", "represents", "represents_checks", "encoding_width", "train_one",
           "choose"]

NAME = "targets"
PRESETS = {"quick": QUICK, "full": FULL}
