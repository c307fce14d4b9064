r"""Two-scalar reduction ``(a, γ)`` of the population dynamics (derived in
``docs/theory.md`` §3): the theory model's case ``b = 0`` of :mod:`stsim.core.reduced`,
whose formula (:func:`stsim.core.reduced.loss_grad`) and update
(:func:`stsim.core.reduced.reduced_map`) every function here calls.

On the invariant set (``W_xe = 0``, ``V_e = 0``, ``x_query = 0``), from zero
initialisation, population GD with a one-hot (or stochastic/slots) encoding keeps
``W_ee = a (I − J/n)``, ``V_x = γ I_d`` (``n = T`` for ``onehot``, on the T×T block of
trained positions; ``n = d_e`` for ``stochastic/slots``). With ``c = 1`` (``query="sum"``)
or ``1/q`` (``"mean"``), ``θ = c a``, ``r = T − q``, ``s₊ = e^θ/(q e^θ + r)``,
``s₋ = 1/(q e^θ + r)`` and ``S₂ = q s₊² + r s₋²``::

    L(a, γ) = (d/2) (S₂ γ² − 2 s₊ γ + 1/q) = (d/2) [q (γ s₊ − 1/q)² + r γ² s₋²],

and full-matrix GD with step η (or a step per block, η_W on W and η_V on V) is *exactly*
the map ``a ← a − η_W/(n − 1) · ∂L/∂a``, ``γ ← γ − (η_V/d) · ∂L/∂γ``
(``‖I − J/n‖_F² = n − 1``). Gradient flow is the same vector field in time ``τ = η·step``.
``T, q, d, lr, n`` broadcast to a common shape ``(K,)`` of settings: a grid of settings
runs in one call.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from stsim.core.encodings import Encoding
from stsim.core.families import family_reduced_n
from stsim.core.model import query_coef  # noqa: F401  (re-exported: part of this API)
from stsim.core.reduced import loss_grad, reduced_map_record
from stsim.util.validate import Steps, check_int, check_lr

__all__ = ["reduced_loss", "reduced_loss_grad", "reduced_gd", "reduced_gd_scalar", "gradient_flow",
           "ReducedTrajectory", "step_divisor", "ood_floor_onehot", "ood_loss_onehot", "query_coef"]


# ---- closed form ---------------------------------------------------------------------
def _check_sizes(T, q, d):
    T, q, d = np.asarray(T), np.asarray(q), np.asarray(d)
    for name, v, lo in (("T", T, 1), ("q", q, 1), ("d", d, 1)):
        if not np.all(np.isfinite(v)) or np.any(v < lo) or np.any(v != np.round(v)):
            raise ValueError(f"{name} must be integer(s) >= {lo}, got {v!r}")
    if np.any(q > T):
        raise ValueError(f"q must satisfy 1 <= q <= T, got q={q!r}, T={T!r}")
    return T.astype(np.float64), q.astype(np.float64), d.astype(np.float64)


def reduced_loss_grad(a, gamma, T, q, d, *, query="sum"):
    """Population loss ``L(a, γ)`` and ``(∂L/∂a, ∂L/∂γ)`` on the reduced set: the theory
    model's case (``b = 0``) of :func:`stsim.core.reduced.loss_grad`, the one formula.

    Parameters
    ----------
    a, gamma : array_like
        The coefficients of ``W_ee = a (I − J/n)`` and ``V_x = γ I``.
    T : array_like of int
        Sequence length (the number of tokens attended to). Everything broadcasts.
    q, d : array_like of int
        Subset size, token dimension.
    query : {"sum", "mean"}
        The logit gap is ``θ = c a`` with ``c = 1`` or ``1/q``.

    Returns
    -------
    tuple of ndarrays
        ``L, dL_da, dL_dgamma`` of the broadcast shape.
    """
    T, q, d = _check_sizes(T, q, d)
    L, da, _, dg = loss_grad(a, 0.0, gamma, T, q, d, c=query_coef(query, q))
    return L, da, dg


def reduced_loss(a, gamma, T, q, d, *, query="sum") -> np.ndarray:
    """Closed-form population loss ``L(a, γ) = (d/2)[q(γ s₊ − 1/q)² + (T−q) γ² s₋²]``
    (docs/theory.md §3), vectorised over numpy arrays.

    Also the out-of-distribution loss of the stochastic/slots model at length ``T_test``:
    ``reduced_loss(a, gamma, T_test, q, d)`` (the slots-trained ``W_ee = a(I − J/d_e)``
    covers every slot, so the test problem is the same problem with ``T → T_test``).

    Example
    -------
    >>> float(reduced_loss(0.0, 0.0, T=8, q=2, d=3))      # L(0) = d / (2q)
    0.75
    """
    return reduced_loss_grad(a, gamma, T, q, d, query=query)[0]


def step_divisor(pe, T, d_e=None):
    """``n − 1`` in the reduced step ``a ← a − η/(n−1) ∂L/∂a``.

    ``pe`` is an :class:`~stsim.core.encodings.Encoding` (its
    :meth:`~stsim.core.encodings.Encoding.reduced_n`: ``n = T`` for one-hot, the trained
    block; ``n = d_e`` for stochastic/slots) or, for grids of settings, a family name
    (``"onehot"``, ``"stochastic"`` (slots) or a registered family, with width ``d_e``,
    default ``d_e = T``; ``T`` and ``d_e`` may be arrays:
    :func:`stsim.core.families.family_reduced_n`)."""
    if isinstance(pe, Encoding):
        n, label = pe.reduced_n(T), pe.label
    else:
        n, label = family_reduced_n(pe, T, d_e), pe
    if n is None:
        raise ValueError(f"the {label} encoding has no exact two-scalar reduction (sphere / "
                         "near-orthogonal encodings have none; use stsim.theory.population "
                         "with Monte-Carlo)")
    n = np.asarray(n, dtype=np.float64)
    if np.any(n < np.asarray(T)):
        raise ValueError(f"d_e must be >= T for the {label} encoding, got d_e={d_e}, T={T}")
    return n - 1.0


# ---- discrete GD map -----------------------------------------------------------------
@dataclass(frozen=True)
class ReducedTrajectory:
    """Recorded reduced trajectory of ``K`` settings.

    Attributes
    ----------
    step : (n_rec,) array
        GD step of each record (time ``τ = η · step``; for gradient flow, ``step`` holds
        ``τ`` as floats and ``lr`` is ``nan``).
    a : (K, n_rec) array
        The scale ``a`` at the recorded steps.
    gamma : (K, n_rec) array
        The value scale ``γ`` at the recorded steps.
    loss : (K, n_rec) array
        The population loss *at* that state (before the update).
    T : (K,) array
        Sequence length of each setting.
    q : (K,) array
        Subset size of each setting.
    d : (K,) array
        Token dimension of each setting.
    lr : (K,) array
        Step size η of each setting (``nan`` for gradient flow).
    n_minus_1 : (K,) array
        ``n − 1`` of each setting (``n``: the reduction's number of positions).
    query : str
        The query convention, ``"sum"`` or ``"mean"``.
    max_loss_increase : (K,) array or None
        ``max_t (L(t+1) − L(t))`` over EVERY step (not only the recorded ones); ``<= 0``
        means the loss never increased.
    min_a_increment : (K,) array or None
        ``min_t (a(t+1) − a(t))`` over every step.
    a_min : (K,) array or None
        The least ``a`` over every state (not only the recorded ones), the start included.
    gamma_min : (K,) array or None
        The least ``γ`` over every state.
    gamma_max : (K,) array or None
        The greatest ``γ`` over every state.
    lr_V : (K,) array or None
        V's step when it differs from W's (``lr``); None for gradient flow.
    """

    step: np.ndarray
    a: np.ndarray
    gamma: np.ndarray
    loss: np.ndarray
    T: np.ndarray
    q: np.ndarray
    d: np.ndarray
    lr: np.ndarray
    n_minus_1: np.ndarray
    query: str = "sum"
    max_loss_increase: np.ndarray | None = None
    min_a_increment: np.ndarray | None = None
    lr_V: np.ndarray | None = None
    a_min: np.ndarray | None = None
    gamma_min: np.ndarray | None = None
    gamma_max: np.ndarray | None = None


def _settings(T, q, d, lr, pe, d_e, a0, gamma0, query, lr_V=1.0):
    T, q, d = _check_sizes(T, q, d)
    lr = np.asarray(check_lr(lr), dtype=np.float64)
    lr_V = np.asarray(lr_V, dtype=np.float64)
    nm1 = step_divisor(pe, T, d_e)
    if np.any(nm1 < 1):
        raise ValueError("the reduction needs n = T (onehot) or d_e (slots) >= 2")
    c = query_coef(query, q)
    arrs = np.broadcast_arrays(T, q, d, lr, nm1, c, np.asarray(a0, dtype=np.float64),
                               np.asarray(gamma0, dtype=np.float64), lr_V)
    return [np.array(x, dtype=np.float64).reshape(-1) for x in arrs]


def reduced_gd(T, q, d, lr, steps, *, pe="onehot", d_e=None, query="sum", a0=0.0, gamma0=0.0,
               record_every=1) -> ReducedTrajectory:
    """Run the exact reduced GD map for a grid of settings at once.

    ``a ← a − η_W/(n−1) ∂L/∂a``, ``γ ← γ − (η_V/d) ∂L/∂γ`` (module docstring), ``steps``
    times: :func:`stsim.core.reduced.reduced_map`, the one reduced update, on arrays. All
    of ``T, q, d, lr, d_e, a0, gamma0`` broadcast to ``K`` settings.

    Parameters
    ----------
    T, q, d : int or array of int
        Sequence length, subset size, token dimension.
    lr : float or array or dict
        Step size η, or a step per block ``{"W": η_W, "V": η_V}`` (each a float or array).
    steps : int
        Number of updates.
    pe : str or Encoding
        ``"onehot"``, ``"stochastic"`` (slots), or an Encoding object (see
        :func:`step_divisor`).
    d_e : int, optional
        Slots width (default ``T``).
    query : {"sum", "mean"}
        The query convention.
    a0, gamma0 : float or array
        Initial ``a`` and ``γ``.
    record_every : int
        Record every k steps (and the last step).

    Returns
    -------
    ReducedTrajectory
        Arrays of shape (K, n_rec); ``lr`` holds W's step, ``lr_V`` V's.

    Examples
    --------
    >>> tr = reduced_gd(T=[8, 50], q=2, d=3, lr=0.1, steps=100, record_every=50)
    >>> tr.a.shape, bool(np.all(np.diff(tr.loss, axis=1) < 0))
    ((2, 3), True)
    """
    return _gd(T, q, d, lr, steps, pe, d_e, query, a0, gamma0, record_every, scalar=False)


def reduced_gd_scalar(T, q, d, lr, steps, *, pe="onehot", d_e=None, query="sum", a0=0.0,
                      gamma0=0.0, record_every=1):
    """:func:`reduced_gd` for ONE setting, the map run in plain Python floats (e.g. 10⁶
    steps; :func:`stsim.core.reduced.reduced_map_record`, 1.4 µs a step). Tested equal to
    :func:`reduced_gd` to rounding. Returns a :class:`ReducedTrajectory` with K = 1."""
    return _gd(T, q, d, lr, steps, pe, d_e, query, a0, gamma0, record_every, scalar=True)


def _gd(T, q, d, lr, steps, pe, d_e, query, a0, gamma0, record_every, scalar):
    steps = check_int("steps", steps, 0)
    record_every = check_int("record_every", record_every, 1)
    lr_W, lr_V = Steps(lr, check=False).pair()
    check_lr(lr_V, "lr")
    T, q, d, lr_W, nm1, c, a, g, lr_V = _settings(T, q, d, lr_W, pe, d_e, a0, gamma0, query,
                                                  lr_V)
    args = [T, q, d, lr_W, lr_V, nm1, c, a, g]
    if scalar:
        if T.size != 1:
            raise ValueError("reduced_gd_scalar runs one setting; use reduced_gd for a grid")
        args = [float(x[0]) for x in args]
    Tk, qk, dk, lw, lv, nm, ck, ak, gk = args
    rec, A, G, L, *every = reduced_map_record(Tk, qk, dk, {"W": lw, "V": lv}, nm + 1.0, steps,
                                              record_every=record_every, c=ck, a0=ak,
                                              gamma0=gk)
    dl, da, a_min, g_min, g_max = (np.atleast_1d(x).astype(np.float64) for x in every)
    return ReducedTrajectory(step=rec, a=np.atleast_2d(A), gamma=np.atleast_2d(G),
                             loss=np.atleast_2d(L), T=T, q=q, d=d, lr=lr_W, n_minus_1=nm1,
                             query=query, max_loss_increase=dl, min_a_increment=da,
                             lr_V=lr_V, a_min=a_min, gamma_min=g_min, gamma_max=g_max)


# ---- gradient flow (η → 0), through scipy.integrate.solve_ivp ------------------------
def gradient_flow(T, q, d, t_eval, *, pe="onehot", d_e=None, query="sum", a0=0.0, gamma0=0.0,
                  method="DOP853", rtol=1e-11, atol=1e-13) -> ReducedTrajectory:
    """Gradient flow ``da/dτ = −1/(n−1) ∂L/∂a``, ``dγ/dτ = −(1/d) ∂L/∂γ`` for K settings
    in ONE ``solve_ivp`` call (the state is the stacked ``[a_1..a_K, γ_1..γ_K]``).

    Time ``τ`` is gradient-flow time: GD with step η after ``k`` steps is compared with the
    flow at ``τ = η k`` (error O(η), tested).

    Parameters
    ----------
    T, q, d, pe, d_e, query, a0, gamma0
        As for :func:`reduced_gd`.
    t_eval : (n_rec,) array
        Increasing times ``τ >= 0`` (the flow starts at τ = 0).
    method, rtol, atol
        Passed to ``scipy.integrate.solve_ivp``.

    Returns
    -------
    ReducedTrajectory
        With ``step = t_eval`` (times) and ``lr = nan``.

    Raises
    ------
    RuntimeError
        With the solver's message, if the integration fails.
    """
    t_eval = np.asarray(t_eval, dtype=np.float64)
    if t_eval.ndim != 1 or t_eval.size == 0 or t_eval[0] < 0 or np.any(np.diff(t_eval) < 0):
        raise ValueError("t_eval must be a non-empty increasing 1-D array of times >= 0")
    T, q, d, _, nm1, c, a, g, _ = _settings(T, q, d, 1.0, pe, d_e, a0, gamma0, query)
    K = T.size

    def rhs(_t, y):
        L, da, dg = reduced_loss_grad(y[:K], y[K:], T, q, d, query=query)
        return np.concatenate([-da / nm1, -dg / d])

    from scipy.integrate import solve_ivp  # here, not at the top: 0.3 s of `import stsim`
    sol = solve_ivp(rhs, (0.0, float(t_eval[-1])), np.concatenate([a, g]), method=method,
                    t_eval=t_eval, rtol=rtol, atol=atol)
    if not sol.success:
        raise RuntimeError(f"gradient flow integration failed: {sol.message}")
    A, G = sol.y[:K], sol.y[K:]
    L = reduced_loss(A, G, T[:, None], q[:, None], d[:, None], query=query)
    return ReducedTrajectory(step=sol.t, a=A, gamma=G, loss=L, T=T, q=q, d=d,
                             lr=np.full(K, np.nan), n_minus_1=nm1, query=query)


# ---- out-of-distribution length, fixed one-hot ---------------------------------------
def _check_ood(T, T_test, q, d):
    T = check_int("T", T, 2)
    q = check_int("q", q, 1, T - 1)
    T_test = check_int("T_test", T_test, T)        # the one-hot formulas need T_test >= T
    d = check_int("d", d, 1)
    return T, T_test, q, d


def ood_loss_onehot(a, gamma, T, T_test, q, d, *, query="sum") -> np.ndarray:
    r"""Exact population loss at length ``T_test`` of the fixed one-hot model trained at
    ``T`` and stopped at ``(a, γ)``: ``W_ee = a(I_T − J_T/T)`` on the trained block, 0 on
    positions ``>= T`` (never seen), ``V_x = γ I``, ``d_e >= T_test``.

    With ``m = |y ∩ [T]|`` ~ Hypergeometric(T_test, T, q), the logits (shifted by
    ``c a m/T``) are ``c a`` for the m trained selected tokens, 0 for the ``T − m`` trained
    unselected ones and ``c a m/T`` for the ``T_test − T`` untrained ones, so

        L = Σ_m P(m) (d/2) (‖s‖² γ² − 2 γ s·u + 1/q),
        s·u = (m s_ts + (q − m) s_un)/q.

    At ``T_test = T`` it equals :func:`reduced_loss`. ``a``, ``gamma`` broadcast;
    ``T, T_test, q, d`` are scalars.
    """
    T, T_test, q, d = _check_ood(T, T_test, q, d)
    c = float(query_coef(query, q))
    a = np.asarray(a, dtype=np.float64)[..., None]
    g = np.asarray(gamma, dtype=np.float64)[..., None]
    m = np.arange(0, q + 1, dtype=np.float64)
    from scipy.stats import hypergeom      # here, not at the top: 0.3 s of `import stsim`
    pm = hypergeom(T_test, T, q).pmf(m)
    n_un = T_test - T
    lw = np.stack(np.broadcast_arrays(c * a, np.zeros_like(c * a * m), c * a * m / T), axis=0)
    # the shift is the largest logit among the groups that have tokens (with m = 0 the
    # selected-trained logit c a is absent: shifting by it underflows every weight, 0/0)
    count = np.stack(np.broadcast_arrays(m, T - m, np.full_like(m, n_un)), axis=0)
    count = count.reshape((3,) + (1,) * (lw.ndim - 2) + (m.size,))   # broadcast over a, γ
    lw = np.where(count > 0, lw, -np.inf)          # a group without tokens weighs 0
    lw = lw - lw.max(axis=0)
    w_ts, w_tu, w_un = np.exp(lw)
    Z = m * w_ts + (T - m) * w_tu + n_un * w_un
    s_ts, s_tu, s_un = w_ts / Z, w_tu / Z, w_un / Z
    S2 = m * s_ts ** 2 + (T - m) * s_tu ** 2 + n_un * s_un ** 2
    su = (m * s_ts + (q - m) * s_un) / q
    Lm = 0.5 * d * (S2 * g * g - 2.0 * g * su + 1.0 / q)
    return np.sum(pm * Lm, axis=-1)


def ood_floor_onehot(T, T_test, q, d) -> float:
    r"""Limit ``a → ∞, γ → 1`` of :func:`ood_loss_onehot` (fixed one-hot, trained at ``T``,
    tested at ``T_test >= T``):

        L_∞ = ½ d [ Σ_{m≥1} P(m) (q − m)/(q m)  +  P(0) (1/q − 1/T_test) ],

    ``m`` ~ Hypergeometric(population T_test, T trained positions, q draws). With ``m >= 1``
    attention becomes uniform on the m trained selected tokens: ``f = (1/m) Σ x``, loss
    ``½ d (q − m)/(q m)``. With ``m = 0`` every logit is 0, attention is uniform over all
    ``T_test`` tokens and the loss is ``½ d (1/q − 1/T_test)`` (the task statement writes ``d/q``
    for this term; the difference is ``½ d P(0)/T_test``).

    Example
    -------
    >>> round(ood_floor_onehot(200, 250, 3, 5), 4), round(ood_floor_onehot(200, 300, 3, 5), 4)
    (0.3261, 0.5864)
    """
    T, T_test, q, d = _check_ood(T, T_test, q, d)
    m = np.arange(1, q + 1)
    from scipy.stats import hypergeom      # here, not at the top: 0.3 s of `import stsim`
    pm = hypergeom(T_test, T, q).pmf(m)
    p0 = float(hypergeom(T_test, T, q).pmf(0))
    return float(0.5 * d * (np.sum(pm * (q - m) / (q * m)) + p0 * (1.0 / q - 1.0 / T_test)))
