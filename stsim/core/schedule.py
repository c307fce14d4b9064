r"""Default step size and step count of a run, derived from the reduced population dynamics
(the diagnosis of a finished run is :mod:`stsim.core.assessment`; the measurements behind
the rules are in docs/theory.md, section 9, and docs/model.md, "Where the plateau ends",
"Stability with a batch" and "A step per block").

A call naming only the problem (``run(T=200, q=3)``) must learn: from zero initialisation
softmax attention sits on a plateau before a fast descent, so a fixed step count is too short
or wasteful; the reduced dynamics (``docs/theory.md`` §3) give both numbers. **The reduced
map** (:mod:`stsim.core.reduced`; exact for the population loss with a two-scalar reduction,
:meth:`~stsim.core.encodings.Encoding.reduced_n`): ``W_ee = a I − b J``, ``V_x = γ I``, the
GD map on ``(a, b, γ)``. The schedule asks the encoding spec, the optimiser's default-lr rule
and the architecture — never their names.

**Stability** (:mod:`stsim.core.stability`): the largest stable single step ``η_max``,
with a batch, W's own step when its token rows are held (a step per block), and the
batch terms of heavy-tailed features.

**Another target** (:mod:`stsim.core.targets`; the paper's mean is the rest of this
docstring) asks the target for facts only: the reduced dynamics run at its
``effective_dim`` (``‖A‖²_F``: ``dim φ`` for a separable target with orthonormal
features), its :meth:`~stsim.core.targets.Target.fourth_moments` enter the batch terms
(*Heavy tails*), W's token rows are held at 0 unless ``freeze`` is given (the derivation's
``W_xe = 0``), and the quadratic readout's ``b``, ``Q`` take its ``head_steps`` times V's
step. The run's message says whether that is derived, measured (``Target.measured``) or
neither (:func:`_target_note`).

**Step count.** The reduced map is run at the chosen lr from zero; ``t_2%`` is its first step
with ``L ≤ 2% · L(0)``; the default ``steps = 2 · t_2%`` (rounded up to 100): the margin
covers online SGD's lag behind the population map (:data:`SGD_ESCAPE_LAG` with W's token
rows free; 1.03–1.13× with them held). For sphere / near-orthogonal encodings there is no
exact reduction; the slots map with ``n = d_e`` is used as an approximation (their
``approx_reduced_n``) and the margin is 3.

**Fallback.** An architecture registered without reduced dynamics (the FCN), or an
encoding with neither an exact nor an approximate reduction (e.g. a registered dense
family), gets 1000 steps and, for SGD, the architecture's own step rule when it registered
one (the FCN's: :func:`stsim.baselines.fcn.fcn_default_lr`, the same mean-square bound on
its read-out at initialisation), else the optimiser's fixed default lr (``fixed_lr``:
SGD 1.0, Adam 0.01); the explanation, and a completed run's message, say so.

**Adam** has a scale-free step, but at a constant step it settles on a noise floor. The
default anneals: lr 0.02 for the first half of the steps, then linearly to 0
(``lr_decay="linear"``, when the lr is derived), ``max(2000, 30 T)`` steps — MEASURED, not
derived (seed 0, batch 256; at the end 0.10% of L(0) at T = 50, 0.13% at T = 100, 0.77% at
T = 200, cos(V, V*) ≥ 0.994).

A learning rate or a step count given by the user is always obeyed exactly; the reduced
dynamics are then used only to predict, for the status message, where the plateau ends at
the user's lr.
"""
from __future__ import annotations

import dataclasses

from dataclasses import dataclass

from stsim.core.attention_dynamics import mechanism_schedule
from stsim.core.cost import estimated_seconds, wall_seconds
from stsim.core.model import query_coef
from stsim.core.optim import REDUCED
from stsim.core.reduced import MARGIN, MAX_STEPS, reduced_map_steps, step_count
from stsim.core.stopping import resolve_stop
from stsim.core.targets import make_target
from stsim.core.token_stats import resolve_draws
from stsim.core.stability import (NOISE_W, SAFETY, eta_max, eta_V_max, eta_W_block, eta_W_cap,
                                  fourth_excess)
from stsim.util.validate import Steps, check_int
from stsim.util.warn import warn

__all__ = ["Plan", "plan", "settle", "check_freeze", "derived_steps", "FROZEN", "predict",
           "SGD_ESCAPE_LAG", "MARGIN", "FALLBACK_STEPS", "LongRunWarning"]

FALLBACK_STEPS = 1000  # steps where nothing is derived
#: a default schedule expected to take longer (s, stsim.core.cost.wall_seconds) warns
LONG_RUN_S = 90.0
#: online SGD's escape step over the reduced map's (population GD), MEASURED at batch 256
#: (benchmarks/bench_sgd_lag.py; docs/model.md, "Where the plateau ends")
SGD_ESCAPE_LAG = ("1.3-1.4x at T <= 50, 1.6x at T = 100, 2.2x at T = 200 (batch 256); "
                  "more than 2.33x at T = 1000, where the single-step schedule ended on "
                  "the plateau")


@dataclass(frozen=True)
class Plan:
    """What a run will do (:func:`plan`, kept as ``cfg.resolved.plan``), or what the
    reduced dynamics say of one (:func:`predict`). lr, steps : the values the run uses (the
    user's when given; ``lr`` a :class:`~stsim.util.validate.Steps`);  freeze : the blocks
    held at their initial value (:func:`predict`: by its step per block);  lr_decay : the
    step-size schedule;  eta_max : the stability bound (None for Adam);  escape_step /
    target_step : first step of the reduced map at ``lr`` with loss <= 50% / 2% of L(0)
    (None: not within the horizon, or no reduction);  estimated_s : expected wall time (s)
    on an idle machine (:func:`~stsim.core.cost.wall_seconds`);  explanation : one line;
    warning : set when the default run is expected to be long;  note : what a completed
    run's message adds;  stop : the stop rule (:mod:`stsim.core.stopping`; None: none).
    Frozen: each value is decided once, and a resolved config's ``lr``, ``steps``,
    ``freeze``, ``lr_decay`` and ``stop`` are written from it (:meth:`record`)."""

    lr: Steps
    steps: int
    eta_max: float | None = None
    escape_step: int | None = None
    target_step: int | None = None
    estimated_s: float | None = None
    explanation: str = ""
    warning: str | None = None
    freeze: tuple = ()
    lr_decay: str = "none"
    note: str = ""
    stop: object = None

    def record(self) -> dict:
        """The config fields this plan decides, as a config records them."""
        return {"lr": self.lr.record(), "steps": self.steps, "freeze": self.freeze,
                "lr_decay": self.lr_decay,
                "stop": "none" if self.stop is None else self.stop.record()}


def _reduction(cfg):
    """``(n, exact, why)``: ``n`` of the reduced map for the resolved ``cfg`` — the
    encoding's exact ``reduced_n(T)``, else its ``approx_reduced_n(T)`` — or ``None`` with
    ``why`` there is none (an architecture not described by the reduced dynamics, or an
    encoding with no reduction)."""
    if not cfg.resolved.arch.reduced:
        return None, False, f"arch={cfg.arch!r} (registered without reduced dynamics)"
    t = getattr(cfg.resolved, "target", None)
    if t is not None and not t.gaussian_tokens:
        return None, False, (f"the target {t.label!r} (its tokens are not Gaussian: the "
                             f"reduced dynamics are derived for N(0, I) tokens)")
    spec = cfg.resolved.encoding
    n = spec.reduced_n(cfg.T)
    if n is not None:
        return n, True, ""
    n = spec.approx_reduced_n(cfg.T)
    if n is not None:
        return n, False, ""
    return None, False, f"the {spec.label} encoding (no reduced_n or approx_reduced_n)"


#: where the measured lag of online SGD and the run times behind the messages are told
PLATEAU_DOC = "docs/model.md#where-the-plateau-ends"


def _long_run_warning(what, estimated_s):
    """The text of the long-default-run warning, two lines: ``what`` takes about
    ``estimated_s`` (:func:`~stsim.core.cost.wall_seconds`); the measurements behind it are in
    :data:`PLATEAU_DOC`."""
    return (f"{what}:\n  expect roughly {estimated_s / 60:.0f} min on an idle machine "
            f"(stsim.core.cost.wall_seconds); details: {PLATEAU_DOC}")


def _fallback_lr(cfg):
    """``(lr, words)``: the step where nothing is derived from the reduced dynamics, and
    what it is: the architecture's own rule for SGD
    (:func:`~stsim.core.problem.register_arch`'s ``lr``: the FCN's), else the optimiser's
    fixed default."""
    opt, own = cfg.resolved.optimizer, cfg.resolved.arch.lr
    if own is not None and opt.lr == REDUCED:
        lr = own(cfg)
        return lr, f"default lr {lr:.4g} (the {cfg.arch} architecture's own stability rule)"
    return opt.fixed_lr, f"default lr {opt.fixed_lr:g} ({opt.name}'s fixed default)"


def _note(cfg, lr, freeze, noted) -> str:
    """What a run of ``cfg`` at the step ``lr`` holding ``freeze`` is told of its step: the
    fallback where nothing is derived (module docstring, *Fallback*; when ``noted``); else
    what it does beyond the paper's single SGD step on every parameter, and W's token rows
    left free beside a step per block (the derived one holds them); or ``""``."""
    n, _, why = _reduction(cfg)
    if n is None:
        return (f"no reduced dynamics for {why}: {_fallback_lr(cfg)[1]} and {FALLBACK_STEPS} "
                f"steps, not derived") if noted else ""
    per_block = lr is not None and lr.names
    parts = ([f"a step per block ({lr})"] if per_block else []) + (
        [f"{', '.join(freeze)} held at their initial value"] if freeze else [])
    free = [b for b in FROZEN if b not in freeze] if per_block and set(FROZEN) <= set(
        cfg.resolved.arch.blocks(cfg) if cfg.resolved.arch.blocks is not None else ()) else []
    if free:
        parts.append(f"{', '.join(free)} trained (the derived step per block holds "
                     f"{', '.join(FROZEN)}: freeze={FROZEN!r})")
    return ("beyond the paper's single step on every parameter: " + " and ".join(parts)
            + " (stsim.core.schedule; lr=<number> runs the plain single step)") if parts else ""


def _batch(cfg):
    """The number of points whose mean gradient a step takes (None: the population)."""
    if cfg.objective == "online":
        return cfg.batch
    return cfg.n_train if cfg.objective == "sample" else None


#: the blocks a derived step per block holds at their initial value 0: W's token rows,
#: whose population gradient vanishes from zero init (module docstring)
FROZEN = ("W_xx", "W_xe")


def _target(cfg):
    """The run's target (:mod:`stsim.core.targets`) when its plan is not the mean task's
    own — a target other than the paper's, on an architecture with reduced dynamics —
    else None."""
    t = getattr(cfg.resolved, "target", None)
    return None if t is None or t.paper or not cfg.resolved.arch.reduced else t


def _task_dim(cfg) -> int:
    """The ``d`` of the mean task whose reduced dynamics the run's are: ``cfg.d``, or the
    target's :meth:`~stsim.core.targets.Target.effective_dim`."""
    t = _target(cfg)
    return cfg.d if t is None else t.effective_dim(cfg.d)


def _target_note(cfg, t, s) -> str:
    """What a run's message says of its step for the target ``t`` (derived, measured, or
    neither; module docstring, *Another target*)."""
    m, (e_V, e_W) = t.feature_dim(cfg.d), fourth_excess(t, cfg.d, cfg.q)
    tails = (f", the batch terms with its features' fourth moments (eps_V = {e_V:.4g}, "
             f"eps_W = {e_W:.4g})" if t.fourth_moments(cfg.d) is not None else
             ", the batch terms with Gaussian fourth moments of phi (assumed: the target "
             "gives no fourth_moments)")
    if not t.gaussian_tokens:
        return (f"target {t.label}: lr {s.lr} and steps neither derived nor measured (give lr "
                f"and steps)")
    if t.measured:
        how = f"lr {s.lr} and steps measured on {t.measured}"
    elif t.mean_on_features:
        how = (f"lr and steps the mean task's with d replaced by ||A||^2 = "
               f"{t.effective_dim(cfg.d)} (dim phi = {m}; derived), a capped step at the "
               f"calibrated cap with its derived excess" + tails)
    else:
        how = (f"lr {s.lr} and steps neither derived nor measured: the mean task's on dim "
               f"phi = {m}" + (", b and Q at the variance's measured factors"
                               if not t.linear_readout else "") + " (give lr and steps)")
    return f"target {t.label}: {how}"


def derived_steps(cfg, n, blocks=True):
    """``(lr, freeze, note)`` derived for SGD on the resolved ``cfg`` with the reduced map's
    ``n``: with ``blocks`` and minibatches, a step per block ``{"W": η_W, "V": η_V}`` and
    ``freeze = FROZEN`` when it lets W take a larger step than the single one; else the
    single step ``SAFETY · eta_max`` (:mod:`stsim.core.stability`)."""
    c = query_coef(cfg.query, cfg.q)
    B = _batch(cfg)
    t, d = _target(cfg), _task_dim(cfg)
    e_V, e_W = fourth_excess(t, cfg.d, cfg.q)
    half = cfg.model == "practical" and cfg.query == "sum"
    single = SAFETY * eta_max(cfg.q, d, n, c, B, e_V) * (0.5 if half else 1.0)
    note = "eta_max/2" + (" x 1/2 (practical/sum: measured, not derived)" if half else "")
    if not blocks or B is None:
        return single, (), note
    lr_V = SAFETY * eta_V_max(cfg.q, d, B, c, False, e_V) * (0.5 if half else 1.0)
    lr_W = eta_W_block(cfg.q, d, n, c, B, e_W)
    if lr_W <= single:
        return single, (), note
    rule = (f"{NOISE_W:g} B n/(c^2 q d)" if lr_W < eta_W_cap(B, c, e_W)
            else "B/c^2 (calibrated: T = 500 on one seed, 1000 and 2000 on 3 seeds, docs/model.md)"
            if not e_W else f"B/(c^2 (1 + eps_W)): the calibrated cap B/c^2 (Gaussian "
                            f"tokens) with the derived excess eps_W = {e_W:.4g} (the "
                            f"features' fourth moment)")
    return {"W": lr_W, "V": lr_V}, FROZEN, (
        f"a step per block: W {lr_W:.4g} = {rule} with W's token rows "
        f"{'+'.join(FROZEN)} held at 0, V {lr_V:.4g} = eta_V/2" + (" x 1/2" if half else "")
        + (f" (eps_V = {e_V:.4g}: the features' fourth moment)" if e_V else ""))


def predict(cfg, lr=None, steps=None, blocks=False) -> Plan:
    """The :class:`Plan` of a config whose ``T, q, d, pe, d_e, sampler, model, query,
    optimizer, arch, batch, objective`` are resolved; ``lr`` / ``steps``: the user's values
    (None: derive; ``lr`` a number, or a step per parameter, or their
    :class:`~stsim.util.validate.Steps`: ``{"W": η_W, "V": η_V}`` follows the reduced map
    with a step per block); ``blocks``: a derived SGD step may be a step per block with W's
    token rows held (:func:`derived_steps`)."""
    opt = cfg.resolved.optimizer
    lr = None if lr is None else Steps(lr)
    if lr is not None and lr.names and (set(lr.names) != {"W", "V"} or _reduction(cfg)[0] is None):
        if steps is None:               # a step per parameter the map does not describe
            raise ValueError(f"lr={lr.record()!r} (a step per parameter) needs steps: the "
                             f"default step count is derived for one step on every "
                             f"parameter, or for a step per block {{'W': ..., 'V': ...}}")
        return Plan(lr=lr, steps=steps, estimated_s=wall_seconds(cfg, steps),
                        explanation=f"lr = user, a step per parameter {lr.record()}; steps = "
                                    f"{steps} (user); no reduced prediction for a step per "
                                    f"parameter")
    n, exact, why = _reduction(cfg)
    if n is None:
        return Plan(lr=Steps(_fallback_lr(cfg)[0]) if lr is None else lr, explanation=_note(
            cfg, lr, (), True), steps=FALLBACK_STEPS if steps is None else steps)
    c = query_coef(cfg.query, cfg.q)
    if opt.lr != REDUCED and opt.steps is not None:     # the optimiser's own defaults
        d_steps = opt.steps(cfg)
        n_steps = d_steps if steps is None else steps
        est = wall_seconds(cfg, n_steps)
        return Plan(lr=Steps(opt.lr) if lr is None else lr, steps=n_steps, estimated_s=est,
                    explanation=opt.note or f"{opt.name}: its own default lr {opt.lr:g} and "
                                            f"{d_steps} steps (registered)",
                    warning=_long_run_warning(f"the default {opt.name} schedule needs "
                                              f"{d_steps} steps", est)
                    if steps is None and est > LONG_RUN_S else None)
    B = _batch(cfg)
    d = _task_dim(cfg)
    em = eta_max(cfg.q, d, n, c, B, fourth_excess(_target(cfg), cfg.d, cfg.q)[0])
    att = cfg.resolved.attention
    if att is not None and not (att.paper and cfg.rank is None):   # another mechanism
        d_lr = SAFETY * em if opt.lr == REDUCED else opt.lr
        use_lr, d_steps, expl = mechanism_schedule(
            att, cfg.rank, cfg.T, cfg.q, d, n, c, cfg.model == "practical",
            d_lr, lr=None if lr is None else lr.record(), steps=steps,
            dense=cfg.resolved.encoding.dense, d_e=cfg.d_e)
        return Plan(lr=Steps(use_lr), steps=d_steps, explanation=expl,
                    estimated_s=estimated_seconds(cfg, d_steps))
    freeze = ()
    if opt.lr == REDUCED:
        d_lr, freeze, note = derived_steps(cfg, n, blocks=blocks and lr is None)
    else:
        d_lr, note = opt.lr, opt.name
    use_lr = Steps(d_lr, check=False) if lr is None else lr     # derived: finite, > 0
    practical = cfg.model == "practical"
    horizon = MAX_STEPS
    esc, learned_at = reduced_map_steps(cfg.T, cfg.q, d, use_lr, n, c=c, practical=practical,
                                        max_steps=horizon) if n >= 2 else (None, None)
    margin = MARGIN if exact else 1.5 * MARGIN
    d_steps = step_count(learned_at, margin) if steps is None else steps
    kind = "exact" if exact else f"approximate (slots map with n=d_e={n})"
    bound = ("min(2q, 2n/(c^2(q-1)(q+d)))" if B is None else
             f"2/(max(1/q, c^2(q-1)(q+d)/n) + kappa/B), B={B}")
    expl = (f"lr = {'user' if lr is not None else note} = {use_lr} "
            f"(eta_max = {bound} = {em:.4g}, n={n}); the {kind} reduced "
            f"{cfg.model}/{cfg.query} dynamics reach 50% of L(0) at step {esc} and 2% at step "
            f"{learned_at}; steps = " + (f"{margin:g} x {learned_at} -> {d_steps}" if steps is None
                                  else f"{steps} (user)"))
    # the run's draws with the blocks this plan holds (resolve_draws, as the config will)
    held = tuple(set(cfg.freeze or ()) | set(freeze))
    est = wall_seconds(cfg, d_steps, statistics=resolve_draws(cfg, held) == "statistics")
    warning = None
    if steps is None and est > LONG_RUN_S:
        # where the plateau ends, and that online SGD with W's token rows free lags it
        lag = "; online SGD leaves it later" if cfg.objective == "online" and not freeze else ""
        stops = ("; the stop rule ends it once the validation loss has settled"
                 if resolve_stop(cfg.stop, False, _lr_decay(cfg)) is not None else "")
        warning = _long_run_warning(f"the default schedule needs at most {d_steps} steps "
                                    f"(population gradient descent, i.e. the reduced "
                                    f"dynamics, leaves the plateau near step {esc} at lr "
                                    f"{use_lr}{lag}{stops})", est)
    if steps is None and learned_at is None:
        warning = (f"the reduced dynamics do not reach 2% of L(0) within {horizon} steps at lr "
                   f"{use_lr}; running {d_steps} steps")
    return Plan(lr=use_lr, steps=d_steps, eta_max=em, escape_step=esc, target_step=learned_at,
                explanation=expl, freeze=freeze, estimated_s=est, warning=warning)


class LongRunWarning(UserWarning):
    """A default schedule expected to take long, or one the reduced dynamics cannot
    bound (``stsim run --quiet`` hides it; ``warnings.simplefilter("ignore",
    LongRunWarning)`` does in Python)."""


def _lr_decay(cfg) -> str:
    """The run's ``lr_decay``: the caller's, else the optimiser's (Adam: linear) with a
    derived lr, else none."""
    return cfg.lr_decay or (cfg.resolved.optimizer.decay if cfg.lr is None else "none")


def plan(cfg, noted=False) -> Plan:
    """What a run of ``cfg`` (checked, names resolved; ``lr``, ``steps``, ``lr_decay``,
    ``freeze`` the caller's or None) will do: the one place they are decided. Given values
    are obeyed; else derived (:func:`predict`): an SGD step may be a step per block holding
    W's token rows :data:`FROZEN` unless the caller's ``freeze`` leaves them free, and the
    blocks held are the caller's and the default's, merged; ``lr_decay`` is the optimiser's
    (Adam: linear) with a derived lr, else none. ``noted``: the caller left ``lr`` or
    ``steps`` to the default (:func:`settle`; where nothing is derived, the run's message
    then says so); the message says what a step does beyond the paper's (``note``,
    :func:`_note`). A long default schedule warns (:class:`LongRunWarning`)."""
    arch, given, t = cfg.resolved.arch, cfg.freeze, _target(cfg)
    if t is not None and given is None:     # the target's reduction holds W_xe = 0
        given = FROZEN
    blocks = tuple(arch.blocks(cfg)) if arch.blocks is not None else ()
    s, default = Plan(Steps(cfg.lr) if cfg.lr is not None else None, cfg.steps), ()
    if cfg.lr is None or cfg.steps is None:     # derived from the reduced dynamics
        holds = set(FROZEN) <= set(blocks) and (given is None or set(FROZEN) <= set(given))
        s = predict(cfg, lr=cfg.lr, steps=cfg.steps, blocks=cfg.lr is None and holds)
        s, default = dataclasses.replace(s, steps=check_int("steps", s.steps, 0)), s.freeze
        if s.warning:
            warn(f"stsim: {s.warning}", LongRunWarning)
    freeze = tuple(b for b in blocks if b in set(given or ()) | set(default))   # merged
    s = dataclasses.replace(s, freeze=freeze, lr_decay=_lr_decay(cfg),
                            note=_note(cfg, s.lr, freeze, noted))
    if t is not None and cfg.lr is None and not t.linear_readout:   # b, Q: x V's step
        base = s.lr.record()
        base = base if isinstance(base, dict) else {"W": base, "V": base}
        # every parameter of the architecture: a key/query pair's W_K, W_Q take W's step
        names = tuple(arch.shapes(cfg)) if arch.shapes is not None else tuple(base)
        lr = {n: base.get(n, base["W"]) for n in names if n not in t.head_steps}
        lr.update({k: lr["V"] * f for k, f in t.head_steps.items()})
        s = dataclasses.replace(s, lr=Steps(lr))
    if t is not None and noted:
        s = dataclasses.replace(s, note=(s.note + "; " if s.note else "") +
                                _target_note(cfg, t, s))
    return s


def settle(cfg) -> Plan:
    """The plan of the config ``cfg`` that :meth:`~stsim.core.config.Config.resolve` is
    resolving (names resolved; not changed): ``lr`` checked (one step, or one per parameter
    of the architecture) and ``freeze`` (:func:`check_freeze`), the plan made (:func:`plan`,
    which asks the target for its facts, of a config holding the checked values) and the
    stop rule decided — where the run's step, held blocks and stopping are checked and
    decided, once. The resolved config records them from the plan (:meth:`Plan.record`)."""
    arch = cfg.resolved.arch
    lr = None if cfg.lr is None else Steps(
        cfg.lr, names=None if arch.shapes is None else tuple(arch.shapes(cfg))).record()
    # left to the default: lr or steps not given, or given by an optimiser object
    noted = cfg.lr is None or cfg.steps is None or "optimizer" in cfg.resolved.objects
    p = plan(cfg.keeping_resolved(lr=lr, freeze=check_freeze(cfg.freeze, arch, cfg)), noted)
    # the stop rule (stsim.core.stopping): by default only where the step count is the plan's
    return dataclasses.replace(p, stop=resolve_stop(cfg.stop, cfg.steps is not None,
                                                    p.lr_decay))


def check_freeze(freeze, arch, cfg) -> tuple | None:
    """``freeze`` of a config being resolved: None (not given: the plan decides,
    :func:`stsim.core.schedule.plan`) or a block name or a sequence of them, of the
    architecture's blocks (:func:`stsim.core.problem.transformer_blocks`); returned as a
    tuple in the blocks' order. ``ValueError`` naming ``freeze`` and the allowed names, and
    for a run where nothing could move (every block held; or, in the transformer, ``V_x``
    and ``V_e`` held at 0 from ``init="zero"``: with ``V = 0``, ``f = V Z s = 0`` and
    ``∂ℓ/∂s = Zᵀ Vᵀ r = 0``, so every mechanism's ``∂ℓ/∂W`` is 0 and W stays at 0 too)."""
    if freeze is None:
        return None
    names = (freeze,) if isinstance(freeze, str) else freeze
    try:
        names = tuple(names)
    except TypeError:
        raise ValueError(f"freeze must be a tuple of block names, got {freeze!r}") from None
    if not names:
        return ()
    allowed = tuple(arch.blocks(cfg)) if arch.blocks is not None else ()
    if not allowed:
        raise ValueError(f"freeze: arch={arch.name!r} has no named blocks to freeze, got "
                         f"{names!r}")
    bad = [n for n in names if n not in allowed]
    if bad:
        raise ValueError(f"freeze must name blocks of {allowed}, got {bad!r}")
    # a quadratic readout's own blocks (b, Q) are not W or V blocks: they train, and pass
    # a gradient to W through the attended vector
    try:
        t = make_target(getattr(cfg, "target", "mean"))
    except ValueError:          # one's own target's label: refused elsewhere, naming it
        t = None
    head = arch.transformer and t is not None and not t.linear_readout
    if set(names) == set(allowed) and not head:
        raise ValueError(f"freeze holds every block {allowed}: nothing would train; leave "
                         f"at least one free (steps=0 evaluates the initial state)")
    if {"V_x", "V_e"} <= set(names) and cfg.init == "zero" and arch.transformer and not head:
        raise ValueError("freeze holds V_x and V_e at their initial value 0 (init='zero'): "
                         "with V = 0 no gradient reaches W (f = V Z s = 0 and dl/ds = Z^T "
                         "V^T r = 0, so dl/dW = 0), so nothing would train; free V, or give "
                         "init='random'")
    return tuple(n for n in allowed if n in names)

