"""The state of a run between two steps — what a checkpoint saves and restores.

:class:`RunState` holds everything :func:`stsim.core.run.run` carries from one step to the
next: the parameters, the optimiser (its state), the training generator (its state: where
the next minibatch comes from, also while a :class:`~stsim.util.prefetch.Prefetch` draws
ahead), the recorded history, the training-loss accumulator since the last record, and
the step. :meth:`RunState.save` writes it at the top of a step (before the step's batch is
drawn), so a run resumed by :meth:`RunState.load` continues bit-for-bit like an
uninterrupted one.

The checkpoint file (``stsim.util.io.save_npz``): arrays ``param/<name>``, ``opt/<name>``
(the optimiser's ``state_dict``), ``history/<key>``; JSON metadata ``config`` (the resolved
config), ``step``, ``rng`` (the bit generator's state), ``acc`` (``[loss sum, count]``) and
``history_keys`` (their order).
"""
from __future__ import annotations

import dataclasses
import os

import numpy as np

from stsim.core.config import upgrade_config
from stsim.util.io import load_npz, save_npz

__all__ = ["RunState"]

_META_KEYS = ("config", "step", "rng", "acc", "history_keys")


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

    @property
    def first_loss(self) -> float | None:
        """The first recorded training loss (None before the first record)."""
        return float(self.history["loss"][0]) if self.history.get("loss") else None

    # ---- checkpoints ------------------------------------------------------------------
    def save(self, path, cfg) -> None:
        """Write the checkpoint ``path`` (atomically) for the resolved config ``cfg``."""
        arrays = {f"param/{k}": v for k, v in self.params.items()}
        arrays.update({f"opt/{k}": v for k, v in self.opt.state_dict().items()})
        arrays.update({f"history/{k}": np.asarray(v, dtype=float)
                       for k, v in self.history.items()})
        meta = {"config": cfg.to_dict(), "step": self.step, "rng": self.rng_state(),
                "acc": [self.loss_sum, self.loss_count], "history_keys": list(self.history)}
        save_npz(path, arrays, meta)

    @classmethod
    def load(cls, path, cfg, opt, rng, eval_given: bool = True):
        """The state saved in checkpoint ``path`` and the config to continue with:
        ``(state, cfg)``. ``opt`` and ``rng`` (built for ``cfg``) get the saved optimiser
        and generator states.

        The checkpoint's config (written by any version: :func:`upgrade_config`) must equal
        ``cfg`` except in ``steps`` (for a constant-step run; a decaying schedule depends
        on them) and ``eval_every`` when the caller left it to its default (derived from
        ``steps``: the checkpoint's grid is kept); its step must not exceed ``cfg.steps``.
        """
        arrays, meta = load_npz(path, what="checkpoint")
        for key in _META_KEYS:
            if key not in meta:
                raise ValueError(f"checkpoint {os.fspath(path)!r} lacks its {key!r} record: not "
                                 f"a complete stsim checkpoint; remove it or use another path")
        old = upgrade_config(meta["config"])
        new = cfg.to_dict()
        free = ({"steps"} if cfg.lr_decay == "none" else set()) | (
            set() if eval_given else {"eval_every"})
        diff = sorted(k for k in new if k not in free and old.get(k) != new[k])
        if diff:
            raise ValueError(f"checkpoint {os.fspath(path)!r} was written with a different "
                             f"config (differs in {diff}); remove it or use another checkpoint "
                             f"path")
        if meta["step"] > cfg.steps:
            raise ValueError(f"checkpoint {os.fspath(path)!r} is at step {meta['step']}, beyond "
                             f"steps={cfg.steps}: a run cannot be shortened; give steps >= "
                             f"{meta['step']} or use another checkpoint path")
        if not eval_given:
            cfg = dataclasses.replace(cfg, eval_every=old["eval_every"])
        params = {k[6:]: v for k, v in arrays.items() if k.startswith("param/")}
        missing = [k for k in meta["history_keys"] if f"history/{k}" not in arrays]
        if missing or not params:
            raise ValueError(f"checkpoint {os.fspath(path)!r} lacks arrays "
                             f"{missing or ['param/*']}: the file is incomplete")
        opt.load_state_dict({k[4:]: v for k, v in arrays.items() if k.startswith("opt/")})
        rng.bit_generator.state = meta["rng"]
        history = {k: list(arrays[f"history/{k}"]) for k in meta["history_keys"]}
        return cls(params, opt, rng, step=meta["step"], history=history,
                   acc=meta["acc"]), cfg
