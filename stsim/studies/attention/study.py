r"""``stsim attention``: which attention mechanisms learn sparse token selection, and at
what width (docs/attention.md, "The study: `stsim attention`").

Five parts, each check carrying its standard error, the critical value right for its
sample size and a verdict (:func:`stsim.util.verdict.judge`):

* **runs** (:mod:`~stsim.studies.attention.runs`) — every mechanism of ``mechanisms`` (names of
  :data:`stsim.core.attention.ATTENTIONS`, ``rank=r``, ``tau=τ`` or one's own
  :class:`~stsim.core.attention.Attention` object, named by its label), equally tuned
  (``tune_mults``, ``tune_steps``), ``steps`` steps, ``seeds`` seeds: **learns**
  (``level``) and **length generalisation** (``T_test``, ``ood_level``), on the task's
  ``target`` (``"mean"``, the paper's task, by default; any target of :func:`stsim.run`,
  its own L(0)).
* **rank** — ``rank=r`` over ``rank_T`` × ``rank_q`` × ``rank_r`` on ``target``: the
  smallest r held below ``level`` · L(0) (and below ``width_level`` · L(0)).
* **width** (:mod:`~stsim.studies.attention.widths`) — each of ``width_mechs``' sphere
  family: the smallest ``d_e`` reaching ``width_level`` · L(0) against ``width_T``, with
  its growth laws (the mean task's family, whatever ``target``).
* **trained widths** — ``train_mechs`` trained on the sphere at ``train_T`` and each
  ``d_e`` of ``train_widths``, against the family's width there (the mean task).
* **temperature** — the reduced softmax map at each of ``taus`` against τ = 1 with step
  ``η/τ²`` on W (deterministic, ``se = 0``; the mean task's reduction).

The rooms: the design (:mod:`~stsim.studies.attention.design`: presets, ``HELP``,
``EPILOG``, :func:`check`), the runs (:mod:`~stsim.studies.attention.runs`: :func:`run`),
the analysis (:mod:`~stsim.studies.attention.analysis`: :func:`analyse`) and the outputs
(:mod:`~stsim.studies.attention.outputs`: :func:`report`, :func:`console`).
"""
from __future__ import annotations

from stsim.studies.attention.analysis import analyse
from stsim.studies.attention.design import EPILOG, FULL, HELP, QUICK, check, parse_mechanism
from stsim.studies.attention.outputs import console, report
from stsim.studies.attention.runs import run, run_one

__all__ = ["NAME", "PRESETS", "HELP", "EPILOG", "check", "run", "analyse", "report",
           "console", "parse_mechanism", "run_one"]

NAME = "attention"
PRESETS = {"quick": QUICK, "full": FULL}
