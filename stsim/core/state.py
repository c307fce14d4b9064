"""The state of a run between two steps — what a checkpoint saves and restores.

:class:`RunState` holds everything a run carries from one step to the next (its
attributes). :meth:`RunState.save` writes it at the top of a step (before the step's batch
is drawn), so a run resumed by :meth:`RunState.load` continues bit-for-bit like an
uninterrupted one.

The checkpoint file (``stsim.util.io.save_npz``): arrays ``param/<name>``, ``opt/<name>``
(the optimiser's ``state_dict``), ``history/<key>``; JSON metadata ``config`` (the resolved
config), ``step``, ``rng`` (the bit generator's state), ``acc`` (``[loss sum, count]``) and
``history_keys`` (their order). :meth:`RunState.load` checks all of it before anything is
changed or written (:func:`check_params`, :func:`check_history`): a corrupt checkpoint is
refused with a ``ValueError`` naming the file and the defect, never trained on.
"""
from __future__ import annotations

import contextlib
import math
import os
import signal
import threading

import numpy as np

from stsim.core.config import ADDED_LATER
from stsim.core.records import upgrade_config
from stsim.util.io import load_npz, save_npz
from stsim.util.signals import route_termination
from stsim.util.validate import check_state_dict

__all__ = ["RunState", "check_params", "check_history"]

_META_KEYS = ("config", "step", "rng", "acc", "history_keys")


def _bad(path, what, defect):
    return ValueError(f"{what} {os.fspath(path)!r} is corrupt: {defect}; give another "
                      f"path")


def check_params(path, what, params: dict, shapes: dict | None, *, finite: bool) -> None:
    """The parameters read from ``path`` (a ``what``: "checkpoint", "result file"): present
    (every name of ``shapes`` when it is known, and no other), float arrays of those
    shapes, finite when ``finite`` (a checkpoint: training would go on from them; a
    diverged result may hold non-finite values). ``ValueError`` naming the file and the
    defect."""
    if not params:
        raise _bad(path, what, "it holds no parameters (no param/* array)")
    if shapes is not None:
        missing = sorted(set(shapes) - set(params))
        extra = sorted(set(params) - set(shapes))
        if missing or extra:
            raise _bad(path, what, "its parameters are " + (
                f"missing {['param/' + k for k in missing]}" if missing else "") + (
                " and " if missing and extra else "") + (
                f"not of this architecture: {['param/' + k for k in extra]}" if extra else ""))
    for k, v in params.items():
        if v.dtype.kind != "f":
            raise _bad(path, what, f"param/{k} has dtype {v.dtype}, not a float array")
        if shapes is not None and v.shape != shapes[k]:
            raise _bad(path, what, f"param/{k} has shape {v.shape}, the config needs "
                                   f"{shapes[k]}")
        if finite and not np.all(np.isfinite(v)):
            bad = int(np.size(v) - np.count_nonzero(np.isfinite(v)))
            raise _bad(path, what, f"param/{k} holds {bad} non-finite value(s) (NaN or inf)")


def check_history(path, what, history: dict, *, step: int | None = None) -> None:
    """The history read from ``path``: 1-D numeric arrays of one length, ``step`` (when
    recorded) finite, integral and increasing, and for a checkpoint (``step`` given) not
    beyond its step. ``ValueError`` naming the file and the defect."""
    lengths = {}
    for k, v in history.items():
        if v.ndim != 1 or v.dtype.kind not in "fiu":
            raise _bad(path, what, f"history/{k} is not a 1-D numeric array (shape "
                                   f"{v.shape}, dtype {v.dtype})")
        lengths[k] = len(v)
    if len(set(lengths.values())) > 1:
        raise _bad(path, what, f"its history arrays have unequal lengths {lengths}")
    if history and "step" not in history:
        raise _bad(path, what, "its history has no 'step' record")
    if "step" in history and len(history["step"]):
        st = history["step"].astype(float)
        if not (np.all(np.isfinite(st)) and np.all(st == np.round(st)) and st[0] >= 0
                and np.all(np.diff(st) > 0)):
            raise _bad(path, what, "history/step is not an increasing list of whole steps")
        if step is not None and st[-1] > step:
            raise _bad(path, what, f"its history reaches step {int(st[-1])}, beyond its "
                                   f"step {step}")


def _check_meta(path, meta, arrays):
    """The checkpoint's JSON records (types and ranges) and the history arrays they name."""
    what = "checkpoint"
    if not isinstance(meta["config"], dict):
        raise _bad(path, what, "its config record is not a JSON object")
    step = meta["step"]
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise _bad(path, what, f"its step record {step!r} is not a whole number >= 0")
    acc = meta["acc"]
    if not (isinstance(acc, list) and len(acc) == 2 and all(
            isinstance(a, (int, float)) and not isinstance(a, bool) for a in acc)
            and math.isfinite(acc[0]) and float(acc[1]).is_integer() and acc[1] >= 0):
        raise _bad(path, what, f"its loss accumulator {acc!r} is not [finite sum, count >= 0]")
    keys = meta["history_keys"]
    if not (isinstance(keys, list) and all(isinstance(k, str) for k in keys)):
        raise _bad(path, what, "its history_keys record is not a list of names")
    missing = [f"history/{k}" for k in keys if f"history/{k}" not in arrays]
    if missing:
        raise _bad(path, what, f"it lacks the arrays {missing}")
    if not isinstance(meta["rng"], dict):
        raise _bad(path, what, "its generator state is not a JSON object")


class RunState:
    """The state of a run (module docstring).

    Attributes
    ----------
    params : dict of arrays
        The parameters, updated in place by the optimiser.
    opt : object
        The optimiser (``step``, ``state_dict``, ``load_state_dict``).
    rng : numpy.random.Generator
        The training stream.
    step : int
        The step at whose top the state is (updates done so far).
    history : dict of lists
        The records so far, key by key (``step``, ``loss``, the metrics).
    loss_sum : float
        The sum of the training losses since the last record.
    loss_count : int
        Their number.
    source : Prefetch or None
        The batches drawn ahead from ``rng`` (:meth:`attach`); the saved generator state is
        then the one at the top of the current step, not ``rng``'s own.
    """

    def __init__(self, params: dict, opt, rng: np.random.Generator, *, step: int = 0,
                 history: dict | None = None, acc=(0.0, 0)):
        self.params, self.opt, self.rng = params, opt, rng
        self.step = int(step)
        self.history = {} if history is None else history
        self.loss_sum, self.loss_count = float(acc[0]), int(acc[1])
        self.source = None
        self.interrupted = False
        self._mark = None
        self.signal = None

    # ---- Ctrl-C -----------------------------------------------------------------------
    @contextlib.contextmanager
    def catch_interrupt(self):
        """While inside, the first SIGINT (Ctrl-C) sets :attr:`interrupted` instead of
        raising ``KeyboardInterrupt``, and puts the previous handler back: the loop stops
        at its next step boundary, and a second Ctrl-C interrupts at once, as usual.

        It acts only where Ctrl-C would raise ``KeyboardInterrupt`` here: in the main
        thread, with Python's default SIGINT handler (a notebook's kernel installs it while
        a cell runs), in a process that is not a ``multiprocessing`` worker (a pool's
        workers get the terminal's SIGINT too; their driver decides). Elsewhere it changes
        nothing. Yields whether it acts."""
        import multiprocessing
        acts = (threading.current_thread() is threading.main_thread()
                and signal.getsignal(signal.SIGINT) is signal.default_int_handler
                and multiprocessing.parent_process() is None)
        if not acts:
            def flag(signum, frame):
                self.interrupted, self.signal = True, signum
            # Ctrl-C does not reach the loop (SIGINT ignored: a background job), but a
            # SIGTERM/SIGHUP the stsim command handles still stops it with its result kept
            # (under another SIGINT handler, e.g. a sweep's, they take that handler's path)
            main = (threading.current_thread() is threading.main_thread()
                    and multiprocessing.parent_process() is None
                    and signal.getsignal(signal.SIGINT) is signal.SIG_IGN)
            with route_termination(flag) if main else contextlib.nullcontext():
                yield False
            return
        previous = signal.getsignal(signal.SIGINT)

        def handler(signum, frame):
            self.interrupted = True
            self.signal = signum     # SIGINT, or SIGTERM/SIGHUP (stsim.util.signals)
            signal.signal(signal.SIGINT, previous)

        signal.signal(signal.SIGINT, handler)
        try:
            yield True
        finally:
            signal.signal(signal.SIGINT, previous)

    # ---- the training stream ----------------------------------------------------------
    def attach(self, source) -> None:
        """Draw the minibatches through ``source`` (a Prefetch on :attr:`rng`)."""
        self.source = source

    def rng_state(self) -> dict:
        """The generator state at the top of the current step."""
        return self.rng.bit_generator.state if self.source is None else self.source.state()

    def loss_grad(self, problem, params):
        """``problem.loss_grad`` of this step's data (drawn ahead, or from :attr:`rng`)."""
        if self.source is None:
            return problem.loss_grad(params, self.rng)
        return problem.loss_grad(params, self.rng, self.source.next())

    # ---- records ----------------------------------------------------------------------
    def accumulate(self, loss: float) -> None:
        """Add one step's training loss to the accumulator."""
        self.loss_sum += loss
        self.loss_count += 1

    def record(self, step: int, metrics: dict) -> dict:
        """Append the row ``{"step", "loss" (the accumulator's mean), **metrics}`` to the
        history, reset the accumulator, return the row."""
        row = {"step": step, "loss": self.loss_sum / max(self.loss_count, 1), **metrics}
        for k, v in row.items():
            self.history.setdefault(k, []).append(float(v))
        self.loss_sum, self.loss_count = 0.0, 0
        return row

    def mark(self) -> None:
        """Remember the state at the top of this step (step, generator, accumulator, the
        number of records): where :meth:`save` with ``at_mark`` rewinds to when the run
        stops at this step's record."""
        self._mark = (self.step, self.rng_state(), self.loss_sum, self.loss_count,
                      len(self.history.get("step", ())))

    @property
    def first_loss(self) -> float | None:
        """The first recorded training loss (None before the first record)."""
        return float(self.history["loss"][0]) if self.history.get("loss") else None

    # ---- checkpoints ------------------------------------------------------------------
    def save(self, path, cfg, at_mark: bool = False) -> None:
        """Write the checkpoint ``path`` (atomically) for the resolved config ``cfg``.

        ``at_mark``: the run stopped at the record of the step :meth:`mark` remembered,
        before its update (parameters and optimiser are still those of the top of that
        step): write the state of the top of that step — its generator state and
        accumulator, the history without that record —, so a resumed run draws that
        step's batch again and continues bit for bit like an uninterrupted one."""
        step, rng, acc, n = self.step, self.rng_state(), [self.loss_sum, self.loss_count], None
        if at_mark:
            step, rng, loss_sum, loss_count, n = self._mark
            acc = [loss_sum, loss_count]
        arrays = {f"param/{k}": v for k, v in self.params.items()}
        arrays.update({f"opt/{k}": v for k, v in
                       check_state_dict(self.opt, self.opt.state_dict()).items()})
        arrays.update({f"history/{k}": np.asarray(v[:n], dtype=float)
                       for k, v in self.history.items()})
        meta = {"config": cfg.to_dict(), "step": step, "rng": rng, "acc": acc,
                "history_keys": list(self.history)}
        save_npz(path, arrays, meta)

    @staticmethod
    def read_checked(path, arrays: dict, meta: dict, shapes: dict | None) -> dict:
        """The parameters of a checkpoint read from ``path`` (``arrays, meta`` of
        :func:`~stsim.util.io.load_npz`), after checking all of it: the records, the
        parameters (of ``shapes`` when known; float; finite), the history
        (:func:`check_history`), the optimiser arrays (numeric and finite;
        ``<slot>/<param>`` of its parameter's shape) and the generator state. A defect
        raises ``ValueError`` naming the file and the defect."""
        if "status" in meta and "step" not in meta:     # a file written by Result.save
            raise ValueError(f"checkpoint {os.fspath(path)!r} is a saved result, not a "
                             f"checkpoint: to train on from its parameters, start a new run "
                             f"with init={os.fspath(path)!r}; checkpoint= takes a file that "
                             f"run(checkpoint=...) writes, or a path where none is yet")
        for key in _META_KEYS:
            if key not in meta:
                raise ValueError(f"checkpoint {os.fspath(path)!r} lacks its {key!r} record: not "
                                 f"a complete stsim checkpoint; give checkpoint= another path")
        _check_meta(path, meta, arrays)
        params = {k[6:]: v for k, v in arrays.items() if k.startswith("param/")}
        check_params(path, "checkpoint", params, shapes, finite=True)
        history = {k: arrays[f"history/{k}"] for k in meta["history_keys"]}
        check_history(path, "checkpoint", history, step=meta["step"])
        for k, v in arrays.items():
            if not k.startswith("opt/"):
                continue
            if v.dtype.kind not in "fiub" or not np.all(np.isfinite(v)):
                raise _bad(path, "checkpoint", f"{k} is not a finite numeric array")
            slot = k.split("/")[-1]
            if k.count("/") >= 2 and slot in params and v.shape != params[slot].shape:
                raise _bad(path, "checkpoint", f"{k} has shape {v.shape}, its parameter "
                                               f"{params[slot].shape}")
        kind = getattr(np.random, str(meta["rng"].get("bit_generator")), None)
        try:
            if not (isinstance(kind, type) and issubclass(kind, np.random.BitGenerator)):
                raise ValueError(f"unknown bit generator {meta['rng'].get('bit_generator')!r}")
            kind().state = meta["rng"]
        except (TypeError, ValueError, KeyError, OverflowError) as exc:
            raise _bad(path, "checkpoint", f"its generator state is invalid ({exc})") from None
        return params

    @classmethod
    def load(cls, path, cfg, opt, rng, eval_given: bool = True, template: dict | None = None):
        """The state saved in checkpoint ``path`` and the config to continue with:
        ``(state, cfg)``. ``opt`` and ``rng`` (built for ``cfg``) get the saved optimiser
        and generator states.

        The checkpoint's config (written by any version: :func:`upgrade_config`) must equal
        ``cfg`` except in ``steps`` (for a constant-step run; a decaying schedule depends
        on them) and ``eval_every`` when the caller left it to its default (derived from
        ``steps``: the checkpoint's grid is kept); its step must not exceed ``cfg.steps``.

        Everything is checked (:meth:`read_checked`, the parameters against ``template``,
        the run's initial parameters: same names and shapes) before ``opt`` or ``rng`` is
        touched; a defect raises ``ValueError`` naming the file and the defect.
        """
        arrays, meta = load_npz(path, what="checkpoint")
        new = cfg.to_dict()
        free = ({"steps"} if cfg.lr_decay == "none" else set()) | (
            set() if eval_given else {"eval_every"})
        if isinstance(meta.get("config"), dict):
            # another run's checkpoint (another T: its parameters have other shapes) is
            # named as such, with the fields that differ, before its parts are checked
            old = upgrade_config(meta["config"])
            # every key either side recorded (an object's class and settings too); a
            # field left out at its value (ADDED_LATER) is compared at that value
            keys = (set(new) | set(old) | set(ADDED_LATER)) - free
            diff = sorted(k for k in keys if old.get(k, ADDED_LATER.get(k)) !=
                          new.get(k, ADDED_LATER.get(k)))
            if diff:
                what = ", ".join(f"{k}: {old.get(k, ADDED_LATER.get(k))!r} there, "
                                 f"{new.get(k, ADDED_LATER.get(k))!r} here"
                                 for k in diff[:6]) + (", ..." if len(diff) > 6 else "")
                why = ""
                if "steps" in diff and cfg.lr_decay != "none":
                    why = (f"; lr_decay={cfg.lr_decay!r} (Adam's default) ties the step "
                           f"schedule to the step count, so a run cannot be extended: resume "
                           f"with steps={old.get('steps')!r}, or give lr_decay='none' to runs "
                           f"meant to be extended")
                raise ValueError(f"checkpoint {os.fspath(path)!r} was written with a "
                                 f"different config (differs in {diff}: {what}){why}; give "
                                 f"another checkpoint path, or init={os.fspath(path)!r} to "
                                 f"start a new run from its parameters")
        shapes = None if template is None else {k: v.shape for k, v in template.items()}
        params = cls.read_checked(path, arrays, meta, shapes)   # a dict config: old set above
        kind = meta["rng"].get("bit_generator")
        if kind != type(rng.bit_generator).__name__:
            raise ValueError(f"checkpoint {os.fspath(path)!r} holds a {kind} generator state; "
                             f"this run's training stream is "
                             f"{type(rng.bit_generator).__name__} (numpy.random.default_rng): "
                             f"not a checkpoint of this run; give another path")
        if meta["step"] > cfg.steps:
            raise ValueError(f"checkpoint {os.fspath(path)!r} is at step {meta['step']}, beyond "
                             f"steps={cfg.steps}: a run cannot be shortened; give steps >= "
                             f"{meta['step']} or use another checkpoint path")
        if not eval_given:
            cfg = cfg.keeping_resolved(eval_every=old["eval_every"])
        try:
            opt.load_state_dict({k[4:]: v for k, v in arrays.items() if k.startswith("opt/")})
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise _bad(path, "checkpoint", f"the optimiser cannot use its state "
                                           f"({type(exc).__name__}: {exc})") from None
        rng.bit_generator.state = meta["rng"]
        history = {k: list(arrays[f"history/{k}"]) for k in meta["history_keys"]}
        return cls(params, opt, rng, step=meta["step"], history=history,
                   acc=meta["acc"]), cfg
