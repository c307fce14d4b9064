r"""Default step size and step count of a run, derived from the reduced population dynamics,
and the plateau diagnosis of a finished run.

Why this module exists: a call naming only the problem (``run(T=200, q=3)``) must learn.
Softmax attention from zero initialisation sits on a long plateau (all logits equal, ``a``
grows like ``η t/(n−1)`` times a small gradient) before a fast descent, so a fixed step count
is either far too short or wasteful. The reduced dynamics (SPEC §4, ``docs/theory.md`` §3)
give both numbers from the math.

**The reduced map** (exact for the population loss with one-hot or stochastic/slots PE, both
models, both queries, from zero initialisation). On ``W_ee = a I − b J`` (n×n, ``n = T`` for
onehot, ``d_e`` for slots), ``V_x = γ I``, all other blocks 0, the logits relative to an
unselected token are ``θ = c a`` (the q selected tokens) and, for the practical model only,
``φ = c² q (a − b q) + c b q`` (the query token, whose value ``V_e p_q`` is 0); ``c = 1``
(``query="sum"``) or ``1/q`` (``"mean"``). With ``Z = q e^θ + (T − q) + e^φ``,
``s₊ = e^θ/Z``, ``s₋ = 1/Z``, ``S₂ = q s₊² + (T−q) s₋²``:

    L(a, b, γ) = (d/2) (S₂ γ² − 2 s₊ γ + 1/q).

By slot exchangeability the population gradient in ``W_ee`` is ``αI + βJ`` with
``n(α + β) = ∂L/∂a`` and ``n(α + nβ) = −∂L/∂b``, so full-matrix GD is the 3-scalar map
``a ← a − ηα``, ``b ← b + ηβ``, ``γ ← γ − (η/d) ∂L/∂γ`` (for the theory model ``∂L/∂b = 0``
and this is the two-scalar map of :mod:`stsim.theory.reduced`; tested equal).

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
with ``L ≤ 2% · L(0)``; the default ``steps = 2 · t_2%`` (rounded up to 100): minibatch SGD
lags the population dynamics (measured: T ≤ 100 within 5%, T = 200 by up to 1.6×). For
sphere / near-orthogonal encodings there is no exact reduction; the slots map with
``n = d_e`` is used as an approximation and the margin is 3.

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

from stsim.core.encodings import is_dense

__all__ = ["Schedule", "eta_max", "estimated_seconds", "reduced_map_steps", "reduced_map_losses", "default_schedule", "predict",
           "plateau_status", "assess_run", "adam_steps", "TARGET", "SAFETY", "MARGIN"]

TARGET = 0.02          # "learned": loss <= 2% of its initial value L(0) = d/(2q)
ESCAPE = 0.5           # "escaped the plateau": loss <= 50% of L(0)
SAFETY = 0.5           # lr = SAFETY * eta_max
MARGIN = 2.0           # steps = MARGIN * t_TARGET of the reduced map (3 without exact reduction)
MAX_STEPS = 100_000    # the reduced map is run this far, then extrapolated by the rate law
ADAM_LR = 0.02
ADAM_STEPS_PER_T = 30  # Adam's default steps = max(2000, 30 T) (measured, see the docstring)


def adam_steps(T: int) -> int:
    """Adam's default step count ``max(2000, 30 T)`` rounded up to 100 (MEASURED)."""
    return max(2000, int(math.ceil(ADAM_STEPS_PER_T * T / 100.0)) * 100)

SECONDS_PER_TOKEN = 1.8e-7   # rough cost of one sample-token of one SGD step (measured, 1 core)
LONG_RUN_S = 90.0
DEFAULT_LR = {"sgd": 1.0, "gd": 1.0, "adam": 0.01}   # fixed defaults where nothing is derived (fcn)


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


def _n_and_c(cfg):
    """``n`` of the reduction, ``c``, and whether the reduction is exact (onehot and
    stochastic/slots; other families, registered ones included, use ``n = d_e``)."""
    exact = cfg.pe == "onehot" or (cfg.pe == "stochastic" and cfg.sampler == "slots")
    n = cfg.T if cfg.pe == "onehot" else cfg.d_e
    c = 1.0 if cfg.query == "sum" else 1.0 / cfg.q
    return n, c, exact


def eta_max(q: int, d: int, n: int, c: float = 1.0) -> float:
    """``min(2q, 2n/(c²(q−1)(q+d)))`` — the reduced map's bound ``2q`` and the transverse
    ``W_xe`` bound (module docstring); ``n = T`` (onehot) or ``d_e`` (slots)."""
    lam_xe = c * c * (q - 1) * (q + d) / n
    return 2.0 * q if lam_xe <= 0 else min(2.0 * q, 2.0 / lam_xe)


def _loss_grad(a, b, g, T, q, d, c, practical):
    """``L`` and ``(∂L/∂a, ∂L/∂b, ∂L/∂γ)`` of the reduced 3-scalar model (overflow-safe)."""
    r = T - q
    th = c * a
    ph = c * c * q * (a - b * q) + c * b * q if practical else -math.inf
    m = max(th, ph, 0.0)
    es, eu = math.exp(th - m), math.exp(-m)
    eq = math.exp(ph - m) if practical else 0.0
    Z = q * es + r * eu + eq
    sp, sm, sq = es / Z, eu / Z, eq / Z
    S2 = q * sp * sp + r * sm * sm
    L = 0.5 * d * (S2 * g * g - 2.0 * sp * g + 1.0 / q)
    # derivatives of (s₊, s₋) with respect to θ (all q selected logits) and φ (query logit)
    dsp_t, dsm_t = sp * (1.0 - q * sp), -q * sp * sm
    dsp_p, dsm_p = -sp * sq, -sm * sq
    dL_t = 0.5 * d * (g * g * 2.0 * (q * sp * dsp_t + r * sm * dsm_t) - 2.0 * g * dsp_t)
    dL_p = 0.5 * d * (g * g * 2.0 * (q * sp * dsp_p + r * sm * dsm_p) - 2.0 * g * dsp_p)
    dL_a = c * dL_t + (c * c * q * dL_p if practical else 0.0)
    dL_b = (c * q - c * c * q * q) * dL_p if practical else 0.0
    return L, dL_a, dL_b, d * (S2 * g - sp)


def reduced_map_steps(T, q, d, lr, n, *, c=1.0, practical=False, max_steps=MAX_STEPS,
                      levels=(ESCAPE, TARGET), a0=0.0, b0=0.0, gamma0=0.0, extrapolate=True):
    """Run the exact reduced GD map (module docstring) from ``(a0, b0, γ0)`` and return, for
    each level in ``levels``, the first step with ``L <= level · L(0)`` (None if not within
    ``max_steps``). ``L(0)`` is the loss at zero, ``d/(2q)``. With ``extrapolate``, a level
    not reached within ``max_steps`` after the escape (``L <= 50% L(0)``) is extrapolated
    with the rate law ``1/L(t) ≈ 1/L(t_h) + 4ηc²(t − t_h)/(n−1)``."""
    a, b, g = float(a0), float(b0), float(gamma0)
    L0 = 0.5 * d / q
    out = [None] * len(levels)
    todo = sorted(range(len(levels)), key=lambda i: -levels[i])
    k = 0
    for t in range(max_steps + 1):
        L, da, db, dg = _loss_grad(a, b, g, T, q, d, c, practical)
        while k < len(todo) and L <= levels[todo[k]] * L0:
            out[todo[k]] = t
            k += 1
        if k == len(todo) or not math.isfinite(L):
            break
        if t == max_steps and extrapolate and L < ESCAPE * L0:
            # past the plateau: 1/L grows like 4 lr c^2 t/(n-1) (the rate law, SPEC §4)
            for i in todo[k:]:
                out[i] = int(t + (n - 1) / (4.0 * lr * c * c) * (1.0 / (levels[i] * L0) - 1.0 / L))
            break
        beta = (-db / n - da / n) / (n - 1)
        alpha = da / n - beta
        a -= lr * alpha
        b += lr * beta
        g -= lr / d * dg
    return out


def reduced_map_losses(T, q, d, lr, n, steps, *, c=1.0, practical=False):
    """The loss ``L(t)``, ``t = 0..steps``, of the reduced 3-scalar GD map from zero (a list;
    for tests against full-matrix population GD)."""
    a = b = g = 0.0
    out = []
    for _ in range(steps + 1):
        L, da, db, dg = _loss_grad(a, b, g, T, q, d, c, practical)
        out.append(L)
        beta = (-db / n - da / n) / (n - 1)
        a -= lr * (da / n - beta)
        b += lr * beta
        g -= lr / d * dg
    return out


def estimated_seconds(cfg, steps=None) -> float:
    """Rough wall time (s, one core) of ``steps`` (default ``cfg.steps``) steps of the
    resolved config ``cfg``: ``SECONDS_PER_TOKEN`` × batch × tokens × steps, a dense
    encoding costing ``1 + d_e/8`` times an index one — the one cost model (the default
    schedule's warning, the studies' longest-first ordering)."""
    steps = cfg.steps if steps is None else steps
    n_tok = cfg.T + (1 if cfg.model == "practical" else 0)
    batch = cfg.n_train if cfg.optimizer == "gd" else cfg.batch
    dense = is_dense(cfg.pe, cfg.sampler)
    per = batch * n_tok * (1 + (cfg.d_e / 8 if dense else 0))
    return SECONDS_PER_TOKEN * per * steps


def _long_run_warning(what, estimated_s):
    """The text of the long-default-run warning: ``what`` needs ``estimated_s`` on one core."""
    return (f"{what}: expect roughly {estimated_s / 60:.0f} min on one core (with the "
            f"batches drawn ahead on a second core, the default, about 0.4-0.6 of that: "
            f"run(T=200, q=3) measured 6.8 ms per step on one core, 4.1-5.3 ms by default)")


def predict(cfg, lr=None, steps=None) -> Schedule:
    """The :class:`Schedule` of a config whose ``T, q, d, pe, d_e, sampler, model, query,
    optimizer`` are resolved; ``lr`` / ``steps``: the user's values (None: derive)."""
    builtin = cfg.pe in ("onehot", "stochastic", "near-orthogonal")
    if cfg.arch != "transformer" or not builtin:
        return Schedule(lr=DEFAULT_LR[cfg.optimizer] if lr is None else lr,
                        steps=1000 if steps is None else steps, lr_derived=lr is None,
                        steps_derived=steps is None, exact=False,
                        explanation="no reduced dynamics for this architecture or encoding: lr "
                                    f"{DEFAULT_LR[cfg.optimizer]}, 1000 steps (fixed defaults)")
    n, c, exact = _n_and_c(cfg)
    if cfg.optimizer == "adam":
        d_steps = adam_steps(cfg.T)
        s = Schedule(lr=ADAM_LR if lr is None else lr, steps=d_steps if steps is None else steps,
                     lr_derived=lr is None, steps_derived=steps is None, exact=False,
                     explanation=f"adam: scale-free step; default lr {ADAM_LR} held for half "
                                 f"of the steps, then decayed linearly to 0 (when the lr is "
                                 f"derived); {d_steps} steps = max(2000, {ADAM_STEPS_PER_T} T) "
                                 "(measured at T = 50, 100, 200, not derived)")
        s.estimated_s = estimated_seconds(cfg, s.steps)
        if steps is None and s.estimated_s > LONG_RUN_S:
            s.warning = _long_run_warning(f"the default Adam schedule needs {d_steps} steps",
                                          s.estimated_s)
        return s
    em = eta_max(cfg.q, cfg.d, n, c)
    d_lr = SAFETY * em
    note = ""
    if cfg.model == "practical" and cfg.query == "sum":
        d_lr *= 0.5
        note = " x 1/2 (practical/sum: measured, not derived)"
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
    expl = (f"lr = {'user' if lr is not None else f'eta_max/2{note}'} = {use_lr:.4g} "
            f"(eta_max = min(2q, 2n/(c^2(q-1)(q+d))) = {em:.4g}, n={n}); the {kind} reduced "
            f"{cfg.model}/{cfg.query} dynamics reach 50% of L(0) at step {esc} and 2% at step "
            f"{tgt}; steps = " + (f"{margin:g} x {tgt} -> {d_steps}" if steps is None
                                  else f"{steps} (user)"))
    s = Schedule(lr=use_lr, steps=d_steps, lr_derived=lr is None, steps_derived=steps is None,
                 eta_max=em, escape_step=esc, target_step=tgt, exact=exact, explanation=expl)
    s.estimated_s = estimated_seconds(cfg, d_steps)
    if steps is None and s.estimated_s > LONG_RUN_S:
        s.warning = _long_run_warning(f"the default schedule needs {d_steps} steps (the plateau "
                                      f"of the reduced dynamics ends near step {esc} at lr "
                                      f"{use_lr:.3g})", s.estimated_s)
    if steps is None and tgt is None:
        s.warning = (f"the reduced dynamics do not reach 2% of L(0) within {horizon} steps at lr "
                     f"{use_lr:.3g}; running {d_steps} steps")
    return s


def default_schedule(cfg) -> Schedule:
    """The schedule :meth:`Config.resolve` uses when ``lr`` and/or ``steps`` are None; a
    ``UserWarning`` says so when the default run is expected to be long."""
    s = predict(cfg, lr=cfg.lr, steps=cfg.steps)
    if s.warning:
        import warnings
        warnings.warn(f"stsim: {s.warning}", stacklevel=4)
    return s


def plateau_status(history: dict, schedule: Schedule | None):
    """``(assessment, text)`` of a finished run from its recorded validation loss
    (``val``, else ``loss``): ``"learned"`` (last <= 2% of first), ``"plateau"`` (> 90%),
    ``"not converged"`` (in between) or ``"unknown"`` (nothing recorded)."""
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
        pred = (f"; the reduced dynamics predict the escape near step {schedule.escape_step} "
                f"and loss <= 2% of initial near step {schedule.target_step} at lr "
                f"{schedule.lr:.4g}")
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
        assessment, text = plateau_status(history, predict(cfg, lr=cfg.lr, steps=cfg.steps))
    return assessment, text
