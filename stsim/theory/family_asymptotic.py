r"""The (a, γ) family's loss at large T for the sphere PE: an exact T-free reduction, the
mean-field (concentration) approximation, where it holds, and the smallest width.

Setting (:mod:`stsim.theory.family`): theory model, ``W_ee = a I``, ``V_x = γ I``
(``W_xe = V_e = 0``, ``x_query = 0``), stochastic sphere PE (i.i.d. uniform unit vectors
in ``R^{d_e}``, redrawn per sample), sum query ``p_q = Σ_{j∈y} p_j`` (the mean query
``p_q/q`` only rescales ``a`` to ``a/q``: same best loss, optimum ``a`` times q).  With
``s = softmax(a g)``, ``g_i = <p_i, p_q>``, ``S = Σ_{i∈y} s_i`` and the best ``γ* = E S /
(q E|s|²)``, the loss relative to ``L0 = d/(2q)`` is (``E_X ℓ`` is d times a d-free
expression, so the ratio is d-free)

    L/L0 = 1 − (E S)² / (q E|s|²).

**Exact structure.** Condition on the q selected encodings, i.e. on their Gram matrix
``G`` (``G_ii = 1``).  The selected logits are ``a g_i``, ``g_i = Σ_j G_ij = 1 + Σ_{j≠i}
ε_ij``; ``r = |p_q| = (Σ_ij G_ij)^{1/2}``; each unselected token, independent of ``p_q``,
has ``g_k = r t_k`` with ``t_k`` i.i.d., density ∝ ``(1 − t²)^{(d_e−3)/2}`` on (−1, 1)
(``(1+t)/2 ~ Beta((d_e−1)/2, (d_e−1)/2)``, mean 0, variance ``1/d_e``).  With
``A = Σ_{i∈y} e^{a g_i}``, ``A₂ = Σ_{i∈y} e^{2a g_i}``, ``λ = a r``, ``X_k = e^{λ t_k}``,
``N = T − q``, ``R = Σ_k X_k``, ``R₂ = Σ_k X_k²``::

    S = A/(A + R),      |s|² = (A₂ + R₂)/(A + R)².

**Exact, T-free (Laplace).** ``1/(A+R) = ∫₀^∞ e^{−σ(A+R)} dσ``, ``1/(A+R)² = ∫₀^∞ σ
e^{−σ(A+R)} dσ`` and ``E e^{−σR} = φ(σ)^N`` give (with ``φ(σ) = E e^{−σX}``,
``ψ(σ) = E[X² e^{−σX}]``)::

    E[S | G]   = ∫₀^∞ A e^{−σA} φ(σ)^N dσ,
    E[|s|²| G] = ∫₀^∞ σ e^{−σA} [A₂ φ(σ)^N + N ψ(σ) φ(σ)^{N−1}] dσ.

T enters only as an exponent: a Gauss rule for the law of t and a trapezoid rule in
``ln σ`` cost ``O(n_G n_σ n_t)`` for any T.  The average over G
(:func:`stsim.theory.sphere_law.gram_rule`): q = 2, ``G_12 = ε`` has the law of t (the
same Gauss rule, no Monte Carlo); q ≥ 3, Monte Carlo, exact draws in O(q²) each.

**Mean field (the large-T approximation).** ``R → N M(λ)``, ``R₂ → N M(2λ)`` with

    M(λ) = E e^{λt} = ₀F₁(; d_e/2; λ²/4),   ln M(λ) = λ²/(2d_e) − λ⁴/(4d_e²(d_e+2)) + …

(:func:`stsim.theory.sphere_law.log_sphere_mgf`): ``E[S|G] ≈ A/(A + N M(λ))``,
``E[|s|²|G] ≈ (A₂ + N M(2λ))/(A + N M(λ))²``, closed form, O(n_G q²).  The Gaussian
``M ≈ e^{λ²/(2d_e)}`` (η = r t of variance ≈ q/d_e) needs ``4λ⁴ ≪ d_e³`` for ``M(2λ)``;
t is bounded (lighter tails), so the exact form is the default.  It holds when

1. R concentrates: ``Var R/(E R)² ≈ e^{−rem}``, ``rem = ln N − ln M(2λ) + 2 ln M(λ)
   ≈ ln N − λ²/d_e ≫ 0`` (the random-energy model's second-moment condition), and
2. no single unselected token rivals the denominator ``D = A + N M(λ)``: the tokens that
   carry ``E X²`` sit at ``ln X ≈ λ m₁(2λ)`` (``m₁ = (ln M)'``, Gaussian ``2λ²/d_e``) with
   spread ``λ m₂^{1/2}`` (``m₂ = (ln M)''``), and ``margin μ = [ln D − λ m₁(2λ)] /
   (λ m₂(2λ)^{1/2}) ≫ 1``.  Condition 1 is not enough: with γ optimal the O(R/A) leak
   cancels, the loss is carried by ``E[R₂/(A+R)²]``, and for μ ≲ 1 (the frozen side of the
   transition, for the second moment; Gaussian with D ≈ q e^a: ``a ≳ d_e/(2q)``) the mean
   field overestimates the loss, ``E[X²/(D+X)²] < E X²/D²``.

**Where the loss comes from** (:func:`mean_field_terms`, an identity of the mean field).
With ``Y = A/(A + N M(λ))``, ``σ = q A₂/A²``, ``κ = q N M(2λ)/A²``,

    L/L0 = [Var_G Y + E[Y²(σ − 1)] + E[Y² κ]] / E[Y²(σ + κ)]

— the leak's variation over the selected configurations, the spread of the selected
logits (σ = 1 iff they are equal: q ≤ 2), the unselected tokens' second moment.

**Consequences for the width** (the benchmark ``benchmarks/family_large_T.py`` checks them).
q ≥ 3: the spread is ``F_q(β)``, ``β = a/√d_e`` (:func:`spread_loss`: the loss of
``softmax(β Z)``, ``Z ~ N(0, (q−2)I + J)``; ``≈ β²(q−1)(q−2)/q`` for small β); the leak
term is ``≈ ℓ̄² Var(ln ℓ)``, ``ℓ = N M(λ)/A ≈ (N/q) e^{−a + qβ²/2}``, ``Var ln ℓ = O(β²)``,
so it needs ``a ≈ ln N + O(1)``; κ ≈ ``(N/q) e^{−2a+2qβ²}`` then vanishes.  Hence
``β → β*`` with ``F_q(β*) = target`` and ``d_e = a²/β² ≈ (ln T)²/β*²``: a (log T)² law;
rem ≈ ln N − qβ² and μ ∝ √d_e grow, so the mean field becomes exact as T grows.
q = 2: σ = 1, no spread; the optimum sits at μ < 0 and rem < 0 (frozen side): the loss is
carried by rare selected configurations in which an unselected token rivals the selected
ones, ``r t > 1 + ε``, i.e. ``t > θ = ((1+ε)/2)^{1/2}``, ``P(t > θ) ≈ ((1−ε)/2)^{d_e/2}``.
Rivals are expected when ``ε < ε*`` with ``N ((1−ε*)/2)^{d_e/2} ≈ 1``; that has probability
``≈ e^{−d_e ε*²/2}``, so a target τ needs ``|ε*| ≈ (2 ln(c/τ)/d_e)^{1/2}`` and
``d_e ≈ 2 log₂ T + C √d_e`` (C grows as τ falls): the q log₂ T law (q = 2) with an
O((log T)^{1/2}) correction.
"""
from __future__ import annotations

import math

import numpy as np

from stsim.theory.sphere_law import log_gauss_mgf, log_sphere_mgf, sphere_nodes

__all__ = ["conditional_moments", "mean_field_terms", "family_mc_moments", "rel_and_se",
           "large_T_rel", "METHODS"]

METHODS = ("exact", "mean")


def _check(q, T, d_e, method="exact", mgf="exact", query="sum"):
    for name, v, lo in (("q", q, 1), ("T", T, 2), ("d_e", d_e, 2)):
        if not isinstance(v, (int, np.integer)) or v < lo:
            raise ValueError(f"{name} must be an integer >= {lo}, got {v!r}")
    if not q < T:
        raise ValueError(f"q must be < T, got q={q}, T={T}")
    for name, v, ok in (("method", method, METHODS), ("mgf", mgf, ("exact", "gauss")),
                        ("query", query, ("sum", "mean"))):
        if v not in ok:
            raise ValueError(f"{name} must be one of {ok}, got {v!r}")


def _selected(a, G, c):
    """``ln A``, ``ln A₂``, ``λ`` per Gram sample."""
    z = (a * c) * G.sum(axis=2)
    lam = (a * c) * np.sqrt(np.maximum(G.sum(axis=(1, 2)), 0.0))
    zm = z.max(axis=1)
    e = np.exp(z - zm[:, None])
    return zm + np.log(e.sum(axis=1)), 2 * zm + np.log((e * e).sum(axis=1)), lam


# ---- E[S | G], E[|s|² | G] ------------------------------------------------------------
def conditional_moments(a, T, d_e, G, *, method="exact", mgf="exact", query="sum",
                        n_nodes=64, du=0.5, chunk=64, diagnostics=True):
    """Per Gram sample: ``E[S|G]``, ``E[|s|²|G]`` and the diagnostics (module docstring).

    Returns ``dict(S, Q, margin, rem)`` (arrays over the samples); ``margin`` is μ,
    ``rem`` is ``ln N − ln M(2λ) + 2 ln M(λ)`` (both from the exact MGF; only with
    ``diagnostics``).

    Parameters
    ----------
    a : float
        ``W_ee = a I``.
    T : int
        Sequence length.
    d_e : int
        PE dimension.
    G : ndarray
        Gram matrices ``(n, q, q)`` of the selected encodings.
    method : str
        ``"exact"`` (Laplace, exact given G) or ``"mean"`` (mean field).
    mgf : str
        ``"exact"`` or ``"gauss"`` MGF in the mean field.
    query : str
        ``"sum"`` or ``"mean"``.
    n_nodes : int
        Gauss nodes for t (exact method).
    du : float
        Trapezoid step in ``ln σ`` (exact method).
    chunk : int
        Gram samples per block (exact method; memory ``chunk · n_σ · n_nodes``).
    diagnostics : bool
        Whether to compute ``margin`` and ``rem``.
    """
    q = G.shape[1]
    _check(q, T, d_e, method, mgf, query)
    c = 1.0 if query == "sum" else 1.0 / q
    lA, lA2, lam = _selected(float(a), G, c)
    lN = math.log(T - q)
    lm1 = log_sphere_mgf(lam, d_e)
    lD = np.logaddexp(lA, lN + lm1)
    out = {}
    if diagnostics:
        h = 1e-4 * np.maximum(lam, 1.0)              # m₁, m₂ of ln M at 2λ by differences
        l0, lp, lm = (log_sphere_mgf(2 * lam + x, d_e) for x in (0.0, h, -h))
        m1, m2 = (lp - lm) / (2 * h), np.maximum((lp - 2 * l0 + lm) / (h * h), 1e-300)
        out = {"margin": (lD - lam * m1) / np.maximum(lam * np.sqrt(m2), 1e-300),
               "rem": lN - l0 + 2 * lm1}
    if method == "mean":
        if mgf == "gauss":
            lD = np.logaddexp(lA, lN + log_gauss_mgf(lam, d_e))
        lmf = log_gauss_mgf if mgf == "gauss" else log_sphere_mgf
        out["S"] = np.exp(lA - lD)
        out["Q"] = np.exp(np.logaddexp(lA2, lN + lmf(2 * lam, d_e)) - 2 * lD)
        return out
    t, w = sphere_nodes(d_e, n_nodes)
    N = float(T - q)
    S, Q = np.empty(len(lA)), np.empty(len(lA))
    for lo in range(0, len(lA), chunk):
        sl = slice(lo, lo + chunk)
        S[sl], Q[sl] = _laplace(lA[sl] - lD[sl], lA2[sl] - 2 * lD[sl], lam[sl], lD[sl], N,
                                t, w, du)
    out["S"], out["Q"] = S, Q
    return out


def _laplace(la, la2, lam, lD, N, t, w, du):
    """The Laplace integrals in units of the mean-field denominator (σ = e^u)."""
    u_hi = min(float(np.max(-la)) + 5.0, 80.0)
    u = np.arange(-30.0, u_hi + du, du)
    sig = np.exp(u)
    L = u[None, :, None] + (lam[:, None, None] * t[None, None, :] - lD[:, None, None])
    with np.errstate(over="ignore", under="ignore", divide="ignore", invalid="ignore"):
        sx = np.exp(np.minimum(L, 700.0))
        omp = (-np.expm1(-sx)) @ w                                  # 1 − φ
        psi = np.exp(2.0 * L - sx) @ w                               # σ² ψ(σ)
        lphi = np.log1p(-np.minimum(omp, 1.0))
        ea = np.exp(-sig[None, :] * np.exp(la)[:, None])
        pN = np.exp(N * lphi)
        pN1 = np.exp((N - 1.0) * lphi)
    kS = sig[None, :] * np.exp(la)[:, None] * ea * pN
    kQ = ea * (sig[None, :] ** 2 * np.exp(la2)[:, None] * pN + N * psi * pN1)
    return du * np.nan_to_num(kS).sum(axis=1), du * np.nan_to_num(kQ).sum(axis=1)


def mean_field_terms(a, T, d_e, G, w, query="sum"):
    """The mean-field loss split into its three sources (an identity, module docstring).

    With ``Y = A/(A + N M(λ))``, ``σ = q A₂/A²`` and ``κ = q N M(2λ)/A²`` (per Gram
    sample), ``E S = E Y`` and ``q E|s|² = E[Y²(σ + κ)]``, so

        L/L0 = [Var Y + E[Y²(σ − 1)] + E[Y² κ]] / E[Y²(σ + κ)]:

    ``leak`` (the leak's variation over the selected configurations), ``spread`` (unequal
    selected logits; 0 for q ≤ 2) and ``single`` (the unselected tokens' second moment).
    Returns ``dict(leak, spread, single, rel)`` (each term already divided by the
    denominator, so they sum to ``rel``) and ``branch``: ``"selected"`` if ``E Y > ½``
    (the selected tokens dominate the denominator), else ``"bulk"``.

    Parameters
    ----------
    a, T, d_e, G, query
        As for :func:`conditional_moments`.
    w : ndarray
        The weights of ``G`` (sum 1).
    """
    q = G.shape[1]
    _check(q, T, d_e, query=query)
    c = 1.0 if query == "sum" else 1.0 / q
    lA, lA2, lam = _selected(float(a), G, c)
    lN = math.log(T - q)
    Y = 1.0 / (1.0 + np.exp(lN + log_sphere_mgf(lam, d_e) - lA))
    sig = q * np.exp(lA2 - 2 * lA)
    kap = q * np.exp(lN + log_sphere_mgf(2 * lam, d_e) - 2 * lA)
    Y2 = Y * Y
    den = w @ (Y2 * (sig + kap))
    EY = w @ Y
    t = {"leak": (w @ Y2 - EY * EY) / den, "spread": (w @ (Y2 * (sig - 1.0))) / den,
         "single": (w @ (Y2 * kap)) / den}
    t["rel"] = t["leak"] + t["spread"] + t["single"]
    t["branch"] = "selected" if EY > 0.5 else "bulk"
    return {k: (float(v) if k != "branch" else v) for k, v in t.items()}


def family_mc_moments(a, g, q):
    """Per sample ``(S, |s|²)`` of ``softmax(a g)`` for scores ``g`` ``(n, T)`` with the q
    selected tokens first (:func:`stsim.theory.family.sample_scores`,
    :func:`stsim.theory.sphere_law.draw_scores`).

    Parameters
    ----------
    a : float
        ``W_ee = a I``.
    g : ndarray
        Scores ``(n, T)``.
    q : int
        Number of selected tokens.
    """
    z = a * np.asarray(g, dtype=float)
    z = z - z.max(axis=1, keepdims=True)
    np.exp(z, out=z)
    z /= z.sum(axis=1, keepdims=True)
    return z[:, :q].sum(axis=1), np.einsum("nt,nt->n", z, z)


def rel_and_se(S, Q, q, w=None, mc=True):
    """``L/L0 = 1 − (E S)²/(q E Q)`` and its delta-method standard error (0 if not ``mc``).

    Parameters
    ----------
    S : ndarray
        Per-sample ``S`` (or conditional expectations).
    Q : ndarray
        Per-sample ``|s|²``.
    q : int
        Number of selected tokens.
    w : ndarray or None
        Weights summing to 1 (None: equal).
    mc : bool
        Whether the samples are Monte Carlo (else the SE is 0).
    """
    S, Q = np.asarray(S, float), np.asarray(Q, float)
    w = np.full(len(S), 1.0 / len(S)) if w is None else np.asarray(w, float)
    ES, EQ = w @ S, w @ Q
    rel = 1.0 - ES * ES / (q * EQ)
    if not mc or len(S) < 2:
        return float(rel), 0.0
    gS, gQ = -2.0 * ES / (q * EQ), ES * ES / (q * EQ * EQ)
    z = gS * (S - ES) + gQ * (Q - EQ)
    return float(rel), float(np.sqrt(w @ (z * z) / (len(S) - 1)))


def large_T_rel(a, T, d_e, G, w, mc, *, method="exact", mgf="exact", query="sum",
                n_nodes=64, diagnostics=True):
    """``dict(rel, se, margin, rem)`` at ``W_ee = a I`` with the best γ, from a Gram rule.

    ``margin``/``rem``: the weighted 5% quantile over the Gram samples (the worst typical).

    Parameters
    ----------
    a, T, d_e, G, method, mgf, query, n_nodes
        As for :func:`conditional_moments` (``G`` from
        :func:`stsim.theory.sphere_law.gram_rule`).
    w : ndarray
        The weights of ``G``.
    mc : bool
        Whether ``G`` is a Monte-Carlo sample.
    diagnostics : bool
        Whether to return ``margin`` and ``rem`` (else nan).
    """
    o = conditional_moments(a, T, d_e, G, method=method, mgf=mgf, query=query,
                            n_nodes=n_nodes, diagnostics=diagnostics)
    rel, se = rel_and_se(o["S"], o["Q"], G.shape[1], w, mc)
    nan = float("nan")
    return {"rel": rel, "se": se, "gamma": float((w @ o["S"]) / (G.shape[1] * (w @ o["Q"]))),
            "margin": _wquant(o["margin"], w, 0.05) if diagnostics else nan,
            "rem": _wquant(o["rem"], w, 0.05) if diagnostics else nan}


def _wquant(x, w, p):
    i = np.argsort(x)
    return float(x[i][np.searchsorted(np.cumsum(w[i]), p)])
