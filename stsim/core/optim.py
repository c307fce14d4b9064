"""Optimisers acting in place on a dict of parameter arrays.

* ``sgd`` / ``gd``: ``θ ← θ − η ∇`` (the two differ only in the data the gradient comes
  from: fresh batches or a fixed sample / the population; see :mod:`stsim.core.run`).
* ``adam`` (Kingma & Ba 2015): ``m ← β₁m + (1−β₁)∇``, ``v ← β₂v + (1−β₂)∇²``,
  ``θ ← θ − η m̂ / (√v̂ + ε)`` with bias-corrected ``m̂ = m/(1−β₁ᵗ)``, ``v̂ = v/(1−β₂ᵗ)``.

Step-size schedule (``decay``): ``"none"`` keeps ``η`` constant; ``"linear"`` keeps it for
the first half of the ``total`` steps and then decays it linearly towards 0 (update number
``k = 0, 1, …`` uses ``η · min(1, (total − k)/(total − ⌊total/2⌋))``). With a constant step
a stochastic optimiser settles into a stationary cloud whose spread grows with ``η``;
annealing shrinks it (measured for Adam on STS: see :mod:`stsim.core.schedule`).

Optimiser state is a dict of arrays plus a step count, so it can be checkpointed. An
optimiser *object* given to a run is its settings (``lr``, ``decay``, ``total``,
:meth:`SGD.settings`), never its state: the run steps :meth:`SGD.fresh` of it.

**The registry.** ``optimizer=name`` (in :func:`stsim.run`, :class:`Config`) is looked up in
the table :func:`register_optimizer` fills; each entry carries its own default-lr rule
(:class:`OptimizerSpec`). ``"gd"`` is not an optimiser but a data regime: it is the alias of
``optimizer="sgd"`` on a fixed sample of ``n_train`` points (``objective="sample"``; with
``objective="population"``, on the population) — :func:`resolve_optimizer`.
"""
from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass
from typing import Callable, Protocol, runtime_checkable

import numpy as np

from stsim.core.reduced import MEASURED_STEPS_PER_T, measured_steps
from stsim.util.validate import Steps, check_choice, check_lr

__all__ = ["Optimizer", "SGD", "Adam", "make_optimizer", "all_finite", "LR_DECAYS",
           "register_optimizer", "optimizer_spec",
           "resolve_optimizer", "OptimizerSpec", "object_spec", "REDUCED", "ALIASES",
           "adam_steps"]

LR_DECAYS = ("none", "linear")
REDUCED = "reduced"    # default lr rule: eta_max/2 of the reduced dynamics (stsim.core.schedule)
#: optimizer aliases that name a data regime: name -> (optimizer, objective it turns "online" into)
ALIASES = {"gd": ("sgd", "sample")}


def all_finite(g) -> bool:
    """Whether every entry of the gradient ``g`` is finite: ``np.all(np.isfinite(g))``
    for an array, ``g.all_finite()`` for a sparse gradient
    (:class:`stsim.core.sparse_grad.SparseGradW`), which is not made dense for it."""
    check = getattr(g, "all_finite", None)
    return bool(check()) if check is not None else bool(np.all(np.isfinite(g)))


@runtime_checkable
class Optimizer(Protocol):
    """What an optimiser object passed as ``optimizer`` provides (:func:`object_spec`):
    :class:`SGD`, :class:`Adam`, a subclass, or any class with these."""

    base_lr: object

    def step(self, params: dict, grads: dict) -> None: ...

    def state_dict(self) -> dict: ...

    def load_state_dict(self, state: dict) -> None: ...


class SGD:
    """Plain (stochastic) gradient descent ``θ ← θ − η_k g`` (``η_k``: module docstring).

    ``lr``: one step for every parameter, or a dict with a step per parameter
    (``SGD(lr={"W": 200, "V": 5.5})``; :class:`~stsim.util.validate.Steps`, kept as
    ``step_size``; ``base_lr`` is its record); the schedule ``decay`` scales each alike."""

    def __init__(self, lr, decay="none", total=None):
        self.step_size = Steps(lr)
        self.decay = check_choice("decay", decay, LR_DECAYS)
        if self.decay != "none":       # total = 0: a run of no update (and so no step)
            if total is None or int(total) < 0:
                raise ValueError(f"decay={decay!r} needs total >= 0 steps, got {total!r}")
            total = int(total)
        self.total = total
        self.reset_state()

    @property
    def base_lr(self):
        """The step as a config records it (a number, or a dict with one per parameter)."""
        return self.step_size.record()

    def reset_state(self) -> None:
        """Back to the state of no update (``t = 0``; Adam: no moments). A subclass with
        state of its own extends it (:meth:`fresh` relies on it)."""
        self.t = 0

    def fresh(self):
        """A copy with this object's settings and a fresh state (:meth:`reset_state`): what
        a run given this object steps (the object itself is not touched)."""
        new = copy.copy(self)
        new.reset_state()       # rebinds the state: the object's own arrays are not copied
        return copy.deepcopy(new)

    def settings(self) -> dict:
        """The settings that change the numbers beyond ``lr``, ``decay`` and ``total``
        (which a config records as ``lr``, ``lr_decay``, ``steps``), JSON-ready: none for
        SGD."""
        return {}

    @property
    def lr(self):
        """The step size of the next update (update number ``self.t``): a number, or a dict
        with one per parameter."""
        return self._next().record()

    def _factor(self) -> float:
        """The schedule's factor of update number ``self.t`` (``decay != "none"``)."""
        start = self.total // 2
        return min(1.0, max(self.total - self.t, 0) / max(self.total - start, 1))

    def _next(self) -> Steps:
        """The :class:`~stsim.util.validate.Steps` of update number ``self.t``."""
        if self.decay == "none":
            return self.step_size
        return self.step_size.scaled(self._factor())

    def _etas(self, names: tuple) -> dict:
        """``{parameter: step}`` of update number ``self.t`` for the parameters ``names``:
        the numbers of :meth:`_next`'s ``block``, bit for bit. Each parameter's step is
        looked up in ``step_size`` (and refused there if ``lr`` has none) once, on the first
        update; the updates after only scale it, without a check on the per-step path."""
        held = self.__dict__.get("_base_etas")
        if held is None or held[0] is not self.step_size or held[1] != names:
            held = (self.step_size, names, {k: self.step_size.block(k) for k in names})
            self._base_etas = held
        if self.decay == "none":
            return held[2]
        f = self._factor()
        return {k: x * f for k, x in held[2].items()}

    def step(self, params: dict, grads: dict) -> None:
        """Update ``params`` in place: ``p ← p − lr · g`` for every ``grads`` entry."""
        etas = self._etas(tuple(grads))
        self.t += 1
        for k, g in grads.items():
            eta = etas[k]
            if hasattr(g, "axpy"):         # a sparse gradient: only its support moves
                g.axpy(params[k], -eta)    # p + (−η)·g: the roundings of p − η·g
            else:
                params[k] -= eta * g

    def state_dict(self) -> dict:
        """The optimiser's state as a dict of arrays (for checkpoints)."""
        return {"t": np.array(self.t)}

    def load_state_dict(self, state: dict) -> None:
        """Restore a state written by :meth:`state_dict`."""
        self.t = int(state["t"])


class Adam(SGD):
    """Adam with bias correction; ``betas=(0.9, 0.999)``, ``eps=1e-8`` by default."""

    def __init__(self, lr, betas=(0.9, 0.999), eps=1e-8, decay="none", total=None):
        super().__init__(lr, decay, total)
        self.b1, self.b2 = (float(b) for b in betas)
        if not (0 <= self.b1 < 1 and 0 <= self.b2 < 1):
            raise ValueError(f"betas must lie in [0, 1), got {betas!r}")
        self.eps = check_lr(eps, "eps")

    def reset_state(self):
        self.t = 0
        self.m, self.v = {}, {}
        self.__dict__.pop("_bufs", None)

    def settings(self):
        return {"betas": [self.b1, self.b2], "eps": self.eps}

    def step(self, params, grads):
        etas = self._etas(tuple(grads))
        self.t += 1
        c1 = 1 - self.b1 ** self.t
        c2 = 1 - self.b2 ** self.t
        for k, g in grads.items():
            lr = etas[k]
            p = params[k]
            if k not in self.m:
                self.m[k] = np.zeros_like(p)           # the parameter's memory order
                self.v[k] = np.zeros_like(p)
            m, v = self.m[k], self.v[k]
            m *= self.b1
            v *= self.b2
            if hasattr(g, "axpy"):                     # a sparse gradient (dense moments)
                g.axpy(m, 1 - self.b1)
                g.axpy(v, 1 - self.b2, square=True)
            else:
                m += (1 - self.b1) * g
                v += (1 - self.b2) * g * g
            # p −= lr (m/c1) / (√(v/c2) + eps), in two buffers kept across steps (a large
            # W's temporaries are not faulted in afresh every step)
            bufs = self.__dict__.setdefault("_bufs", {})
            if k not in bufs or bufs[k][0].shape != p.shape:
                bufs[k] = (np.empty_like(p), np.empty_like(p))
            step, den = bufs[k]
            np.divide(m, c1, out=step)
            step *= lr
            np.divide(v, c2, out=den)
            np.sqrt(den, out=den)
            den += self.eps
            step /= den
            p -= step

    def state_dict(self):
        out = {"t": np.array(self.t)}
        out.update({f"m/{k}": v for k, v in self.m.items()})
        out.update({f"v/{k}": v for k, v in self.v.items()})
        return out

    def load_state_dict(self, state):
        self.t = int(state["t"])
        self.m = {k[2:]: np.array(v) for k, v in state.items() if k.startswith("m/")}
        self.v = {k[2:]: np.array(v) for k, v in state.items() if k.startswith("v/")}


@dataclass(frozen=True)
class OptimizerSpec:
    """A registered optimiser and its default-lr rule (see :func:`register_optimizer`)."""

    name: str
    factory: Callable
    lr: float | str
    steps: Callable | None = None
    decay: str = "none"
    fixed_lr: float = 1.0
    note: str = ""


_OPTIMIZERS: dict = {}


def register_optimizer(name: str, factory, *, lr, steps=None, decay: str = "none",
                       fixed_lr=None, note: str = "") -> OptimizerSpec:
    """Make ``optimizer=name`` build ``factory(lr, decay=…, total=…)``: an object with
    ``step(params, grads)`` (in place), ``state_dict()`` and ``load_state_dict(state)``
    (checkpoints), like :class:`SGD`.

    Parameters
    ----------
    name : str
        The optimiser's name (not an alias in :data:`ALIASES`).
    factory : callable
        ``factory(lr, decay=decay, total=steps)`` returning the optimiser.
    lr : float or "reduced"
        Its default step: ``"reduced"`` (:data:`REDUCED`) — ``eta_max/2`` of the reduced
        dynamics (:mod:`stsim.core.schedule`; right for plain gradient steps, whose
        stability the reduced map bounds) — or a float, its own default (a scale-free step
        such as Adam's).
    steps : callable, optional
        ``steps(cfg) -> int``: its default step count. None: derived from the reduced map
        at the run's lr.
    decay : {"none", "linear"}
        The ``lr_decay`` a run uses when its lr is this default (Adam: ``"linear"``).
    fixed_lr : float, optional
        The default lr where nothing is derived (an architecture or encoding without
        reduced dynamics). Default: ``lr`` if it is a float, else 1.0.
    note : str
        Why these defaults (said in the schedule's explanation).

    Returns
    -------
    OptimizerSpec
        The registered rules.

    Examples
    --------
    The built-in rules (``docs/architecture.md`` registers an optimiser of its own):

    >>> [(s.lr, s.decay, s.fixed_lr) for s in map(optimizer_spec, ("sgd", "adam"))]
    [('reduced', 'none', 1.0), (0.02, 'linear', 0.01)]
    """
    name = str(name)
    if name in ALIASES:
        raise ValueError(f"{name!r} is an alias ({ALIASES[name]}); choose another name")
    if not callable(factory):
        raise ValueError(f"factory must be callable, got {factory!r}")
    if lr != REDUCED:
        lr = check_lr(lr)
    if steps is not None and not callable(steps):
        raise ValueError(f"steps must be a callable steps(cfg) -> int or None, got {steps!r}")
    check_choice("decay", decay, LR_DECAYS)
    fixed = check_lr(fixed_lr, "fixed_lr") if fixed_lr is not None else (
        1.0 if lr == REDUCED else lr)
    spec = OptimizerSpec(name, factory, lr, steps, decay, fixed, str(note))
    _OPTIMIZERS[name] = spec
    return spec


def optimizer_names() -> tuple:
    """The registered optimisers' names, then the aliases."""
    return tuple(_OPTIMIZERS) + tuple(ALIASES)


def optimizer_spec(name: str) -> OptimizerSpec:
    """The :class:`OptimizerSpec` of ``name`` (an alias: of its optimiser);
    ``ValueError`` naming ``optimizer`` and the registered names otherwise."""
    key = ALIASES[name][0] if name in ALIASES else name
    if key not in _OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {optimizer_names()}, got {name!r}")
    return _OPTIMIZERS[key]


def resolve_optimizer(name: str, objective: str) -> tuple:
    """``(optimizer, objective)`` with an alias resolved: ``("gd", "online")`` →
    ``("sgd", "sample")`` (full-batch GD is SGD on a fixed sample); other objectives are
    kept (``("gd", "population")`` → ``("sgd", "population")``).

    >>> resolve_optimizer("gd", "online"), resolve_optimizer("adam", "online")
    (('sgd', 'sample'), ('adam', 'online'))
    """
    spec = optimizer_spec(name)
    if name in ALIASES and objective == "online":
        objective = ALIASES[name][1]
    return spec.name, objective


def object_spec(opt) -> OptimizerSpec:
    """The :class:`OptimizerSpec` of an optimiser *object* passed as ``optimizer`` (e.g.
    ``SGD(lr=1.0)``, ``Adam(0.02, betas=(0.8, 0.99))``): its factory returns a copy of
    the object with a fresh state (:meth:`SGD.fresh`, or a deep copy of an object of
    another class: a run never steps the caller's object), its default-lr rules are those
    of the built-in class it derives from (SGD's otherwise); it is named after its class
    (``"sgd"``, ``"adam"``, or the lower-cased class name of another). Nothing is
    registered. ``ValueError`` naming ``optimizer`` for an object without ``step``,
    ``state_dict``, ``load_state_dict`` or its step ``base_lr``."""
    missing = [m for m in ("step", "state_dict", "load_state_dict")
               if not callable(getattr(opt, m, None))]
    if missing or getattr(opt, "base_lr", None) is None:
        raise ValueError(f"optimizer must be a name {optimizer_names()} or an optimiser object "
                         f"with step, state_dict, load_state_dict and its step base_lr (as "
                         f"stsim.SGD and stsim.Adam), got {opt!r}")
    base = _OPTIMIZERS["adam" if isinstance(opt, Adam) else "sgd"]
    name = base.name if type(opt) in (SGD, Adam) else type(opt).__name__.lower()
    return dataclasses.replace(base, name=name,
                               factory=lambda *a, **k: (opt.fresh() if isinstance(opt, SGD)
                                                        else copy.deepcopy(opt)))


def make_optimizer(name: str, lr, decay="none", total=None):
    """The optimiser registered as ``name`` (``"sgd"``, ``"gd"`` -> :class:`SGD`;
    ``"adam"`` -> :class:`Adam`; :func:`register_optimizer`), built with ``lr`` and the
    step-size schedule ``decay`` / ``total`` (module docstring)."""
    return optimizer_spec(name).factory(lr, decay=decay, total=total)


ADAM_LR = 0.02
ADAM_STEPS_PER_T = MEASURED_STEPS_PER_T  # Adam's default steps: measured_steps (its name here)


def adam_steps(T: int) -> int:
    """Adam's default step count: :func:`stsim.core.reduced.measured_steps`,
    ``max(2000, 30 T)`` rounded up to 100 (MEASURED)."""
    return measured_steps(T)


register_optimizer("sgd", SGD, lr=REDUCED, fixed_lr=1.0)
register_optimizer(
    "adam", Adam, lr=ADAM_LR, steps=lambda cfg: adam_steps(cfg.T), decay="linear", fixed_lr=0.01,
    note=f"adam: scale-free step; default lr {ADAM_LR} held for half of the steps, then "
         f"decayed linearly to 0 (when the lr is derived); max(2000, {ADAM_STEPS_PER_T} T) "
         "steps (measured at T = 50, 100, 200, not derived)")
