r"""Exact results for the attention mechanisms of :mod:`stsim.core.attention` (derived in
``docs/attention.md``, each with its test in ``tests/test_attention_theory.py``).

**Linear attention, the loss given the encodings.** With ``x_q = 0``, tokens
``z_i = [x_i; p_i]``, ``x_i ~ N(0, I_d)`` i.i.d., query ``z_q = [0; p_q]`` and
``s = a/τ`` (fold ``1/τ`` into ``W``), write ``m = W_xe p_q`` (d), ``w_i = p_iᵀ W_ee p_q``,
``v_i = V_e p_i``, ``u = 1_y/q``. Then ``a_i = x_iᵀ m + w_i`` and::

    r = Σ_i (x_iᵀ m) V_x x_i  +  Σ_i M_i x_i  +  C₀,
    M_i = v_i mᵀ + w_i V_x − u_i I,      C₀ = Σ_i w_i v_i  (+ a_q V_e p_q, practical),

(``a_q = p_qᵀ W_ee p_q``), a quadratic, a linear and a constant part in X. Odd Gaussian
moments vanish, ``E[x xᵀ A x xᵀ] = A + Aᵀ + tr(A) I`` (Isserlis), so::

    E_X ‖r‖² = T(T+1) ‖V_x m‖² + T ‖V_x‖_F² ‖m‖² + Σ_i ‖M_i‖_F² + ‖C₀‖² + 2T (V_x m)·C₀,
    Σ_i ‖M_i‖_F² = ‖m‖² Σ_i‖v_i‖² + ‖w‖² ‖V_x‖_F² + d ‖u‖²
                   + 2 (Σ_i w_i v_i)·(V_x m) − 2 (Σ_i u_i v_i)·m − 2 (w·u) tr V_x

(:func:`linear_loss_given`, any encodings, both models).

**Linear attention, the population loss in closed form** (fixed one-hot encodings, theory
model). Every term above is a quadratic form ``eᵀQe`` in the indicator ``e = 1_y ∈ {0,1}^T``
(``p_q = c e``, ``u = e/q``), and ``E_y[e eᵀ] = (ρ₁ − ρ₂) I + ρ₂ J`` with ``ρ₁ = q/T``,
``ρ₂ = q(q−1)/(T(T−1))``, so ``L = ½ [(ρ₁ − ρ₂) tr Q + ρ₂ 1ᵀQ1]`` with (blocks on the T
trained positions)::

    Q = c² T(T+1) (V_xW_xe)ᵀ(V_xW_xe) + c² (T‖V_x‖² + ‖V_e‖²) W_xeᵀW_xe + c² ‖V_x‖² W_eeᵀW_ee
        + (d/q²) I + c²(T+1) (A + Aᵀ) − (c/q)(B + Bᵀ) − (c/q) tr V_x (W_ee + W_eeᵀ)
        + c² W_eeᵀV_eᵀV_eW_ee,          A = W_eeᵀV_eᵀV_xW_xe,   B = V_eᵀW_xe

(:func:`linear_population_loss`; a polynomial of degree 4 in (W, V)).

**Linear attention with sphere encodings** (:func:`linear_sphere_best`,
:func:`linear_sphere_width`: the width is linear in T) and **every mechanism on the sphere
family** (:func:`mechanism_family_rel`, :func:`best_mechanism_family_loss`,
:func:`sigmoid_family_bound`; their located widths: :mod:`stsim.studies.widths`): derived in
docs/attention.md, §5 and §8. The reduced dynamics of every mechanism:
:mod:`stsim.core.attention_dynamics`.
"""
from __future__ import annotations

import numpy as np

from stsim.core.attention import make_attention
from stsim.core.model import MODELS, QUERIES, query_coef
from stsim.core.targets import Mean
from stsim.util.validate import check_choice, check_int, check_real

__all__ = ["linear_loss_given", "linear_population_loss", "linear_sphere_best",
           "linear_sphere_width", "mechanism_family_rel", "best_mechanism_family_loss",
           "sigmoid_family_bound"]


def _blocks(W, V, tau):
    """``d`` (read from V) and the blocks ``W_xe, W_ee, V_x, V_e`` of ``(W/τ, V)``."""
    W = np.asarray(W, dtype=np.float64) / tau
    V = np.asarray(V, dtype=np.float64)
    d, D = V.shape[0], W.shape[0]
    if W.shape != (D, D) or V.shape != (d, D) or D <= d:
        raise ValueError(f"W must be (D, D) and V (d, D) with D > d = {d}, got {W.shape}, "
                         f"{V.shape}")
    return d, W[:d, d:], W[d:, d:], V[:, :d], V[:, d:]


def linear_loss_given(W, V, P, y, *, query="sum", model="theory", temperature=1.0):
    """``E_X ℓ`` of linear attention given the encodings and the subset of each sample
    (module docstring), ``x_q = 0``.

    Parameters
    ----------
    W, V : arrays
        Key-query matrix ``(D, D)``, ``D = d + d_e``, and value-output matrix ``(d, D)``.
    P : (T, d_e) or (B, T, d_e) array
        Encodings (shared or per sample).
    y : (B, q) int array
        Selected positions.
    query, model : str
        The query convention (``"sum"``, ``"mean"``) and the model (``"theory"``, or
        ``"practical"``, which also attends over the query token).
    temperature : float
        ``τ``: the weights are ``a/τ``.

    Returns
    -------
    (B,) array
        The expected loss of each sample over its tokens X.
    """
    check_choice("query", query, QUERIES)
    check_choice("model", model, MODELS)
    tau = check_real("temperature", temperature, lo=0.0, lo_open=True)
    d, Wxe, Wee, Vx, Ve = _blocks(W, V, tau)
    y = np.asarray(y)
    B, q = y.shape
    P = np.broadcast_to(np.asarray(P, dtype=np.float64), (B,) + np.shape(P)[-2:])
    T = P.shape[1]
    c = query_coef(query, q)
    pq = c * np.take_along_axis(P, y[:, :, None], axis=1).sum(axis=1)      # (B, d_e)
    m = pq @ Wxe.T                                                          # (B, d)
    w = (P @ (pq @ Wee.T)[:, :, None])[:, :, 0]                              # (B, T)
    u = np.zeros((B, T))
    np.put_along_axis(u, y, 1.0 / q, axis=1)
    VeP = P @ Ve.T                                                          # v_i, (B, T, d)
    Vxm = m @ Vx.T
    nVx2 = float(np.sum(Vx * Vx))
    mm = np.einsum("bd,bd->b", m, m)
    wv = (w[:, None, :] @ VeP)[:, 0]                                        # Σ_i w_i v_i
    C0 = wv
    if model == "practical":
        aq = np.einsum("be,be->b", pq, pq @ Wee.T)
        C0 = C0 + aq[:, None] * (pq @ Ve.T)
    Mi = (mm * np.einsum("btd,btd->b", VeP, VeP) + np.einsum("bt,bt->b", w, w) * nVx2
          + d * np.einsum("bt,bt->b", u, u)
          + 2 * np.einsum("bd,bd->b", wv, Vxm)
          - 2 * np.einsum("bd,bd->b", (u[:, None, :] @ VeP)[:, 0], m)
          - 2 * np.einsum("bt,bt->b", w, u) * np.trace(Vx))
    Er2 = (T * (T + 1) * np.einsum("bd,bd->b", Vxm, Vxm) + T * nVx2 * mm + Mi
           + np.einsum("bd,bd->b", C0, C0) + 2 * T * np.einsum("bd,bd->b", Vxm, C0))
    return 0.5 * Er2


def linear_population_loss(W, V, T, q, *, query="sum", temperature=1.0) -> float:
    """Closed-form population loss of linear attention, fixed one-hot encodings at the
    first T slots (``d_e >= T``), theory model, ``x_q = 0``: a polynomial in (W, V)
    (module docstring), exact over the tokens and the subset.

    Parameters
    ----------
    W, V, query, temperature
        As for :func:`linear_loss_given` (``d`` is read from V).
    T : int
        Sequence length (``T <= d_e``).
    q : int
        Subset size, ``1 <= q <= T``.

    Returns
    -------
    float
        The population loss.

    Example
    -------
    >>> d, T = 3, 6
    >>> Ws = np.zeros((d + T, d + T)); Ws[d:, d:] = np.eye(T) / 2; Vs = np.eye(d, d + T)
    >>> abs(linear_population_loss(Ws, Vs, T, 2)) < 1e-15       # W_ee = I/q solves it
    True
    """
    check_choice("query", query, QUERIES)
    T = check_int("T", T, 2, np.shape(W)[0] - np.shape(V)[0])
    q = check_int("q", q, 1, T)
    tau = check_real("temperature", temperature, lo=0.0, lo_open=True)
    d, Wxe, Wee, Vx, Ve = _blocks(W, V, tau)
    Wxe, Wee, Ve = Wxe[:, :T], Wee[:T, :T], Ve[:, :T]
    c = float(query_coef(query, q))
    nVx2, nVe2, trVx = float(np.sum(Vx * Vx)), float(np.sum(Ve * Ve)), float(np.trace(Vx))
    VW = Vx @ Wxe
    A = Wee.T @ Ve.T @ Vx @ Wxe
    Bm = Ve.T @ Wxe
    VeW = Ve @ Wee
    Q = (c * c * T * (T + 1) * VW.T @ VW + c * c * (T * nVx2 + nVe2) * Wxe.T @ Wxe
         + c * c * nVx2 * Wee.T @ Wee + (d / q ** 2) * np.eye(T)
         + c * c * (T + 1) * (A + A.T) - (c / q) * (Bm + Bm.T)
         - (c / q) * trVx * (Wee + Wee.T) + c * c * VeW.T @ VeW)
    rho1 = q / T
    rho2 = q * (q - 1) / (T * (T - 1))
    return float(0.5 * ((rho1 - rho2) * np.trace(Q) + rho2 * Q.sum()))


def linear_sphere_best(T, q, d_e, d=1):
    """Linear attention with sphere encodings on the isotropic family (``W_ee = κI``,
    ``V_x = γI``, sum query): ``(λ*, L*, L*/L₀)`` with ``λ* = κγ = 1/S``,
    ``S = q + q(T − 1)/d_e``, ``L* = (d/2)(1/q − 1/S)``, ``L*/L₀ = (T − 1)/(d_e + T − 1)``.
    Vectorised over ``T, q, d_e``."""
    T, q, d_e = (np.asarray(x, dtype=np.float64) for x in (T, q, d_e))
    S = q + q * (T - 1) / d_e
    L = 0.5 * d * (1 / q - 1 / S)
    return 1 / S, L, L / Mean().zero_loss(d, q)


def linear_sphere_width(T, target=0.25):
    """Smallest integer ``d_e`` with ``(T − 1)/(d_e + T − 1) <= target`` (linear attention,
    sphere, isotropic family): ``⌈(T − 1)(1/target − 1)⌉``."""
    target = check_real("target", target, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    T = np.asarray(T, dtype=np.float64)
    return np.ceil((T - 1) * (1 / target - 1) - 1e-9).astype(int)


def mechanism_family_rel(attention, a, g, q):
    """``L/L₀ = 1 − q E[s·u]²/E[|s|²]``, ``s_i = φ(a g_i/τ + β)`` (β: the mechanism's fixed
    bias at N = T tokens), of the sphere family
    ``W_ee = aI``, ``V_x = γ*I`` for a mechanism (docs/attention.md, §8), on scores ``g``
    ``(n_mc, T)`` of :func:`stsim.theory.family.sample_scores` (the q selected first)."""
    from stsim.theory.family import family_rel
    att = make_attention(attention)
    if att.softmax_family:
        return family_rel(a / att.temperature, g, q)
    s = att.phi(a * g / att.temperature + att.bias(g.shape[1]))
    S2 = np.einsum("nt,nt->n", s, s).mean()
    su = s[:, :q].sum(axis=1).mean() / q
    return 1.0 - q * su * su / S2 if S2 > 0 else 1.0


def best_mechanism_family_loss(attention, T, q, d_e, n_mc=4096, rng=0, bounds=(-2.0, 3.0)):
    """The family's best ``L/L₀`` over ``a > 0`` for a mechanism, on one draw of sphere
    encodings (``rng``): softmax through :func:`stsim.theory.family.best_family_loss`; a
    positively homogeneous mechanism at ``a = 1`` (the ratio does not depend on a); else a
    grid of ``log10 a`` in ``bounds`` refined by bounded Brent. Returns ``{"rel", "a"}``."""
    from scipy.optimize import minimize_scalar

    from stsim.theory.family import best_family_loss, sample_scores
    att = make_attention(attention)
    if att.softmax_family:
        r = best_family_loss(T, q, 1, d_e, n_mc=n_mc, rng=rng)
        return {"rel": r["rel"], "a": r["a"] * att.temperature}
    g = sample_scores(T, q, d_e, n_mc, rng)
    if att.homogeneous:
        return {"rel": float(mechanism_family_rel(att, 1.0, g, q)), "a": 1.0}
    f = lambda la: mechanism_family_rel(att, 10.0 ** la, g, q)
    grid = np.linspace(bounds[0], bounds[1], 21)
    vals = np.array([f(x) for x in grid])
    k = int(np.argmin(vals))
    res = minimize_scalar(f, bounds=(grid[max(k - 1, 0)], grid[min(k + 1, 20)]),
                          method="bounded", options={"xatol": 2e-3})
    la = res.x if res.fun <= vals[k] else grid[k]
    return {"rel": float(min(res.fun, vals[k])), "a": float(10.0 ** la)}



def sigmoid_family_bound(T, q):
    """``(T − q)/(T + 3q)``: the sigmoid family's ``L/L₀`` at ``d_e → ∞`` and ``a → ∞``
    (docs/attention.md, §8), its infimum over a there."""
    T, q = (np.asarray(x, dtype=np.float64) for x in (T, q))
    return (T - q) / (T + 3 * q)
