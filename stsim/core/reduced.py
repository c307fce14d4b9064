r"""The reduced population dynamics (docs/theory.md §3): the one home of the closed-form loss, its
gradient and the GD map on the invariant set. :mod:`stsim.core.schedule` (default lr and
steps) and :mod:`stsim.theory.reduced` (trajectories, gradient flow, OOD closed forms)
both build on it.

**The invariant set** (exact for the population loss with a one-hot or stochastic/slots
encoding, both models, both queries, from zero initialisation; derived in
``docs/theory.md`` §3). ``W_ee = a I − b J`` (n×n; ``n`` is the encoding's
:meth:`~stsim.core.encodings.Encoding.reduced_n`: ``T`` for onehot, ``d_e`` for slots),
``V_x = γ I``, every other block 0. Relative to an unselected token the q selected tokens
have logit ``θ = c a`` and, in the practical model only, the query token has
``φ = c² q (a − b q) + c b q`` (its value ``V_e p_q`` is 0); ``c = 1`` (``query="sum"``) or
``1/q`` (``"mean"``). With ``r = T − q``, ``Z = q e^θ + r + e^φ`` (no ``e^φ`` term in the
theory model) and ``s₊ = e^θ/Z``, ``s₋ = 1/Z``, ``s_φ = e^φ/Z``, ``S₂ = q s₊² + r s₋²``::

    L(a, b, γ) = (d/2) (S₂ γ² − 2 s₊ γ + 1/q)

    ∂L/∂θ = d r s₊ s₋ γ (q γ (s₊ − s₋) − 1) + d γ s₊ s_φ (q γ s₊ − 1)
    ∂L/∂φ = d γ s_φ (s₊ − γ S₂)
    ∂L/∂a = c ∂L/∂θ + c² q ∂L/∂φ,     ∂L/∂b = (c q − c² q²) ∂L/∂φ
    ∂L/∂γ = d (S₂ γ − s₊)

(from ``∂s₊/∂θ = s₊(1 − q s₊)``, ``∂s₋/∂θ = −q s₊ s₋``, ``∂s₊/∂φ = −s₊ s_φ``,
``∂s₋/∂φ = −s₋ s_φ`` and ``1 − q s₊ = r s₋ + s_φ``). Softmax is evaluated shifted by
``m = max(θ, φ, 0)``, so logits of any size are safe.

**The GD map.** By slot exchangeability the population gradient in ``W_ee`` is ``αI + βJ``
with ``n(α + β) = ∂L/∂a`` and ``n(α + nβ) = −∂L/∂b``, so full-matrix GD with step η is
the 3-scalar map ``a ← a − ηα``, ``b ← b + ηβ``, ``γ ← γ − (η/d) ∂L/∂γ``. In the theory
model ``∂L/∂b = 0``, ``b`` stays 0 and the map is the two-scalar
``a ← a − η/(n−1) ∂L/∂a`` of :mod:`stsim.theory.reduced` (``‖I − J/n‖_F² = n − 1``).
Tested against full-matrix population GD (``tests/test_schedule.py``,
``tests/test_population.py``).
"""
from __future__ import annotations

import math

import numpy as np

from stsim.core.targets import Mean
from stsim.util.validate import Steps, check_int

__all__ = ["loss_grad", "loss_grad_scalar", "reduced_map", "reduced_map_steps",
           "reduced_map_losses", "reduced_map_record", "step_count", "measured_steps",
           "MEASURED_STEPS", "MEASURED_STEPS_PER_T", "ESCAPE", "LEARNED", "TARGET",
           "MAX_STEPS", "MARGIN"]

#: "learned": loss <= 2% of its initial value L(0) (the one level every run, check and
#: study calls learned; a study's reach ratio defaults to it)
LEARNED = 0.02
TARGET = LEARNED        # its earlier name
ESCAPE = 0.5           # "escaped the plateau": loss <= 50% of L(0)
MAX_STEPS = 100_000    # the map is run this far by reduced_map_steps, then extrapolated
MARGIN = 2.0           # steps = MARGIN * t_LEARNED of the reduced map (3 without exact reduction)


def loss_grad_scalar(a, b, gamma, T, q, d, c=1.0, practical=False, exp=math.exp,
                     maximum=max):
    """``L`` and ``(∂L/∂a, ∂L/∂b, ∂L/∂γ)`` of the reduced model (module docstring) — the
    one formula, written once: for one setting in Python floats as called (what the
    step-by-step maps need; several times faster than NumPy on scalars), and for NumPy
    arrays through :func:`loss_grad` (``exp=np.exp``, ``maximum=np.maximum``).
    ``∂L/∂b`` is ``0.0`` in the theory model."""
    r = T - q
    th = c * a
    if practical:
        ph = c * c * q * (a - b * q) + c * b * q
        m = maximum(maximum(th, ph), 0.0)
        eq = exp(ph - m)
    else:
        m = maximum(th, 0.0)
        eq = 0.0
    es, eu = exp(th - m), exp(-m)
    Z = q * es + r * eu + eq
    sp, sm = es / Z, eu / Z
    S2 = q * sp * sp + r * sm * sm
    L = 0.5 * d * (S2 * gamma * gamma - 2.0 * sp * gamma + 1.0 / q)
    dth = d * r * sp * sm * gamma * (q * gamma * (sp - sm) - 1.0)
    dg = d * (S2 * gamma - sp)
    if not practical:
        return L, c * dth, 0.0, dg
    sq = eq / Z
    dth = dth + d * gamma * sp * sq * (q * gamma * sp - 1.0)
    dph = d * gamma * sq * (sp - gamma * S2)
    return L, c * dth + c * c * q * dph, (c * q - c * c * q * q) * dph, dg


def loss_grad(a, b, gamma, T, q, d, *, c=1.0, practical=False):
    """:func:`loss_grad_scalar` on NumPy arrays (everything broadcasts).

    Parameters
    ----------
    a : array_like
        Coefficient of ``I`` in ``W_ee = a I − b J``.
    b : array_like
        Coefficient of ``−J`` (stays 0 in the theory model).
    gamma : array_like
        ``V_x = γ I``.
    T : array_like
        Number of tokens attended to (besides the query token).
    q : array_like
        Subset size.
    d : array_like
        Token dimension.
    c : array_like
        Query coefficient: 1 (``query="sum"``) or ``1/q`` (``"mean"``).
    practical : bool
        Attention also over the query token (logit ``φ``).

    Returns
    -------
    tuple of ndarrays
        ``L, dL_da, dL_db, dL_dgamma`` of the broadcast shape.

    Examples
    --------
    >>> L, da, db, dg = loss_grad(0.0, 0.0, 0.0, 8, 2, 3)     # L(0) = d/(2q)
    >>> float(L), float(dg)
    (0.75, -0.375)
    """
    f = np.float64
    L, da, db, dg = loss_grad_scalar(np.asarray(a, f), np.asarray(b, f), np.asarray(gamma, f),
                                     np.asarray(T, f), np.asarray(q, f), np.asarray(d, f),
                                     np.asarray(c, f), practical, np.exp, np.maximum)
    return L, da, (db if practical else np.zeros(np.shape(L))), dg


def reduced_map(T, q, d, eta, n, *, c=1.0, practical=False, a0=0.0, b0=0.0, gamma0=0.0,
                loss_grad=None):
    """The GD map of the module docstring from ``(a0, b0, γ0)`` — the one reduced update
    (every trajectory, schedule and benchmark iterates it, for every mechanism): an
    endless iterator of ``(L, a, b, γ)``, the loss at each state before its update.
    ``loss_grad``: another mechanism's ``(a, b, γ) -> (L, ∂L/∂a, ∂L/∂b, ∂L/∂γ)`` (default
    softmax's, above); ``b`` then takes the practical model's update in both models.

    ``eta``: one step η, or a step per block ``{"W": η_W, "V": η_V}`` or its
    :class:`~stsim.util.validate.Steps` (η_W moves ``a, b``, η_V moves ``γ``). ``n``: the
    encoding's ``reduced_n(T)``. Python floats run the map for one setting (fast: about
    0.6 µs a step); NumPy arrays of ``T, q, d, eta, n, c`` and the initial values run a grid
    of settings at once (everything broadcasts).

    The update: theory model ``a ← a − (η_W/(n−1)) ∂L/∂a`` (``b`` only follows the ``J``
    part of the gradient, ``b ← b − η_W ∂L/∂a/(n(n−1))``, which no loss sees);
    practical model ``a ← a − η_W α``, ``b ← b + η_W β`` with ``β = (−∂L/∂b/n −
    ∂L/∂a/n)/(n−1)``, ``α = ∂L/∂a/n − β``; both ``γ ← γ − (η_V/d) ∂L/∂γ``."""
    lr_W, lr_V = Steps(eta, check=False).pair()
    arrays = any(isinstance(v, np.ndarray) for v in (T, q, d, lr_W, lr_V, n, c, a0, b0, gamma0))
    if arrays:
        f = np.float64
        T, q, d, lr_W, lr_V, n, c = (np.asarray(v, f) for v in (T, q, d, lr_W, lr_V, n, c))
        a, b, g = (np.asarray(v, f) for v in (a0, b0, gamma0))
        exp, maximum = np.exp, np.maximum
    else:
        a, b, g = float(a0), float(b0), float(gamma0)
        exp, maximum = math.exp, max
    ka, kg = lr_W / (n - 1), lr_V / d
    own, general = loss_grad is None, practical or loss_grad is not None   # (asked once)
    while True:
        if own:
            L, da, db, dg = loss_grad_scalar(a, b, g, T, q, d, c, practical, exp, maximum)
        else:
            L, da, db, dg = loss_grad(a, b, g)
        yield L, a, b, g
        if general:
            beta = (-db / n - da / n) / (n - 1)
            a = a - lr_W * (da / n - beta)
            b = b + lr_W * beta
        else:
            a = a - ka * da
            b = b - ka * da / n
        g = g - kg * dg


def reduced_map_steps(T, q, d, eta, n, *, c=1.0, practical=False, max_steps=MAX_STEPS,
                      levels=(ESCAPE, LEARNED), a0=0.0, b0=0.0, gamma0=0.0, extrapolate=True):
    """For each level in ``levels``, the first step of :func:`reduced_map` with
    ``L <= level · L(0)``, ``L(0) = d/(2q)`` (None if not within ``max_steps``). With
    ``extrapolate``, a level not reached within ``max_steps`` after the escape
    (``L <= 50% L(0)``) is extrapolated with the rate law
    ``1/L(t) ≈ 1/L(t_h) + 4η_Wc²(t − t_h)/(n−1)`` (docs/theory.md; ``eta`` as for
    :func:`reduced_map`)."""
    L0 = Mean().zero_loss(d, q)
    out = [None] * len(levels)
    todo = sorted(range(len(levels)), key=lambda i: -levels[i])
    k = 0
    states = reduced_map(T, q, d, eta, n, c=c, practical=practical, a0=a0, b0=b0, gamma0=gamma0)
    for t, (L, *_) in zip(range(max_steps + 1), states):
        while k < len(todo) and L <= levels[todo[k]] * L0:
            out[todo[k]] = t
            k += 1
        if k == len(todo) or not math.isfinite(L):
            break
        if t == max_steps and extrapolate and L < ESCAPE * L0:
            for i in todo[k:]:
                out[i] = int(t + (n - 1) / (4.0 * Steps(eta, check=False).pair()[0] * c * c)
                             * (1.0 / (levels[i] * L0) - 1.0 / L))
    return out


#: the fewest steps of a run whose step count is measured, not derived (:func:`measured_steps`)
MEASURED_STEPS = 2000
#: ... and at least this many per token of T
MEASURED_STEPS_PER_T = 30


def measured_steps(T: int) -> int:
    """The default step count where none is derived — Adam's, and a mechanism's whose
    reduced GD is not a step of the softmax map: ``max(2000, 30 T)`` rounded up to a
    multiple of 100 (MEASURED at T = 50, 100, 200 with Adam, not derived).

    >>> measured_steps(50), measured_steps(67), measured_steps(200)
    (2000, 2100, 6000)
    """
    T = check_int("T", T, 1)
    return max(MEASURED_STEPS, int(math.ceil(MEASURED_STEPS_PER_T * T / 100.0)) * 100)


def step_count(tgt, margin=MARGIN) -> int:
    """The default step count of a run from the reduced map's first step ``tgt`` with
    ``L <= LEARNED · L(0)``: ``margin · tgt`` rounded up to a multiple of 100 (at least 100);
    ``MAX_STEPS`` when the map did not get there (``tgt`` None)."""
    return MAX_STEPS if tgt is None else max(100, int(math.ceil(margin * tgt / 100.0)) * 100)


def reduced_map_losses(T, q, d, eta, n, steps, *, c=1.0, practical=False):
    """The loss ``L(t)``, ``t = 0..steps``, of :func:`reduced_map` from zero (a list; for
    tests against full-matrix population GD)."""
    states = reduced_map(T, q, d, eta, n, c=c, practical=practical)
    return [L for _, (L, *_) in zip(range(steps + 1), states)]


def reduced_map_record(T, q, d, eta, n, steps, *, record_every=1, c=1.0, practical=False,
                       a0=0.0, b0=0.0, gamma0=0.0):
    """:func:`reduced_map` (same arguments) for ``steps`` updates, recorded: ``(step, a, γ,
    L, max_loss_increase, min_a_increment, a_min, γ_min, γ_max)`` — the recorded steps
    (every ``record_every``-th and the last), ``a, γ, L`` there (shape ``(..., n_rec)``: the
    settings' shape, then the records), and over EVERY step ``max_t (L(t+1) − L(t))`` and
    ``min_t (a(t+1) − a(t))`` (``-inf``/``inf`` with no step) and the extremes of ``a`` and
    ``γ`` over every state ``t = 0 … steps``. Floats in, the bookkeeping in floats too:
    0.84–0.91 µs a step with the five trackers, 0.87–0.91 µs with the first two only (4·10⁵
    steps, the best of 5, two interleaved pairs at load 0.5–0.9); 1.10–1.15 µs when the map
    asked at every step which update it takes."""
    rec = np.unique(np.r_[np.arange(0, steps + 1, record_every), steps])
    states = reduced_map(T, q, d, eta, n, c=c, practical=practical, a0=a0, b0=b0,
                         gamma0=gamma0)
    L_prev, a_prev, _, g = next(states)
    out, nxt, j = [(a_prev, g, L_prev)], (int(rec[1]) if rec.size > 1 else -1), 1
    arrays = isinstance(L_prev, np.ndarray)
    inf = np.full(np.shape(L_prev), math.inf) if arrays else math.inf
    dl_max, da_min = -inf, inf
    a_min, g_min, g_max = ((np.minimum(inf, a_prev), np.minimum(inf, g), np.maximum(-inf, g))
                           if arrays else (a_prev, g, g))   # arrays: the settings' shape
    for t, (L, a, _, g) in zip(range(1, steps + 1), states):
        if arrays:
            dl_max, da_min = np.maximum(dl_max, L - L_prev), np.minimum(da_min, a - a_prev)
            a_min, g_min = np.minimum(a_min, a), np.minimum(g_min, g)
            g_max = np.maximum(g_max, g)
        else:                               # floats: comparisons, faster than max/min
            if L - L_prev > dl_max:
                dl_max = L - L_prev
            if a - a_prev < da_min:
                da_min = a - a_prev
            if a < a_min:
                a_min = a
            if g < g_min:
                g_min = g
            elif g > g_max:
                g_max = g
        L_prev, a_prev = L, a
        if t == nxt:
            out.append((a, g, L))
            j += 1
            nxt = int(rec[j]) if j < rec.size else -1
    shape = np.broadcast_shapes(*(np.shape(v) for v in out[-1]))   # a0 = 0.0 with arrays
    if shape == ():         # one setting: the records as they are (no view per number)
        A, G, Ls = (np.array(x, dtype=np.float64) for x in zip(*out))
    else:
        A, G, Ls = (np.ascontiguousarray(np.moveaxis(np.array(
            [np.broadcast_to(v, shape) for v in x], dtype=np.float64), 0, -1))
            for x in zip(*out))
    return rec, A, G, Ls, dl_max, da_min, a_min, g_min, g_max
