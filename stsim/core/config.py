"""Configuration of a run: every option of :func:`stsim.run`, validated in one place.

:meth:`Config.resolve` checks every field (``ValueError`` naming the parameter and its
allowed range) and fills the defaults; the command line's ``stsim run`` flags are
generated from the fields of :class:`Config`, so Python and command-line names and
defaults cannot drift apart.
"""
from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field

from stsim.core.attention import ATTENTIONS, TAU_RANGE, resolve_mechanism
from stsim.core.families import SAMPLERS, encoding_spec
from stsim.core.model import MODELS, QUERIES
from stsim.core.optim import (ADAM_LR, ADAM_STEPS_PER_T, LR_DECAYS, object_spec,
                              optimizer_names, optimizer_spec, resolve_optimizer)
from stsim.core.problem import (ArchSpec, arch_names, arch_spec,
                                check_objective)
from stsim.core.schedule import FROZEN, MARGIN, settle
from stsim.core.stability import NOISE_W
from stsim.core.stopping import Settled
from stsim.core.token_stats import resolve_draws
from stsim.core.seeds import seed_record
from stsim.core.targets import resolve_target
from stsim.core.warm import LABEL as WARM_LABEL, is_source, start_params
from stsim.core.memory import run_memory
from stsim.util.validate import (Steps, check_choice, check_int, check_memory, check_real,
                                 int_tuple)

__all__ = ["Config", "Resolved", "OBJECTIVES", "INITS", "OBJECT_FIELDS", "field_help",
           "recorded_shapes"]

#: the data regimes: fresh minibatches, a fixed sample of n_train points (full batch), the
#: exact population loss (registered by stsim.theory.population)
OBJECTIVES = ("online", "sample", "population")
INITS = ("zero", "random", "random_rows0")


#: the fields that also take an object (an Encoding, an optimiser, an ArchSpec, a mechanism
#: of one's own: a built-in mechanism object is recorded as its name and temperature; a
#: warm start's parameters, stsim.core.warm)
OBJECT_FIELDS = ("pe", "optimizer", "arch", "attention", "target", "init")


@dataclass(frozen=True)
class Resolved:
    """What :meth:`Config.resolve` turned the names of a config into, once: the encoding
    (:class:`~stsim.core.families.EncodingSpec`; None for an architecture without one),
    the architecture (:class:`~stsim.core.problem.ArchSpec`) and the optimiser
    (:class:`~stsim.core.optim.OptimizerSpec`), ``objects``, the objects given in
    place of names (``{"pe": <Encoding>, ...}``), the attention mechanism
    (:class:`~stsim.core.attention.Attention`, with its temperature) and the run's ``plan``
    (:func:`stsim.core.schedule.plan`). Every later stage asks these, never the names."""

    encoding: object
    arch: object
    optimizer: object
    objects: dict = field(default_factory=dict)
    attention: object = None
    plan: object = None
    target: object = None


def _field(default, help, default_text=None):
    """A :class:`Config` field with its help text; ``default_text`` says what a ``None``
    default means (the command line shows it as ``(default: …)``)."""
    return field(default=default, metadata={"help": help, "default_text": default_text})


@dataclass(frozen=True)
class Config:
    """All options of a run; :meth:`resolve` validates them and fills defaults.

    The fields, their defaults and meanings are listed below (generated from the field
    metadata, which also gives the ``stsim run`` flags their help text).

    The rules :meth:`resolve` applies to every field alike: a number must be given as a
    number (``lr="0.1"`` is refused as ``T="10"`` is; the command line converts its text
    itself); a choice (``pe``, ``optimizer``, ``model``, ``query``, ``init``, ``sampler``,
    ``objective``, ``lr_decay``, ``arch``) is matched ignoring case and recorded in its
    registered spelling (``--optimizer SGD`` as ``--pe ONEHOT``); an option of another
    architecture is refused (``width``/``depth`` with the transformer).

    ``pe``, ``optimizer``, ``arch``, ``attention`` and ``target`` also take objects (an
    :class:`Encoding`, an optimiser such as ``SGD(lr=1.0)``, an
    :class:`~stsim.core.problem.ArchSpec`, an :class:`~stsim.core.attention.Attention` or a
    :class:`~stsim.core.targets.Target` of one's own): resolving records their name and
    keeps the object in :attr:`resolved`; nothing is registered.
    :meth:`to_dict` then adds ``<field>_object`` (the object's class) and, for an optimiser
    with settings beyond its step and schedule (Adam's ``betas``, ``eps``),
    ``optimizer_settings`` (``settings()`` of the object; a resume must match it like every
    field); a config dict with them needs the object again (:func:`options_from_record`).
    """

    T: int = _field(200, "sequence length")
    q: int = _field(3, "subset size, 1 <= q <= T")
    pe: str | Encoding = _field("stochastic", "positional encodings: onehot | near-orthogonal | stochastic "
                     "(Python: also an Encoding object, built-ins included)")
    d: int = _field(5, "token dimension")
    d_e: int | None = _field(None, "PE width", "2 max(T, T_test) for stochastic/slots (so that "
                             "the law is really stochastic: d_e = T would use every slot, in "
                             "order, i.e. the fixed one-hot PE), max(T, T_test) for onehot, 64 "
                             "for dense")
    sampler: str = _field("slots", "law of the stochastic family: slots | sphere | sinusoid")
    model: str = _field("theory", "theory | practical (attention also over the query token)")
    query: str = _field("sum", "query token: sum (p_query = sum of p_j, j in y) | mean")
    attention: str | Attention = _field(
        "softmax", f"attention mechanism: {' | '.join(ATTENTIONS)} (the -norm ones divided by "
        f"the number of attended tokens, sigmoid-bias with the logit bias -ln N; Python: also "
        f"an Attention object; docs/attention.md)")
    rank: int | None = _field(None, "rank r of a key/query pair W = W_K^T W_Q (W_K, W_Q of shape "
                              "(r, D)) in place of the merged W", "none: the merged W")
    temperature: float = _field(1.0, f"temperature tau, {TAU_RANGE[0]:g} <= tau <= "
                                f"{TAU_RANGE[1]:g} (tau^2 and 1/tau^2 scale the steps): the "
                                f"logits are divided by tau")
    objective: str = _field("online", "the data: online (a fresh minibatch every step) | sample "
                            "(a fixed sample of n_train points: full-batch training) | "
                            "population (the exact population loss)")
    optimizer: str | Optimizer = _field("sgd", "sgd (plain gradient steps) | adam | gd (alias: sgd with "
                            "objective sample, or on the population) | a registered name "
                            "(Python: also an optimiser object such as stsim.SGD(lr=1.0))")
    lr: float | dict | None = _field(
        None, "learning rate (a given value is obeyed exactly): one number for every "
        "parameter, or one per parameter (Python: a dict {'W': 200, 'V': 5.5}; command line: "
        "W=200,V=5.5)", f"the plan's (stsim.core.schedule.plan): for SGD with batch B a step "
        f"per block W=min({NOISE_W:g} B n/(c^2 q d), B/c^2), V=half V's stability bound "
        f"2/(1/q + kappa/B), with W's token rows {','.join(FROZEN)} held at 0 (freeze) - "
        f"beyond the paper's single step on every parameter; else (or when freeze is given "
        f"without them) the single step eta_max/2; adam {ADAM_LR:g}")
    lr_decay: str | None = _field(None, "step-size schedule: none (constant) | linear (constant "
                                  "for the first half of the steps, then linearly towards 0)",
                                  "linear for adam with a derived lr, else none")
    freeze: tuple | None = _field(None, "parameter blocks held at their initial value (comma "
                                  "list of W_xx, W_xe, W_ex, W_ee, V_x, V_e: W = [[W_xx, "
                                  "W_xe], [W_ex, W_ee]], rows the key side, the first d rows "
                                  "and columns the token part; V = [V_x, V_e]; docs/model.md)",
                                  f"none; {','.join(FROZEN)} with the derived step per block")
    steps: int | None = _field(None, "optimiser steps (a given value is obeyed exactly)",
                               f"the plan's: {MARGIN:g}x the step where the reduced dynamics "
                               f"reach 2 percent of the initial loss; adam max(2000, "
                               f"{ADAM_STEPS_PER_T} T); see stsim.core.schedule")
    stop: str | dict | Settled = _field(
        "auto", "when a run may end before steps: auto (the settled rule when steps is "
        "left to the plan and the step is constant, else none) | none (every step) | "
        "settled (validation loss <= 1 percent of initial on 3 records, falling by at most 2 "
        "percent per record; Python: also Settled(level, patience, tol) or its dict); "
        "stsim.core.stopping", "auto")
    draws: str = _field(
        "auto", "how a step draws its tokens: tokens (all T d entries) | statistics (only "
        "what the loss and gradients read: exact in distribution where W's token rows are "
        "held at 0, the mean task, online; stsim.core.token_stats) | auto (statistics where "
        "they hold, else tokens)", "auto")
    batch: int = _field(256, "batch size")
    n_train: int | None = _field(None, "size of the fixed sample (objective sample)", "batch")
    init: str | os.PathLike | dict | Result | None = _field(None, "initialisation: zero | random (i.i.d. N(0, "
                              "init_scale^2)) | random_rows0 (random, with W's token rows "
                              "W_xx, W_xe at 0, softmax's value; merged W only); zero is "
                              "refused where it is a stationary point "
                              "(linear, relu, relu-norm, any rank) | the path of a saved result "
                              "or checkpoint: a warm start from its parameters, a new run "
                              "recorded as params:<hash> (Python: also a Result or a dict of "
                              "parameters)", "zero; random where zero is a stationary point")
    init_scale: float = _field(0.02, "std of the random initialisation")
    seed: int | SeedSequence | Generator = _field(0, "seed of every random stream (Python: also a numpy SeedSequence or "
                       "Generator, recorded as JSON: stsim.core.seeds.seed_record)")
    T_test: tuple = _field((), "out-of-distribution validation lengths (comma list, e.g. 60,80)",
                           "none")
    q_test: tuple = _field((), "out-of-distribution validation subset sizes (comma list)",
                           "none")
    n_val: int = _field(128, "points per validation set (drawn once, before training)")
    eval_every: int | None = _field(None, "record metrics every k steps (and at the end)",
                                    "max(1, steps // 100)")
    arch: str | ArchSpec = _field("transformer", "transformer | fcn (fully-connected baseline, "
                       "stsim.baselines.fcn) | a registered name (Python: also an ArchSpec)")
    width: int | None = _field(None, "FCN hidden width", "64")
    depth: int = _field(1, "FCN number of hidden layers")
    target: str | Target = _field("mean", "what the task asks of the selected tokens: mean | moment:k "
                         "(the mean of h_k = He_k/sqrt(k!), elementwise) | variance (Python: "
                         "also a Target object; docs/targets.md)")

    @classmethod
    def from_options(cls, **options) -> "Config":
        """``Config(**options).resolve()``; ``ValueError`` for an unknown option name.

        >>> Config.from_options(T=10, q=2).d_e     # stochastic/slots: 2 T by default
        20
        """
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(options) - names)
        if unknown:
            raise ValueError(f"unknown option(s) {unknown}; allowed: {sorted(names)}")
        return cls(**options).resolve()

    def resolve(self) -> "Config":
        """Validate every field (``ValueError`` naming the parameter), resolve the names
        once (:attr:`resolved`), refuse a run too large for memory, and decide the run's
        plan (:func:`stsim.core.schedule.settle`, kept in :attr:`resolved`). A config is
        never changed (it is frozen): each stage decides some fields and the next one sees a
        new config with them (``dataclasses.replace``), so a field is never an object
        on one line and a label on the next; the run's ``lr``, ``steps``, ``freeze``,
        ``lr_decay`` and ``stop`` are written once, from the plan; then ``draws`` and
        ``eval_every``. Returns the resolved config."""
        c = self
        prev = self.__dict__.get("_resolved")
        back = {name: obj for name, obj in (prev.objects.items() if prev is not None else ())
                if getattr(c, name) == _object_name(name, obj)}     # resolved again: the object
        if back:
            c = dataclasses.replace(c, **back)
        if is_source(c.init, INITS):     # a warm start: a Result, a saved file, a dict
            c = dataclasses.replace(c, init=start_params(c.init))
        elif isinstance(c.init, str) and c.init.startswith(WARM_LABEL):
            raise ValueError(f"init={c.init!r} records a warm start from parameters with that "
                             f"hash: pass the source again, init=<the Result, its saved file "
                             f"or the dict of parameters>")
        objects = {k: getattr(c, k) for k in OBJECT_FIELDS
                   if not isinstance(getattr(c, k), str) and not (k == "init" and c.init is None)}
        for name, obj in objects.items():
            if isinstance(obj, type):       # NearOrthogonal for NearOrthogonal(16, 200, rng)
                raise ValueError(f"{name} got the class {obj.__name__}, not an object: pass "
                                 f"an instance, {name}={obj.__name__}(...), or a name")
        if "init" in objects:       # recorded by the source's hash
            c = dataclasses.replace(c, init=objects["init"].name)
        c = dataclasses.replace(c, **_checked_fields(c))
        r, names = _look_up(c, objects)
        c = _holding(dataclasses.replace(c, **names), r)
        check_objective(c)      # e.g. a population too large to enumerate: before any work
        c.check_memory()
        p = settle(c)
        r = dataclasses.replace(r, plan=p)
        c = _holding(dataclasses.replace(c, **p.record()), r)
        draws = resolve_draws(c)        # after the plan: it decides the blocks held
        return _holding(dataclasses.replace(
            c, draws=draws, eval_every=c.eval_every or max(1, c.steps // 100)), r)

    @property
    def resolved(self) -> Resolved:
        """The objects :meth:`resolve` turned this config's names into (:class:`Resolved`);
        ``ValueError`` for a config that was not resolved."""
        r = self.__dict__.get("_resolved")
        if r is None:
            raise ValueError("this Config is not resolved: use Config.resolve() or "
                             "Config.from_options(...)")
        return r

    def as_options(self) -> dict:
        """The fields as options of :func:`stsim.run`, with the objects given in place of
        names (``pe``, ``optimizer``, ``arch``, ``attention``) put back: running them again
        runs the same thing."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        r = self.__dict__.get("_resolved")
        if r is not None:
            out.update(r.objects)
        return out

    def keeping_resolved(self, **changes) -> "Config":
        """A copy with ``changes`` to fields that no resolved object depends on (such as
        ``eval_every``), keeping :attr:`resolved` (and so the objects given)."""
        new = dataclasses.replace(self, **changes)
        r = self.__dict__.get("_resolved")
        return new if r is None else _holding(new, r)

    def __getstate__(self):     # pickled (a pool's task) as its fields: the specs hold
        state = dict(self.__dict__)     # factories that need not pickle
        state.pop("_resolved", None)
        return state

    def memory_estimate(self) -> dict:
        """Bytes of the largest arrays a run of this (resolved) config allocates, by name,
        and their ``total``: :func:`stsim.core.memory.run_memory`."""
        return run_memory(self)

    def check_memory(self, limit: float | None = None) -> None:
        """Refuse, before anything is allocated, a run whose :meth:`memory_estimate`
        exceeds ``limit`` bytes (default: 80% of this machine's physical memory;
        :func:`stsim.util.validate.check_memory`); the message names the sizes that matter."""
        parts = {k: v for k, v in self.memory_estimate().items() if k != "total"}
        sizes = {"T": self.T, "T_test": list(self.T_test) or None, "d": self.d,
                 "d_e": self.d_e, "width": self.width,
                 "depth": self.depth if self.width is not None else None,
                 "batch": self.batch, "n_train": self.n_train, "n_val": self.n_val}
        named = ", ".join(f"{k}={v}" for k, v in sizes.items() if v is not None)
        check_memory(parts, f"this run ({named})", limit)

    @property
    def T_max(self) -> int:
        """The longest sequence any encoding must cover: ``max(T, *T_test)``."""
        return max((self.T,) + tuple(self.T_test))

    def to_dict(self) -> dict:
        """The fields as a JSON-ready dict (tuples as lists); a field added later is left
        out at the value it stands for where it is absent (:data:`ADDED_LATER`), so that
        such a config reads as one written before the field existed."""
        d = {f.name: copy.deepcopy(getattr(self, f.name)) for f in dataclasses.fields(self)}
        d.update((k, list(v)) for k, v in d.items() if isinstance(v, tuple))
        for name, default in ADDED_LATER.items():
            if d.get(name) == default:
                d.pop(name)
        r = self.__dict__.get("_resolved")
        for name, obj in (r.objects.items() if r is not None else ()):
            d[f"{name}_object"] = type(obj).__name__     # given as an object (its class)
        settings = _optimizer_settings(r)
        if settings:
            d["optimizer_settings"] = settings
        return d


#: the mechanism fields at the paper's model
MECHANISM_DEFAULTS = {"attention": "softmax", "rank": None, "temperature": 1.0}
#: the largest step count: a step number is an int64 in the history (2^63 - 1)
MAX_STEPS = 2 ** 63 - 1
#: fields added later, at the value meant where absent (:meth:`Config.to_dict` omits them)
ADDED_LATER = {**MECHANISM_DEFAULTS, "freeze": [], "target": "mean", "stop": "none",
               "draws": "tokens"}


def _holding(c: "Config", r: Resolved) -> "Config":
    """``c`` with its resolved names ``r`` (:attr:`Config.resolved`): a cache beside the
    fields, set on a config that :meth:`Config.resolve` has just made."""
    object.__setattr__(c, "_resolved", r)
    return c


def _checked_fields(c) -> dict:
    """The fields that need no registry, checked (``ValueError`` naming the field): their
    values, to replace."""
    for name in ("init_scale", "temperature"):   # numbers as numbers (int fields too)
        if isinstance(getattr(c, name), (str, bytes)):
            raise ValueError(f"{name} must be a number, got the string "
                             f"{getattr(c, name)!r}")
    v = {"T": check_int("T", c.T, 1)}
    v["q"] = check_int("q", c.q, 1, v["T"])
    v["d"] = check_int("d", c.d, 1)
    v["T_test"] = int_tuple("T_test", c.T_test, v["q"])
    v["q_test"] = int_tuple("q_test", c.q_test, 1, v["T"])
    for name, allowed in (("objective", OBJECTIVES), ("model", MODELS), ("query", QUERIES),
                          ("sampler", SAMPLERS), ("lr_decay", LR_DECAYS)):
        if name != "lr_decay" or c.lr_decay is not None:     # None: the plan's
            v[name] = check_choice(name, getattr(c, name), allowed, ignore_case=True)
    for name, lo in (("steps", 0), ("eval_every", 1)):
        if getattr(c, name) is not None:    # a step number is an int64 in the history
            v[name] = check_int(name, getattr(c, name), lo, MAX_STEPS)
    v["batch"] = check_int("batch", c.batch, 1)
    v["n_train"] = check_int("n_train", v["batch"] if c.n_train is None else c.n_train, 1)
    v["n_val"] = check_int("n_val", c.n_val, 1)
    v["seed"] = seed_record(c.seed)
    v["init_scale"] = check_real("init_scale", c.init_scale, lo=0.0)
    v["depth"] = check_int("depth", c.depth, 1)
    return v


def _look_up(c, objects) -> tuple:
    """The names of ``c`` resolved once (optimiser, mechanism, target, architecture,
    encoding), and the fields they decide: an object's settings, the recorded names,
    ``rank``, ``init``, ``d_e``. Returns ``(Resolved, {field: value})``; each step sees the
    fields the ones before it decided (a new config, ``dataclasses.replace``)."""
    v = {}

    def decide(**fields):
        nonlocal c
        v.update(fields)
        c = dataclasses.replace(c, **fields)
    if "optimizer" in objects:      # an object: its step and schedule are the run's
        opt = object_spec(c.optimizer)
        decide(optimizer=opt.name, **_object_settings(c, objects["optimizer"]))
    else:
        name = check_choice("optimizer", c.optimizer, optimizer_names(), ignore_case=True)
        name, objective = resolve_optimizer(name, c.objective)     # "gd": sgd, sample
        decide(optimizer=name, objective=objective)
        opt = optimizer_spec(name)
    att, mechanism = resolve_mechanism(c, objects, INITS)
    decide(**mechanism)
    tgt = resolve_target(c, objects)
    if "arch" in objects:
        arch = objects["arch"]
        if not isinstance(arch, ArchSpec):
            raise ValueError(f"arch must be a name {arch_names()} or an ArchSpec "
                             f"(stsim.core.problem), got {arch!r}")
    else:
        arch = arch_spec(check_choice("arch", c.arch, arch_names(), ignore_case=True))
    decide(target=tgt.label, arch=arch.name)
    if arch.resolve is not None:
        decide(**(arch.resolve(c) or {}))
    elif c.width is not None or c.depth != 1:
        raise ValueError(f"width and depth are options of the FCN (arch='fcn'); "
                         f"arch={c.arch!r} has none: got width={c.width!r}, "
                         f"depth={c.depth!r}")
    spec = None
    if arch.encoding:     # really stochastic slots: each slot used w.p. T/d_e <= 1/2
        spec = encoding_spec(c.pe, T_max=c.T_max, d_e=c.d_e, sampler=c.sampler,
                             slots_factor=2)
        decide(pe=spec.name, d_e=spec.d_e, sampler=spec.sampler)
    elif "pe" in objects:
        raise ValueError(f"pe: arch={c.arch!r} takes no positional encoding, got an "
                         f"encoding object")
    decide(**_checked_mechanism(c, att, arch, tgt))
    return Resolved(spec, arch, opt, objects, att, target=tgt), v


def _checked_mechanism(c, att, arch, tgt) -> dict:
    """The mechanism options belong to the transformer; ``rank <= D`` (D: the target
    ``tgt``'s feature dimension plus ``d_e``). Returns the checked ``rank`` (or nothing)."""
    if not arch.transformer:
        given = {k: getattr(c, k) for k, v in MECHANISM_DEFAULTS.items() if getattr(c, k) != v}
        if given:
            raise ValueError(f"attention, rank and temperature are options of the transformer; "
                             f"arch={c.arch!r} has none: got {given}")
        if c.init == "random_rows0":
            raise ValueError(f"init='random_rows0' sets the transformer's W token rows to 0; "
                             f"arch={c.arch!r} has none: use init='zero' or 'random'")
        return {}
    if c.rank is None:
        return {}
    return {"rank": check_int("rank", c.rank, 1, tgt.feature_dim(c.d) + c.d_e)}


def _optimizer_settings(r) -> dict:
    """``settings()`` of the optimiser object of the resolved names ``r`` (None: not
    resolved), ``{}`` for a name or an object without the method."""
    opt = r.objects.get("optimizer") if r is not None else None
    return dict(opt.settings()) if callable(getattr(opt, "settings", None)) else {}


def _object_name(name: str, obj) -> str:
    """The name a config records for the object given as its field ``name``."""
    if name == "optimizer":
        return object_spec(obj).name
    return obj.name if name == "arch" else obj.label if name == "target" else str(obj.name)


def _object_settings(c, opt) -> dict:
    """``lr``, ``lr_decay`` and (for a decaying schedule) ``steps`` that the optimiser
    object ``opt`` decides (its ``base_lr``, ``decay``, ``total``): the object is what
    runs, so the config records its settings. A value also given to the config ``c`` must
    agree (``ValueError`` naming it)."""
    own = {"lr": Steps(opt.base_lr).record(), "lr_decay": getattr(opt, "decay", "none")}
    if own["lr_decay"] != "none":
        own["steps"] = getattr(opt, "total", None)
    for key, value in own.items():
        given = getattr(c, key)
        if given is not None and (Steps(given).record() if key == "lr" else given) != value:
            raise ValueError(f"{key}={given!r} differs from the optimizer object's {value!r}; "
                             f"give it once (the object's)")
    return own


def recorded_shapes(record: dict):
    """``{name: shape}`` of the parameters of a run from its recorded config dict: its
    architecture's ``shapes`` rule (:func:`~stsim.core.problem.register_arch`), or None
    when it has none (or the architecture is not registered in this process, or was an
    object)."""
    if "arch_object" in record:
        return None
    try:
        spec = arch_spec(record.get("arch", "transformer"))
    except ValueError:
        return None
    if spec.shapes is None:
        return None
    names = {f.name for f in dataclasses.fields(Config)}
    cfg = Config(**{k: v for k, v in record.items() if k in names})
    try:
        return {k: tuple(v) for k, v in spec.shapes(cfg).items()}
    except (TypeError, ValueError, KeyError):
        return None


def field_help(f: dataclasses.Field) -> str:
    """``"<help> (default: <value>)"`` for a field of :class:`Config`."""
    text = f.metadata.get("default_text")
    if text is None:
        text = ",".join(map(str, f.default)) if isinstance(f.default, tuple) else str(f.default)
    return f"{f.metadata['help']} (default: {text})"


def _field_type(f: dataclasses.Field) -> str:
    """The type of a field as numpydoc writes it: ``int | None`` → ``int, optional``."""
    t = str(f.type).replace("'", "")
    return t[:-len(" | None")] + ", optional" if t.endswith(" | None") else t


if Config.__doc__:  # None under python -OO: one numpydoc entry per field, name : type
    Config.__doc__ += "\n    Attributes\n    ----------\n" + "".join(
        f"    {f.name} : {_field_type(f)}\n        {field_help(f)}\n"
        for f in dataclasses.fields(Config))
