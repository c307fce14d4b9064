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

from stsim.core.config import Config
from stsim.core.optim import all_finite, make_optimizer
from stsim.core.problem import make_problem
from stsim.core.result import Result
from stsim.core.schedule import assess_run
from stsim.core.seeds import Streams
from stsim.util.io import load_npz, save_npz
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


def _save_checkpoint(path, cfg, step, params, opt, rng_state, hist, acc):
    arrays = {f"param/{k}": v for k, v in params.items()}
    arrays.update({f"opt/{k}": v for k, v in opt.state_dict().items()})
    arrays.update({f"history/{k}": np.asarray(v, dtype=float) for k, v in hist.items()})
    meta = {"config": cfg.to_dict(), "step": step, "rng": rng_state,
            "acc": acc, "history_keys": list(hist)}
    save_npz(path, arrays, meta)


def _load_checkpoint(path, cfg, opt, rng, eval_given=True):
    """The state saved in checkpoint ``path``; its config must equal ``cfg`` except in
    ``steps`` (and ``eval_every`` when the caller left it to its default, which is
    derived from ``steps``: the checkpoint's grid is kept). Returns ``(step, params,
    history, acc, cfg)``."""
    arrays, meta = load_npz(path, what="checkpoint")
    for key in ("config", "step", "rng", "acc", "history_keys"):
        if key not in meta:
            raise ValueError(f"checkpoint {os.fspath(path)!r} lacks its {key!r} record: not a "
                             f"complete stsim checkpoint; remove it or use another path")
    old = dict(meta["config"])
    old.setdefault("lr_decay", "none")      # written before the field existed
    new = cfg.to_dict()
    # more steps may be added to a constant-step run; a decaying schedule depends on them
    free = ({"steps"} if cfg.lr_decay == "none" else set()) | (
        set() if eval_given else {"eval_every"})
    diff = sorted(k for k in new if k not in free and old.get(k) != new[k])
    if diff:
        raise ValueError(f"checkpoint {os.fspath(path)!r} was written with a different config "
                         f"(differs in {diff}); remove it or use another checkpoint path")
    if meta["step"] > cfg.steps:
        raise ValueError(f"checkpoint {os.fspath(path)!r} is at step {meta['step']}, beyond "
                         f"steps={cfg.steps}: a run cannot be shortened; give steps >= "
                         f"{meta['step']} or use another checkpoint path")
    if not eval_given:
        cfg = dataclasses.replace(cfg, eval_every=old["eval_every"])
    params = {k[6:]: v for k, v in arrays.items() if k.startswith("param/")}
    opt.load_state_dict({k[4:]: v for k, v in arrays.items() if k.startswith("opt/")})
    rng.bit_generator.state = meta["rng"]
    missing = [k for k in meta["history_keys"] if f"history/{k}" not in arrays]
    if missing or not params:
        raise ValueError(f"checkpoint {os.fspath(path)!r} lacks arrays "
                         f"{missing or ['param/*']}: the file is incomplete")
    hist = {k: list(arrays[f"history/{k}"]) for k in meta["history_keys"]}
    return meta["step"], params, hist, meta["acc"], cfg


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
    start, hist, acc = 0, {}, [0.0, 0]
    if checkpoint is not None and os.path.exists(checkpoint):
        start, params, hist, acc, cfg = _load_checkpoint(
            checkpoint, cfg, opt, rng, eval_given=options.get("eval_every") is not None)
    else:
        params = problem.init_params(streams.init())
    rule = _DivergenceRule(float(hist["loss"][0]) if hist.get("loss") else None)
    t0 = time.perf_counter()
    status, message = "completed", ""

    def record(step):
        with np.errstate(over="ignore", invalid="ignore"):
            metrics = problem.evaluate(params)
        row = {"step": step, "loss": acc[0] / max(acc[1], 1), **metrics}
        for k, v in row.items():
            hist.setdefault(k, []).append(float(v))
        acc[0], acc[1] = 0.0, 0
        if progress is not None:
            progress(step, cfg.steps, row)

    def at_top(step):
        # checkpoint = the state at the top of an iteration, before its batch is drawn,
        # so that a resumed run continues bit-for-bit like an uninterrupted one
        if checkpoint is not None and step > start and (
                step == cfg.steps or (checkpoint_every and step % checkpoint_every == 0)):
            _save_checkpoint(checkpoint, cfg, step, params, opt, state(), hist, acc)

    def observe(step, out):
        acc[0] += out[0]
        acc[1] += 1
        if step % cfg.eval_every == 0 or step == cfg.steps:
            record(step)

    if prefetch is None:
        prefetch = prefetch_default()
    src = None
    if prefetch and getattr(problem, "draws", False) and start < cfg.steps:
        src = Prefetch(problem.draw_step, rng)

    def state():
        return rng.bit_generator.state if src is None else src.state()

    def loss_grad(p):
        return problem.loss_grad(p, rng) if src is None else problem.loss_grad(p, rng, src.next())

    try:
        with one_blas_thread(uses_second_thread(getattr(problem, "enc", None), src is not None)):
            end = train_loop(loss_grad, opt, params, cfg.steps, start=start,
                             at_top=at_top, observe=observe, finite=rule)
    finally:
        if src is not None:
            src.close()
    if end.status == "diverged":
        status = "diverged"
        message = (f"diverged: {rule.why} at step {end.step}; history kept up to the last "
                   f"record before it")
        if not hist:   # nothing recorded yet: keep the step that diverged
            acc[0], acc[1] = float(end.out[0]), 1
            record(end.step)
    info = {"wall_time_s": time.perf_counter() - t0, **problem.info()}
    history = {k: np.asarray(v) for k, v in hist.items()}
    if status == "completed":
        message = f"completed {cfg.steps} steps"
        info["assessment"], note = assess_run(cfg, history)   # plateau diagnosis (issue 13)
        message += f"; {note}" if note else ""
    return Result(config=cfg.to_dict(), params=params, history=history, status=status,
                  message=message, info=info)
