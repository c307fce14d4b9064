"""Tests of the two-scalar reduction (stsim.theory.reduced): closed forms against Monte-Carlo of
the independent minibatch model, finite differences, the OOD floor."""
import numpy as np
import pytest

from stsim import PEBatch, check_grad, forward_backward, sample_batch
from stsim.theory.reduced import (gradient_flow, ood_floor_onehot, ood_loss_onehot, reduced_gd,
                           reduced_gd_scalar, reduced_loss, reduced_loss_grad)


def embed(a, gamma, T, d, d_e, n=None):
    """Full matrices of the reduced point: W_ee = a(I_n − J_n/n) on the first n slots."""
    from stsim.theory.checks import embed_reduced
    return embed_reduced(a, gamma, d, d_e, T if n is None else n)


def mc_loss(W, V, T, q, d, d_e, rng, batches=20, B=2000, query="sum"):
    """Monte-Carlo population loss of the minibatch model (one-hot PE), mean and s.e."""
    pe = PEBatch(d_e=d_e, idx=np.arange(T))
    vals = []
    for _ in range(batches):
        b = sample_batch(rng, B, T, q, d)
        vals.append(forward_backward(W, V, b.X, b.y, pe, query=query, need_grad=False)[0])
    return np.mean(vals), np.std(vals, ddof=1) / np.sqrt(batches)


def test_zero_init_loss_and_limits():
    assert reduced_loss(0.0, 0.0, 8, 2, 3) == pytest.approx(3 / 4, rel=1e-15)   # d/(2q)
    assert reduced_loss(200.0, 1.0, 8, 2, 3) < 1e-80                             # a→∞, γ=1
    # no overflow for huge |a|: a → −∞ puts all attention on the T − q unselected tokens
    L = reduced_loss(np.array([-1e4, 1e4]), 1.0, 8, 2, 3)
    assert np.all(np.isfinite(L))
    assert L[0] == pytest.approx(0.5 * 3 * (1 / 2 + 6 / 36), rel=1e-12)


@pytest.mark.parametrize("query", ["sum", "mean"])
def test_reduced_loss_matches_minibatch_monte_carlo(query):
    T, q, d, a, gamma = 8, 2, 3, 1.3, 0.7
    rng = np.random.default_rng(5)
    W, V = embed(a, gamma, T, d, T)
    mc, se = mc_loss(W, V, T, q, d, T, rng, query=query)
    L = float(reduced_loss(a, gamma, T, q, d, query=query))
    assert abs(mc - L) < 4 * se, (mc, se, L)
    assert se < 0.01 * L                      # the check has teeth


@pytest.mark.parametrize("query", ["sum", "mean"])
def test_reduced_gradient_finite_differences(query):
    rng = np.random.default_rng(0)
    for a, g in [(0.0, 0.0), (0.7, 1.4), (3.0, 0.9), (-2.0, 0.3)]:
        def f(ps):
            L, da, dg = reduced_loss_grad(ps[0], ps[1], 12, 3, 4, query=query)
            return float(L), [np.asarray(da), np.asarray(dg)]
        check_grad(f, [np.array(a), np.array(g)], rng, n_dirs=4, rtol=1e-7)


def test_scalar_and_vector_maps_agree():
    kw = dict(pe="stochastic", d_e=20, query="sum", record_every=37)
    v = reduced_gd(12, 3, 4, 0.05, 1000, **kw)
    s = reduced_gd_scalar(12, 3, 4, 0.05, 1000, **kw)
    np.testing.assert_array_equal(v.step, s.step)
    for x, y in [(v.a, s.a), (v.gamma, s.gamma), (v.loss, s.loss)]:
        np.testing.assert_allclose(x, y, rtol=1e-13, atol=0)


def test_grid_equals_separate_runs():
    T = np.array([8, 20, 50])
    lr = np.array([0.5, 0.1, 0.02])
    grid = reduced_gd(T, 2, 3, lr, 300, record_every=100)
    for k in range(3):
        one = reduced_gd(int(T[k]), 2, 3, float(lr[k]), 300, record_every=100)
        np.testing.assert_allclose(grid.loss[k], one.loss[0], rtol=1e-15)


def _floor_by_counting(T, Tt, q, d):
    """The a → ∞ floor written independently: m of the q selected positions fall in the
    trained range with probability C(T, m) C(Tt − T, q − m) / C(Tt, q); attention is then
    uniform on those m (loss ½ d (q − m)/(q m)), or on all Tt tokens when m = 0 (loss
    ½ d (1/q − 1/Tt): target variance d/q, prediction the mean of Tt tokens)."""
    from math import comb
    total = 0.0
    for m in range(q + 1):
        p = comb(T, m) * comb(Tt - T, q - m) / comb(Tt, q)
        total += p * (0.5 * d * ((q - m) / (q * m)) if m else 0.5 * d * (1 / q - 1 / Tt))
    return total


def test_ood_floor_spec_numbers():
    # the reference values 0.326 (T_test=250) and 0.587 (300) write the m = 0 term as d/q;
    # the exact term is ½ d (1/q − 1/T_test) (Monte-Carlo below and in the next tests)
    for Tt in (250, 300, 400):
        assert ood_floor_onehot(200, Tt, 3, 5) == pytest.approx(
            _floor_by_counting(200, Tt, 3, 5), rel=1e-12)
    assert ood_floor_onehot(200, 250, 3, 5) == pytest.approx(0.326, abs=5e-4)
    assert ood_floor_onehot(200, 300, 3, 5) == pytest.approx(0.587, abs=1e-3)
    assert ood_floor_onehot(200, 200, 3, 5) == 0.0
    # finite-(a, γ) exact OOD loss tends to the floor
    assert float(ood_loss_onehot(80.0, 1.0, 200, 300, 3, 5)) == pytest.approx(
        ood_floor_onehot(200, 300, 3, 5), rel=1e-12)
    # at T_test = T it is the in-distribution reduced loss
    assert float(ood_loss_onehot(2.0, 0.8, 12, 12, 3, 4)) == pytest.approx(
        float(reduced_loss(2.0, 0.8, 12, 3, 4)), rel=1e-13)


def test_ood_floor_matches_monte_carlo_where_m0_term_matters():
    # T=4, T_test=12, q=2: P(m=0) = 28/66, so the m = 0 term (uniform attention over all
    # T_test tokens) is a large part of the floor; written d/q it would be 0.088 higher.
    T, Tt, q, d, a = 4, 12, 2, 5, 60.0
    W, V = embed(a, 1.0, T, d, Tt)
    mc, se = mc_loss(W, V, Tt, q, d, Tt, np.random.default_rng(3), batches=20, B=5000)
    floor = ood_floor_onehot(T, Tt, q, d)
    assert abs(mc - floor) < 4 * se, (mc, se, floor)
    assert 0.5 * d * (28 / 66) / Tt > 10 * se


@pytest.mark.parametrize("Tt", [250, 300])
def test_ood_floor_matches_monte_carlo_T200(Tt):
    T, q, d = 200, 3, 5
    W, V = embed(60.0, 1.0, T, d, Tt)
    mc, se = mc_loss(W, V, Tt, q, d, Tt, np.random.default_rng(4), batches=10, B=1000)
    floor = ood_floor_onehot(T, Tt, q, d)
    assert abs(mc - floor) < 4 * se, (mc, se, floor)


def test_bad_input():
    with pytest.raises(ValueError, match="T_test"):
        ood_floor_onehot(200, 100, 3, 5)
    with pytest.raises(ValueError, match="q"):
        reduced_loss(0.0, 0.0, 4, 5, 3)
    with pytest.raises(ValueError, match="lr"):
        reduced_gd(8, 2, 3, -1.0, 10)
    with pytest.raises(ValueError, match="pe"):
        reduced_gd(8, 2, 3, 0.1, 10, pe="sphere")


def test_monotone_trackers_see_every_step():
    tr = reduced_gd([8, 50], 2, 3, [0.5, 0.5], 3000, record_every=1000)
    ts = reduced_gd_scalar(8, 2, 3, 0.5, 3000, record_every=1000)
    assert np.all(tr.max_loss_increase <= 0) and np.all(tr.min_a_increment >= 0)
    assert ts.max_loss_increase[0] == pytest.approx(tr.max_loss_increase[0], rel=1e-10)
    # a huge step makes GD overshoot: the tracker must notice the loss going up
    bad = reduced_gd(8, 2, 3, 60.0, 50)
    assert bad.max_loss_increase[0] > 0


def test_small_step_gd_tracks_gradient_flow_linearly_in_eta():
    """|GD(k) − flow(ηk)| = O(η): halving η halves the error (first-order Euler)."""
    tau = np.linspace(0.0, 40.0, 81)
    flow = gradient_flow([8, 20], 2, 3, tau)
    errs = []
    for eta in (0.05, 0.025, 0.0125):
        k = int(round(40 / eta))
        gd = reduced_gd([8, 20], 2, 3, eta, k, record_every=int(round(0.5 / eta)))
        np.testing.assert_allclose(gd.step * eta, tau, rtol=1e-12)
        errs.append(np.abs(gd.loss - flow.loss).max(axis=1))
    ratios = np.array(errs[:-1]) / np.array(errs[1:])
    assert np.all(np.abs(ratios - 2.0) < 0.1), ratios
    assert np.all(errs[-1] < 1e-3)


def test_gradient_flow_grid_and_limits():
    tau = np.array([0.0, 1.0, 10.0])
    grid = gradient_flow([8, 12], [2, 3], 3, tau)
    one = gradient_flow(12, 3, 3, tau)
    np.testing.assert_allclose(grid.loss[1], one.loss[0], rtol=1e-8)
    # t = 0: zero init, L(0) = d/(2q)
    assert np.all(grid.loss[:, 0] == pytest.approx(3 / np.array([4, 6])))
    # t → ∞: a → ∞, L → 0 at the rate 1/L ≈ 4τ/(T − 1) (slope over a late window), and
    # γ returns to 1 from above as γ ≈ 1 + (T − q)/(q eᵃ)
    # (the late flow is stiff — γ relaxes in O(1) while a creeps like log τ — so the explicit
    # default DOP853 is held to O(1) steps by stability: 56 000 right-hand sides to τ = 4e4,
    # 4 s. LSODA switches to an implicit method and gives the same states, to 2e-9 relative
    # at the default rtol/atol, in 0.3 s; the flow and its right-hand side are the same.)
    late = np.linspace(2e4, 4e4, 5)
    fl = gradient_flow([8, 12], [2, 3], 3, np.concatenate([[0.0], late]), method="LSODA")
    assert np.all(np.diff(fl.a, axis=1) > 0) and np.all(fl.loss[:, -1] < 1e-4)
    T, q = np.array([8, 12]), np.array([2, 3])
    np.testing.assert_allclose(fl.gamma[:, -1] - 1, (T - q) / (q * np.exp(fl.a[:, -1])),
                               rtol=0.02)
    slope = np.polyfit(late, 1.0 / fl.loss[0, 1:], 1)[0]
    assert slope == pytest.approx(4 / 7, rel=0.02)


@pytest.mark.parametrize("T", [50, 200])
def test_rate_law_inverse_loss_slope(T):
    """1/L(t) ≈ 4ηt/(T−1): fitted slope on the second half of 10⁶ steps, η = 0.5."""
    eta, steps = 0.5, 10 ** 6
    tr = reduced_gd_scalar(T, 3, 5, eta, steps, record_every=1000)
    half = tr.step.size // 2
    slope = np.polyfit(tr.step[half:], 1.0 / tr.loss[0, half:], 1)[0]
    assert abs(slope / (4 * eta / (T - 1)) - 1.0) < 0.01


def test_onehot_ood_loss_is_finite_for_any_logit_size():
    """With m = 0 selected tokens in the trained block the selected-trained group is empty:
    shifting the logits by its c·a underflowed every weight (0/0 = NaN for c·a > ~745).
    The loss reaches its floor instead, and is unchanged where it was finite."""
    from stsim.theory.reduced import ood_floor_onehot, ood_loss_onehot
    big = ood_loss_onehot(np.array([800.0, 5000.0]), 1.0, 200, 250, 3, 5)
    np.testing.assert_allclose(big, ood_floor_onehot(200, 250, 3, 5), rtol=1e-12)
    assert np.isfinite(ood_loss_onehot(-900.0, 1.0, 200, 250, 3, 5))
    np.testing.assert_allclose(ood_loss_onehot(np.array([1.0, 2.0]), np.array([0.5, 1.0]),
                                               20, 30, 3, 5), [0.70088592, 0.42823729],
                               rtol=1e-7)


def _record_by_hand(T, q, d, lr, n, steps, every, **kw):
    """What stsim.core.reduced.reduced_map_record must return, from the whole trajectory
    of reduced_map kept in memory."""
    import itertools

    from stsim.core.reduced import reduced_map
    states = list(itertools.islice(reduced_map(T, q, d, lr, n, **kw), steps + 1))
    shape = np.shape(states[-1][0])                 # a0 = 0.0 is a scalar with arrays
    L, a, _, g = (np.array([np.broadcast_to(v, shape) for v in x]) for x in zip(*states))
    rec = np.unique(np.r_[np.arange(0, steps + 1, every), steps])
    return rec, a[rec].T, g[rec].T, L[rec].T, np.diff(L, axis=0).max(axis=0), \
        np.diff(a, axis=0).min(axis=0), a.min(axis=0), g.min(axis=0), g.max(axis=0)


def _same(got, want):
    return len(got) == len(want) and all(np.array_equal(x, y) for x, y in zip(got, want))


@pytest.mark.parametrize("T", [200, np.array([20.0, 200.0])])
def test_map_record_is_the_map_at_the_recorded_steps(T, monkeypatch):
    """reduced_map_record (floats, or an array of settings): the states of reduced_map at
    every record_every-th step and the last, and the trackers over every step (the
    increments, the extremes of a and gamma) — bit for bit; with the step per block and
    the practical model too. Seeded fault: the recording
    fed a trajectory one step late is caught."""
    import stsim.core.reduced as R
    cases = ((5.5, {}), ({"W": 80.0, "V": 5.0}, {"practical": True, "c": 1 / 3}))
    for lr, kw in cases:
        got = R.reduced_map_record(T, 3, 5, lr, 400, 1000, record_every=300, **kw)
        np.testing.assert_array_equal(got[0], [0, 300, 600, 900, 1000])
        assert _same(got, _record_by_hand(T, 3, 5, lr, 400, 1000, 300, **kw))
    real = R.reduced_map

    def late(*a, **k):
        states = real(*a, **k)
        next(states)
        return states
    monkeypatch.setattr(R, "reduced_map", late)
    for lr, kw in cases:
        got = R.reduced_map_record(T, 3, 5, lr, 400, 1000, record_every=300, **kw)
        monkeypatch.setattr(R, "reduced_map", real)
        assert not _same(got, _record_by_hand(T, 3, 5, lr, 400, 1000, 300, **kw))
        monkeypatch.setattr(R, "reduced_map", late)
