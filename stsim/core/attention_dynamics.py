r"""The dynamics of the attention mechanisms of :mod:`stsim.core.attention`: their reduced
population dynamics, and the default step size and step count of a run.

**Reduced dynamics of every mechanism** (one-hot or slots encodings, the invariant set
``W_xe = 0``, ``V_e = 0``, ``x_q = 0``; ``W_ee = aI − bJ`` on the n×n block, ``V_x = γI``;
derived in ``docs/attention.md`` §6). The selected tokens' logit is ``l₊ = c(a − bq)/τ``,
the unselected ones' ``l₋ = −cbq/τ``. For softmax only ``l₊ − l₋ = ca/τ`` matters
(:mod:`stsim.core.reduced` at ``(a/τ, b/τ)``, its gradient times ``1/τ``); for an
element-wise mechanism ``s_± = φ(l_±)/n_N`` and::

    L = (d/2)(γ² (q s₊² + r s₋²) − 2γ s₊ + 1/q),          r = T − q,
    ∂L/∂a = (c/τ) D₊,   ∂L/∂b = −(cq/τ)(D₊ + D₋),   ∂L/∂γ = d (S₂ γ − s₊),
    D₊ = d γ (q γ s₊ − 1) φ'(l₊)/n_N,    D₋ = d γ² r s₋ φ'(l₋)/n_N.

The query token of the practical model has value ``V_e p_q = 0``, so for an element-wise
mechanism it changes only ``n_N`` (``T + 1`` for the normalised ones). Each mechanism
writes its formula at ``τ = 1`` (:meth:`~stsim.core.attention.Attention.reduced`); the
temperature enters here (:func:`reduced_loss_grad`). Full-matrix GD is the 3-scalar map of
:func:`stsim.core.reduced.reduced_map`, the one reduced update (:func:`reduced_gd`).

**Defaults of a run** with another mechanism (derived for softmax at a temperature,
measured for the others; each rule is the mechanism's own,
:meth:`~stsim.core.attention.Attention.default_lr`): :func:`mechanism_schedule`.
"""
from __future__ import annotations

import math

import numpy as np

from stsim.core.attention import make_attention
from stsim.core.reduced import (MEASURED_STEPS, MEASURED_STEPS_PER_T, measured_steps,
                                reduced_map, reduced_map_steps, step_count)
from stsim.util.validate import check_int, check_real, lr_text

__all__ = ["reduced_loss_grad", "reduced_gd", "MEASURED_STEPS", "MEASURED_STEPS_PER_T",
           "mechanism_schedule"]


# --------------------------------------------------------------------------------------
# reduced dynamics, every mechanism
# --------------------------------------------------------------------------------------
def reduced_loss_grad(attention, a, b, gamma, T, q, d, *, c=1.0, practical=False):
    """``L, ∂L/∂a, ∂L/∂b, ∂L/∂γ`` (arrays; everything broadcasts) on ``W_ee = aI − bJ``,
    ``V_x = γI`` for the mechanism ``attention`` (a name or an object) at its temperature
    ``τ``: its formula at ``τ = 1`` (:meth:`~stsim.core.attention.Attention.reduced`) at
    ``(a/τ, b/τ)``, the a- and b-gradients divided by ``τ``; the other arguments as for
    :func:`stsim.core.reduced.loss_grad`."""
    att = make_attention(attention)
    tau = att.temperature
    a, b, g, T, q, d, c = (np.asarray(x, np.float64) for x in (a, b, gamma, T, q, d, c))
    L, da, db, dg = att.reduced(a / tau, b / tau, g, T, q, d, c=c, practical=practical)
    return L, da / tau, db / tau, dg


def reduced_gd(attention, T, q, d, lr, n, steps, *, c=1.0, practical=False,
               a0=0.0, b0=0.0, gamma0=0.0, lr_gamma=None):
    """Full-matrix GD on the reduced set, ``steps`` times: the map of
    :func:`stsim.core.reduced.reduced_map` with :func:`reduced_loss_grad` (the temperature
    in the logits; ``n``: the encoding's ``reduced_n(T)``; ``lr`` the step of W,
    ``lr_gamma`` that of V, default ``lr``), one setting: ``{"loss", "a", "b", "gamma"}``,
    arrays of ``steps + 1`` values, the loss at each state before its update (NaN after a
    non-finite loss)."""
    att = make_attention(attention)
    steps = check_int("steps", steps, 0)
    lr = check_real("lr", lr, lo=0.0, lo_open=True)
    lr_g = lr if lr_gamma is None else check_real("lr_gamma", lr_gamma, lo=0.0, lo_open=True)
    n = check_int("n", n, 2)

    def loss_grad(a, b, g):
        return tuple(float(x) for x in reduced_loss_grad(att, a, b, g, T, q, d, c=c,
                                                         practical=practical))
    out = np.full((4, steps + 1), np.nan)
    states = reduced_map(T, q, d, {"W": lr, "V": lr_g}, n, c=c, practical=practical,
                         a0=float(a0), b0=float(b0), gamma0=float(gamma0), loss_grad=loss_grad)
    for t, state in zip(range(steps + 1), states):
        out[:, t] = state
        if not math.isfinite(state[0]):
            break
    return dict(zip(("loss", "a", "b", "gamma"), out))


# --------------------------------------------------------------------------------------
# default step size and step count of a run with another mechanism
# --------------------------------------------------------------------------------------
def mechanism_schedule(att, rank, T, q, d, n, c, practical, paper_lr, lr=None, steps=None,
                       dense=False, d_e=None):
    """``(lr, steps, explanation)`` of a run with a mechanism other than the paper's, SGD
    (``lr``, ``steps``: the user's values, obeyed): the mechanism's
    :meth:`~stsim.core.attention.Attention.default_lr` (``paper_lr``: the paper model's
    derived lr) and, where its reduced GD is a step of the softmax map
    (:meth:`~stsim.core.attention.Attention.map_step`, the merged W), twice that map's step
    to 2% of L(0) (:func:`stsim.core.reduced.step_count`), else
    :func:`~stsim.core.reduced.measured_steps` (Adam's: ``max(2000, 30 T)`` rounded up to
    100), measured."""
    if lr is None:
        lr, why = att.default_lr(T, q, d, n, c, paper_lr, rank=rank, dense=dense, d_e=d_e)
    else:
        why = "user"
    step = att.map_step(lr) if rank is None else None
    if steps is not None:
        swhy = "user"
    elif step is not None:
        learned_at = reduced_map_steps(T, q, d, step, n, c=c, practical=practical,
                                       extrapolate=False)[1]
        steps = step_count(learned_at)
        swhy = (f"2 x {learned_at} (the reduced map at temperature {att.temperature:g} "
                "reaches 2% of L(0) there)")
    else:
        steps = measured_steps(T)
        swhy = (f"max({MEASURED_STEPS}, {MEASURED_STEPS_PER_T} T) rounded up to 100 (measured; "
                "not derived)")
    what = att.label + ("" if rank is None else f", rank {rank}")
    return lr, steps, f"{what}: lr = {why} = {lr_text(lr)}; steps = {swhy} = {steps}"
