"""Training: configuration, the run loop, results, checkpoints.

``run(T=200, q=3, pe="stochastic", **options)`` trains one model and returns a
:class:`Result` (config, final parameters, history), in the spirit of
``scipy.integrate.solve_ivp``: one call, one rich result with ``status`` and ``message``.

Data flow: a *problem* (the model plus where its gradients come from) exposes
``init_params(rng)``, ``loss_grad(params, rng) -> (loss, grads)`` and
``evaluate(params) -> {metric: value}``; the loop steps an optimiser on it, records
metrics every ``eval_every`` steps, stops on divergence and checkpoints.

Random streams: ``SeedSequence(seed).spawn(4)`` gives independent generators for
(0) the fixed encoding table, (1) validation sets, (2) initialisation, (3) the training
stream, so that e.g. the validation sets do not depend on ``steps`` or ``batch``.

Units: a *step* is one optimiser update; gradient-flow time is ``η · step``.
"""
from __future__ import annotations

import dataclasses
import math
import os
import time
from dataclasses import dataclass, field

import numpy as np

from stsim.core.encodings import SAMPLERS, make_encoding, resolve_encoding
from stsim.util.io import load_npz, save_npz
from stsim.core.model import MODELS, QUERIES, cosine_to_target, forward_backward
from stsim.core.optim import OPTIMIZERS, check_lr, make_optimizer
from stsim.core.task import check_int, sample_batch

__all__ = ["Config", "Result", "run", "load", "make_problem", "TransformerProblem",
           "OBJECTIVES", "ARCHS", "INITS"]

OBJECTIVES = ("online", "population")
ARCHS = ("transformer", "fcn")
INITS = ("zero", "random")
DEFAULT_LR = {"sgd": 1.0, "gd": 1.0, "adam": 0.01}


def _int_tuple(name, values, lo, hi=None):
    if values is None:
        return ()
    if isinstance(values, (int, np.integer)):
        values = (values,)
    return tuple(check_int(name, v, lo, hi) for v in values)


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
        c.T_test = _int_tuple("T_test", c.T_test, c.q)
        c.q_test = _int_tuple("q_test", c.q_test, 1, c.T)
        for name, val, allowed in (("model", c.model, MODELS), ("query", c.query, QUERIES),
                                   ("optimizer", c.optimizer, OPTIMIZERS),
                                   ("init", c.init, INITS), ("objective", c.objective, OBJECTIVES),
                                   ("arch", c.arch, ARCHS), ("sampler", c.sampler, SAMPLERS)):
            if val not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {val!r}")
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


def _val_key(kind, value):
    return f"val/{kind}={value}"


class TransformerProblem:
    """The attention model of SPEC §3 on the online stream, a fixed sample, or the
    population (``objective="population"``, provided by :mod:`stsim.theory.population`)."""

    def __init__(self, cfg: Config, seeds):
        self.cfg = cfg
        self.enc = make_encoding(cfg.pe, T_max=cfg.T_max, d_e=cfg.d_e,
                                 sampler=cfg.sampler, rng=np.random.default_rng(seeds[0]))
        vrng = np.random.default_rng(seeds[1])
        # validation sets, drawn once before training: in-distribution, then OOD
        self.val = {"val": self._draw(vrng, cfg.n_val, cfg.T, cfg.q)}
        for Tt in cfg.T_test:
            self.val[_val_key("T", Tt)] = self._draw(vrng, cfg.n_val, Tt, cfg.q)
        for qt in cfg.q_test:
            self.val[_val_key("q", qt)] = self._draw(vrng, cfg.n_val, cfg.T, qt)
        self.fixed = None
        self.population = None
        if cfg.objective == "population":
            from stsim.theory.population import make_population_objective
            self.population = make_population_objective(cfg, self.enc)
        elif cfg.optimizer == "gd":
            self.fixed = self._draw(np.random.default_rng(seeds[3]).spawn(1)[0],
                                    cfg.n_train, cfg.T, cfg.q)

    def _draw(self, rng, B, T, q):
        return sample_batch(rng, B, T, q, self.cfg.d), self.enc.sample(rng, B, T)

    @property
    def D(self):
        return self.cfg.d + self.enc.d_e

    def init_params(self, rng):
        c, D = self.cfg, self.D
        if c.init == "zero":
            return {"W": np.zeros((D, D)), "V": np.zeros((c.d, D))}
        return {"W": c.init_scale * rng.standard_normal((D, D)),
                "V": c.init_scale * rng.standard_normal((c.d, D))}

    def _fb(self, params, data, need_grad=True):
        b, pe = data
        return forward_backward(params["W"], params["V"], b.X, b.y, pe, model=self.cfg.model,
                                query=self.cfg.query, target=b.target, need_grad=need_grad)

    def loss_grad(self, params, rng):
        if self.population is not None:
            loss, dW, dV = self.population.loss_grad(params["W"], params["V"])
        else:
            data = self.fixed if self.fixed is not None else self._draw(
                rng, self.cfg.batch, self.cfg.T, self.cfg.q)
            loss, dW, dV = self._fb(params, data)
        return loss, {"W": dW, "V": dV}

    def evaluate(self, params):
        out = {k: self._fb(params, data, need_grad=False)[0] for k, data in self.val.items()}
        out["cos_W"], out["cos_V"] = cosine_to_target(params["W"], params["V"], self.cfg.d)
        if self.population is not None:
            out.update(self.population.metrics(params["W"], params["V"]))
        return out

    def info(self):
        return {"encoding": self.enc.describe()}


def make_problem(cfg: Config, seeds):
    """The problem object for ``cfg.arch`` (see the module docstring for its interface)."""
    if cfg.arch == "fcn":
        from stsim.baselines.fcn import FCNProblem
        return FCNProblem(cfg, seeds)
    return TransformerProblem(cfg, seeds)


@dataclass
class Result:
    """Outcome of :func:`run`.

    Attributes
    ----------
    config : dict — the resolved configuration.
    params : dict of arrays — final parameters (``W`` (D, D) and ``V`` (d, D) for the
        transformer).
    history : dict of 1-D arrays of equal length — ``step``; ``loss`` (mean training loss
        over the steps since the previous record, the record step included); ``val``
        (in-distribution validation loss); ``val/T=<T_test>``, ``val/q=<q_test>``;
        ``cos_W``, ``cos_V``; plus objective-specific metrics.
    status : ``"completed"`` | ``"diverged"``;  message : str;  info : dict (wall time,
        encoding description such as the near-orthogonal δ).
    """

    config: dict
    params: dict
    history: dict
    status: str = "completed"
    message: str = ""
    info: dict = field(default_factory=dict)

    @property
    def W(self):
        return self.params["W"]

    @property
    def V(self):
        return self.params["V"]

    @property
    def success(self) -> bool:
        return self.status == "completed"

    def final(self, key="loss"):
        """Last recorded value of a history entry (NaN if nothing was recorded)."""
        values = self.history.get(key, ())
        if key not in self.history and self.history:
            raise KeyError(f"no history entry {key!r}; recorded: {list(self.history)}")
        return float(values[-1]) if len(values) else float("nan")

    def save(self, path):
        """Write ``path`` (npz: params, history and the JSON metadata), atomically."""
        arrays = {f"param/{k}": v for k, v in self.params.items()}
        arrays.update({f"history/{k}": v for k, v in self.history.items()})
        meta = {"config": self.config, "status": self.status, "message": self.message,
                "info": self.info, "history_keys": list(self.history)}
        save_npz(path, arrays, meta)
        return path

    @classmethod
    def load(cls, path) -> "Result":
        arrays, meta = load_npz(path)
        params = {k[6:]: v for k, v in arrays.items() if k.startswith("param/")}
        history = {k: arrays[f"history/{k}"] for k in meta.get("history_keys", [])}
        return cls(config=meta["config"], params=params, history=history,
                   status=meta["status"], message=meta["message"], info=meta.get("info", {}))

    def __repr__(self):
        keys = ", ".join(self.history)
        last = f"{self.final('loss'):.4g}" if len(self.history.get("loss", [])) else "n/a"
        return (f"Result(status={self.status!r}, steps={self.config.get('steps')}, "
                f"final loss={last}, history keys=[{keys}])")


def load(path) -> Result:
    """Load a :class:`Result` written by :meth:`Result.save`."""
    return Result.load(path)


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
    seeds = np.random.SeedSequence(cfg.seed).spawn(4)
    problem = make_problem(cfg, seeds)
    opt = make_optimizer(cfg.optimizer, cfg.lr)
    rng = np.random.default_rng(seeds[3])
    if checkpoint_every is not None:
        checkpoint_every = check_int("checkpoint_every", checkpoint_every, 1)
    start, hist, acc = 0, {}, [0.0, 0]
    if checkpoint is not None and os.path.exists(checkpoint):
        start, params, hist, acc = _load_checkpoint(checkpoint, cfg, opt, rng)
    else:
        params = problem.init_params(np.random.default_rng(seeds[2]))
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
    return Result(config=cfg.to_dict(), params=params, history=history, status=status,
                  message=message, info=info)
