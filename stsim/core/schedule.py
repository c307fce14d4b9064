r"""Default step size and step count of a run, derived from the reduced population dynamics,
and the plateau diagnosis of a finished run.

Why this module exists: a call naming only the problem (``run(T=200, q=3)``) must learn.
Softmax attention from zero initialisation sits on a long plateau (all logits equal, ``a``
grows like ``η t/(n−1)`` times a small gradient) before a fast descent, so a fixed step count
is either far too short or wasteful. The reduced dynamics (``docs/theory.md`` §3)
give both numbers from the math.

**The reduced map** (:mod:`stsim.core.reduced`: exact for the population loss with an
encoding that has a two-scalar reduction — one-hot, stochastic/slots, or any family whose
:meth:`~stsim.core.encodings.Encoding.reduced_n` says so — both models, both queries, from
zero initialisation): ``W_ee = a I − b J`` (n×n, ``n = enc.reduced_n(T)``), ``V_x = γ I``;
the 3-scalar GD map on ``(a, b, γ)``. The schedule asks the encoding (its
:class:`~stsim.core.families.EncodingSpec`), the optimiser
(:func:`~stsim.core.optim.register_optimizer`: its default-lr rule) and the architecture
(:func:`~stsim.core.problem.register_arch`: whether the reduced dynamics describe it) —
never their names.

**Largest stable step** (``η_max``). In the coordinates ``(θ, γ)`` the map's Jacobian is
``I − η diag(c²/(n−1), 1/d) H``; the γγ entry of the scaled Hessian is
``S₂ = |s|² ∈ [1/T, 1/q)``, largest at the solution, and the θθ entry is
``O(c² d/(q(n−1)))``, negligible. Hence ``η_max(reduced) = 2/sup S₂ = 2q``. Minibatch noise
moves the model off the invariant set into ``W_xe``; at the solution that direction has
curvature ``λ_xe = c² (q−1)(q+d)/n`` (scatter of the q selected tokens; checked by finite
differences), so

    η_max = min(2q, 2n / (c² (q−1)(q+d))),     default lr = η_max / 2

(half, for the minibatch fluctuation of the curvature). For the practical model with
``query="sum"`` a further factor 1/2 is applied: MEASURED, not derived (lr = q diverged at
T=50, q=3; the query token's own logit grows like ``c² q a``).

**Step count.** The reduced map is run at the chosen lr from zero; ``t_2%`` is its first step
with ``L ≤ 2% · L(0)``; the default ``steps = 2 · t_2%`` (rounded up to 100). The reduced
map is *population* gradient descent; online SGD leaves the plateau later, by a factor that
grows with T and shrinks with the batch (:data:`SGD_ESCAPE_LAG`, MEASURED by
``benchmarks/bench_sgd_lag.py``: the step where the validation loss first reaches 50% of
L(0), SGD over the reduced map, batch 256: 1.34× at T = 25, 1.39× at T = 50, 1.62× at
T = 100, 2.15× at T = 200; batch 64: 2.4–2.5×, batch 1024: 1.1–1.2×). It comes from the
minibatch noise in ``W_xe`` (the token rows of W, zero in the population dynamics): with
their gradient dropped, SGD at T = 50, batch 64 escapes at 1.01× the reduced map's step
instead of 2.55×, docs/model.md. The margin 2 covers the measured lag at the default batch
up to T = 200. For sphere / near-orthogonal encodings there is no exact reduction; the
slots map with ``n = d_e`` is used as an approximation (their ``approx_reduced_n``) and
the margin is 3.

**Fallback.** An architecture registered without reduced dynamics (the FCN), or an
encoding with neither an exact nor an approximate reduction (e.g. a registered dense
family), gets the optimiser's fixed default lr (``fixed_lr``: SGD 1.0, Adam 0.01) and 1000
steps; the explanation, and a completed run's message, say so.

**Adam** has a scale-free step, so the plateau is not a small-gradient trap; but at a
constant step it settles into a noise floor whose spread grows with the step (measured at
T = 200, q = 3, slots, lr 0.02: the validation loss stalls near 14% of L(0) from step 1000
to 4000, cos(V, V*) ≈ 0.53). The default therefore anneals: lr 0.02 for the first half of
the steps, then linearly to 0 (``lr_decay="linear"``, applied when the lr is derived), and
``max(2000, 30 T)`` steps — MEASURED, not derived (seed 0, batch 256; loss / L(0) and
cos(V, V*) at the end: T = 50, 2000 steps: 0.10%, 0.9998 (1500 steps: 0.16%, 0.9996);
T = 100, 3000 steps: 0.13%, 0.9995; T = 200, 6000 steps: 0.77%, 0.994; T = 200 with only
2000 annealed steps: 3.6%, 0.94).

A learning rate or a step count given by the user is always obeyed exactly; the reduced
dynamics are then used only to predict, for the status message, where the plateau ends at
the user's lr.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from stsim.core.families import encoding_spec
from stsim.core.optim import ADAM_LR, ADAM_STEPS_PER_T, REDUCED, adam_steps, optimizer_spec
from stsim.core.problem import arch_spec
from stsim.core.reduced import MAX_STEPS, TARGET, reduced_map_steps

__all__ = ["Schedule", "eta_max", "estimated_seconds", "default_schedule", "predict", "SGD_ESCAPE_LAG",
           "plateau_status", "assess_run", "adam_steps", "fallback_note", "TARGET", "SAFETY",
           "MARGIN", "ADAM_LR", "ADAM_STEPS_PER_T", "FALLBACK_STEPS", "LongRunWarning"]

SAFETY = 0.5           # lr = SAFETY * eta_max
MARGIN = 2.0           # steps = MARGIN * t_TARGET of the reduced map (3 without exact reduction)
FALLBACK_STEPS = 1000  # steps where nothing is derived
SECONDS_PER_TOKEN = 1.8e-7   # rough cost of one sample-token of one SGD step (measured, 1 core)
LONG_RUN_S = 90.0
#: online SGD's escape step over the reduced map's (population GD), MEASURED at batch 256
#: (benchmarks/bench_sgd_lag.py; module docstring)
SGD_ESCAPE_LAG = ("1.3-1.4x at T <= 50, 1.6x at T = 100, 2.2x at T = 200 (batch 256); "
                  "more than 2.33x at T = 1000, where the default schedule ends on the "
                  "plateau")


@dataclass
class Schedule:
    """What the reduced dynamics say about a run.

    lr, steps : the values the run uses (the user's when given);  lr_derived /
    steps_derived : whether each was derived here;  eta_max : the stability bound (None for
    Adam);  escape_step / target_step : first step of the reduced map at ``lr`` with loss
    <= 50% / 2% of L(0) (None: not within the horizon, or no reduction);  exact : whether
    the reduction is exact for this encoding;  estimated_s : rough wall time;  explanation :
    one line;  warning : set when the default run is expected to be long.
    """

    lr: float
    steps: int
    lr_derived: bool = False
    steps_derived: bool = False
    eta_max: float | None = None
    escape_step: int | None = None
    target_step: int | None = None
    exact: bool = True
    estimated_s: float | None = None
    explanation: str = ""
    warning: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)


def _reduction(cfg):
    """``(n, exact, why)``: ``n`` of the reduced map for the resolved ``cfg`` — the
    encoding's exact ``reduced_n(T)``, else its ``approx_reduced_n(T)`` — or ``None`` with
    ``why`` there is none (an architecture not described by the reduced dynamics, or an
    encoding with no reduction)."""
    if not arch_spec(cfg.arch).reduced:
        return None, False, f"arch={cfg.arch!r} (registered without reduced dynamics)"
    spec = encoding_spec(cfg.pe, T_max=cfg.T_max, d_e=cfg.d_e, sampler=cfg.sampler)
    n = spec.reduced_n(cfg.T)
    if n is not None:
        return n, True, ""
    n = spec.approx_reduced_n(cfg.T)
    if n is not None:
        return n, False, ""
    return None, False, f"the {spec.label} encoding (no reduced_n or approx_reduced_n)"


def eta_max(q: int, d: int, n: int, c: float = 1.0) -> float:
    """``min(2q, 2n/(c²(q−1)(q+d)))`` — the reduced map's bound ``2q`` and the transverse
    ``W_xe`` bound (module docstring); ``n = T`` (onehot) or ``d_e`` (slots)."""
    lam_xe = c * c * (q - 1) * (q + d) / n
    return 2.0 * q if lam_xe <= 0 else min(2.0 * q, 2.0 / lam_xe)


def estimated_seconds(cfg, steps=None) -> float:
    """Rough wall time (s, one core) of ``steps`` (default ``cfg.steps``) steps of the
    resolved config ``cfg`` — the one cost model (the default schedule's warning, the
    studies' longest-first ordering). Per step: the architecture's own
    ``seconds_per_step(cfg)`` (:func:`~stsim.core.problem.register_arch`; the FCN's is
    :func:`stsim.baselines.fcn.fcn_seconds_per_step`), else the transformer's:
    ``SECONDS_PER_TOKEN`` × points × tokens, a dense encoding costing ``1 + d_e/8`` times
    an index one."""
    steps = cfg.steps if steps is None else steps
    own = arch_spec(cfg.arch).seconds_per_step
    if own is not None:
        return own(cfg) * steps
    n_tok = cfg.T + (1 if cfg.model == "practical" else 0)
    batch = cfg.n_train if cfg.objective != "online" else cfg.batch
    dense = encoding_spec(cfg.pe, T_max=cfg.T_max, d_e=cfg.d_e, sampler=cfg.sampler).dense
    per = batch * n_tok * (1 + (cfg.d_e / 8 if dense else 0))
    return SECONDS_PER_TOKEN * per * steps


def _long_run_warning(what, estimated_s):
    """The text of the long-default-run warning: ``what`` needs ``estimated_s`` on one core."""
    return (f"{what}: expect roughly {estimated_s / 60:.0f} min on one core (with the "
            f"batches drawn ahead on a second core, the default, about 0.4-0.6 of that: "
            f"run(T=200, q=3) measured 6.8 ms per step on one core, 4.1-5.3 ms by default)")


def fallback_note(cfg) -> str:
    """What a run of ``cfg`` whose lr or steps were not given was told when nothing could
    be derived (module docstring, *Fallback*), or ``""``."""
    n, _, why = _reduction(cfg)
    if n is not None:
        return ""
    opt = optimizer_spec(cfg.optimizer)
    return (f"no reduced dynamics for {why}: default lr {opt.fixed_lr:g} ({opt.name}'s fixed "
            f"default) and {FALLBACK_STEPS} steps, not derived")


def predict(cfg, lr=None, steps=None) -> Schedule:
    """The :class:`Schedule` of a config whose ``T, q, d, pe, d_e, sampler, model, query,
    optimizer, arch`` are resolved; ``lr`` / ``steps``: the user's values (None: derive)."""
    opt = optimizer_spec(cfg.optimizer)
    n, exact, why = _reduction(cfg)
    if n is None:
        return Schedule(lr=opt.fixed_lr if lr is None else lr,
                        steps=FALLBACK_STEPS if steps is None else steps, lr_derived=lr is None,
                        steps_derived=steps is None, exact=False,
                        explanation=fallback_note(cfg))
    c = 1.0 if cfg.query == "sum" else 1.0 / cfg.q
    if opt.lr != REDUCED and opt.steps is not None:     # the optimiser's own defaults
        d_steps = opt.steps(cfg)
        s = Schedule(lr=opt.lr if lr is None else lr, steps=d_steps if steps is None else steps,
                     lr_derived=lr is None, steps_derived=steps is None, exact=False,
                     explanation=opt.note or f"{opt.name}: its own default lr {opt.lr:g} and "
                                             f"{d_steps} steps (registered)")
        s.estimated_s = estimated_seconds(cfg, s.steps)
        if steps is None and s.estimated_s > LONG_RUN_S:
            s.warning = _long_run_warning(f"the default {opt.name} schedule needs {d_steps} "
                                          "steps", s.estimated_s)
        return s
    em = eta_max(cfg.q, cfg.d, n, c)
    d_lr, note = (SAFETY * em, "eta_max/2") if opt.lr == REDUCED else (opt.lr, opt.name)
    if opt.lr == REDUCED and cfg.model == "practical" and cfg.query == "sum":
        d_lr *= 0.5
        note += " x 1/2 (practical/sum: measured, not derived)"
    use_lr = d_lr if lr is None else lr
    practical = cfg.model == "practical"
    horizon = MAX_STEPS
    esc, tgt = reduced_map_steps(cfg.T, cfg.q, cfg.d, use_lr, n, c=c, practical=practical,
                                 max_steps=horizon) if n >= 2 else (None, None)
    margin = MARGIN if exact else 1.5 * MARGIN
    if steps is None:
        d_steps = MAX_STEPS if tgt is None else max(100, int(math.ceil(margin * tgt / 100.0)) * 100)
    else:
        d_steps = steps
    kind = "exact" if exact else f"approximate (slots map with n=d_e={n})"
    expl = (f"lr = {'user' if lr is not None else note} = {use_lr:.4g} "
            f"(eta_max = min(2q, 2n/(c^2(q-1)(q+d))) = {em:.4g}, n={n}); the {kind} reduced "
            f"{cfg.model}/{cfg.query} dynamics reach 50% of L(0) at step {esc} and 2% at step "
            f"{tgt}; steps = " + (f"{margin:g} x {tgt} -> {d_steps}" if steps is None
                                  else f"{steps} (user)"))
    s = Schedule(lr=use_lr, steps=d_steps, lr_derived=lr is None, steps_derived=steps is None,
                 eta_max=em, escape_step=esc, target_step=tgt, exact=exact, explanation=expl)
    s.estimated_s = estimated_seconds(cfg, d_steps)
    if steps is None and s.estimated_s > LONG_RUN_S:
        s.warning = _long_run_warning(f"the default schedule needs {d_steps} steps ("
                                      f"{_escape_words(cfg, esc, use_lr)})", s.estimated_s)
    if steps is None and tgt is None:
        s.warning = (f"the reduced dynamics do not reach 2% of L(0) within {horizon} steps at lr "
                     f"{use_lr:.3g}; running {d_steps} steps")
    return s


class LongRunWarning(UserWarning):
    """A default schedule expected to take long, or one the reduced dynamics cannot
    bound (``stsim run --quiet`` hides it; ``warnings.simplefilter("ignore",
    LongRunWarning)`` does in Python)."""


def _escape_words(cfg, esc, lr) -> str:
    """Where the plateau ends: the reduced map's step (population gradient descent) and,
    for online SGD, that it lags it (:data:`SGD_ESCAPE_LAG`)."""
    words = (f"population gradient descent, i.e. the reduced dynamics, leaves the initial "
             f"plateau near step {esc} at lr {lr:.3g}")
    if cfg.objective == "online":
        words += (f"; online SGD leaves it later: measured {SGD_ESCAPE_LAG}, from minibatch "
                  f"noise in W_xe; docs/model.md")
    return words


def default_schedule(cfg) -> Schedule:
    """The schedule :meth:`Config.resolve` uses when ``lr`` and/or ``steps`` are None; a
    :class:`LongRunWarning`, attributed to the caller's line, says so when the default run
    is expected to be long."""
    s = predict(cfg, lr=cfg.lr, steps=cfg.steps)
    if s.warning:
        from stsim.util.warn import warn
        warn(f"stsim: {s.warning}", LongRunWarning)
    return s


def plateau_status(history: dict, schedule: Schedule | None, online: bool = True):
    """``(assessment, text)`` of a finished run from its recorded validation loss
    (``val``, else ``loss``): ``"learned"`` (last <= 2% of first), ``"plateau"`` (> 90%),
    ``"not converged"`` (in between) or ``"unknown"`` (nothing recorded). ``online``: the
    run drew minibatches (the text then says that SGD lags the reduced dynamics)."""
    key = "val" if len(history.get("val", ())) else "loss"
    L = history.get(key, ())
    if len(L) < 1 or not (L[0] > 0):
        return "unknown", ""
    ratio = float(L[-1]) / float(L[0])
    if not math.isfinite(ratio):
        return "unknown", ""
    if ratio <= TARGET:
        return "learned", f"learned: loss {ratio:.2%} of initial"
    pred = ""
    if schedule is not None and schedule.target_step is not None:
        pred = (f"; the reduced dynamics (population gradient descent) predict the escape "
                f"near step {schedule.escape_step} and loss <= 2% of initial near step "
                f"{schedule.target_step} at lr {schedule.lr:.4g}")
        if online:
            pred += f" (online SGD escapes later: measured {SGD_ESCAPE_LAG})"
        if schedule.target_step > schedule.steps:
            pred += f" (> steps={schedule.steps}: give more steps, or omit steps for the default)"
    elif schedule is not None and schedule.eta_max is not None and schedule.lr > schedule.eta_max:
        pred = f"; lr {schedule.lr:.4g} exceeds the stability bound eta_max = {schedule.eta_max:.4g}"
    if ratio > 0.9:
        return "plateau", f"still on the initial plateau: loss {ratio:.1%} of initial{pred}"
    return "not converged", f"escaped the plateau but not converged: loss {ratio:.1%} of initial{pred}"


def assess_run(cfg, history: dict):
    """``(assessment, text)`` for a finished run of the resolved ``cfg`` (see
    :func:`plateau_status`); the reduced dynamics are run (at the run's lr) only when the
    run did not learn, to say where the plateau ends."""
    assessment, text = plateau_status(history, None)
    if assessment in ("plateau", "not converged"):
        assessment, text = plateau_status(history, predict(cfg, lr=cfg.lr, steps=cfg.steps),
                                          online=cfg.objective == "online")
    return assessment, text
