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

import dataclasses
import math
import os
import time
from dataclasses import dataclass

import numpy as np

from stsim.core.config import Config, upgrade_config
from stsim.core.optim import all_finite, make_optimizer
from stsim.core.problem import make_problem
from stsim.core.progress import check_progress, make_progress
from stsim.core.result import Result
from stsim.core.schedule import assess_run, estimated_seconds, fallback_note
from stsim.core.seeds import Streams
from stsim.core.state import RunState
from stsim.util.io import check_writable_folder
from stsim.util.malloc import keep_freed_memory, release_freed_memory
from stsim.util.prefetch import Prefetch, prefetch_default
from stsim.util.threads import one_blas_thread, parallel_default
from stsim.util.validate import check_int
from stsim.util.warn import warn

__all__ = ["run", "train_loop", "LoopEnd", "Config", "Result", "DIVERGENCE_FACTOR",
           "RunInterrupted", "check_checkpoint"]


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
    it calls :func:`stsim.util.malloc.keep_freed_memory`, and when it ends (also by an
    exception) :func:`stsim.util.malloc.release_freed_memory`: the freed memory kept for
    the steps is handed back.
    """
    keep_freed_memory()   # the step's large arrays are reused, not re-faulted (util.malloc)
    try:
        return _loop(loss_grad, opt, params, steps, start, at_top, observe, stop, post_step,
                     finite)
    finally:
        release_freed_memory()


def _loop(loss_grad, opt, params, steps, start, at_top, observe, stop, post_step, finite):
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


class RunInterrupted(UserWarning):
    """:func:`run` was interrupted (Ctrl-C) and returns the result so far."""


class _Interrupt(Exception):
    """Raised at a step boundary after Ctrl-C (:meth:`RunState.catch_interrupt`)."""


def check_checkpoint(checkpoint, checkpoint_every):
    """``(checkpoint, checkpoint_every)`` of :func:`run`, checked before any work:
    ``checkpoint`` a file path (not empty, not a folder), ``checkpoint_every`` an int
    >= 1 and only with a ``checkpoint``. ``ValueError`` naming the parameter."""
    if checkpoint is not None:
        if not isinstance(checkpoint, (str, os.PathLike)):
            raise ValueError(f"checkpoint must be a file path, got {checkpoint!r}")
        checkpoint = os.fspath(checkpoint)
        if not checkpoint:
            raise ValueError("checkpoint must be a file path, got an empty string")
        if os.path.isdir(checkpoint):
            raise ValueError(f"checkpoint must be a file path, got the folder {checkpoint!r}")
    if checkpoint_every is not None:
        checkpoint_every = check_int("checkpoint_every", checkpoint_every, 1)
        if checkpoint is None:
            raise ValueError(f"checkpoint_every={checkpoint_every} needs checkpoint, the file "
                             f"to write (e.g. checkpoint='run.npz')")
    return checkpoint, checkpoint_every


def _options(T, q, pe, config, options) -> dict:
    """The options of a run: ``config``'s fields (a :class:`Config` or a config dict such
    as ``Result.config``; else the defaults T=200, q=3, pe="stochastic"), then ``T``,
    ``q``, ``pe`` and ``options`` where given."""
    if config is None:
        base = {"T": 200, "q": 3, "pe": "stochastic"}
    elif isinstance(config, Config):
        base = {f.name: getattr(config, f.name) for f in dataclasses.fields(Config)}
    elif isinstance(config, dict):
        base = upgrade_config(config)
    else:
        raise ValueError(f"config must be a stsim.Config or a dict of its fields (such as a "
                         f"Result's config), got {type(config).__name__}")
    given = {k: v for k, v in (("T", T), ("q", q), ("pe", pe)) if v is not None}
    return {**base, **given, **options}


def run(T=None, q=None, pe=None, *, config=None, checkpoint=None, checkpoint_every=None,
        progress=None, prefetch=None, **options) -> Result:
    """Train a model on STS_q and return a :class:`Result`.

    Parameters
    ----------
    T : int, optional
        Sequence length (default 200, or ``config``'s).
    q : int, optional
        Subset size, ``1 <= q <= T`` (default 3, or ``config``'s).
    pe : str or Encoding, optional
        Positional-encoding family (default ``"stochastic"``, or ``config``'s).
    config : Config or dict, optional
        A configuration to run: a :class:`Config` (resolved or not) or a config dict such
        as ``Result.config`` (reruns that run). ``T``, ``q``, ``pe`` and ``options``
        given beside it override its fields.
    checkpoint : str or path, optional
        Resume from this file if it exists (same config except ``steps``; every part of
        it is checked first, a corrupt file is refused), and write it every
        ``checkpoint_every`` steps, at the end and on Ctrl-C.
    checkpoint_every : int, optional
        Steps between checkpoints (>= 1; needs ``checkpoint``).
    progress : bool or callable, optional
        ``True``: a tqdm bar (``pip install "stsim[progress]"``), else a line on stderr
        every 2 s; ``False``: nothing; a callable ``progress(step, steps, row)``: called
        at every record. Default: on for a run estimated above 10 s in an interactive
        session (:mod:`stsim.core.progress`).
    prefetch : bool, optional
        Draw each step's minibatch one step ahead on a background thread
        (:class:`stsim.util.prefetch.Prefetch`); the same draws either way, and the same
        numbers up to the last bits (BLAS's thread count can change those at large sizes:
        docs/model.md, "Drawing ahead").
        Default: on when two or more CPUs are free to this process and BLAS is not pinned
        to one thread (:func:`stsim.util.prefetch.prefetch_default`). While it draws (or
        while a sphere batch is filled on two threads), BLAS is limited to one thread
        (:func:`uses_second_thread`).
    **options
        Any field of :class:`Config` (``d``, ``d_e``, ``sampler``, ``model``, ``query``,
        ``objective``, ``optimizer``, ``lr``, ``steps``, ``batch``, ``init``, ``seed`` —
        an int, a ``numpy.random.SeedSequence`` or a ``Generator`` —, ``T_test``,
        ``q_test``, ``eval_every``, ...). Unknown names raise.

    Returns
    -------
    Result
        Its ``status``: ``"completed"``, ``"diverged"`` or ``"interrupted"``.

    Notes
    -----
    Every option is checked before any work: a bad value raises ``ValueError`` naming
    the parameter. A long default run warns (:class:`~stsim.core.schedule.LongRunWarning`,
    attributed to the caller's line).

    Divergence — a non-finite loss or gradient, a loss above ``DIVERGENCE_FACTOR``
    (10⁶) times the loss at the first step, or a non-finite parameter at a record — stops
    the run: ``status="diverged"``, the message names the step and the cause, and the
    history up to the last good record is kept (a run that diverges before its first
    record gets one row, at that step, with the loss that diverged). Resuming needs the
    same config except ``steps`` (never fewer than the checkpoint's step) and, when it is
    left at its default, ``eval_every``.

    Ctrl-C (in the main thread of the main process) stops the run at the next step
    boundary and *returns* the result so far with ``status="interrupted"`` — history,
    parameters, a final record — after writing the checkpoint if one is configured; a
    :class:`RunInterrupted` warning says so. This is what a notebook user wants: the
    interrupted cell still gives ``res`` to plot or resume from. A script that loops
    over runs should stop when ``res.status == "interrupted"``. A second Ctrl-C raises
    ``KeyboardInterrupt`` at once.

    Examples
    --------
    >>> res = run(T=20, q=2, pe="stochastic", steps=50, batch=32, seed=1)
    >>> res.status, sorted(res.history)[:3]
    ('completed', ['cos_V', 'cos_W', 'loss'])
    >>> bool(run(config=res.config).history["loss"][-1] == res.history["loss"][-1])  # a rerun
    True
    """
    progress = check_progress(progress)
    if prefetch is not None and not isinstance(prefetch, (bool, np.bool_)):
        raise ValueError(f"prefetch must be True, False or None (automatic), got {prefetch!r}")
    checkpoint, checkpoint_every = check_checkpoint(checkpoint, checkpoint_every)
    opts = _options(T, q, pe, config, options)
    cfg = Config.from_options(**opts)
    if checkpoint is not None:
        check_writable_folder(os.path.dirname(os.path.abspath(checkpoint)),
                              "the folder of checkpoint")
    streams = Streams(cfg.seed)
    problem = make_problem(cfg, streams)
    opt = make_optimizer(cfg.optimizer, cfg.lr, cfg.lr_decay, cfg.steps)
    rng = streams.train()
    init = problem.init_params(streams.init())
    if checkpoint is not None and os.path.exists(checkpoint):
        state, cfg = RunState.load(checkpoint, cfg, opt, rng, template=init,
                                   eval_given=opts.get("eval_every") is not None)
    else:
        state = RunState(init, opt, rng)
    start = state.step
    rule = _DivergenceRule(state.first_loss)
    t0 = time.perf_counter()
    status, message = "completed", ""
    reporter = make_progress(progress, start=start, steps=cfg.steps,
                             estimated_s=estimated_seconds(cfg, cfg.steps - start))
    bad_params = []

    def record(step):
        with np.errstate(over="ignore", invalid="ignore"):
            metrics = problem.evaluate(state.params)
        row = state.record(step, metrics)
        if reporter is not None:
            reporter(step, cfg.steps, row)
        # entries the loss never reaches can hold NaN while loss and gradients stay finite
        bad_params[:] = [k for k, v in state.params.items() if not np.all(np.isfinite(v))]

    def at_top(step):
        # checkpoint = the state at the top of an iteration, before its batch is drawn,
        # so that a resumed run continues bit-for-bit like an uninterrupted one
        state.step = step
        if state.interrupted:
            raise _Interrupt
        if checkpoint is not None and step > start and (
                step == cfg.steps or (checkpoint_every and step % checkpoint_every == 0)):
            state.save(checkpoint, cfg)

    def observe(step, out):
        state.accumulate(out[0])
        if step % cfg.eval_every == 0 or step == cfg.steps:
            record(step)

    if prefetch is None:
        prefetch = prefetch_default()
    drawing_ahead = bool(prefetch and getattr(problem, "draws", False))
    if drawing_ahead and start < cfg.steps:
        state.attach(Prefetch(problem.draw_step, rng))
    end = None
    try:
        # BLAS is pinned by the run's setting, not by whether steps remain: a call resumed
        # at its last step re-records that step with the same threads, hence the same bits
        with state.catch_interrupt(), one_blas_thread(
                uses_second_thread(getattr(problem, "enc", None), drawing_ahead)):
            end = train_loop(lambda p: state.loss_grad(problem, p), opt, state.params,
                             cfg.steps, start=start, at_top=at_top, observe=observe,
                             stop=lambda step, out: bool(bad_params), finite=rule)
    except _Interrupt:
        if checkpoint is not None:      # the state at the top of this step: resumable
            state.save(checkpoint, cfg)
        if state.loss_count:            # the steps since the last record
            record(state.step)
    finally:
        if state.source is not None:
            state.source.close()
        if reporter is not None and hasattr(reporter, "close"):
            reporter.close()
    if end is None:
        status = "interrupted"
        message = (f"interrupted (Ctrl-C) at step {state.step} of {cfg.steps}: the result so "
                   f"far" + ("; checkpoint written (rerun the same call to resume)"
                             if checkpoint is not None else ""))
        warn(f"stsim: run {message}; status 'interrupted'", RunInterrupted)
    elif end.status == "stopped":
        status = "diverged"
        message = (f"diverged: non-finite parameter(s) {bad_params} at step {end.step} (the "
                   f"loss and gradients stayed finite: entries the loss does not reach); "
                   f"history kept up to that record")
    elif end.status == "diverged":
        status = "diverged"
        message = (f"diverged: {rule.why} at step {end.step}; history kept up to the last "
                   f"record before it")
        if not state.history:   # nothing recorded yet: keep the step that diverged
            state.loss_sum, state.loss_count = float(end.out[0]), 1
            record(end.step)
    info = {"wall_time_s": time.perf_counter() - t0, **problem.info()}
    if status == "interrupted":
        info["interrupted_at_step"] = state.step
    history = {k: np.asarray(v, dtype=np.int64 if k == "step" else None)
               for k, v in state.history.items()}
    if status in ("completed", "interrupted"):
        if status == "completed":
            message = f"completed {cfg.steps} steps"
        if status == "completed" and (opts.get("lr") is None or opts.get("steps") is None):
            note = fallback_note(cfg)           # defaults that could not be derived
            message += f"; {note}" if note else ""
        info["assessment"], note = assess_run(cfg, history)   # plateau diagnosis
        message += f"; {note}" if note else ""
    return Result(config=cfg.to_dict(), params=state.params, history=history, status=status,
                  message=message, info=info)
