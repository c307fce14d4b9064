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
mechanism it changes only ``n_N`` (``T + 1`` for the normalised ones). Full-matrix GD is
the 3-scalar map of :func:`stsim.core.reduced.reduced_map` (:func:`reduced_gd`).

**Defaults of a run** with another mechanism (derived for softmax at a temperature,
measured for the others): :func:`mechanism_schedule`.
"""
from __future__ import annotations

import math

import numpy as np

from stsim.core.attention import Attention, Softmax, make_attention
from stsim.core.reduced import loss_grad as _softmax_reduced
from stsim.util.validate import check_int, check_real, lr_text

__all__ = ["reduced_loss_grad", "reduced_gd", "MEASURED_LR", "MEASURED_STEPS",
           "MEASURED_STEPS_PER_T", "DENSE_CAP", "is_default", "softmax_eta_max", "softmax_reduced_steps",
           "mechanism_schedule"]


# --------------------------------------------------------------------------------------
# reduced dynamics, every mechanism
# --------------------------------------------------------------------------------------
def reduced_loss_grad(attention, a, b, gamma, T, q, d, *, c=1.0, practical=False):
    """``L`` and ``(∂L/∂a, ∂L/∂b, ∂L/∂γ)`` on ``W_ee = aI − bJ``, ``V_x = γI`` for any
    mechanism (module docstring); everything broadcasts.

    Parameters
    ----------
    attention : str or Attention
        The mechanism (with its temperature).
    a, b, gamma, T, q, d, c, practical
        As for :func:`stsim.core.reduced.loss_grad` (the softmax case).

    Returns
    -------
    tuple of ndarrays
        ``L, dL_da, dL_db, dL_dgamma``.
    """
    att = make_attention(attention)
    tau = att.temperature
    f = np.float64
    a, b, g, T, q, d, c = (np.asarray(x, f) for x in (a, b, gamma, T, q, d, c))
    if isinstance(att, Softmax):
        L, da, db, dg = _softmax_reduced(a / tau, b / tau, g, T, q, d, c=c, practical=practical)
        return L, da / tau, db / tau, dg
    if not att.elementwise:
        raise ValueError(f"no reduced dynamics for the {att.label} mechanism")
    r = T - q
    nN = (T + 1 if practical else T) if att.normalised else 1.0
    lp, lm = c * (a - b * q) / tau, -c * b * q / tau
    sp, sm = att.phi(lp) / nN, att.phi(lm) / nN
    S2 = q * sp * sp + r * sm * sm
    L = 0.5 * d * (S2 * g * g - 2.0 * sp * g + 1.0 / q)
    Dp = d * g * (q * g * sp - 1.0) * att.dphi(lp) / nN
    Dm = d * g * g * r * sm * att.dphi(lm) / nN
    return L, c / tau * Dp, -c * q / tau * (Dp + Dm), d * (S2 * g - sp)


def reduced_gd(attention, T, q, d, lr, n, steps, *, c=1.0, practical=False,
                         a0=0.0, b0=0.0, gamma0=0.0, lr_gamma=None):
    """Full-matrix GD on the reduced set, ``steps`` times: the map of
    :func:`stsim.core.reduced.reduced_map` with :func:`~stsim.core.attention_dynamics.reduced_loss_grad` (``n``:
    the encoding's ``reduced_n(T)``; ``lr`` the step of W, ``lr_gamma`` that of V, default
    ``lr``). One setting, scalars.

    Returns
    -------
    dict
        ``loss, a, b, gamma``: arrays of ``steps + 1`` values, the loss at each state
        before its update.
    """
    att = make_attention(attention) if not isinstance(attention, Attention) else attention
    steps = check_int("steps", steps, 0)
    lr = check_real("lr", lr, lo=0.0, lo_open=True)
    lr_g = lr if lr_gamma is None else check_real("lr_gamma", lr_gamma, lo=0.0, lo_open=True)
    n = check_int("n", n, 2)
    a, b, g = float(a0), float(b0), float(gamma0)
    out = np.empty((4, steps + 1))
    for t in range(steps + 1):
        L, da, db, dg = (float(x) for x in reduced_loss_grad(
            att, a, b, g, T, q, d, c=c, practical=practical))
        out[:, t] = L, a, b, g
        if t == steps or not math.isfinite(L):
            out[:, t + 1:] = np.nan
            break
        beta = (-db / n - da / n) / (n - 1)
        a -= lr * (da / n - beta)
        b += lr * beta
        g -= lr_g / d * dg
    return dict(zip(("loss", "a", "b", "gamma"), out))


# --------------------------------------------------------------------------------------
# default step size and step count of a run with another mechanism
# --------------------------------------------------------------------------------------
#: the measured default-lr rules of the mechanisms without a derived one (the measurements:
#: docs/attention.md, "Defaults of a run"): ``lr = min(cap, k/T)`` for the unnormalised
#: element-wise ones (their weights do not shrink with T, so the curvature in V grows with
#: T); ``{name: (k, cap)}``. The normalised ones and any rank take the paper model's lr
MEASURED_LR = {"linear": (5.0, 0.3), "relu": (5.0, 0.3), "sigmoid": (4.0, math.inf)}
#: the fewest steps of a mechanism without derived ones (``max(2000, 30 T)`` in all)
MEASURED_STEPS = 2000
#: a mechanism without derived steps takes at least this many per token of T
MEASURED_STEPS_PER_T = 30


def is_default(attention, temperature, rank) -> bool:
    """Whether the options name the paper's model (softmax, ``τ = 1``, the merged W)."""
    att = make_attention(attention, temperature)
    return isinstance(att, Softmax) and att.temperature == 1.0 and rank is None


def softmax_eta_max(q, d, n, c, temperature):
    """``min(2q, τ² · 2n/(c²(q−1)(q+d)))``: the softmax bound of
    :func:`stsim.core.schedule.eta_max` at temperature ``τ`` — the W directions' curvature
    scales as ``1/τ²``, V's does not (docs/attention.md §3)."""
    lam = c * c * (q - 1) * (q + d) / n / temperature ** 2
    return 2.0 * q if lam <= 0 else min(2.0 * q, 2.0 / lam)


def softmax_reduced_steps(T, q, d, lr, n, *, c=1.0, practical=False, temperature=1.0,
                          max_steps=100_000, levels=(0.5, 0.02)):
    """First steps of the reduced softmax map at temperature ``τ`` (step ``lr`` on both
    blocks, or a step per block ``{"W": η_W, "V": η_V}``) with ``L <= level · L(0)``, each
    None when not within ``max_steps``: the map of :func:`stsim.core.reduced.reduced_map`
    on ``(a/τ, b/τ)`` with its a- and b-gradients divided by ``τ``, in Python floats."""
    from stsim.core.reduced import loss_grad_scalar
    lr, lr_g = (lr["W"], lr["V"]) if isinstance(lr, dict) else (lr, lr)
    tau = float(temperature)
    a = b = g = 0.0
    L0 = 0.5 * d / q
    out = [None] * len(levels)
    for t in range(max_steps + 1):
        L, da, db, dg = loss_grad_scalar(a / tau, b / tau, g, T, q, d, c, practical)
        for i, lv in enumerate(levels):
            if out[i] is None and L <= lv * L0:
                out[i] = t
        if all(o is not None for o in out) or not math.isfinite(L):
            break
        da, db = da / tau, db / tau
        beta = (-db / n - da / n) / (n - 1)
        a -= lr * (da / n - beta)
        b += lr * beta
        g -= lr_g / d * dg
    return out


#: dense encodings (sphere, near-orthogonal) with an unnormalised element-wise mechanism:
#: the lr above times ``min(DENSE_CAP, d_e/(4T))`` — MEASURED (docs/attention.md, "Defaults
#: of a run"; linear attention with near-orthogonal encodings, d_e = 16, was stable at 0.15
#: at T = 12 and 0.075 at T = 20): the tokens' positions leak into every logit
DENSE_CAP = 0.5


def mechanism_schedule(att, rank, T, q, d, n, c, practical, softmax_lr, lr=None, steps=None,
                       dense=False, d_e=None):
    """``(lr, steps, explanation)`` of a run with a mechanism other than the paper's, SGD
    (``lr``, ``steps``: the user's values, obeyed). Softmax at temperature ``τ`` with the
    merged W: derived — ``lr = η_max(τ)/2`` (:func:`softmax_eta_max`) and ``steps`` twice
    the reduced map's step to 2% of L(0) (:func:`softmax_reduced_steps`). Every other
    mechanism, and any rank: measured rules (:data:`MEASURED_LR`; the normalised
    element-wise ones and rank r take ``softmax_lr``, the paper model's derived lr;
    ``steps = max(2000, 30 T)``)."""
    if isinstance(att, Softmax) and rank is None and n is not None:
        em = softmax_eta_max(q, d, n, c, att.temperature)
        use = 0.5 * em if lr is None else lr
        esc, tgt = softmax_reduced_steps(T, q, d, use, n, c=c, practical=practical,
                                         temperature=att.temperature)
        if steps is None:
            steps = 100_000 if tgt is None else max(100, int(math.ceil(2.0 * tgt / 100.0)) * 100)
            how = f"2 x {tgt} (the reduced map at temperature {att.temperature:g} reaches 2% " \
                  "of L(0) there)"
        else:
            how = f"{steps} (user)"
        return use, steps, (f"{att.label}: lr = {'eta_max(tau)/2' if lr is None else 'user'} = "
                            f"{lr_text(use)} (eta_max(tau) = min(2q, tau^2 2n/(c^2(q-1)(q+d))) = "
                            f"{em:.4g}, n={n}); steps = {how}")
    base = att.name if att.elementwise and not att.normalised else None
    if lr is None:
        if base in MEASURED_LR:
            k, cap = MEASURED_LR[base]
            lr = min(cap, k / T)
            why = f"min({cap:g}, {k:g}/T) (measured)"
            if dense:
                lr *= min(DENSE_CAP, d_e / (4.0 * T))
                why += f" x min({DENSE_CAP:g}, d_e/(4T)) (dense encodings, measured)"
        else:
            lr = softmax_lr
            why = "the paper model's derived lr (measured to be stable)"
    else:
        why = "user"
    if steps is None:
        steps = max(MEASURED_STEPS, MEASURED_STEPS_PER_T * T)
        swhy = f"max({MEASURED_STEPS}, {MEASURED_STEPS_PER_T} T) (measured; not derived)"
    else:
        swhy = "user"
    what = att.label + ("" if rank is None else f", rank {rank}")
    return lr, steps, f"{what}: lr = {why} = {lr_text(lr)}; steps = {swhy} = {steps}"
