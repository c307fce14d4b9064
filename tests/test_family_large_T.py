"""The family at large T (stsim.theory.sphere_law, family_asymptotic, family_width) against
independent computations: the Beta law's moments, scipy's Gauss–Jacobi rule, explicit
sphere vectors, draws of the unselected tokens given the same selected encodings, the
Monte-Carlo family of stsim.theory.family, and the population objective.  Each check is
also run on a seeded fault and seen to fail."""
import math

import numpy as np
import pytest
from scipy.special import roots_jacobi

from stsim.theory import family_asymptotic as fa
from stsim.theory import family_width as fw
from stsim.theory import sphere_law as sl
from stsim.theory.family import sample_scores


# ---- the law of t and of the selected Gram matrix -------------------------------------------
def _moment_errors(d_e, n_nodes=64):
    t, w = sl.sphere_nodes(d_e, n_nodes)
    exact = (1.0 / d_e, 3.0 / (d_e * (d_e + 2)), 15.0 / (d_e * (d_e + 2) * (d_e + 4)))
    return [abs(w @ t ** (2 * k + 2) / e - 1) for k, e in enumerate(exact)]


def test_sphere_nodes_match_scipy_and_the_beta_moments():
    for d_e in (2, 3, 8, 23, 181):
        t, w = sl.sphere_nodes(d_e, 48)
        x, v = roots_jacobi(48, (d_e - 3) / 2, (d_e - 3) / 2)
        assert np.allclose(np.sort(t), np.sort(x), atol=1e-12)
        assert np.allclose(w[np.argsort(t)], (v / v.sum())[np.argsort(x)], atol=1e-12)
    for d_e in (2, 5, 4096, 65536):         # scipy's roots_jacobi gives nan beyond ~2000
        assert max(_moment_errors(d_e)) < 1e-9


def test_sphere_nodes_check_fails_on_a_wrong_first_recurrence_coefficient(monkeypatch):
    import scipy.linalg                 # the rule imports it when it first builds nodes
    orig = scipy.linalg.eigh_tridiagonal

    def faulty(d, e, *a, **k):
        e = np.array(e)
        e[0] *= 1.05
        return orig(d, e, *a, **k)
    sl._nodes.cache_clear()
    monkeypatch.setattr(scipy.linalg, "eigh_tridiagonal", faulty)
    try:
        assert max(_moment_errors(4096)) > 1e-3
    finally:
        sl._nodes.cache_clear()


def test_log_sphere_mgf_against_quadrature_series_and_asymptote():
    for d_e in (2, 5, 32, 500):
        t, w = sl.sphere_nodes(d_e, 128)
        for lam in (0.5, 5.0, 40.0):
            assert sl.log_sphere_mgf(lam, d_e) == pytest.approx(np.log(w @ np.exp(lam * t)),
                                                                 rel=1e-10, abs=1e-12)
    lam, d_e = 0.3, 5                       # ln M = λ²/(2d_e) − λ⁴/(4 d_e²(d_e+2)) + O(λ⁶)
    assert sl.log_sphere_mgf(lam, d_e) - lam ** 2 / (2 * d_e) == pytest.approx(
        -lam ** 4 / (4 * d_e ** 2 * (d_e + 2)), rel=2e-2)
    # beyond hyp0f1's range (λ > 709) the Bessel branch, against the large-λ expansion
    # ln M = ln Γ(ν+1) − ν ln(λ/2) + λ − ½ ln(2πλ) + ln(1 − (4ν² − 1)/(8λ)) + O(λ⁻²), ν = 1
    for lam in (1500.0, 3000.0):
        ref = math.lgamma(2.0) - math.log(lam / 2) + lam - 0.5 * math.log(2 * math.pi * lam) \
            + math.log1p(-3 / (8 * lam))
        assert sl.log_sphere_mgf(lam, 4) == pytest.approx(ref, abs=1e-6)
    x = np.array([700.0, 705.0, 710.0, 715.0, 720.0])     # smooth across the switch
    assert np.max(np.abs(np.diff(sl.log_sphere_mgf(x, 40), 2))) < 1e-2
    # the Gaussian form holds for 4λ⁴ ≪ d_e³ and fails for 4λ⁴ ≫ d_e³
    assert sl.log_sphere_mgf(3.0, 400) == pytest.approx(sl.log_gauss_mgf(3.0, 400), rel=1e-3)
    assert sl.log_sphere_mgf(40.0, 32) < 0.7 * sl.log_gauss_mgf(40.0, 32)


def _gram_moment_z(G, d_e):
    """z-scores of E ε², E ε⁴ and E[ε12 ε13 ε23] against 1/d_e, 3/(d_e(d_e+2)), 1/d_e²."""
    e12, e13, e23 = G[:, 0, 1], G[:, 0, 2], G[:, 1, 2]
    out = []
    for x, ref in ((e12 ** 2, 1 / d_e), (e13 ** 4, 3 / (d_e * (d_e + 2))),
                   (e12 * e13 * e23, 1 / d_e ** 2)):
        out.append((x.mean() - ref) / (x.std() / math.sqrt(len(x))))
    return out


def test_selected_gram_has_the_law_of_explicit_sphere_vectors():
    for d_e in (2, 6, 40):                  # d_e = 2 < q: explicit vectors; else Bartlett
        G = sl.selected_gram(3, d_e, 200000, 1)
        assert np.allclose(np.einsum("nii->ni", G), 1.0)
        assert max(abs(z) for z in _gram_moment_z(G, d_e)) < 4


def test_gram_check_fails_on_a_wrong_bartlett_degree(monkeypatch):
    make = np.random.default_rng

    class Faulty:                           # χ²(d_e − i + 2): two degrees too many per row
        def __init__(self, rng):
            self.g = make(rng)

        def chisquare(self, df, n):
            return self.g.chisquare(df + 2, n)

        def standard_normal(self, shape):
            return self.g.standard_normal(shape)
    monkeypatch.setattr(sl.np.random, "default_rng", lambda rng: Faulty(rng))
    G = sl.selected_gram(3, 6, 200000, 1)
    assert max(abs(z) for z in _gram_moment_z(G, 6)) > 6


# ---- the exact reduction and the mean field against draws ------------------------------------
def _paired_z(a, T, d_e, G, method, seed=7):
    """(rel of the formula, rel of drawn unselected tokens on the same G, z of the difference)."""
    q = G.shape[1]
    o = fa.conditional_moments(a, T, d_e, G, method=method, diagnostics=False)
    S, Q = fa.family_mc_moments(a, sl.draw_scores(T, d_e, G, seed), q)

    def infl(S, Q):
        ES, EQ = S.mean(), Q.mean()
        return -2 * ES / (q * EQ) * (S - ES) + ES * ES / (q * EQ * EQ) * (Q - EQ)
    r_f, r_d = fa.rel_and_se(o["S"], o["Q"], q)[0], fa.rel_and_se(S, Q, q)[0]
    se = np.std(infl(S, Q) - infl(o["S"], o["Q"])) / math.sqrt(len(S))
    return r_f, r_d, (r_d - r_f) / se


CASES = [(2, 256, 16, 8.0), (2, 1024, 23, 16.0), (3, 64, 16, 4.0), (4, 512, 64, 6.0)]


@pytest.mark.parametrize("q,T,d_e,a", CASES)
def test_exact_reduction_matches_drawn_unselected_tokens(q, T, d_e, a):
    G = sl.selected_gram(q, d_e, 4096, q)
    _, _, z = _paired_z(a, T, d_e, G, "exact")
    assert abs(z) < 3


def test_exact_reduction_check_fails_without_the_unselected_second_moment(monkeypatch):
    orig = fa._laplace

    def faulty(la, la2, lam, lD, N, t, w, du):
        """Drop N ψ φ^{N−1} from E[|s|² | G]: with ln A₂ → −∞ only that term is left."""
        S, Q = orig(la, la2, lam, lD, N, t, w, du)
        _, Q_psi = orig(la, np.full_like(la2, -800.0), lam, lD, N, t, w, du)
        return S, Q - Q_psi
    monkeypatch.setattr(fa, "_laplace", faulty)
    G = sl.selected_gram(2, 16, 4096, 2)
    assert abs(_paired_z(8.0, 256, 16, G, "exact")[2]) > 5


# ---- against the Monte-Carlo family (stsim.theory.family) ------------------------------------
def _vs_family_mc(q, T, d_e, a, method, n_mc=None, seed=11):
    """(large-T rel, its diagnostics, Monte-Carlo rel, z) at fixed a (no optimiser bias)."""
    G, w, mc = sl.gram_rule(q, d_e, 8192 if method == "mean" else 2048, 0)
    r = fa.large_T_rel(a, T, d_e, G, w, mc, method=method)
    n_mc = n_mc or max(2 ** 21 // T, 1024)
    S, Q = fa.family_mc_moments(a, sample_scores(T, q, d_e, n_mc, seed), q)
    m, s = fa.rel_and_se(S, Q, q)
    return r, m, (m - r["rel"]) / math.hypot(s, r["se"])


AGREE = [(2, 64, 16, 11.4, "exact"), (2, 4096, 32, 26.0, "exact"), (3, 64, 45, 3.7, "exact"),
         (3, 64, 45, 3.7, "mean"), (3, 1024, 128, 6.6, "mean"), (3, 4096, 181, 8.5, "mean"),
         (4, 512, 110, 4.0, "mean"), (4, 4096, 256, 5.4, "mean"), (2, 4096, 32, 6.0, "mean")]


@pytest.mark.parametrize("q,T,d_e,a,method", AGREE)
def test_large_T_loss_matches_the_family_monte_carlo(q, T, d_e, a, method):
    r, m, z = _vs_family_mc(q, T, d_e, a, method)
    if method == "mean":                    # the stated conditions hold here
        assert r["margin"] > 3 and r["rem"] > 3
    assert abs(z) < 3


def test_family_comparison_fails_with_a_fixed_query_norm(monkeypatch):
    orig = fa._selected

    def faulty(a, G, c):                    # |p_q| = √q instead of its law
        lA, lA2, lam = orig(a, G, c)
        return lA, lA2, np.full_like(lam, a * c * math.sqrt(G.shape[1]))
    monkeypatch.setattr(fa, "_selected", faulty)
    for case in (AGREE[0], AGREE[3], AGREE[6]):
        assert abs(_vs_family_mc(*case)[2]) > 3


@pytest.mark.parametrize("q,T,d_e,a", [(2, 4096, 23, 16.0), (2, 1024, 23, 12.0),
                                       (3, 16, 4, 8.0)])
def test_mean_field_breaks_down_where_its_conditions_fail(q, T, d_e, a):
    """margin < 1 (single tokens rival the denominator; here rem is small too): the mean
    field overestimates the loss by many SE, the exact reduction still agrees."""
    r, m, z = _vs_family_mc(q, T, d_e, a, "mean")
    assert r["margin"] < 1 and z < -5 and r["rel"] - m > 0.04
    assert abs(_vs_family_mc(q, T, d_e, a, "exact")[2]) < 3


def _d_free_check(wrap=lambda obj: obj):
    """L ∝ d (L0 = d/(2q)), so L/L0 does not depend on d: the population objective at
    d = 1 and 3, the same (a, γ), the same Monte-Carlo stream. ``wrap`` seeds a fault."""
    from stsim.theory.population import make_population_objective
    T, q, d_e, a, g = 16, 3, 8, 3.0, 1.2
    losses = []
    for d in (1, 3):
        obj = wrap(make_population_objective(dict(T=T, q=q, d=d, d_e=d_e, pe="stochastic",
                                                  sampler="sphere", query="sum",
                                                  model="theory"),
                                             method="mc", n_mc=2000, rng=5))
        W = np.zeros((d + d_e, d + d_e))
        W[d:, d:] = a * np.eye(d_e)
        V = np.zeros((d, d + d_e))
        V[:, :d] = g * np.eye(d)
        losses.append(obj.loss(W, V))
    assert losses[1] == pytest.approx(3 * losses[0], rel=1e-12)       # L ∝ d, L0 = d/(2q)
    assert losses[1] / (3 / (2 * q)) == pytest.approx(losses[0] / (1 / (2 * q)), rel=1e-12)


def test_loss_over_L0_is_d_free():
    _d_free_check()


def test_d_free_check_fails_on_a_loss_with_a_d_independent_term():
    class Offset:                  # seeded fault: a constant added to the population loss
        def __init__(self, obj):
            self.obj = obj

        def loss(self, W, V):
            return self.obj.loss(W, V) + 1e-3
    with pytest.raises(AssertionError):
        _d_free_check(Offset)


# ---- the decomposition, the optimum, the width ------------------------------------------------
def _mean_field_identity_check(terms=fa.mean_field_terms):
    """The three terms sum to the mean-field ``large_T_rel`` (an identity), each is ≥ 0,
    the spread vanishes exactly for q = 2; the branch follows E Y ≷ ½. ``terms`` seeds a
    fault."""
    for q, T, d_e, a in ((2, 4096, 27, 8.0), (3, 4096, 153, 8.6), (3, 2 ** 48, 2000, 18.0),
                         (4, 2 ** 20, 800, 12.0)):
        G, w, mc = sl.gram_rule(q, d_e, 4096, 0)
        t = terms(a, T, d_e, G, w)
        rel = fa.large_T_rel(a, T, d_e, G, w, mc, method="mean", diagnostics=False)["rel"]
        assert t["leak"] + t["spread"] + t["single"] == pytest.approx(t["rel"], abs=1e-12)
        assert t["rel"] == pytest.approx(rel, abs=1e-12)
        assert min(t["leak"], t["single"], t["spread"]) >= -1e-12
        assert (abs(t["spread"]) < 1e-12) == (q == 2)
    G, w, _ = sl.gram_rule(3, 2000, 4096, 0)
    assert terms(18.0, 2 ** 48, 2000, G, w)["branch"] == "bulk"
    assert terms(36.0, 2 ** 48, 2000, G, w)["branch"] == "selected"


def test_mean_field_terms_are_an_identity():
    _mean_field_identity_check()


@pytest.mark.parametrize("fault", ["spread dropped", "single at M(λ)", "branch at E Y > 0.95"])
def test_mean_field_identity_check_fails_on_seeded_faults(fault):
    def faulty(a, T, d_e, G, w):
        t = fa.mean_field_terms(a, T, d_e, G, w)
        if fault == "spread dropped":          # the unequal-logit term left out
            t["spread"] = 0.0
            t["rel"] = t["leak"] + t["single"]
        elif fault == "single at M(λ)":        # κ with M(λ) instead of M(2λ): a wrong term
            t["single"] *= 1.5
            t["rel"] = t["leak"] + t["spread"] + t["single"]
        else:                                  # a wrong branch threshold
            lA, _, lam = fa._selected(float(a), G, 1.0)       # E Y = 0.937 at a = 36
            Y = 1.0 / (1.0 + np.exp(math.log(T - G.shape[1]) + sl.log_sphere_mgf(lam, d_e) - lA))
            t["branch"] = "selected" if w @ Y > 0.95 else "bulk"
        return t
    with pytest.raises(AssertionError):
        _mean_field_identity_check(faulty)


def _spread_law_check():
    """F_q(β) = 0 for q = 2; its small-β expansion β²(q−1)(q−2)/q; β_s solves
    F_3(β_s) = target and β_b solves 1 − e^{−2β_b²} = target, the coefficients 1/β_s² and
    1/(4β_b²); the bulk branch's closed form 1 − e^{−(q−1)β²} against an independent
    Monte Carlo of Z ~ N(0, (q−2)I + J)."""
    assert fw.spread_loss(0.7, 2) == pytest.approx(0, abs=1e-12)
    for q in (3, 4):                       # small β: F_q ≈ β²(q−1)(q−2)/q (interference.py)
        assert fw.spread_loss(0.05, q) == pytest.approx(0.0025 * (q - 1) * (q - 2) / q, rel=0.05)
    c = fw.asymptotic_coefficients(3, 0.25, n=100000)
    assert fw.spread_loss(c["beta_s"], 3, 100000) == pytest.approx(0.25, abs=1e-6)
    assert 1 - math.exp(-2 * c["beta_b"] ** 2) == pytest.approx(0.25, rel=1e-12)
    assert c["selected"] == pytest.approx(1 / c["beta_s"] ** 2, rel=1e-12)
    assert c["bulk"] == pytest.approx(1 / (4 * c["beta_b"] ** 2), rel=1e-12)
    # bulk branch: 1 − (E Σ e^{βZ})² / (q E Σ e^{2βZ}) = 1 − e^{−(q−1)β²}
    q, b = 4, c["beta_b"]
    Z = np.random.default_rng(3).standard_normal((400000, q)) @ np.linalg.cholesky(
        (q - 2) * np.eye(q) + np.ones((q, q))).T
    mc = 1 - np.exp(b * Z).sum(1).mean() ** 2 / (q * np.exp(2 * b * Z).sum(1).mean())
    assert mc == pytest.approx(1 - math.exp(-(q - 1) * b * b), rel=0.01)
    assert fw.asymptotic_coefficients(2, 0.1) == {"log2T": 2.0}


def test_spread_loss_and_the_asymptotic_coefficients():
    _spread_law_check()


@pytest.mark.parametrize("fault", ["beta scaled", "beta_b off"])
def test_spread_law_check_fails_on_seeded_faults(monkeypatch, fault):
    spread = fw.spread_loss
    if fault == "beta scaled":                 # β off by 10% inside F_q
        monkeypatch.setattr(fw, "spread_loss", lambda b, q, n=200000, rng=0:
                            spread(1.1 * np.asarray(b, float), q, n, rng))
    else:                                      # the bulk branch's β_b off by 10%
        coeffs = fw.asymptotic_coefficients
        def faulty(q, target, n=400000, rng=0):
            c = coeffs(q, target, n, rng)
            if "beta_b" in c:
                c["beta_b"] *= 1.1
            return c
        monkeypatch.setattr(fw, "asymptotic_coefficients", faulty)
    with pytest.raises(AssertionError):
        _spread_law_check()


def test_best_loss_and_the_mean_query():
    s = fw.best_large_T_loss(3, 256, 67, method="mean", n_gram=4096)
    m = fw.best_large_T_loss(3, 256, 67, method="mean", n_gram=4096, query="mean")
    assert m["rel"] == pytest.approx(s["rel"], abs=1e-6)
    assert m["a"] == pytest.approx(3 * s["a"], rel=0.01)
    assert not s["at_bound"] and 0 < s["rel"] < 1
    G, w, mc = sl.gram_rule(3, 67, 4096, 0)
    for f in (0.9, 1.1):                    # a local minimum in a
        assert fa.large_T_rel(s["a"] * f, 256, 67, G, w, mc, method="mean")["rel"] > s["rel"]


@pytest.mark.parametrize("q,method", [(2, "exact"), (3, "mean")])
def test_width_is_the_smallest_passing_integer_and_fits_the_monte_carlo_crossing(q, method):
    T, tg = 64, 0.25
    r = fw.large_T_width(q, T, tg, method=method, n_gram=2048, n_grid=29, d_start=16)
    probes = dict((int(k), float(v)) for k, v in (p.split(":") for p in r["probes"].split()))
    assert r["rel"] <= tg < r["rel_below"] and r["d_e"] - 1 in probes   # both were probed
    assert probes[r["d_e"] - 1] == pytest.approx(r["rel_below"], abs=1e-4)
    # the Monte-Carlo family's located crossing (the widths library), one stage of 4096
    from stsim.studies import widths as wl
    x = wl.locate(wl.mechanism_loss("softmax", T, q), [tg], T, wl.family_key("softmax", T, q),
                  wl.Precision(replicates=2, se_rel=0.5, n_start=4096, n_max=4096), q=q)[tg]
    assert abs(r["d_e"] - x["d_e"]) <= 0.1 * x["d_e"] + 1, (r["d_e"], x)


def test_width_search_raises_on_a_non_monotone_loss(monkeypatch):
    fake = lambda q, T, d, **kw: {"rel": 0.5 if d in (9, 10) else (0.3 if d < 12 else 0.2),
                                  "se": 0.0, "a": 1.0, "margin": 5.0}
    monkeypatch.setattr(fw, "best_large_T_loss", fake)
    with pytest.raises(RuntimeError, match="not monotone"):
        fw.large_T_width(3, 64, 0.25, method="mean", d_start=8, step=1.25)


def test_bad_input_is_rejected():
    G, w, _ = sl.gram_rule(3, 8, 16, 0)
    for kw, msg in ((dict(method="laplace"), "method"), (dict(mgf="beta"), "mgf"),
                    (dict(query="max"), "query")):
        with pytest.raises(ValueError, match=msg):
            fa.conditional_moments(1.0, 16, 8, G, **kw)
    with pytest.raises(ValueError, match="q must be < T"):
        fa.conditional_moments(1.0, 3, 8, G)
    with pytest.raises(ValueError, match="d_e"):
        fw.best_large_T_loss(3, 16, 1)
    with pytest.raises(ValueError, match="target"):
        fw.large_T_width(3, 16, 1.5)
    with pytest.raises(ValueError, match="step"):
        fw.large_T_width(3, 16, 0.25, step=1.0)
    with pytest.raises(ValueError, match="n_nodes"):
        sl.sphere_nodes(8, 1)
    with pytest.raises(ValueError, match="q must be"):
        fw.spread_loss(0.5, 1)
