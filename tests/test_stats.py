"""stsim.util.stats: the least-squares line, growth laws and the width search."""
import math

import numpy as np
import pytest

from stsim.util.stats import (WidthSearch, compare_growth, fit_linear, law_fit, power_law_fit,
                              smallest_passing)


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
    lin = law_fit(T, 3 * T + 2)
    assert (lin["a"], lin["b"], lin["rel_rms"]) == pytest.approx((3, 2, 0), abs=1e-9)
    assert law_fit([1], [1]) is None and law_fit([2, 2], [1, 3]) is None
    pw = power_law_fit(T, 5 * T ** 1.5)
    assert pw["a"] == pytest.approx(1.5) and 2 ** pw["b"] == pytest.approx(5)
    assert pw["residuals_ratio"] == pytest.approx([1] * 4)
    c = compare_growth(T, 4 * np.log2(T) + 1)
    assert c["better"] == "log" and c["log"]["a"] == pytest.approx(4)
    c = compare_growth(T, 2 * T, scale=3)            # linear in scale·T = 3T: a = 2/3
    assert c["better"] == "linear" and c["linear"]["a"] == pytest.approx(2 / 3)
    assert compare_growth(T[:2], T[:2], min_points=3) == {"linear": None, "log": None,
                                                         "power": None}


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
