"""Configuration of a run: every option of :func:`stsim.run`, validated in one place.

:meth:`Config.resolve` checks every field (``ValueError`` naming the parameter and its
allowed range) and fills the defaults; the command line's ``stsim run`` flags are
generated from the fields of :class:`Config`, so Python and command-line names and
defaults cannot drift apart.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

from stsim.core.encodings import SAMPLERS, resolve_encoding
from stsim.core.model import MODELS, QUERIES
from stsim.core.optim import OPTIMIZERS
from stsim.util.validate import check_choice, check_int, check_lr, int_tuple

__all__ = ["Config", "OBJECTIVES", "ARCHS", "INITS", "DEFAULT_LR", "field_help"]

OBJECTIVES = ("online", "population")
ARCHS = ("transformer", "fcn")
INITS = ("zero", "random")
DEFAULT_LR = {"sgd": 1.0, "gd": 1.0, "adam": 0.01}


def _field(default, help, default_text=None):
    """A :class:`Config` field with its help text; ``default_text`` says what a ``None``
    default means (the command line shows it as ``(default: …)``)."""
    return field(default=default, metadata={"help": help, "default_text": default_text})


@dataclass
class Config:
    """All options of a run; :meth:`resolve` validates them and fills defaults.

    The fields, their defaults and meanings are listed below (generated from the field
    metadata, which also gives the ``stsim run`` flags their help text).
    """

    T: int = _field(200, "sequence length")
    q: int = _field(3, "subset size, 1 <= q <= T")
    pe: str = _field("stochastic", "positional encodings: onehot | near-orthogonal | stochastic")
    d: int = _field(5, "token dimension")
    d_e: int | None = _field(None, "PE width", "max(T, T_test) for one-hot families, 64 for dense")
    sampler: str = _field("slots", "law of the stochastic family: slots | sphere")
    model: str = _field("theory", "theory | practical (attention also over the query token)")
    query: str = _field("sum", "query token: sum (p_query = sum of p_j, j in y) | mean")
    objective: str = _field("online", "online (minibatch loss) | population (exact population "
                            "loss; needs optimizer gd)")
    optimizer: str = _field("sgd", "sgd (fresh batch every step) | gd (a fixed sample of n_train "
                            "points, or the population) | adam (fresh batches)")
    lr: float | None = _field(None, "learning rate", "1.0 for sgd/gd, 0.01 for adam")
    steps: int = _field(1000, "optimiser steps")
    batch: int = _field(256, "batch size")
    n_train: int | None = _field(None, "size of the fixed sample for optimizer gd", "batch")
    init: str = _field("zero", "initialisation: zero | random (i.i.d. N(0, init_scale^2))")
    init_scale: float = _field(0.02, "std of the random initialisation")
    seed: int = _field(0, "seed of every random stream")
    T_test: tuple = _field((), "out-of-distribution validation lengths (comma list, e.g. 60,80)",
                           "none")
    q_test: tuple = _field((), "out-of-distribution validation subset sizes (comma list)",
                           "none")
    n_val: int = _field(128, "points per validation set (drawn once, before training)")
    eval_every: int | None = _field(None, "record metrics every k steps (and at the end)",
                                    "max(1, steps // 100)")
    arch: str = _field("transformer", "transformer | fcn (fully-connected baseline, "
                       "stsim.baselines.fcn)")
    width: int | None = _field(None, "FCN hidden width", "64")
    depth: int = _field(1, "FCN number of hidden layers")

    @classmethod
    def from_options(cls, **options) -> "Config":
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(options) - names)
        if unknown:
            raise ValueError(f"unknown option(s) {unknown}; allowed: {sorted(names)}")
        return cls(**options).resolve()

    def resolve(self) -> "Config":
        """Validate every field (``ValueError`` naming the parameter) and fill defaults."""
        c = dataclasses.replace(self)
        c.T = check_int("T", c.T, 1)
        c.q = check_int("q", c.q, 1, c.T)
        c.d = check_int("d", c.d, 1)
        c.T_test = int_tuple("T_test", c.T_test, c.q)
        c.q_test = int_tuple("q_test", c.q_test, 1, c.T)
        for name, val, allowed in (("model", c.model, MODELS), ("query", c.query, QUERIES),
                                   ("optimizer", c.optimizer, OPTIMIZERS),
                                   ("init", c.init, INITS), ("objective", c.objective, OBJECTIVES),
                                   ("arch", c.arch, ARCHS), ("sampler", c.sampler, SAMPLERS)):
            check_choice(name, val, allowed)
        c.lr = check_lr(DEFAULT_LR[c.optimizer] if c.lr is None else c.lr)
        c.steps = check_int("steps", c.steps, 0)
        c.batch = check_int("batch", c.batch, 1)
        c.n_train = check_int("n_train", c.batch if c.n_train is None else c.n_train, 1)
        c.n_val = check_int("n_val", c.n_val, 1)
        c.seed = check_int("seed", c.seed, 0)
        c.eval_every = check_int("eval_every", max(1, c.steps // 100) if c.eval_every is None
                                 else c.eval_every, 1)
        c.init_scale = float(c.init_scale)
        if not math.isfinite(c.init_scale) or c.init_scale < 0:
            raise ValueError(f"init_scale must be a finite number >= 0, got {self.init_scale!r}")
        c.depth = check_int("depth", c.depth, 1)
        if c.arch == "fcn":
            c.width = check_int("width", 64 if c.width is None else c.width, 1)
        if c.objective == "population" and c.optimizer != "gd":
            raise ValueError("objective='population' needs optimizer='gd' "
                             f"(got optimizer={c.optimizer!r})")
        if c.arch == "transformer":
            c.pe, c.d_e = resolve_encoding(c.pe, T_max=c.T_max, d_e=c.d_e, sampler=c.sampler)
        return c

    @property
    def T_max(self) -> int:
        """The longest sequence any encoding must cover: ``max(T, *T_test)``."""
        return max((self.T,) + tuple(self.T_test))

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["T_test"], d["q_test"] = list(self.T_test), list(self.q_test)
        return d


def field_help(f: dataclasses.Field) -> str:
    """``"<help> (default: <value>)"`` for a field of :class:`Config`."""
    text = f.metadata.get("default_text")
    if text is None:
        text = ",".join(map(str, f.default)) if isinstance(f.default, tuple) else str(f.default)
    return f"{f.metadata['help']} (default: {text})"


if Config.__doc__:  # None under python -OO
    Config.__doc__ += "\n    Attributes\n    ----------\n" + "".join(
        f"    {f.name} : {field_help(f)}\n" for f in dataclasses.fields(Config))
