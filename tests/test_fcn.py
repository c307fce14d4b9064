"""FCN baseline: analytic gradients (float64 finite differences), input layout, init,
training through stsim.run, and its refusals."""
import numpy as np
import pytest

import stsim
from stsim.baselines.fcn import fcn_forward_backward, fcn_init, fcn_input, param_names
from stsim.core.gradcheck import check_grad
from stsim.core.task import sample_batch


def _fg(names, u, target):
    def f(ps):
        loss, grads = fcn_forward_backward(dict(zip(names, ps)), u, target)
        return loss, [grads[k] for k in names]
    return f


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_gradients_match_finite_differences(depth):
    rng = np.random.default_rng(depth)
    b = sample_batch(rng, B=7, T=5, q=2, d=3)
    u = fcn_input(b.X, b.y)
    # random read-out (not zero) so that every gradient block is nonzero
    params = fcn_init(rng, u.shape[1], 3, width=6, depth=depth, init="random", init_scale=0.5)
    params = {k: v + 0.1 * rng.standard_normal(v.shape) for k, v in params.items()}
    names = param_names(depth)
    assert sorted(names) == sorted(params)
    worst = check_grad(_fg(names, u, b.target), [params[k] for k in names], rng,
                       n_dirs=6, rtol=1e-6)
    assert worst < 1e-6
    # every block must carry gradient (a check that passes on zeros proves little)
    _, g = fcn_forward_backward(params, u, b.target)
    assert all(np.abs(g[k]).max() > 0 for k in names)


def test_gradcheck_detects_a_wrong_gradient():
    rng = np.random.default_rng(0)
    b = sample_batch(rng, B=5, T=4, q=2, d=2)
    u = fcn_input(b.X, b.y)
    params = fcn_init(rng, u.shape[1], 2, width=5, init="random", init_scale=0.5)
    names = param_names(1)

    def wrong(ps):
        loss, grads = _fg(names, u, b.target)(ps)
        grads[0] = 1.1 * grads[0]  # W1 off by 10%
        return loss, grads
    with pytest.raises(AssertionError):
        check_grad(wrong, [params[k] for k in names], rng, rtol=1e-6)


def test_input_layout_and_zero_init_loss():
    rng = np.random.default_rng(1)
    b = sample_batch(rng, B=4, T=6, q=3, d=2)
    u = fcn_input(b.X, b.y)
    assert u.shape == (4, 6 * 2 + 6)
    np.testing.assert_array_equal(u[:, :12], b.X.reshape(4, 12))  # token after token
    assert np.all(u[:, 12:].sum(axis=1) == 3)
    np.testing.assert_array_equal(np.sort(np.nonzero(u[2, 12:])[0]), np.sort(b.y[2]))
    p = fcn_init(rng, u.shape[1], 2, width=8)
    # zero read-out: f = 0, loss = mean ½|target|²
    loss, _ = fcn_forward_backward(p, u, b.target)
    assert loss == pytest.approx(0.5 * np.mean(np.sum(b.target ** 2, axis=1)))
    # He scaling of the hidden layer
    big = fcn_init(np.random.default_rng(2), 400, 2, width=400)
    assert np.var(big["W1"]) == pytest.approx(2 / 400, rel=0.02)


def test_run_fcn_learns_and_matches_initial_loss():
    res = stsim.run(T=6, q=2, d=2, arch="fcn", width=48, steps=400, batch=64,
                    optimizer="adam", lr=1e-2, n_val=512, seed=3)
    assert res.success and sorted(res.params) == ["A", "W1", "b1", "c"]
    v = res.history["val"]
    assert v[0] == pytest.approx(2 / (2 * 2), rel=0.15)  # zero function: d/(2q)
    assert v[-1] < 0.3 * v[0]
    assert res.info["n_in"] == 6 * 3 and res.info["arch"] == "fcn"


def test_run_fcn_is_reproducible_and_q_test():
    kw = dict(T=5, q=2, d=2, arch="fcn", width=8, depth=2, steps=20, batch=16, seed=4,
              q_test=(1, 3), optimizer="sgd", lr=0.05)
    a, b = stsim.run(**kw), stsim.run(**kw)
    assert set(a.history) >= {"val", "val/q=1", "val/q=3"}
    for k in a.history:
        np.testing.assert_array_equal(a.history[k], b.history[k])
    assert a.params["W2"].shape == (8, 8)


def test_fcn_refusals():
    with pytest.raises(ValueError, match="T_test"):
        stsim.run(T=5, q=2, arch="fcn", width=4, steps=1, T_test=(8,))
    with pytest.raises(ValueError, match="width"):
        stsim.run(T=5, q=2, arch="fcn", width=0, steps=1)
    with pytest.raises(ValueError, match="depth"):
        stsim.run(T=5, q=2, arch="fcn", width=4, depth=0, steps=1)
    rng = np.random.default_rng(0)
    p = fcn_init(rng, 10, 2, width=3)
    with pytest.raises(ValueError, match="u must have shape"):
        fcn_forward_backward(p, np.zeros((4, 11)), np.zeros((4, 2)))


def test_exact_construction_of_width_2Td():
    from stsim.baselines.fcn import fcn_construction
    rng = np.random.default_rng(5)
    b = sample_batch(rng, B=2000, T=7, q=3, d=2)
    u = fcn_input(b.X, b.y)
    p = fcn_construction(7, 2, 3, M=6.0)
    assert p["W1"].shape == (2 * 7 * 2, 7 * 3)
    loss, _ = fcn_forward_backward(p, u, b.target)
    assert loss < 1e-12
    # with a small M the unselected tails leak: the loss matches ½ d (T−q)/q² E[(|x|−M)₊²]
    M = 0.5
    loss, _ = fcn_forward_backward(fcn_construction(7, 2, 3, M=M), u, b.target)
    z = np.random.default_rng(6).standard_normal(2_000_000)
    pred = 0.5 * 2 * (7 - 3) / 9 * np.mean(np.maximum(np.abs(z) - M, 0) ** 2)
    assert loss == pytest.approx(pred, rel=0.1)
