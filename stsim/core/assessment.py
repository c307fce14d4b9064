"""The diagnosis of a finished run: learned, plateau, diverging, overfitting or not
converged (:func:`plateau_status`), with, for a run that did not learn, where the reduced
dynamics (:func:`stsim.core.schedule.predict`) say its plateau ends (:func:`assess_run`),
or the cause it can see instead of a late escape (:func:`floor_cause`): encodings too
narrow for T, or the noise floor of small-batch SGD.
"""
from __future__ import annotations

import math

from stsim.core.reduced import LEARNED
from stsim.core.model import query_coef
from stsim.core.schedule import PLATEAU_DOC, Plan, predict
from stsim.core.stability import sample_curvature

__all__ = ["plateau_status", "assess_run", "DIVERGING", "OVERFIT_TRAIN", "OVERFIT_GAP",
           "REDUCED_BLOCKS", "FLAT", "narrow_width", "floor_cause", "divergence_hint"]


#: a completed run is "diverging" when its last loss exceeds this multiple of its first
DIVERGING = 2.0
#: "overfitting": training loss at most OVERFIT_TRAIN of its first value while validation,
#: relative to its own first value, stays at least OVERFIT_GAP times higher
OVERFIT_TRAIN, OVERFIT_GAP = 0.5, 5.0
#: the blocks the reduced dynamics move (their invariant set, :mod:`stsim.core.reduced`:
#: ``W_ee = aI − bJ``, ``V_x = γI``, every other block 0; with a rank ``W = W_Kᵀ W_Q``):
#: a run holding one of them is not the run the prediction is about
REDUCED_BLOCKS = ("W_ee", "V_x", "W_K", "W_Q")
#: a loss is on a floor when the mean of its last quarter of records is above FLAT times
#: the mean of the quarter before (it fell by less than 20% over a quarter of the run)
FLAT = 0.8


def narrow_width(T: int) -> int:
    """``⌈2 log₂ T⌉``: below it, dense random encodings (sphere, near-orthogonal) of the T
    positions are too narrow for the (a, γ) family to reach 0.25·L(0) — the leading term of
    its smallest width ``d_e ≈ 2 log₂ T + C √d_e`` at q = 2, larger at q ≥ 3
    (``≈ c (ln T)²``; docs/separation.md, "The width laws" and "The extended widths")."""
    return math.ceil(2.0 * math.log2(max(T, 2)))


def _quarters(history, key):
    L = [float(v) for v in history.get(key, ())]
    k = len(L) // 4
    if k < 2:
        return None
    before, last = sum(L[-2 * k:-k]) / k, sum(L[-k:]) / k
    return last / before if before > 0 else None


def floor_cause(cfg, history, plan) -> str | None:
    """What held a run that did not learn, when it is not a late escape, from what the
    run knows (None: nothing seen):

    * dense encodings narrower than :func:`narrow_width` (T): the family itself cannot
      separate the selected tokens, whatever the training;
    * small-batch SGD: the reduced dynamics reach 2% of L(0) within the run, and one
      sample's curvature over the batch ``κ/B`` (:func:`stsim.core.stability.sample_curvature`)
      exceeds V's population curvature ``1/q``: the minibatch noise, not the mean
      gradient, sets the step (module docstring of :mod:`stsim.core.schedule`, *Stability
      with a batch*) — a noise floor when the loss stopped falling (the last quarter's
      mean above :data:`FLAT` × the quarter before), else SGD lagging."""
    spec = cfg.resolved.encoding
    if spec is not None and spec.dense and cfg.d_e < narrow_width(cfg.T):
        return (f"the encodings are too narrow for T={cfg.T}: d_e={cfg.d_e} is below "
                f"2 log2(T) = {2 * math.log2(cfg.T):.3g}, the leading term of the smallest "
                f"width at which the (a, gamma) family reaches 0.25 of L(0) with dense "
                f"random encodings (larger at q >= 3; docs/separation.md, 'The width "
                f"laws'): give d_e >= {narrow_width(cfg.T)}, or slots encodings")
    if plan is None or plan.eta_max is None or cfg.objective != "online":
        return None
    kappa = sample_curvature(cfg.q, cfg.d, query_coef(cfg.query, cfg.q))
    key = "val" if len(history.get("val", ())) else "loss"
    fall = _quarters(history, key)
    if (kappa / cfg.batch <= 1.0 / cfg.q or fall is None
            or plan.target_step is None or plan.target_step > plan.steps):
        return None
    what = (f"a noise floor of small-batch SGD: the loss fell by {1 - fall:.0%} over the "
            f"last quarter of the run" if fall >= FLAT else
            f"small-batch SGD lagging the population dynamics: the loss was still falling "
            f"({1 - fall:.0%} over the last quarter of the run)")
    return (f"{what}, where the reduced dynamics (population gradient descent) reach 2% of "
            f"initial near step {plan.target_step} of {plan.steps}; with batch={cfg.batch} "
            f"one sample's curvature over the batch, kappa/B = {kappa / cfg.batch:.3g}, "
            f"exceeds the population's 1/q = {1 / cfg.q:.3g}: the minibatch noise, not the "
            f"mean gradient, sets the step; give a larger batch (>= q kappa = "
            f"{math.ceil(cfg.q * kappa)}) or a smaller lr" + ("" if fall >= FLAT else
                                                              ", or more steps"))


def _ratio(history, key):
    L = history.get(key, ())
    if len(L) < 1 or not (L[0] > 0):
        return None
    r = float(L[-1]) / float(L[0])
    return r if math.isfinite(r) else None


def divergence_hint(cfg) -> str:
    """What to change after a divergence, from the resolved ``cfg``: the step (``lr``),
    and which assumption of its default the run left — an ``init_scale`` above the
    default, which the derived step's bound (taken from a small initialisation) assumes;
    a mechanism whose default step is measured (a mechanism with unnormalised weights:
    its curvature grows with them)."""
    default = type(cfg).__dataclass_fields__["init_scale"].default
    if cfg.init == "random" and cfg.init_scale > default:
        return (f"init_scale={cfg.init_scale:g} is above its default {default:g}, which the "
                f"default lr assumes (its stability bound is taken from a small "
                f"initialisation): a smaller init_scale, or a smaller lr")
    att = cfg.resolved.attention
    rule = getattr(att, "measured_lr", None)
    if rule is not None and not att.normalised:
        return (f"a smaller lr: the {att.label} mechanism's weights are not normalised, so its "
                f"curvature grows with them; its default lr, min({rule[1]:g}, {rule[0]:g}/T), "
                f"is calibrated, not derived (docs/attention.md, 'Defaults of a run')")
    return "a smaller lr"


def plateau_status(history: dict, schedule: Plan | None, online: bool = True):
    """``(assessment, text)`` of a finished run from its recorded validation loss
    (``val``, else ``loss``), relative to its first record, ``r``:

    * ``"learned"`` — ``r <= 2%``;
    * ``"overfitting"`` — the training loss ``loss`` fell to at most ``OVERFIT_TRAIN``
      (50%) of its first value while the validation ratio is at least ``OVERFIT_GAP`` (5)
      times the training ratio (validation far above training: a fixed sample learned
      by heart);
    * ``"diverging"`` — ``r > DIVERGING`` (2): the loss rose (a run stopped by the
      divergence rule has ``status="diverged"`` instead);
    * ``"plateau"`` — ``r > 90%``; ``"not converged"`` — in between;
    * ``"unknown"`` — nothing recorded, or a first loss of 0.

    ``online``: the run drew minibatches (the text then says that SGD lags the reduced
    dynamics)."""
    key = "val" if len(history.get("val", ())) else "loss"
    ratio = _ratio(history, key)
    if ratio is None:
        return "unknown", ""
    if ratio <= LEARNED:
        return "learned", f"learned: loss {ratio:.2%} of initial"
    train = _ratio(history, "loss") if key == "val" else None
    if train is not None and train <= OVERFIT_TRAIN and ratio >= OVERFIT_GAP * train:
        return "overfitting", (f"overfitting: training loss {train:.2%} of initial, validation "
                               f"loss {ratio:.2%} of initial (more training points, n_train, "
                               f"or the online objective)")
    if ratio > DIVERGING:
        return "diverging", (f"diverging: loss {ratio:.4g}x its initial value, rising (a "
                             f"smaller lr, or a smaller init_scale)")
    pred = ""
    if schedule is not None and schedule.target_step is not None:
        # two lines: the prediction, then what to do and where the measurements are
        pred = (f"; the reduced dynamics (population gradient descent) predict the escape "
                f"near step {schedule.escape_step}, 2% of initial near step "
                f"{schedule.target_step} at lr {schedule.lr}")
        then = ["online SGD escapes later"] if online else []
        if schedule.target_step > schedule.steps:
            then.append(f"that is beyond steps={schedule.steps}: give more steps, or omit "
                        f"steps for the default")
        pred += "\n  " + "; ".join(then + [f"details: {PLATEAU_DOC}"])
    elif (schedule is not None and schedule.eta_max is not None
          and (schedule.lr.uniform or 0.0) > schedule.eta_max):
        pred = f"; lr {schedule.lr} exceeds the stability bound eta_max = {schedule.eta_max:.4g}"
    if ratio > 0.9:
        return "plateau", f"still on the initial plateau: loss {ratio:.1%} of initial{pred}"
    return "not converged", f"escaped the plateau but not converged: loss {ratio:.1%} of initial{pred}"


def assess_run(cfg, history: dict):
    """``(assessment, text)`` for a finished run of the resolved ``cfg`` (see
    :func:`plateau_status`); where the run did not learn, where its plateau ends: the
    plan's prediction, or (lr and steps given) the reduced dynamics run at the run's lr —
    unless the plan holds a block of :data:`REDUCED_BLOCKS` (then no escape is predicted:
    the text names the blocks held)."""
    assessment, text = plateau_status(history, None)
    if assessment in ("plateau", "not converged"):   # where the reduced dynamics escape
        plan = cfg.resolved.plan
        held = [b for b in plan.freeze or () if b in REDUCED_BLOCKS]
        if held:
            names = ", ".join(held)
            return assessment, (
                f"{text}; freeze holds {names} at the initial value, the block(s) the "
                f"reduced dynamics move (W_ee = a I - b J, V_x = gamma I; with a rank, W = "
                f"W_K^T W_Q): no escape is predicted with them held; free {names}")
        if plan.target_step is None:
            plan = predict(cfg, plan.lr, plan.steps)
        cause = floor_cause(cfg, history, plan)
        if cause is not None:           # not a late escape: say what it is
            return assessment, f"{text}; {cause}"
        assessment, text = plateau_status(history, plan, online=cfg.objective == "online")
    return assessment, text
