"""Configuration of a run: every option of :func:`stsim.run`, validated in one place.

:meth:`Config.resolve` checks every field (``ValueError`` naming the parameter and its
allowed range) and fills the defaults; the command line's ``stsim run`` flags are
generated from the fields of :class:`Config`, so Python and command-line names and
defaults cannot drift apart.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from stsim.core.encodings import SAMPLERS, resolve_encoding
from stsim.core.model import MODELS, QUERIES
from stsim.core.optim import OPTIMIZERS
from stsim.util.validate import check_choice, check_int, check_lr, int_tuple

__all__ = ["Config", "OBJECTIVES", "ARCHS", "INITS", "DEFAULT_LR"]

OBJECTIVES = ("online", "population")
ARCHS = ("transformer", "fcn")
INITS = ("zero", "random")
DEFAULT_LR = {"sgd": 1.0, "gd": 1.0, "adam": 0.01}


@dataclass
class Config:
    """All options of a run; :meth:`resolve` validates them and fills defaults.

    Attributes (defaults in brackets)
    ---------------------------------
    T [200], q [3], d [5] : task sizes, ``1 <= q <= T``.
    pe ["stochastic"] : ``onehot`` | ``near-orthogonal`` | ``stochastic``.
    sampler ["slots"] : law of the stochastic family, ``slots`` | ``sphere``.
    d_e [None] : PE width; default ``max(T, T_test)`` for one-hot families, 64 for dense.
    model ["theory"] : ``theory`` | ``practical`` (attention also over the query token).
    query ["sum"] : ``p_query = Σ_{j∈y} p_j`` (``sum``) or the mean (``mean``).
    objective ["online"] : ``online`` (minibatch loss) | ``population`` (exact population
        loss; needs ``optimizer="gd"``, see :mod:`stsim.theory.population`).
    optimizer ["sgd"] : ``sgd`` (fresh batch every step) | ``gd`` (a fixed sample of
        ``n_train`` points, or the population) | ``adam`` (fresh batches).
    lr [1.0 for sgd/gd, 0.01 for adam] ; steps [1000] ; batch [256] ; n_train [batch].
    init ["zero"] : ``zero`` | ``random`` (i.i.d. ``N(0, init_scale²)`` entries).
    init_scale [0.02] ; seed [0].
    T_test [()] , q_test [()] : out-of-distribution validation lengths / subset sizes.
    n_val [128] : points per validation set (drawn once, before training).
    eval_every [max(1, steps // 100)] : record metrics every k steps (and at the end).
    arch ["transformer"] : ``transformer`` | ``fcn`` (baseline, see :mod:`stsim.baselines.fcn`).
    width [None], depth [1] : FCN hidden width and number of hidden layers.
    """

    T: int = 200
    q: int = 3
    pe: str = "stochastic"
    d: int = 5
    d_e: int | None = None
    sampler: str = "slots"
    model: str = "theory"
    query: str = "sum"
    objective: str = "online"
    optimizer: str = "sgd"
    lr: float | None = None
    steps: int = 1000
    batch: int = 256
    n_train: int | None = None
    init: str = "zero"
    init_scale: float = 0.02
    seed: int = 0
    T_test: tuple = ()
    q_test: tuple = ()
    n_val: int = 128
    eval_every: int | None = None
    arch: str = "transformer"
    width: int | None = None
    depth: int = 1

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
