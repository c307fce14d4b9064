r"""The (a, γ) family's loss at large T for the sphere PE: an exact T-free reduction and the
mean-field (concentration) approximation with its two conditions — derived, with the width
laws they imply and their checks, in docs/separation.md, "The family at large T".

Setting (:mod:`stsim.theory.family`): theory model, ``W_ee = a I``, ``V_x = γ I``, sphere
PE, sum query (the mean query rescales ``a`` to ``a/q``).  With ``s = softmax(a g)``,
``g_i = <p_i, p_q>``, ``S = Σ_{i∈y} s_i`` and the best ``γ* = E S/(q E|s|²)``,

    L/L0 = 1 − (E S)² / (q E|s|²).

Given the selected encodings' Gram matrix ``G``: the selected ``g_i = Σ_j G_ij``;
``r = (Σ_ij G_ij)^{1/2}``; each of the ``N = T − q`` unselected tokens has ``g_k = r t_k``,
``t_k`` i.i.d. with the law of :mod:`stsim.theory.sphere_law`.  With ``A = Σ_{i∈y} e^{a g_i}``,
``A₂ = Σ_{i∈y} e^{2a g_i}``, ``λ = a r``, ``X_k = e^{λ t_k}``, ``R = Σ_k X_k``,
``R₂ = Σ_k X_k²``::

    S = A/(A + R),      |s|² = (A₂ + R₂)/(A + R)².

**Exact** (``method="exact"``: Laplace, ``φ(σ) = E e^{−σX}``, ``ψ(σ) = E[X² e^{−σX}]``; a
Gauss rule for t and a trapezoid rule in ``ln σ``, a cost that does not depend on T)::

    E[S | G]   = ∫₀^∞ A e^{−σA} φ(σ)^N dσ,
    E[|s|²| G] = ∫₀^∞ σ e^{−σA} [A₂ φ(σ)^N + N ψ(σ) φ(σ)^{N−1}] dσ.

**Mean field** (``method="mean"``): ``R → N M(λ)``, ``R₂ → N M(2λ)``, ``M(λ) = E e^{λt}``
(:func:`~stsim.theory.sphere_law.log_sphere_mgf`; ``mgf="gauss"``: ``e^{λ²/(2d_e)}``).  It
holds where ``rem = ln N − ln M(2λ) + 2 ln M(λ) ≫ 0`` (R concentrates) and the margin
``μ = [ln D − λ m₁(2λ)] / (λ m₂(2λ)^{1/2}) ≫ 1`` (no single unselected token rivals
``D = A + N M(λ)``; ``m₁``, ``m₂``: the first two derivatives of ``ln M``).
"""
from __future__ import annotations

import math

import numpy as np

from stsim.core.model import query_coef
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
    T, d_e : int
        Sequence length, PE dimension.
    G : ndarray
        Gram matrices ``(n, q, q)`` of the selected encodings.
    method : str
        ``"exact"`` (Laplace, exact given G) or ``"mean"`` (mean field).
    mgf : str
        ``"exact"`` or ``"gauss"`` MGF in the mean field.
    query : str
        ``"sum"`` or ``"mean"``.
    n_nodes, du, chunk
        Of the exact method: Gauss nodes for t (int), the trapezoid step in ``ln σ``
        (float), Gram samples per block (int; memory ``chunk · n_σ · n_nodes``).
    diagnostics : bool
        Whether to compute ``margin`` and ``rem``.
    """
    q = G.shape[1]
    _check(q, T, d_e, method, mgf, query)
    c = query_coef(query, q)
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
    """The mean-field loss split into its three sources (an identity of the mean field).

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
    c = query_coef(query, q)
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
    g, q
        Scores ``(n, T)``, number of selected tokens.
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
    S, Q : ndarray
        Per-sample ``S`` and ``|s|²`` (or conditional expectations).
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
    w, mc
        The weights of ``G`` (ndarray), and whether ``G`` is a Monte-Carlo sample (bool).
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
