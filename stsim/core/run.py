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

import numpy as np

from stsim.core.config import Config
from stsim.core.optim import make_optimizer
from stsim.core.problem import make_problem
from stsim.core.result import Result
from stsim.core.schedule import assess_run
from stsim.core.seeds import Streams
from stsim.util.io import load_npz, save_npz
from stsim.util.validate import check_int

__all__ = ["run", "Config", "Result"]


# --------------------------------------------------------------------------------------
# the loop
# --------------------------------------------------------------------------------------
def _finite(loss, grads):
    return math.isfinite(loss) and all(np.all(np.isfinite(g)) for g in grads.values())


def _save_checkpoint(path, cfg, step, params, opt, rng, hist, acc):
    arrays = {f"param/{k}": v for k, v in params.items()}
    arrays.update({f"opt/{k}": v for k, v in opt.state_dict().items()})
    arrays.update({f"history/{k}": np.asarray(v, dtype=float) for k, v in hist.items()})
    meta = {"config": cfg.to_dict(), "step": step, "rng": rng.bit_generator.state,
            "acc": acc, "history_keys": list(hist)}
    save_npz(path, arrays, meta)


def _load_checkpoint(path, cfg, opt, rng):
    arrays, meta = load_npz(path)
    old = dict(meta["config"])
    new = cfg.to_dict()
    diff = sorted(k for k in new if k != "steps" and old.get(k) != new[k])
    if diff:
        raise ValueError(f"checkpoint {os.fspath(path)!r} was written with a different config "
                         f"(differs in {diff}); remove it or use another checkpoint path")
    params = {k[6:]: v for k, v in arrays.items() if k.startswith("param/")}
    opt.load_state_dict({k[4:]: v for k, v in arrays.items() if k.startswith("opt/")})
    rng.bit_generator.state = meta["rng"]
    hist = {k: list(arrays[f"history/{k}"]) for k in meta["history_keys"]}
    return meta["step"], params, hist, meta["acc"]


def run(T=200, q=3, pe="stochastic", *, checkpoint=None, checkpoint_every=None, progress=None,
        **options) -> Result:
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

    Divergence (a non-finite loss or gradient) stops the run: ``status="diverged"``, the
    message names the step, and the history up to the last good record is kept.

    Example
    -------
    >>> res = run(T=20, q=2, pe="stochastic", steps=50, batch=32, seed=1)
    >>> res.status, sorted(res.history)[:3]
    ('completed', ['cos_V', 'cos_W', 'loss'])
    """
    cfg = Config.from_options(T=T, q=q, pe=pe, **options)
    streams = Streams(cfg.seed)
    problem = make_problem(cfg, streams)
    opt = make_optimizer(cfg.optimizer, cfg.lr)
    rng = streams.train()
    if checkpoint_every is not None:
        checkpoint_every = check_int("checkpoint_every", checkpoint_every, 1)
    start, hist, acc = 0, {}, [0.0, 0]
    if checkpoint is not None and os.path.exists(checkpoint):
        start, params, hist, acc = _load_checkpoint(checkpoint, cfg, opt, rng)
    else:
        params = problem.init_params(streams.init())
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

    step = start
    while True:
        # checkpoint = the state at the top of an iteration, before its batch is drawn,
        # so that a resumed run continues bit-for-bit like an uninterrupted one
        if checkpoint is not None and step > start and (
                step == cfg.steps or (checkpoint_every and step % checkpoint_every == 0)):
            _save_checkpoint(checkpoint, cfg, step, params, opt, rng, hist, acc)
        with np.errstate(over="ignore", invalid="ignore"):  # divergence is reported below
            loss, grads = problem.loss_grad(params, rng)
        if not _finite(loss, grads):
            status = "diverged"
            message = (f"diverged: non-finite {'loss' if not math.isfinite(loss) else 'gradient'} "
                       f"at step {step}; history kept up to the last record before it")
            break
        acc[0] += loss
        acc[1] += 1
        if step % cfg.eval_every == 0 or step == cfg.steps:
            record(step)
        if step >= cfg.steps:
            break
        opt.step(params, grads)
        step += 1
    info = {"wall_time_s": time.perf_counter() - t0, **problem.info()}
    history = {k: np.asarray(v) for k, v in hist.items()}
    if status == "completed":
        message = f"completed {cfg.steps} steps"
        info["assessment"], note = assess_run(cfg, history)   # plateau diagnosis (issue 13)
        message += f"; {note}" if note else ""
    return Result(config=cfg.to_dict(), params=params, history=history, status=status,
                  message=message, info=info)
