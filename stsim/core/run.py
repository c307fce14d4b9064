"""The run loop: :func:`run` (training, records, divergence, checkpoints).

``run(T=200, q=3, pe="stochastic", **options)`` trains one model and returns a
:class:`Result` (config, final parameters, history), in the spirit of
``scipy.integrate.solve_ivp``: one call, one rich result with ``status`` and ``message``.

Data flow: a *problem* (the model plus where its gradients come from) exposes
``init_params(rng)``, ``loss_grad(params, rng) -> (loss, grads)`` and
``evaluate(params) -> {metric: value}``; the loop steps an optimiser on it, records
metrics every ``eval_every`` steps, stops on divergence and checkpoints.

Random streams: :class:`stsim.core.seeds.Streams` (the encoding table, validation sets,
initialisation and training stream each have their own child of ``SeedSequence(seed)``).

Units: a *step* is one optimiser update; gradient-flow time is ``η · step``.
"""
from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass

import numpy as np

from stsim.core.config import Config
from stsim.core.optim import all_finite, make_optimizer
from stsim.core.problem import make_problem
from stsim.core.result import Result
from stsim.core.schedule import assess_run, fallback_note
from stsim.core.seeds import Streams
from stsim.core.state import RunState
from stsim.util.malloc import keep_freed_memory
from stsim.util.prefetch import Prefetch, prefetch_default
from stsim.util.threads import one_blas_thread, parallel_default
from stsim.util.validate import check_int

__all__ = ["run", "train_loop", "LoopEnd", "Config", "Result", "DIVERGENCE_FACTOR"]


# --------------------------------------------------------------------------------------
# the loop
# --------------------------------------------------------------------------------------
#: a run has diverged when its loss or a gradient entry is not finite, or when its loss
#: exceeds DIVERGENCE_FACTOR times the loss at its first step (4e126 is not "completed")
DIVERGENCE_FACTOR = 1e6


def _finite(loss, grads):
    return math.isfinite(loss) and all(all_finite(g) for g in grads.values())


class _DivergenceRule:
    """``finite`` of :func:`train_loop` for :func:`run`: non-finite values, or a loss above
    ``DIVERGENCE_FACTOR`` × the first loss (``first``, or the first loss seen)."""

    def __init__(self, first=None):
        self.first = first
        self.why = ""

    def __call__(self, loss, grads):
        if not math.isfinite(loss):
            self.why = f"non-finite loss ({loss})"
            return False
        if not all(all_finite(g) for g in grads.values()):
            self.why = "non-finite gradient"
            return False
        if self.first is None:
            self.first = abs(loss)
        limit = DIVERGENCE_FACTOR * max(self.first, 1e-300)
        if loss > limit:
            self.why = (f"loss {loss:.3g} above {DIVERGENCE_FACTOR:.0e} x the first loss "
                        f"{self.first:.3g}")
            return False
        return True


@dataclass
class LoopEnd:
    """How :func:`train_loop` ended: ``step`` (optimiser updates done), ``status``
    (``"completed"``, ``"stopped"`` by the stop criterion, ``"diverged"``) and ``out``,
    the last ``loss_grad`` result (at the final iterate)."""

    step: int
    status: str
    out: tuple


def train_loop(loss_grad, opt, params: dict, steps: int, *, start: int = 0, at_top=None,
               observe=None, stop=None, post_step=None, finite=_finite) -> LoopEnd:
    """The training loop shared by :func:`run` and the studies' trainers.

    Each iteration, at step ``t`` (from ``start``): ``at_top(t)`` (e.g. a checkpoint: the
    state before the iteration's batch is drawn); ``out = loss_grad(params)`` (a tuple
    starting ``(loss, grads)``); stop as ``"diverged"`` unless ``finite(loss, grads)``;
    ``observe(t, out)`` (records); stop as ``"stopped"`` if ``stop(t, out)``; stop as
    ``"completed"`` at ``t = steps``; else ``opt.step(params, grads)`` (in place),
    ``post_step(params)`` (e.g. a projection) and ``t += 1``. Before the first iteration
    it calls :func:`stsim.util.malloc.keep_freed_memory`.
    """
    keep_freed_memory()   # the step's large arrays are reused, not re-faulted (util.malloc)
    step = start
    while True:
        if at_top is not None:
            at_top(step)
        with np.errstate(over="ignore", invalid="ignore"):  # divergence is reported below
            out = loss_grad(params)
        if not finite(out[0], out[1]):
            return LoopEnd(step, "diverged", out)
        if observe is not None:
            observe(step, out)
        if stop is not None and stop(step, out):
            return LoopEnd(step, "stopped", out)
        if step >= steps:
            return LoopEnd(step, "completed", out)
        opt.step(params, out[1])
        if post_step is not None:
            post_step(params)
        step += 1


def uses_second_thread(enc, prefetch: bool) -> bool:
    """Whether a run computes while a thread of stsim's own works: it draws ahead
    (``prefetch``), or its encoding ``enc`` (None for the FCN) fills batches on two threads
    (``Encoding.threaded``: ``stochastic/sphere``, :func:`stsim.core.encodings._unit_rows`).
    BLAS then keeps to one thread (:func:`stsim.util.threads.one_blas_thread`): OpenBLAS's
    second thread spins after each product and takes the core the other thread needs (a
    serial sphere step: 50 ms with two BLAS threads, 36 ms with one; docs/model.md)."""
    return prefetch or (getattr(enc, "threaded", False) and parallel_default())


def run(T=200, q=3, pe="stochastic", *, checkpoint=None, checkpoint_every=None, progress=None,
        prefetch=None, **options) -> Result:
    """Train a model on STS_q and return a :class:`Result`.

    Parameters
    ----------
    T, q, pe : sequence length, subset size, positional-encoding family.
    **options : any field of :class:`Config` (``d``, ``d_e``, ``sampler``, ``model``,
        ``query``, ``objective``, ``optimizer``, ``lr``, ``steps``, ``batch``, ``init``,
        ``seed``, ``T_test``, ``q_test``, ``eval_every``, ...). Unknown names raise.
    checkpoint : path, optional — resume from this file if it exists (same config except
        ``steps``), and write it every ``checkpoint_every`` steps and at the end.
    progress : callable(step, steps, metrics), optional — called at every record.
    prefetch : bool, optional — draw each step's minibatch one step ahead on a background
        thread (:class:`stsim.util.prefetch.Prefetch`); the numbers are the same either way.
        Default: on when two or more CPUs are free to this process and BLAS is not pinned
        to one thread (:func:`stsim.util.prefetch.prefetch_default`). While it draws (or
        while a sphere batch is filled on two threads), BLAS is limited to one thread
        (:func:`uses_second_thread`, :func:`stsim.util.threads.one_blas_thread`, with the
        optional ``threadpoolctl``), so the threads do not compete for the two cores.

    Divergence — a non-finite loss or gradient, or a loss above ``DIVERGENCE_FACTOR``
    (10⁶) times the loss at the first step — stops the run: ``status="diverged"``, the
    message names the step and the cause, and the history up to the last good record is
    kept (a run that diverges before its first record gets one row, at that step, with the
    loss that diverged). Resuming needs the same config except ``steps`` (never fewer than
    the checkpoint's step) and, when it is left at its default, ``eval_every``.

    Example
    -------
    >>> res = run(T=20, q=2, pe="stochastic", steps=50, batch=32, seed=1)
    >>> res.status, sorted(res.history)[:3]
    ('completed', ['cos_V', 'cos_W', 'loss'])
    """
    cfg = Config.from_options(T=T, q=q, pe=pe, **options)
    streams = Streams(cfg.seed)
    problem = make_problem(cfg, streams)
    opt = make_optimizer(cfg.optimizer, cfg.lr, cfg.lr_decay, cfg.steps)
    rng = streams.train()
    if checkpoint_every is not None:
        checkpoint_every = check_int("checkpoint_every", checkpoint_every, 1)
    if checkpoint is not None:
        if not isinstance(checkpoint, (str, bytes, os.PathLike)):
            raise ValueError(f"checkpoint must be a file path, got {checkpoint!r}")
        if os.path.isdir(checkpoint):
            raise ValueError(f"checkpoint must be a file path, got the folder {checkpoint!r}")
    if checkpoint is not None and os.path.exists(checkpoint):
        state, cfg = RunState.load(checkpoint, cfg, opt, rng,
                                   eval_given=options.get("eval_every") is not None)
    else:
        state = RunState(problem.init_params(streams.init()), opt, rng)
    start = state.step
    rule = _DivergenceRule(state.first_loss)
    t0 = time.perf_counter()
    status, message = "completed", ""

    def record(step):
        with np.errstate(over="ignore", invalid="ignore"):
            metrics = problem.evaluate(state.params)
        row = state.record(step, metrics)
        if progress is not None:
            progress(step, cfg.steps, row)

    def at_top(step):
        # checkpoint = the state at the top of an iteration, before its batch is drawn,
        # so that a resumed run continues bit-for-bit like an uninterrupted one
        state.step = step
        if checkpoint is not None and step > start and (
                step == cfg.steps or (checkpoint_every and step % checkpoint_every == 0)):
            state.save(checkpoint, cfg)

    def observe(step, out):
        state.accumulate(out[0])
        if step % cfg.eval_every == 0 or step == cfg.steps:
            record(step)

    if prefetch is None:
        prefetch = prefetch_default()
    if prefetch and getattr(problem, "draws", False) and start < cfg.steps:
        state.attach(Prefetch(problem.draw_step, rng))
    try:
        with one_blas_thread(uses_second_thread(getattr(problem, "enc", None),
                                                state.source is not None)):
            end = train_loop(lambda p: state.loss_grad(problem, p), opt, state.params,
                             cfg.steps, start=start, at_top=at_top, observe=observe,
                             finite=rule)
    finally:
        if state.source is not None:
            state.source.close()
    if end.status == "diverged":
        status = "diverged"
        message = (f"diverged: {rule.why} at step {end.step}; history kept up to the last "
                   f"record before it")
        if not state.history:   # nothing recorded yet: keep the step that diverged
            state.loss_sum, state.loss_count = float(end.out[0]), 1
            record(end.step)
    info = {"wall_time_s": time.perf_counter() - t0, **problem.info()}
    history = {k: np.asarray(v) for k, v in state.history.items()}
    if status == "completed":
        message = f"completed {cfg.steps} steps"
        if options.get("lr") is None or options.get("steps") is None:
            note = fallback_note(cfg)           # defaults that could not be derived
            message += f"; {note}" if note else ""
        info["assessment"], note = assess_run(cfg, history)   # plateau diagnosis (issue 13)
        message += f"; {note}" if note else ""
    return Result(config=cfg.to_dict(), params=state.params, history=history, status=status,
                  message=message, info=info)
