"""Training problems: where a run's loss and gradients come from, and the architecture
registry.

A *problem* is the model plus its data. It exposes

* ``init_params(rng) -> dict of arrays``,
* ``loss_grad(params, rng, data=None) -> (loss, grads)`` (one step's minibatch, fixed-sample
  or population gradient),
* ``draws`` (bool) and ``draw_step(rng)`` -> the data of one step's fresh minibatch, or
  ``None`` when a step draws nothing (fixed sample, population); ``loss_grad(params, rng,
  data)`` then uses ``data`` instead of drawing — what lets :func:`stsim.core.run.run` draw
  one step ahead (:class:`stsim.util.prefetch.Prefetch`) with the same numbers,
* ``evaluate(params) -> {metric: value}`` (validation sets drawn once, cosines, ...),
* ``info() -> dict`` (encoding description, parameter count, ...).

:class:`Problem` is the skeleton they share, :class:`TransformerProblem` the attention
model (docs/model.md). Other layers add architectures and gradient sources without the core
importing them: the FCN baseline registers ``arch="fcn"`` (:func:`register_arch`) and the
theory registers ``objective="population"`` (:func:`register_objective`); importing
:mod:`stsim` does both.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from stsim.core.encodings import sample_checked
from stsim.core.model import forward_backward_unchecked
from stsim.core.constructions import NO_COS_V, NO_COS_W, cosine_to_target, unique_V
from stsim.core.seeds import Streams
from stsim.core.targets import target_of
from stsim.core.task import Batch, draw_subsets
from stsim.core.token_stats import TokenStats

__all__ = ["Problem", "TransformerProblem", "make_problem", "register_arch", "arch_spec",
           "arch_names", "is_transformer", "ArchSpec", "register_objective", "val_key",
           "transformer_shapes", "transformer_blocks"]


@dataclass(frozen=True)
class ArchSpec:
    """A registered architecture and what :class:`~stsim.core.config.Config` and the
    schedule ask of it (see :func:`register_arch`)."""

    name: str
    factory: Callable
    encoding: bool = True
    reduced: bool = False
    resolve: Callable | None = None
    memory: Callable | None = None
    seconds_per_step: Callable | None = None
    shapes: Callable | None = None
    blocks: Callable | None = None
    lr: Callable | None = None

    @property
    def transformer(self) -> bool:
        """It is the transformer, or built on it (its factory subclasses
        :class:`TransformerProblem`)."""
        return isinstance(self.factory, type) and issubclass(self.factory, TransformerProblem)


_ARCHS: dict = {}
_OBJECTIVES: dict = {}


def register_arch(name: str, factory, *, encoding: bool = True, reduced: bool = False,
                  resolve=None, memory=None, seconds_per_step=None, shapes=None,
                  blocks=None, lr=None) -> ArchSpec:
    """Make ``arch=name`` (in :func:`stsim.run`, :class:`Config`) build
    ``factory(cfg, streams)``: an object with the problem interface of the module docstring
    (subclass :class:`Problem` for the shared plumbing).

    Parameters
    ----------
    name : str
        The architecture's name.
    factory : callable
        ``factory(cfg, streams)`` → the problem.
    encoding : bool
        It takes a positional encoding: ``Config`` resolves ``pe`` and ``d_e`` for it.
    reduced : bool
        The reduced attention dynamics (:mod:`stsim.core.reduced`) describe it, so its
        default lr and steps are derived from them (the transformer). False: the
        optimiser's fixed default lr and 1000 steps, said in the schedule's explanation.
    resolve : callable, optional
        ``resolve(cfg) -> {field: value}``: validate its own fields of the config being
        resolved (not changed: a config is frozen) and return the values it decides (the
        FCN: ``{"width": 64}`` by default), ``ValueError`` naming the field.
    memory : callable, optional
        ``memory(cfg) -> {what: bytes}``, the largest arrays of a run (see
        :meth:`Config.memory_estimate`). None: the transformer's estimate.
    seconds_per_step : callable, optional
        ``seconds_per_step(cfg)``, one core (see
        :func:`stsim.core.cost.estimated_seconds`). None: the transformer's cost model.
    shapes : callable, optional
        ``shapes(cfg) -> {name: shape}``, the parameters a run of ``cfg`` has; then
        :func:`stsim.load` refuses a result whose parameters are missing or misshapen
        (checkpoints are checked against the run's own initial parameters either way).
    blocks : callable, optional
        ``blocks(cfg) -> {block name: (parameter, index)}``: the named parts of its
        parameters (``params[parameter][index]``) that ``freeze`` may hold at their initial
        value (the transformer's: :func:`transformer_blocks`). None: nothing can be frozen.
    lr : callable, optional
        ``lr(cfg)``: its own derived default SGD step when it has no reduced dynamics (the
        FCN's, :func:`stsim.baselines.fcn.fcn_default_lr`). None: the optimiser's fixed
        default.

    Returns
    -------
    ArchSpec
        The registered architecture.

    Examples
    --------
    The built-in transformer is
    ``register_arch("transformer", TransformerProblem, reduced=True)``;
    ``docs/architecture.md`` registers one of its own:

    >>> arch_spec("transformer").reduced, arch_spec("transformer").memory is None
    (True, True)
    """
    name = str(name)
    for what, fn in (("factory", factory), ("resolve", resolve), ("memory", memory),
                     ("seconds_per_step", seconds_per_step), ("shapes", shapes),
                     ("blocks", blocks), ("lr", lr)):
        if fn is not None and not callable(fn):
            raise ValueError(f"{what} must be callable, got {fn!r}")
    if factory is None:
        raise ValueError("factory must be callable, got None")
    spec = ArchSpec(name, factory, bool(encoding), bool(reduced), resolve, memory,
                    seconds_per_step, shapes, blocks, lr)
    _ARCHS[name] = spec
    return spec


def arch_names() -> tuple:
    """The registered architectures' names."""
    return tuple(_ARCHS)


def is_transformer(arch) -> bool:
    """Whether ``arch`` (an :class:`ArchSpec` or a name, as a result records it) is the
    transformer or built on it (:attr:`ArchSpec.transformer`); a name not registered in
    this process (a record of a session that registered it) only when it is
    ``"transformer"``."""
    spec = arch if isinstance(arch, ArchSpec) else _ARCHS.get(arch)
    return spec.transformer if spec is not None else arch == "transformer"


def arch_spec(name: str) -> ArchSpec:
    """The :class:`ArchSpec` of ``name``; ``ValueError`` naming ``arch`` otherwise."""
    if name not in _ARCHS:
        raise ValueError(f"arch must be one of {arch_names()} (registered: import stsim for "
                         f"'fcn'), got {name!r}")
    return _ARCHS[name]


def register_objective(name: str, factory, check=None) -> None:
    """Make ``objective=name`` use ``factory(cfg, enc)`` for the transformer's gradients:
    an object with ``loss_grad(W, V) -> (loss, dW, dV)`` and ``metrics(W, V) -> dict``.
    ``check(cfg)``, if given, is called when a config is resolved (before any work or
    file) and raises ``ValueError`` for a config the factory would refuse."""
    _OBJECTIVES[name] = factory
    _OBJECTIVE_CHECKS[name] = check


_OBJECTIVE_CHECKS: dict = {}


def check_objective(cfg) -> None:
    """The registered objective's ``check(cfg)`` (:func:`register_objective`), if any."""
    check = _OBJECTIVE_CHECKS.get(cfg.objective)
    if check is not None:
        check(cfg)


def val_key(kind, value):
    """History key of a validation set: ``val_key("T", 60) == "val/T=60"``."""
    return f"val/{kind}={value}"


class Problem:
    """The skeleton of a training problem (interface: module docstring).

    Built with a resolved config and its :class:`~stsim.core.seeds.Streams`, it draws the
    validation sets once (in-distribution ``val``, ``val/T=…`` for ``T_test`` and
    ``val/q=…`` for ``q_test``, each from its own stream,
    :meth:`~stsim.core.seeds.Streams.validation`) and sets up the data
    regime of ``cfg.objective``: ``"online"`` (a fresh minibatch of ``batch`` points each
    step, from the training stream), ``"sample"`` (one fixed sample of ``n_train`` points,
    drawn from ``Streams.fixed_sample``: full-batch training, ``optimizer="gd"``), or a
    registered objective (:func:`register_objective`, given ``cfg`` and :attr:`enc`).

    A subclass sets what it needs before calling ``Problem.__init__`` and implements
    ``_draw(rng, B, T, q, part="train")`` (B points of length T with subsets of size q;
    ``part``: ``"held"`` for the validation sets, which a target drawing from a corpus takes
    from its held-out part, :mod:`stsim.core.corpus`),
    ``batch_loss_grad(params, data, need_grad=True) -> (loss, grads)``,
    ``init_params(rng)``, and optionally ``population_loss_grad(params)``,
    ``metrics(params)`` and ``info()``.
    """

    enc = None

    def __init__(self, cfg, streams: Streams):
        self.cfg = cfg
        self.val = {"val": self._draw(streams.validation(), cfg.n_val, cfg.T, cfg.q, "held")}
        for Tt in cfg.T_test:
            self.val[val_key("T", Tt)] = self._draw(streams.validation("T", Tt), cfg.n_val,
                                                    Tt, cfg.q, "held")
        for qt in cfg.q_test:
            self.val[val_key("q", qt)] = self._draw(streams.validation("q", qt), cfg.n_val,
                                                    cfg.T, qt, "held")
        self.fixed = None
        self.population = None
        if cfg.objective == "sample":
            self.fixed = self._draw(streams.fixed_sample(), cfg.n_train, cfg.T, cfg.q)
        elif cfg.objective != "online":
            if cfg.objective not in _OBJECTIVES:
                raise ValueError(f"objective={cfg.objective!r} is not available: import stsim "
                                 f"(registered: {sorted(_OBJECTIVES)})")
            self.population = _OBJECTIVES[cfg.objective](cfg, self.enc)

    def _draw(self, rng, B, T, q, part="train"):  # pragma: no cover - the subclass's
        raise NotImplementedError

    def batch_loss_grad(self, params, data, need_grad=True):  # pragma: no cover
        """``(loss, grads)`` of the model on ``data`` (a ``_draw`` result)."""
        raise NotImplementedError

    def population_loss_grad(self, params):  # pragma: no cover - only with an objective
        """``(loss, grads)`` of the registered objective."""
        raise NotImplementedError

    @property
    def draws(self) -> bool:
        """Whether each step draws a fresh minibatch (not the population, not a fixed sample)."""
        return self.population is None and self.fixed is None

    def draw_step(self, rng):
        """One step's fresh minibatch from ``rng``; ``None`` when the step draws nothing
        (:attr:`draws` is false)."""
        return self._draw(rng, self.cfg.batch, self.cfg.T, self.cfg.q) if self.draws else None

    def loss_grad(self, params, rng, data=None):
        """``(loss, grads)`` of one step: a fresh minibatch (``data`` if given, else drawn
        from ``rng``), the fixed sample (``objective="sample"``) or the registered
        objective."""
        if self.population is not None:
            return self.population_loss_grad(params)
        if data is None:
            data = self.fixed if self.fixed is not None else self.draw_step(rng)
        return self.batch_loss_grad(params, data)

    def metrics(self, params) -> dict:
        """Metrics besides the validation losses (none here)."""
        return {}

    def evaluate(self, params):
        """The validation losses (``val``, ``val/T=…``, ``val/q=…``), then :meth:`metrics`."""
        out = {k: self.batch_loss_grad(params, data, need_grad=False)[0]
               for k, data in self.val.items()}
        out.update(self.metrics(params))
        return out

    def info(self):
        """For :attr:`Result.info` (nothing here)."""
        return {}


class TransformerProblem(Problem):
    """The attention model (docs/model.md) on the online stream, a fixed sample, or the
    population (``objective="population"``, provided by :mod:`stsim.theory.population`)."""

    def __init__(self, cfg, streams: Streams):
        self.enc = cfg.resolved.encoding.build(streams.encoding())
        # the mechanism (stsim.core.attention); None: the paper's softmax, its own numbers
        att = cfg.resolved.attention
        self.att = None if att is None or att.paper else att
        self.rank = getattr(cfg, "rank", None)
        self.target = target_of(cfg)         # the task's target (stsim.core.targets)
        self.m = self.target.feature_dim(cfg.d)
        # W_xe held (x_q = 0, the merged W): its rows of dW, which no step uses, not formed
        self.token_rows = self.rank is not None or "W_xe" not in (cfg.freeze or ())
        super().__init__(cfg, streams)

    def _draw(self, rng, B, T, q, part="train"):
        if part == "train" and self.cfg.draws == "statistics":  # stsim.core.token_stats
            y = draw_subsets(rng, B, T, q)
            X = TokenStats.draw(rng, y, T, self.cfg.d)
            return Batch(X=X, y=y, target=X.target), sample_checked(self.enc, rng, B, T)
        return (self.target.draw(rng, B, T, q, self.cfg.d, features=True, part=part),
                sample_checked(self.enc, rng, B, T))

    @property
    def D(self):
        """Token width ``D = dim φ + d_e`` (``dim φ = d`` for the mean)."""
        return self.m + self.enc.d_e

    def init_params(self, rng):
        """``{"W": (D, D), "V": (d, D)}``: zeros, or ``init_scale`` times Gaussians from ``rng``
        (``init="random_rows0"``: the same draws, then W's token rows ``W[:dim φ]`` set to 0).
        ``W`` is kept in Fortran (column) order: the index encodings' step reads and updates
        ``W`` column by column (:mod:`stsim.core.sparse_grad`). With ``rank = r``:
        ``{"W_K": (r, D), "W_Q": (r, D), "V": (d, D)}``, drawn in that order; then, for a
        quadratic readout, ``b`` and ``Q`` (:func:`transformer_shapes`)."""
        c = self.cfg

        def draw(shape, order="C"):
            return np.zeros(shape, order=order) if c.init == "zero" else \
                np.asarray(c.init_scale * rng.standard_normal(shape), order=order)
        params = {k: draw(shape, "F" if k == "W" else "C")
                  for k, shape in transformer_shapes(c, self.enc.d_e).items()}
        if c.init == "random_rows0":        # W's token rows (the features') at 0
            params["W"][:self.m] = 0.0
        return params

    def batch_loss_grad(self, params, data, need_grad=True):
        """``(loss, {"W": dW, "V": dV})`` of :func:`stsim.core.model.forward_backward` on
        ``data = (Batch, PEBatch)``; with ``W_xe`` held, ``dW``'s token rows are 0 (not
        formed: the block is written back after every step)."""
        b, pe = data
        pair = self.rank is not None        # W = W_Kᵀ W_Q (stsim.core.attention)
        head = {"b": params["b"], "Q": params["Q"]} if "Q" in params else None
        loss, dW, dV, *dh = forward_backward_unchecked(
            (params["W_K"], params["W_Q"]) if pair else params["W"], params["V"], b.X, b.y, pe,
            self.cfg.model == "practical", self.cfg.query, None, b.target, need_grad, True,
            self.att, pair, head, self.target.loss == "xent", self.token_rows)
        out = {"W": dW} if not pair else dict(zip(("W_K", "W_Q"), (None, None) if dW is None
                                                  else dW))
        out["V"] = dV
        if head is not None:                # the readout's gradients (None: no gradient)
            out.update(dh[0] or dict.fromkeys(head))
        return loss, out

    def population_loss_grad(self, params):
        loss, dW, dV = self.population.loss_grad(params["W"], params["V"])
        return loss, {"W": dW, "V": dV}

    def merged_W(self, params):
        """``W``, or ``W_Kᵀ W_Q`` for a key/query pair."""
        return params["W"] if self.rank is None else params["W_K"].T @ params["W_Q"]

    def metrics(self, params):
        """``cos_W``, ``cos_V`` against the target's construction (of ``W_Kᵀ W_Q`` for a
        key/query pair; no ``cos_V`` where it is not unique,
        :func:`~stsim.core.constructions.cosine_to_target`) and the objective's own metrics."""
        cos_W, cos_V = cosine_to_target(self.merged_W(params), params["V"], self.cfg.d,
                                        self.target)
        out = {} if cos_W is None else {"cos_W": cos_W}     # None: NO_COS_W
        if cos_V is not None:               # None: no unique construction (NO_COS_V)
            out["cos_V"] = cos_V
        if self.population is not None:
            out.update(self.population.metrics(params["W"], params["V"]))
        return out

    def info(self):
        """``{"encoding": …}``: the encoding's description (e.g. the near-orthogonal δ);
        ``"cos_V"``: why none is recorded, where none is (:data:`~stsim.core.targets.NO_COS_V`)."""
        out = {"encoding": self.enc.describe()}
        if not self.target.paper and unique_V(self.target, self.cfg.d) is None:
            out["cos_V"] = NO_COS_V
        if not self.target.attends_to_named:
            out["cos_W"] = NO_COS_W
        return out


def transformer_shapes(cfg, d_e=None) -> dict:
    """``{"W": (D, D), "V": (o, D)}``, ``D = dim φ + d_e``, ``o`` the target's dimension
    (``dim φ = o = d`` for the mean, :mod:`stsim.core.targets`): the transformer's
    parameters (``{"W_K": (r, D), "W_Q": (r, D), "V": (o, D)}`` with ``rank = r``), then
    ``b`` (o,) and ``Q`` (o, dim φ, dim φ) for a quadratic readout."""
    t = target_of(cfg)
    m, o = t.feature_dim(int(cfg.d)), t.dim(int(cfg.d))
    D = m + int(cfg.d_e if d_e is None else d_e)
    r = getattr(cfg, "rank", None)
    out = {"W": (D, D)} if r is None else {"W_K": (int(r), D), "W_Q": (int(r), D)}
    out["V"] = (o, D)
    if not t.linear_readout:              # the quadratic readout's own blocks
        out.update(b=(o,), Q=(o, m, m))
    return out


def transformer_blocks(cfg) -> dict:
    """``{block: (parameter, index)}`` of the transformer, in order (docs/model.md; W's
    rows are the key side): ``W = [[W_xx, W_xe], [W_ex, W_ee]]`` (``W_xx = W[:d, :d]``,
    ``W_xe = W[:d, d:]`` — the token rows —, ``W_ex = W[d:, :d]``, ``W_ee = W[d:, d:]``)
    and ``V = [V_x, V_e]`` (``V_x = V[:, :d]``, ``V_e = V[:, d:]``); with ``rank``,
    ``W_K`` and ``W_Q`` whole in place of the W blocks."""
    d = target_of(cfg).feature_dim(int(cfg.d))      # the token's content part: φ(x)
    x, e = slice(0, d), slice(d, None)
    if getattr(cfg, "rank", None) is not None:     # a key/query pair: each factor whole
        every = (slice(None), slice(None))
        return {"W_K": ("W_K", every), "W_Q": ("W_Q", every), "V_x": ("V", (slice(None), x)),
                "V_e": ("V", (slice(None), e))}
    return {"W_xx": ("W", (x, x)), "W_xe": ("W", (x, e)), "W_ex": ("W", (e, x)),
            "W_ee": ("W", (e, e)), "V_x": ("V", (slice(None), x)), "V_e": ("V", (slice(None), e))}


register_arch("transformer", TransformerProblem, reduced=True, shapes=transformer_shapes,
              blocks=transformer_blocks)


def make_problem(cfg, streams: Streams | None = None):
    """The problem object for a resolved config's ``arch`` (interface: module docstring);
    ``streams`` defaults to ``Streams(cfg.seed)``."""
    return cfg.resolved.arch.factory(cfg, Streams(cfg.seed) if streams is None else streams)
