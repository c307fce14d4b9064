"""stsim.util.stats: the least-squares line, growth laws and the width search."""
import math

import numpy as np
import pytest

from stsim.util.stats import (WidthSearch, bootstrap_threshold, compare_growth, fit_growth_law,
                              fit_linear, smallest_passing)


def test_fit_linear_matches_polyfit_and_a_known_interval():
    rng = np.random.default_rng(0)
    x = np.linspace(0, 10, 25)
    y = 2.5 * x - 1.0 + rng.normal(0, 0.3, x.size)
    f = fit_linear(x, y)
    slope, intercept = np.polyfit(x, y, 1)
    assert f.slope == pytest.approx(slope, rel=1e-12)
    assert f.intercept == pytest.approx(intercept, rel=1e-10)
    assert f.n == 25
    np.testing.assert_allclose(f.residuals, y - np.polyval([slope, intercept], x), atol=1e-12)
    # standard errors from polyfit's covariance (scaled by the residual variance)
    _, cov = np.polyfit(x, y, 1, cov="unscaled")
    s2 = float(np.sum(f.residuals ** 2)) / (x.size - 2)
    assert f.slope_se == pytest.approx(math.sqrt(cov[0, 0] * s2), rel=1e-9)
    assert f.intercept_se == pytest.approx(math.sqrt(cov[1, 1] * s2), rel=1e-9)
    r2 = 1 - np.sum(f.residuals ** 2) / np.sum((y - y.mean()) ** 2)
    assert f.r2 == pytest.approx(r2)


def test_fit_linear_confidence_interval_by_hand():
    # x = 0..3, y = (0, 1, 1, 3): slope 0.9, intercept −0.1, Σr² = 0.7 (worked by hand)
    f = fit_linear([0, 1, 2, 3], [0, 1, 1, 3])
    assert f.slope == pytest.approx(0.9)
    assert f.intercept == pytest.approx(-0.1)
    se = math.sqrt(0.7 / 2 / 5.0)                   # s² = 0.35, Sxx = 5
    assert f.slope_se == pytest.approx(se)
    t = 4.302652729911275                           # t_{0.975, 2}
    assert f.slope_ci == pytest.approx((0.9 - t * se, 0.9 + t * se))
    assert f.intercept_se == pytest.approx(math.sqrt(0.35 * (1 / 4 + 1.5 ** 2 / 5)))


def test_fit_linear_exact_line_and_errors():
    f = fit_linear([1, 2, 3, 4], [3, 5, 7, 9])
    assert (f.slope, f.intercept, f.r2) == pytest.approx((2.0, 1.0, 1.0))
    assert f.slope_ci[0] == pytest.approx(f.slope_ci[1])   # zero residual variance
    assert math.isnan(fit_linear([0, 1], [1, 3]).slope_se)  # no degree of freedom left
    with pytest.raises(ValueError, match="at least 2"):
        fit_linear([1], [1])
    with pytest.raises(ValueError, match="constant"):
        fit_linear([2, 2, 2], [1, 2, 3])


def test_growth_laws():
    T = np.array([8.0, 16, 32, 64])
    lin = fit_growth_law(T, 3 * T + 2, "linear")
    assert (lin["a"], lin["b"], lin["rel_rms"]) == pytest.approx((3, 2, 0), abs=1e-9)
    assert fit_growth_law([1], [1], "linear") is None
    assert fit_growth_law([2, 2], [1, 3], "linear") is None
    pw = fit_growth_law(T, 5 * T ** 1.5, "power")
    assert pw["a"] == pytest.approx(1.5) and 2 ** pw["b"] == pytest.approx(5)
    assert pw["residuals_ratio"] == pytest.approx([1] * 4)
    c = compare_growth(T, 4 * np.log2(T) + 1, rank_by="rel_rms")
    assert c["ranking"][0] == "log" and c["fits"]["log"]["a"] == pytest.approx(4)
    c = compare_growth(T, 2 * T, scale=3, rank_by="rel_rms")   # linear in 3T: a = 2/3
    assert c["ranking"][0] == "linear" and c["fits"]["linear"]["a"] == pytest.approx(2 / 3)
    assert compare_growth(T[:2], T[:2], min_points=3)["fits"] == {}
    with pytest.raises(ValueError, match="law must be one of"):
        fit_growth_law(T, T, "cubic")
    with pytest.raises(ValueError, match="weights must be one of"):
        fit_growth_law(T, T, "linear", weights="inverse")


def test_growth_law_weights_and_the_proportional_law():
    # relative weights: an outlier at the small end pulls an unweighted fit less than a
    # relative one (its relative error is large); the proportional law goes through 0
    T = np.array([1.0, 2, 4, 8, 16])
    y = 3 * T + 1
    y[0] = 8.0
    plain = fit_growth_law(T, y, "linear")
    rel = fit_growth_law(T, y, "linear", weights="relative")
    assert abs(plain["a"] - 3) < abs(rel["a"] - 3)
    r = y - (rel["a"] * T + rel["b"])
    np.testing.assert_allclose(rel["residuals"], r, atol=1e-12)
    assert rel["rel_rms"] == pytest.approx(np.sqrt(np.mean((r / y) ** 2)))
    assert rel["max_rel_residual"] == pytest.approx(np.max(np.abs(r) / y))
    np.testing.assert_allclose(rel["residuals_log2"], np.log2(y / (rel["a"] * T + rel["b"])))
    p = fit_growth_law(T, 2.5 * T, "proportional")
    assert p["a"] == pytest.approx(2.5) and p["b"] == 0 and p["max_rel_residual"] < 1e-12
    # censored points and ranking by the log residuals
    c = compare_growth([8, 16, 32, 64, 128], [6, 8, 10, 12, 99], censored=[0, 0, 0, 0, 1])
    assert c["censored_T"] == [128] and c["n_points"] == 4 and c["ranking"][0] == "log"


def test_bootstrap_threshold_binomial_redraws():
    """Binomial redraws: cells at 0/n or n/n never move, so the interval is the estimate;
    a middle cell spreads it; the generator is used, not copied (streams continue)."""
    grid = [16, 32, 64]

    def first(rates):
        i = next((k for k, r in enumerate(rates) if r >= 0.9), None)
        return None if i is None else grid[i]
    b = bootstrap_threshold(first, [0.0, 1.0, 1.0], resample="binomial", n=[10, 10, 10])
    assert b["estimate"] == 32 and b["lo"] == b["hi"] == 32 and b["frac_censored"] == 0
    b = bootstrap_threshold(first, [0.0, 0.9, 1.0], resample="binomial", n=[10, 10, 10])
    assert b["lo"] == 32 and b["hi"] == 64
    b = bootstrap_threshold(first, [0.0, 0.5, 0.8], resample="binomial", n=[10, 10, 10])
    assert b["estimate"] is None and b["censored"] and b["hi"] is None
    g = np.random.default_rng(5)
    a1 = bootstrap_threshold(first, [0.5, 0.85, 0.9], resample="binomial", n=[10] * 3,
                             n_boot=50, rng=g)
    a2 = bootstrap_threshold(first, [0.5, 0.85, 0.9], resample="binomial", n=[10] * 3,
                             n_boot=50, rng=g)
    a3 = bootstrap_threshold(first, [0.5, 0.85, 0.9], resample="binomial", n=[10] * 3,
                             n_boot=50, rng=5)
    assert a1["frac_censored"] == a3["frac_censored"] and a2["frac_censored"] != a1["frac_censored"]
    with pytest.raises(ValueError, match="needs n"):
        bootstrap_threshold(first, [0.5], resample="binomial")
    with pytest.raises(ValueError, match="resample must be one of"):
        bootstrap_threshold(first, [0.5], resample="jackknife")


def test_bootstrap_ends_are_the_2_5_percent_order_statistics():
    # the resample mean of continuous data: 2000 distinct draws, known from the seed
    data = np.random.default_rng(0).standard_normal((1, 40))
    b = bootstrap_threshold(lambda V: float(V.mean()), data, n_boot=2000, rng=3)
    g = np.random.default_rng(3)
    draws = np.sort([float(data[:, g.integers(0, 40, 40)].mean()) for _ in range(2000)])
    assert len(set(draws)) == 2000
    assert b["lo"] == draws[49] and b["hi"] == draws[1949]     # the 50th and the 1950th


def test_smallest_passing_on_a_synthetic_predicate():
    for target in (1, 2, 7, 8, 9, 100, 999, 1000):
        calls = []

        def passes(v):
            calls.append(v)
            return v >= target

        w, probes = smallest_passing(passes, 1, 1000, 8)
        assert w == target
        assert [v for v, _ in probes] == calls and len(set(calls)) == len(calls)
        assert all(ok == (v >= target) for v, ok in probes)
        assert (target - 1 in calls) or target == 1     # the boundary is pinned down
        assert len(probes) <= 2 * math.ceil(math.log2(1000)) + 1
    w, probes = smallest_passing(lambda v: False, 1, 100, 8)   # censored
    assert w is None and probes[-1] == (100, False)


def test_smallest_passing_relative_bracket():
    w, probes = smallest_passing(lambda v: v >= 3000, 1, 8192, 100, rel=0.02)
    assert 3000 <= w <= 3000 * 1.03
    failed = max(v for v, ok in probes if not ok)
    assert w - failed <= 0.02 * w


def test_width_search_on_a_grid_with_censoring_and_monotonicity():
    grid = [1, 2, 3, 4, 6, 8, 11, 16, 23, 32]
    for boundary in grid:
        s = WidthSearch(grid, start=8)
        w, probes = s.run(lambda v: v >= boundary)
        assert w == boundary and not s.censored
        i = grid.index(boundary)
        if i:
            assert (grid[i - 1], False) in probes
    s = WidthSearch(grid, start=8)
    assert s.run(lambda v: False) == (None, s.probes)
    assert s.censored and s.probes[-1] == (32, False)
    # steps of two grid places from the start until bracketed
    s = WidthSearch(grid, start=3)
    s.run(lambda v: v >= 23)
    assert [v for v, _ in s.probes][:4] == [3, 6, 11, 23]
    s = WidthSearch(grid, start=4)
    s.update(4, True)
    with pytest.raises(RuntimeError, match="non-monotone"):
        s.update(8, False)
    with pytest.raises(ValueError):
        WidthSearch([], 1)
