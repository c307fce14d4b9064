"""How long a run takes: the one cost model of a step (:func:`estimated_seconds`, one core;
the studies order their runs by it) and the expected wall time of a run on an idle machine
(:func:`wall_seconds`, the number a long default schedule's warning quotes,
:mod:`stsim.core.schedule`). The constants are MEASURED (docs/model.md, "A step per block",
the estimate paragraph)."""
from __future__ import annotations

from stsim.util.prefetch import prefetch_default

__all__ = ["estimated_seconds", "wall_seconds", "SECONDS_PER_TOKEN", "SECONDS_PER_TOKEN_AHEAD",
           "SECONDS_PER_TOKEN_STATS", "START_S", "RECORD_COST"]

SECONDS_PER_TOKEN = 1.8e-7   # rough cost of one sample-token of one SGD step (measured, 1 core)
#: seconds per sample-token of a step with the batches drawn ahead (index encodings),
#: MEASURED by the default calls at T = 200 / 500 / 1000 on the nearly idle machine:
#: 1.56 / 1.73 / 1.57e-7 (docs/model.md, "A step per block", the estimate paragraph)
SECONDS_PER_TOKEN_AHEAD = 1.6e-7
#: the same with the tokens drawn through their statistics (``draws="statistics"``,
#: :mod:`stsim.core.token_stats`), MEASURED by the default calls at T = 1000 / 2000 / 4000,
#: seed 0, on the idle machine: 5.5 / 5.4 / 5.6e-8 (wall over steps, the records included;
#: docs/model.md, "Long default calls in minutes")
SECONDS_PER_TOKEN_STATS = 5.5e-8
START_S = 2.0          # import excluded: building the problem, validation sets, saving
RECORD_COST = 0.5      # a validation pass over one batch's tokens, in steps (forward only)


def estimated_seconds(cfg, steps=None) -> float:
    """Rough wall time (s, one core) of ``steps`` (default ``cfg.steps``) steps of the
    resolved config ``cfg`` — the one cost model (the default schedule's warning, the
    studies' longest-first ordering). Per step: the architecture's own
    ``seconds_per_step(cfg)`` (:func:`~stsim.core.problem.register_arch`; the FCN's is
    :func:`stsim.baselines.fcn.fcn_seconds_per_step`), else the transformer's:
    ``SECONDS_PER_TOKEN`` × points × tokens, a dense encoding costing ``1 + d_e/8`` times
    an index one."""
    steps = cfg.steps if steps is None else steps
    own = cfg.resolved.arch.seconds_per_step
    if own is not None:
        return own(cfg) * steps
    n_tok = cfg.T + (1 if cfg.model == "practical" else 0)
    batch = cfg.n_train if cfg.objective != "online" else cfg.batch
    dense = cfg.resolved.encoding.dense
    per = batch * n_tok * (1 + (cfg.d_e / 8 if dense else 0))
    return SECONDS_PER_TOKEN * per * steps


def wall_seconds(cfg, steps=None, ahead=None, statistics=None) -> float:
    """Expected wall time (s) of ``run`` on the resolved ``cfg`` with ``steps`` steps
    (default ``cfg.steps``) on an idle machine, the number a long default run's warning
    quotes: ``START_S`` + steps × (the transformer's sample-tokens × ``SECONDS_PER_TOKEN_AHEAD``
    when the batches are drawn ahead on a second core, ``ahead=None``: the run's default
    (:func:`stsim.util.prefetch.prefetch_default`); else :func:`estimated_seconds`' one-core
    cost) + the validation records (a forward pass over ``n_val`` points at each length,
    counted as ``RECORD_COST`` of a step per training-batch worth of tokens). Calibrated
    on the idle 2-core machine (docs/model.md, "A step per block").

    ``statistics``: the tokens are drawn through their statistics (None: ``cfg.draws ==
    "statistics"``, a resolved config's); then a step drawn ahead costs
    ``SECONDS_PER_TOKEN_STATS`` per sample-token, the records included (they were measured
    together: docs/model.md, "Long default calls in minutes")."""
    steps = cfg.steps if steps is None else steps
    if ahead is None:
        ahead = prefetch_default()
    if statistics is None:
        statistics = cfg.draws == "statistics"
    one = estimated_seconds(cfg, 1)
    if cfg.resolved.arch.seconds_per_step is not None or not ahead:
        per = one
    elif statistics:
        return START_S + steps * one * SECONDS_PER_TOKEN_STATS / SECONDS_PER_TOKEN
    else:
        per = one * SECONDS_PER_TOKEN_AHEAD / SECONDS_PER_TOKEN
    every = cfg.eval_every or max(1, steps // 100)
    n_rec = steps // every + 2
    batch = cfg.n_train if cfg.objective != "online" else cfg.batch
    lengths = [cfg.T] * (1 + len(cfg.q_test)) + list(cfg.T_test)
    rec = RECORD_COST * per * cfg.n_val * sum(lengths) / (batch * cfg.T)
    return START_S + steps * per + n_rec * rec
