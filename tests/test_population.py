"""Tests of the population objective (stsim.theory.population): finite differences, agreement with
the independent minibatch model (Monte-Carlo over X, y), exact equality of full-matrix
population GD with the reduced (a, γ) map, invariants, bad input."""
import numpy as np
import pytest

import stsim
from stsim import check_grad, forward_backward, make_encoding, sample_batch
from stsim.theory.population import make_population_objective
from stsim.theory.reduced import reduced_gd
from stsim.core.run import Config


def objective(T, q, d, pe="onehot", **kw):
    opts = {k: kw.pop(k) for k in ("d_e", "sampler", "query", "model") if k in kw}
    cfg = Config.from_options(T=T, q=q, d=d, pe=pe, objective="population", optimizer="gd",
                              **opts)
    enc = make_encoding(cfg.pe, T_max=T, d_e=cfg.d_e, sampler=cfg.sampler,
                        rng=np.random.default_rng(11))
    return make_population_objective(cfg, enc, **kw), enc


def invariant_point(rng, d, d_e, scale=1.0):
    """Random W_ee, V_x and nonzero W_xx, W_ex (which must not matter); W_xe = V_e = 0."""
    D = d + d_e
    W = np.zeros((D, D))
    W[d:, d:] = scale * rng.standard_normal((d_e, d_e))
    W[:d, :d] = rng.standard_normal((d, d))
    W[d:, :d] = rng.standard_normal((d_e, d))
    V = np.zeros((d, D))
    V[:, :d] = np.eye(d) + 0.3 * rng.standard_normal((d, d))
    return W, V


CASES = [
    dict(T=6, q=2, d=3, pe="onehot"),
    dict(T=6, q=2, d=3, pe="onehot", query="mean"),
    dict(T=6, q=2, d=3, pe="onehot", model="practical"),
    dict(T=6, q=3, d=2, pe="onehot", d_e=8),                       # untrained slots 6, 7
    dict(T=5, q=2, d=3, pe="stochastic", d_e=7),
    dict(T=6, q=2, d=3, pe="stochastic", d_e=10, sampler="sphere", method="mc", n_mc=256),
    dict(T=6, q=2, d=3, pe="near-orthogonal", d_e=10, model="practical", query="mean"),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(str(v) for v in c.values()))
def test_population_gradient_finite_differences(case):
    pop, enc = objective(**case)
    d, d_e = case["d"], enc.d_e
    rng = np.random.default_rng(1)
    W0, V0 = invariant_point(rng, d, d_e)

    def f(ps):
        W, V = W0.copy(), V0.copy()
        W[d:, d:], V[:, :d] = ps
        L, dW, dV = pop.loss_grad(W, V)
        return L, [dW[d:, d:], dV[:, :d]]

    check_grad(f, [W0[d:, d:], V0[:, :d]], rng, n_dirs=6, rtol=1e-7)
    # the blocks off (W_ee, V_x) get exactly zero gradient
    _, dW, dV = pop.loss_grad(W0, V0)
    assert not np.any(dW[:d, :]) and not np.any(dW[:, :d]) and not np.any(dV[:, d:])


@pytest.mark.parametrize("case", [dict(pe="onehot", model="theory", query="sum"),
                                  dict(pe="onehot", model="practical", query="mean"),
                                  dict(pe="stochastic", model="theory", query="sum", d_e=7)])
def test_population_matches_minibatch_monte_carlo(case):
    """Independent check: the average of forward_backward over many (X, y, encodings) at an
    invariant-set point approaches the population loss and gradient, and its W_xe, V_e,
    W_xx, W_ex blocks shrink towards 0 (they are not set to 0 by construction there)."""
    T, q, d = 5, 2, 3
    pop, enc = objective(T, q, d, **case)
    d_e = enc.d_e
    rng = np.random.default_rng(7)
    W, V = invariant_point(rng, d, d_e, scale=0.8)
    L, dW, dV = pop.loss_grad(W, V)
    samples = []
    for _ in range(40):
        b = sample_batch(rng, 4000, T, q, d)
        pe = enc.sample(rng, 4000, T)
        l, gW, gV = forward_backward(W, V, b.X, b.y, pe, model=case["model"],
                                     query=case["query"], target=b.target)
        samples.append(np.concatenate([[l], gW.ravel(), gV.ravel()]))
    S = np.array(samples)
    mean, se = S.mean(0), S.std(0, ddof=1) / np.sqrt(len(S))
    pop_vec = np.concatenate([[L], dW.ravel(), dV.ravel()])
    z = np.abs(mean - pop_vec) / np.maximum(se, 1e-300)
    live = se > 0          # entries never touched by any sample have mean 0 = population 0
    assert np.all(z[live] < 5.5), (z.max(), np.argmax(z))
    # the invariant blocks of the minibatch gradient are pure noise around 0 ...
    gW = mean[1:1 + dW.size].reshape(dW.shape)
    gV = mean[1 + dW.size:].reshape(dV.shape)
    noise = max(np.abs(gW[:d, d:]).max(), np.abs(gV[:, d:]).max())
    # ... far below the size of the live gradient
    assert noise < 0.05 * max(np.abs(dW).max(), np.abs(dV).max())
    # W_xx, W_ex: exactly 0 per sample since x_query = 0
    assert not np.any(gW[:, :d])


@pytest.mark.parametrize("pe,kw", [("onehot", {}), ("stochastic", {"d_e": 9})])
def test_full_matrix_gd_equals_reduced_map(pe, kw):
    T, q, d, lr, steps = 8, 2, 3, 0.5, 2000
    res = stsim.run(T=T, q=q, pe=pe, d=d, objective="population", optimizer="gd", lr=lr,
                    steps=steps, eval_every=1, **kw)
    assert res.status == "completed"
    h = res.history
    tr = reduced_gd(T, q, d, lr, steps, pe=pe, d_e=kw.get("d_e"))
    np.testing.assert_array_equal(h["step"], tr.step)
    for key, ref in (("a", tr.a[0]), ("gamma", tr.gamma[0]), ("loss", tr.loss[0])):
        rel = np.abs(h[key] - ref) / np.maximum(np.abs(ref), 1e-300)
        assert rel[1:].max() <= 1e-10, (key, rel.max())
    # invariants at every step
    for key in ("inv/W_xx", "inv/W_xe", "inv/W_ex", "inv/V_e"):
        assert h[key].max() == 0.0
    assert h["inv/W_ee_offspan"].max() < 1e-12 * max(1.0, np.abs(h["a"]).max() * T)
    assert h["inv/V_x_offspan"].max() < 1e-13
    assert np.all(np.diff(h["loss"]) <= 0) and np.all(np.diff(h["a"]) >= 0)
    assert h["loss"][-1] < 0.01 * h["loss"][0]          # it actually learns


def test_population_loss_at_zero_is_d_over_2q():
    for case in CASES:
        pop, enc = objective(**case)
        D = case["d"] + enc.d_e
        assert pop.loss(np.zeros((D, D)), np.zeros((case["d"], D))) == pytest.approx(
            case["d"] / (2 * case["q"]), rel=1e-14)


def test_sphere_mc_is_seeded_and_converges_to_isotropic_gradient():
    kw = dict(pe="stochastic", sampler="sphere", d_e=10, method="mc")
    p1, _ = objective(6, 2, 3, n_mc=256, rng=5, **kw)
    p2, _ = objective(6, 2, 3, n_mc=256, rng=5, **kw)
    p3, _ = objective(6, 2, 3, n_mc=256, rng=6, **kw)
    D = 13
    W, V = np.zeros((D, D)), np.zeros((3, D))
    V[:, :3] = np.eye(3)
    g1, g2, g3 = (p.loss_grad(W, V)[1][3:, 3:] for p in (p1, p2, p3))
    np.testing.assert_array_equal(g1, g2)
    assert np.abs(g1 - g3).max() > 0
    # at W_ee = 0 the exact population gradient is ∝ I (rotation invariance); the MC
    # estimate's off-span part shrinks like n_mc^{-1/2}
    def off(g):
        return np.linalg.norm(g - np.trace(g) / 10 * np.eye(10)) / abs(np.trace(g))
    big, _ = objective(6, 2, 3, n_mc=16384, rng=5, **kw)
    ratio = off(g1) / off(big.loss_grad(W, V)[1][3:, 3:])
    assert 4.0 < ratio < 16.0, ratio           # sqrt(16384/256) = 8


def test_bad_input():
    pop, enc = objective(6, 2, 3)
    D = 9
    W, V = np.zeros((D, D)), np.zeros((3, D))
    W[0, 5] = 1e-3
    with pytest.raises(ValueError, match="invariant set"):
        pop.loss_grad(W, V)
    with pytest.raises(ValueError, match="shape|must be"):
        pop.loss_grad(np.zeros((4, 4)), V)
    with pytest.raises(ValueError, match="stsim.theory.reduced"):
        objective(40, 8, 3)                    # C(40, 8) = 7.7e7 subsets
    with pytest.raises(ValueError, match="invariant set"):
        stsim.run(T=6, q=2, pe="onehot", d=3, objective="population", optimizer="gd",
                  init="random", steps=2)
    with pytest.raises(ValueError, match="method"):
        objective(6, 2, 3, method="exact")
