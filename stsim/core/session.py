"""One run in three pieces — setup, advance, finish — and the loop they share.

:class:`Session` is what :func:`stsim.run` does, taken apart so that other code can steer a
run: ``Session(cfg, ...)`` sets it up (problem, optimiser, run state — resumed from a
checkpoint when one exists —, progress, batches drawn ahead), :meth:`Session.advance` trains
(to the end, or ``n`` more steps), :meth:`Session.finish` ends it and returns the
:class:`~stsim.core.result.Result`::

    s = Session(Config.from_options(T=50, q=3, steps=2000))
    while not s.advance(500):          # 500 steps at a time
        print(s.state.step, s.state.history["val"][-1])
    res = s.finish()

:func:`train_loop` is the loop itself (also used by the studies' trainers): at each step
the batch's loss and gradients, the records, the stop rules, the optimiser's update.

Units: a *step* is one optimiser update; gradient-flow time is ``η · step``.
"""
from __future__ import annotations

import math
import os
import signal
import time
from dataclasses import dataclass

import numpy as np

from stsim.core.config import Config
from stsim.core.records import options_from_record
from stsim.core.warm import initial_params
from stsim.core.optim import all_finite
from stsim.core.problem import make_problem
from stsim.core.progress import make_progress
from stsim.core.result import Result
from stsim.core.assessment import assess_run, divergence_hint
from stsim.core.cost import estimated_seconds
from stsim.core.seeds import Streams
from stsim.core.state import RunState
from stsim.util.malloc import keep_freed_memory, release_freed_memory
from stsim.util.prefetch import Prefetch, prefetch_default
from stsim.util.signals import signal_name
from stsim.util.threads import one_blas_thread, parallel_default
from stsim.util.validate import check_int, check_state_dict
from stsim.util.warn import warn

__all__ = ["Session", "train_loop", "LoopEnd", "DIVERGENCE_FACTOR", "RunInterrupted",
           "uses_second_thread"]

#: a run has diverged when its loss or a gradient entry is not finite, or when its loss
#: exceeds DIVERGENCE_FACTOR times the loss at its first step (4e126 is not "completed")
DIVERGENCE_FACTOR = 1e6


def _finite(loss, grads):
    return math.isfinite(loss) and all(all_finite(g) for g in grads.values())


class _DivergenceRule:
    """``finite`` of :func:`train_loop` for a run: non-finite values, or a loss above
    ``DIVERGENCE_FACTOR`` × the first loss (``first``, or the first loss seen)."""

    def __init__(self, first=None):
        self.first = first
        self.why = ""

    def __call__(self, loss, grads):
        if not _finite(loss, grads):
            self.why = "non-finite gradient" if math.isfinite(loss) else f"non-finite loss ({loss})"
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
    (``"completed"``, ``"stopped"`` by the stop criterion, ``"diverged"``, ``"paused"`` at
    ``until``) and ``out``, the last ``loss_grad`` result (at the final iterate; None when
    paused)."""

    step: int
    status: str
    out: tuple | None


def train_loop(loss_grad, opt, params: dict, steps: int, *, start: int = 0, at_top=None,
               observe=None, stop=None, post_step=None, finite=_finite,
               until: int | None = None) -> LoopEnd:
    """The training loop shared by :class:`Session` and the studies' trainers.

    Each iteration, at step ``t`` (from ``start``): return ``"paused"`` if ``t == until``
    (``until < steps``: nothing of step ``t`` is done, so a later call with ``start=t``
    continues as if never paused); ``at_top(t)`` (e.g. a checkpoint: the state before the
    iteration's batch is drawn); ``out = loss_grad(params)`` (a tuple starting ``(loss,
    grads)``); stop as ``"diverged"`` unless ``finite(loss, grads)``; ``observe(t, out)``
    (records); stop as ``"stopped"`` if ``stop(t, out)``; stop as ``"completed"`` at
    ``t = steps``; else ``opt.step(params, grads)`` (in place), ``post_step(params)`` (e.g.
    a projection, frozen blocks) and ``t += 1``. Before the first iteration it calls
    :func:`stsim.util.malloc.keep_freed_memory`, and when it ends (also by an exception)
    :func:`stsim.util.malloc.release_freed_memory`: the freed memory kept for the steps is
    handed back.
    """
    keep_freed_memory()   # the step's large arrays are reused, not re-faulted (util.malloc)
    try:
        return _loop(loss_grad, opt, params, steps, start, at_top, observe, stop, post_step,
                     finite, until)
    finally:
        release_freed_memory()


def _loop(loss_grad, opt, params, steps, start, at_top, observe, stop, post_step, finite,
          until):
    step = start
    while True:
        if until is not None and step == until and step < steps:
            return LoopEnd(step, "paused", None)
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


def config_options(config, options: dict, name: str = "config") -> dict:
    """The options of a run: ``config``'s fields (None: the defaults; a :class:`Config`, its
    objects included; or a config dict such as ``Result.config``, read by
    :func:`~stsim.core.records.options_from_record`), then ``options`` over them."""
    if config is None:
        base = {}
    elif isinstance(config, Config):
        base = config.as_options()
    elif isinstance(config, dict):
        base = options_from_record(config, options)
    else:
        raise ValueError(f"{name} must be a stsim.Config or a dict of its fields (such as "
                         f"{{'T': 10}} or a Result's config), got {type(config).__name__}")
    return {**base, **options}


def _config(cfg, options):
    """The resolved :class:`~stsim.core.config.Config` of ``cfg`` and ``options`` of
    :class:`Session`."""
    if isinstance(cfg, Config) and not options:
        return cfg if "_resolved" in cfg.__dict__ else cfg.resolve()
    return Config.from_options(**config_options(cfg, options, "cfg"))


class RunInterrupted(UserWarning):
    """:func:`stsim.run` was interrupted (Ctrl-C) and returns the result so far."""


class _Interrupt(Exception):
    """Raised at a step boundary after Ctrl-C (:meth:`RunState.catch_interrupt`)."""


class Session:
    """A run of a resolved :class:`~stsim.core.config.Config` (module docstring).

    Parameters
    ----------
    cfg : Config or dict, optional
        The configuration (resolved here if it is not: :meth:`Config.resolve`), or a dict
        of its options (as ``config=`` of :func:`stsim.run`, e.g. ``{"T": 10}`` or a
        ``Result.config``); none: the defaults.
    checkpoint, checkpoint_every, progress, prefetch, callback
        As for :func:`stsim.run` (checked there).
    eval_given : bool
        Whether the caller gave ``eval_every`` (else a resumed run keeps its checkpoint's).
        The step, steps, held blocks and message note are ``cfg.resolved.plan``'s.
    **options
        Fields of :class:`Config` over ``cfg``'s, as for :func:`stsim.run`:
        ``Session(T=50, q=3)``.

    Attributes
    ----------
    cfg : Config
        The config the run continues with (a checkpoint's ``eval_every`` when resumed).
    problem : object
        The problem (:mod:`stsim.core.problem`).
    opt : object
        The optimiser.
    state : RunState
        Parameters, optimiser, generator, history and step.
    """

    def __init__(self, cfg=None, *, checkpoint=None, checkpoint_every=None, progress=None,
                 prefetch=None, callback=None, eval_given=True, **options):
        cfg = _config(cfg, options)
        streams, plan = Streams(cfg.seed), cfg.resolved.plan
        self.problem = problem = make_problem(cfg, streams)
        self.opt = cfg.resolved.optimizer.factory(plan.lr.record(), decay=plan.lr_decay,
                                                  total=plan.steps)
        if checkpoint is not None:      # an optimiser whose state no checkpoint can hold
            check_state_dict(self.opt, self.opt.state_dict())
        rng = streams.train()
        init = initial_params(problem, cfg, streams.init())
        if checkpoint is not None and os.path.exists(checkpoint):
            self.state, cfg = RunState.load(checkpoint, cfg, self.opt, rng, template=init,
                                            eval_given=eval_given)
        else:
            self.state = RunState(init, self.opt, rng)
        self.cfg = cfg
        # the blocks held, with their initial values: written back after every step (exact)
        blocks = cfg.resolved.arch.blocks(cfg) if plan.freeze else {}
        self._frozen = [(p, i, np.array(init[p][i])) for p, i in map(blocks.get, plan.freeze)]
        self.checkpoint, self.checkpoint_every = checkpoint, checkpoint_every
        self.callback = callback
        self._catching = False      # whether advance() catches Ctrl-C itself (a sweep's does not)
        self.start = self.state.step
        self.rule = _DivergenceRule(self.state.first_loss)
        self.t0 = time.perf_counter()
        self.reporter = make_progress(progress, start=self.start, steps=cfg.steps,
                                      estimated_s=estimated_seconds(cfg, cfg.steps - self.start))
        self.bad_params = []        # non-finite parameters at the last record
        self.stop_step = None       # the record at which a callback asked to stop (or raised)
        self.stop_rule = plan.stop      # the plan's (None: every step)
        self.settled = None         # the record at which the stop rule held
        self.error = None           # what the callback or the progress callable raised
        self.end = None             # the loop's LoopEnd, or "interrupted"
        self.finished = False       # finish() has returned the result
        if prefetch is None:
            prefetch = prefetch_default()
        self.drawing_ahead = bool(prefetch and getattr(problem, "draws", False))
        if self.drawing_ahead and self.start < cfg.steps:
            self.state.attach(Prefetch(problem.draw_step, rng))

    # ---- the pieces of a step -----------------------------------------------------------
    def _is_record(self, step) -> bool:
        return step % self.cfg.eval_every == 0 or step == self.cfg.steps

    def _record(self, step):
        state, cfg = self.state, self.cfg
        with np.errstate(over="ignore", invalid="ignore"):
            metrics = self.problem.evaluate(state.params)
        row = state.record(step, metrics)
        try:                    # what the caller's code raises ends the run, not loses it
            if self.reporter is not None:
                self.reporter(step, cfg.steps, row)
            if self.callback is not None:
                stop = self.callback(dict(row))
                if not (stop is None or isinstance(stop, (bool, np.bool_))):
                    raise ValueError(f"callback must return None, True or False (True stops "
                                     f"the run), got {type(stop).__name__} {stop!r} at its "
                                     f"record of step {step}")
                if stop:
                    self.stop_step = step
        except KeyboardInterrupt:   # as Ctrl-C: the loop stops at its next step boundary
            if state.interrupted or not self._catching:
                raise               # a second Ctrl-C, or one the run does not catch (a sweep's)
            state.interrupted, state.signal = True, signal.SIGINT
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - raised by finish(), result kept
            if self.error is None:
                self.error, self.stop_step = exc, step
        if self.stop_rule is not None and self.settled is None and self.stop_step is None:
            vals = state.history.get("val") or state.history["loss"]
            if self.stop_rule.holds(vals):
                self.settled = step
        # entries the loss never reaches can hold NaN while loss and gradients stay finite
        self.bad_params[:] = [k for k, v in state.params.items() if not np.all(np.isfinite(v))]

    def _at_top(self, step):
        # checkpoint = the state at the top of an iteration, before its batch is drawn,
        # so that a resumed run continues bit-for-bit like an uninterrupted one
        state, cfg = self.state, self.cfg
        state.step = step
        if state.interrupted:
            raise _Interrupt
        if self._is_record(step):      # where a stop at this record rewinds a checkpoint to
            state.mark()
        if self.checkpoint is not None and step > self.start and (
                step == cfg.steps or (self.checkpoint_every
                                      and step % self.checkpoint_every == 0)):
            state.save(self.checkpoint, cfg)

    def _observe(self, step, out):
        self.state.accumulate(out[0])
        if self._is_record(step):
            self._record(step)

    def _stop(self, step, out):
        return bool(self.bad_params) or self.stop_step is not None or self.settled is not None

    def _hold_frozen(self, params):
        for param, index, values in self._frozen:
            params[param][index] = values

    def _check_open(self):
        if self.finished:
            raise RuntimeError("this Session has finished: finish() returned its Result, whose "
                               "parameters it would change; start a new Session (or resume "
                               "from its checkpoint) to train on")

    # ---- the public pieces --------------------------------------------------------------
    @property
    def done(self) -> bool:
        """Whether the run has ended (completed, diverged, stopped or interrupted)."""
        return self.end is not None

    def advance(self, n: int | None = None) -> bool:
        """Train until the run ends — ``cfg.steps``, divergence, a stop by the callback,
        Ctrl-C — or, with ``n``, for at most ``n`` more steps. Returns :attr:`done`.
        Advancing in pieces gives the same numbers as in one go. ``RuntimeError`` after
        :meth:`finish` (its result holds the parameters: they train no more)."""
        self._check_open()
        if self.done:
            return True
        state, cfg = self.state, self.cfg
        until = None if n is None else state.step + check_int("n", n, 1)
        try:
            # BLAS is pinned by the run's setting, not by whether steps remain: a call resumed
            # at its last step re-records that step with the same threads, hence the same bits
            with state.catch_interrupt() as self._catching, one_blas_thread(uses_second_thread(
                    getattr(self.problem, "enc", None), self.drawing_ahead)):
                end = train_loop(lambda p: state.loss_grad(self.problem, p), self.opt,
                                 state.params, cfg.steps, start=state.step,
                                 at_top=self._at_top, observe=self._observe, stop=self._stop,
                                 post_step=self._hold_frozen if self._frozen else None,
                                 finite=self.rule, until=until)
        except _Interrupt:
            if self.checkpoint is not None:     # the state at the top of this step: resumable
                state.save(self.checkpoint, cfg)
            if state.loss_count:                # the steps since the last record
                self._record(state.step)
            end = "interrupted"
        if end != "interrupted" and end.status == "paused":
            state.step = end.step
            return False
        self.end = end
        return True

    def close(self) -> None:
        """Stop the thread drawing ahead and the progress display (:meth:`finish` does; so
        does leaving ``with Session(cfg) as s:``; a session dropped unclosed stops its thread
        when it is garbage-collected)."""
        if self.state.source is not None:
            self.state.source.close()
            # the generator back at the top of the current step (the prefetcher drew ahead
            # of it): a checkpoint written after this resumes where the run is
            self.state.rng.bit_generator.state = self.state.source.state()
            self.state.source = None
        if self.reporter is not None and hasattr(self.reporter, "close"):
            self.reporter.close()
            self.reporter = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def finish(self) -> Result:
        """End the run and return its :class:`Result` (a run not advanced to its end ends
        as ``"stopped"`` where it is). When the callback or the progress callable raised,
        that exception is raised now, after the checkpoint (if any) is written, with the
        result as its attribute ``result``. Final: the session then refuses to advance or
        finish again (``RuntimeError``), so that the result's arrays are no live state."""
        self._check_open()
        self.finished = True
        self.close()
        state, cfg, end = self.state, self.cfg, self.end
        steps = cfg.steps
        status, message = "completed", ""
        if end == "interrupted":
            status = "interrupted"
            message = (f"interrupted ({signal_name(state.signal)}) at step {state.step} of "
                       f"{steps}: the result so "
                       f"far" + ("; checkpoint written (rerun the same call to resume)"
                                 if self.checkpoint is not None else ""))
            warn(f"stsim: run {message}; status 'interrupted'", RunInterrupted)
        elif end is not None and end.status == "stopped" and self.settled is not None \
                and not self.bad_params:
            note = cfg.resolved.plan.note
            message = (f"completed at step {end.step} of at most {steps}: the stop rule held "
                       f"({self.stop_rule}; stop={cfg.stop['rule']!r}, stsim.core.stopping)"
                       + (f"; {note}" if note else ""))
            if self.checkpoint is not None:     # the same call resumed stops at that record
                state.save(self.checkpoint, cfg, at_mark=True)
        elif end is None or (end.status == "stopped" and not self.bad_params):
            status = "stopped"
            at = state.step if end is None else end.step
            why = ("by finish() before the end" if end is None else
                   f"by the callback at its record of step {at}" if self.error is None else
                   f"because the callback or the progress callable raised "
                   f"{type(self.error).__name__}: {self.error}")
            message = f"stopped {why}, at step {at} of {steps}: the result so far"
            if self.checkpoint is not None:     # resumable: the state before that record
                state.save(self.checkpoint, cfg, at_mark=end is not None)
                message += "; checkpoint written (rerun the same call to resume)"
        elif end.status == "stopped":
            status = "diverged"
            message = (f"diverged: non-finite parameter(s) {self.bad_params} at step "
                       f"{end.step} (the loss and gradients stayed finite: entries the loss "
                       f"does not reach); history kept up to that record")
        elif end.status == "diverged":
            status = "diverged"
            message = (f"diverged: {self.rule.why} at step {end.step}; history kept up to "
                       f"the last record before it; {divergence_hint(cfg)}")
            if not state.history:   # nothing recorded yet: keep the step that diverged
                state.loss_sum, state.loss_count = float(end.out[0]), 1
                self._record(end.step)
        info = {"wall_time_s": time.perf_counter() - self.t0, **self.problem.info()}
        if self.settled is not None:
            info["settled_at_step"] = self.settled
        if status in ("interrupted", "stopped"):
            info[f"{status}_at_step"] = state.step if end in (None, "interrupted") else end.step
        if status == "interrupted":
            info["interrupted_by"] = signal_name(state.signal)
        history = {k: np.asarray(v, dtype=np.int64 if k == "step" else None)
                   for k, v in state.history.items()}
        if status in ("completed", "interrupted", "stopped"):
            if status == "completed" and self.settled is None:
                note = cfg.resolved.plan.note       # what the run does beyond the paper
                message = f"completed {steps} steps" + (f"; {note}" if note else "")
            info["assessment"], note = assess_run(cfg, history)   # plateau diagnosis
            message += f"; {note}" if note else ""
        # the result's own arrays: nothing done to the session later reaches them
        res = Result(config=cfg.to_dict(), params={k: np.array(v, copy=True)
                                                   for k, v in state.params.items()},
                     history=history,
                     status=status, message=message, info=info)
        res._config = cfg       # the resolved config, objects included (Result.attention)
        if self.error is not None:
            try:
                self.error.result = res
            except AttributeError:      # pragma: no cover - an exception with __slots__
                pass
            raise self.error
        return res
