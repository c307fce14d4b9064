"""One call, one run: :func:`run` (training, records, divergence, checkpoints, stops).

``run(T=200, q=3, pe="stochastic", ...)`` (every field of :class:`Config` a keyword of its
signature: :func:`with_options`) trains one model and returns a
:class:`Result` (config, final parameters, history), in the spirit of
``scipy.integrate.solve_ivp``: one call, one rich result with ``status`` and ``message``.
The pieces — setup, advance, finish — are :class:`stsim.core.session.Session`; the
problem a run trains is :mod:`stsim.core.problem`, its random streams
:class:`stsim.core.seeds.Streams`.
"""
from __future__ import annotations

import dataclasses
import inspect
import os
from collections.abc import Callable

import numpy as np

from stsim.core.attention import ATTENTIONS
from stsim.core.config import Config
from stsim.core.encodings import Encoding
from stsim.core.progress import check_progress
from stsim.core.result import Result
from stsim.core.session import (DIVERGENCE_FACTOR, LoopEnd, RunInterrupted, Session,
                                config_options, train_loop, uses_second_thread)
from stsim.util.io import check_writable_folder
from stsim.util.validate import check_int

__all__ = ["run", "with_options", "train_loop", "LoopEnd", "Config", "Result", "Session", "DIVERGENCE_FACTOR",
           "RunInterrupted", "check_checkpoint", "uses_second_thread"]


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


def run(T: int | None = None, q: int | None = None, pe: str | Encoding | None = None, *,
        config: Config | dict | None = None, checkpoint: str | os.PathLike | None = None,
        checkpoint_every: int | None = None, progress: bool | Callable | None = None,
        prefetch: bool | None = None, callback: Callable | None = None,
        **options) -> Result:
    """Train a model on STS_q and return a :class:`Result`.

    Parameters
    ----------
    T : int, optional
        Sequence length (default 200, or ``config``'s).
    q : int, optional
        Subset size, ``1 <= q <= T`` (default 3, or ``config``'s).
    pe : str or Encoding, optional
        Positional-encoding family (default ``"stochastic"``, or ``config``'s): a name or
        an :class:`~stsim.core.encodings.Encoding` object (built-ins such as
        ``NearOrthogonal(16, 20, rng)`` included), used as it is and registered nowhere;
        likewise ``optimizer`` takes an object (``SGD(lr=1.0)``, ``Adam(0.02)``: its step
        and schedule are the run's) and ``arch`` an :class:`~stsim.core.problem.ArchSpec`.
    config : Config or dict, optional
        A configuration to run: a :class:`Config` (resolved or not; the objects it was
        given are kept) or a config dict such as ``Result.config`` (reruns that run).
        ``T``, ``q``, ``pe`` and ``options`` given beside it override its fields. A dict
        of a run whose ``pe``, ``optimizer`` or ``arch`` was an object (recorded as
        ``pe_object`` etc.) cannot rebuild it from the name: the object must be given
        again (``run(config=res.config, pe=enc)``), else ``ValueError`` says so.
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
    callback : callable, optional
        ``callback(row)``, called at every record with that history row (a dict:
        ``step``, ``loss``, ``val``, ..., the cosines), returns None, True or False (a
        NumPy bool too). When it returns True the run stops there: ``status="stopped"``,
        the message names the step; history, parameters (those of that record) and the
        checkpoint are kept as for Ctrl-C, and the checkpoint resumes the run bit for bit.
        An exception raised by ``callback`` (or by a ``progress`` callable), also
        ``SystemExit``, ends the run the same way and is then raised, after the checkpoint
        is written, with the :class:`Result` as its ``result`` attribute; so is a
        ``ValueError`` naming ``callback`` when it returns anything else (an array, a
        string). A ``KeyboardInterrupt`` it raises is Ctrl-C (below).
    **options
        Every other field of :class:`Config`, a keyword with its default (the signature
        lists them, made from the fields: :func:`with_options`): ``d``, ``d_e``,
        ``sampler``, ``model``, ``query``, ``attention`` — a mechanism's name,
        {MECHANISM_NAMES}, or an :class:`~stsim.core.attention.Attention` object
        (docs/attention.md) —, ``rank``, ``temperature``,
        ``objective``, ``optimizer``, ``lr`` — a number, or a step per parameter such as
        ``{"W": 200, "V": 5.5}`` —, ``target`` — ``"mean"``, ``"moment:k"``,
        ``"variance"`` or a :class:`~stsim.core.targets.Target` (docs/targets.md) —,
        ``freeze`` — blocks held at their initial value,
        e.g. ``("W_xx", "W_xe")``, W's token rows (docs/model.md) —, ``steps``,
        ``batch``, ``init``, ``seed`` — an int, a ``numpy.random.SeedSequence`` or a
        ``Generator`` —, ``T_test``, ``q_test``, ``eval_every``, ... Unknown names
        raise. ``run(**res.config)`` reruns ``res`` (its step, steps and held blocks
        included); a step per block copied without its ``freeze`` trains W's token rows,
        which the derived step holds (the message says so).

    Returns
    -------
    Result
        Its ``status``: ``"completed"``, ``"diverged"``, ``"interrupted"`` or
        ``"stopped"``.

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
    if callback is not None and not callable(callback):
        raise ValueError(f"callback must be a callable callback(row) or None, got {callback!r}")
    if prefetch is not None and not isinstance(prefetch, (bool, np.bool_)):
        raise ValueError(f"prefetch must be True, False or None (automatic), got {prefetch!r}")
    checkpoint, checkpoint_every = check_checkpoint(checkpoint, checkpoint_every)
    given = {k: v for k, v in (("T", T), ("q", q), ("pe", pe)) if v is not None}
    opts = config_options(config, {**given, **options})
    cfg = Config.from_options(**opts)
    if checkpoint is not None:
        check_writable_folder(os.path.dirname(os.path.abspath(checkpoint)),
                              "the folder of checkpoint")
    session = Session(cfg, checkpoint=checkpoint, checkpoint_every=checkpoint_every,
                      progress=progress, prefetch=prefetch, callback=callback,
                      eval_given=opts.get("eval_every") is not None)
    try:
        session.advance()
    finally:
        session.close()
    return session.finish()


def with_options(fn):
    """``fn`` (a function or class) with its ``**options`` spelled out in its signature
    (``__signature__``, what ``help``, Jupyter and ``inspect.signature`` show): every field
    of :class:`Config` a keyword with the field's default and type, taken from the fields,
    where they live; a parameter of ``fn`` named as a field shows the field's default."""
    try:
        sig = inspect.signature(fn, eval_str=True)
    except (TypeError, NameError):      # Python 3.9: no "X | Y" at run time
        sig = inspect.signature(fn)
    fields = {f.name: f for f in dataclasses.fields(Config)}
    own = [p.replace(default=fields[p.name].default) if p.name in fields else p
           for p in sig.parameters.values() if p.kind is not p.VAR_KEYWORD]
    rest = [inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default,
                              annotation=_type(f.type))
            for f in fields.values() if f.name not in sig.parameters]
    fn.__signature__ = sig.replace(parameters=own + rest)
    return fn


def _type(text: str):
    """The annotation a field's type text stands for (the text where it cannot be
    evaluated, as ``int | None`` before Python 3.10)."""
    try:
        return eval(text, {})
    except (TypeError, NameError, SyntaxError):
        return text


if run.__doc__:      # None under python -OO; the names as registered, written once there
    run.__doc__ = run.__doc__.replace("{MECHANISM_NAMES}", ", ".join(
        f'``"{n}"``' for n in ATTENTIONS))
with_options(run)
with_options(Session)
