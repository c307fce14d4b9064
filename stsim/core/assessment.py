"""The diagnosis of a finished run: learned, plateau, diverging, overfitting or not
converged (:func:`plateau_status`), with, for a run that did not learn, where the reduced
dynamics (:func:`stsim.core.schedule.predict`) say its plateau ends (:func:`assess_run`).
"""
from __future__ import annotations

import math

from stsim.core.reduced import TARGET
from stsim.core.schedule import PLATEAU_DOC, Plan, predict

__all__ = ["plateau_status", "assess_run", "DIVERGING", "OVERFIT_TRAIN", "OVERFIT_GAP",
           "REDUCED_BLOCKS"]


#: a completed run is "diverging" when its last loss exceeds this multiple of its first
DIVERGING = 2.0
#: "overfitting": training loss at most OVERFIT_TRAIN of its first value while validation,
#: relative to its own first value, stays at least OVERFIT_GAP times higher
OVERFIT_TRAIN, OVERFIT_GAP = 0.5, 5.0
#: the blocks the reduced dynamics move (their invariant set, :mod:`stsim.core.reduced`:
#: ``W_ee = aI − bJ``, ``V_x = γI``, every other block 0; with a rank ``W = W_Kᵀ W_Q``):
#: a run holding one of them is not the run the prediction is about
REDUCED_BLOCKS = ("W_ee", "V_x", "W_K", "W_Q")


def _ratio(history, key):
    L = history.get(key, ())
    if len(L) < 1 or not (L[0] > 0):
        return None
    r = float(L[-1]) / float(L[0])
    return r if math.isfinite(r) else None


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
    if ratio <= TARGET:
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
        assessment, text = plateau_status(history, plan, online=cfg.objective == "online")
    return assessment, text
