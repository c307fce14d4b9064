"""The exact side of other targets (stsim.theory.targets): a separable target's exact
population loss against Monte-Carlo of the model, full-matrix population GD by exact
quadrature over X against the exact objective and the reduced map at d -> dim phi, the
W_xe gradient of features with third moments, the variance's floor for linear readouts;
each check also shown failing on a seeded fault."""
import itertools
import math

import numpy as np
import pytest

import stsim
from stsim.core.encodings import PEBatch
from stsim.core.model import forward_backward
from stsim.core.reduced import reduced_map
from stsim.core.targets import Moment, Target, hermite
from stsim.core.task import sts_target
from stsim.theory.targets import (exact_objective, mean_task_dim, variance_linear_fit,
                                  variance_linear_floor)


class Pair(Target):
    """One's own separable target: the mean of ``φ = [h_1, h_2]`` (dim φ = 2d)."""

    name = "pair"
    separable = orthonormal = True

    def dim(self, d):
        return 2 * d

    feature_dim = dim

    def features(self, X):
        return np.concatenate([X, hermite(X, 2)], axis=2)

    def value(self, X, y):
        return sts_target(self.features(X), y)


class WrongMoment(Moment):
    """A seeded fault: features ``h_k`` but the value of ``h_{k−1}``."""

    def value(self, X, y):
        return sts_target(hermite(X, self.k - 1), y)


def _cfg(T, q, d, model="theory", query="sum"):
    return dict(T=T, q=q, d=d, d_e=T, pe="onehot", sampler="slots", query=query, model=model)


def _state(m, T, a, gamma, rng=None):
    """``W_ee = a (I − J/T)`` (or random), ``V_x = γ I`` (or random), the rest 0."""
    W, V = np.zeros((m + T, m + T)), np.zeros((m, m + T))
    W[m:, m:] = a * (np.eye(T) - 1.0 / T) if rng is None else rng.normal(0, a, (T, T))
    V[:, :m] = gamma * np.eye(m) if rng is None else rng.normal(0, gamma, (m, m))
    return W, V


def _quadrature(W, V, t, T, q, d, power, n=6, **kw):
    """``forward_backward`` on every Gauss–Hermite node of the T·d tokens (n per variable:
    exact for degree ≤ 2n − 1: the loss and gradients of moment:k have degree ≤ 3k)
    and every subset, the features and target of node b scaled by ``(N w_b)^(1/power)``:
    the batch mean is then the exact expectation of what is homogeneous of degree
    ``power`` in them (2: the loss, ∂/∂W_ee, ∂/∂V_x; 3: ∂/∂W_xe; 1: ∂/∂V_e), W_xe = 0."""
    x, w = np.polynomial.hermite_e.hermegauss(n)
    w = w / w.sum()
    grid = np.array(list(itertools.product(range(n), repeat=T * d)))
    Y = np.array(list(itertools.combinations(range(T), q)))
    X = np.repeat(x[grid].reshape(-1, T, d), len(Y), axis=0)
    wt = np.repeat(w[grid].prod(axis=1), len(Y)) / len(Y)
    y = np.tile(Y, (len(grid), 1))
    s = (len(wt) * wt) ** (1.0 / power)
    return forward_backward(W, V, t.features(X) * s[:, None, None], y,
                            PEBatch(d_e=T, idx=np.arange(T)), target=t.value(X, y) * s[:, None],
                            **kw)


def test_mean_task_dim_asks_the_object():
    assert mean_task_dim("moment:3", 4) == 4 and mean_task_dim(Pair(), 4) == 8
    for t, m in (("moment:2", 2), (Pair(), 4)):          # a resolved config: its target
        obj = exact_objective(stsim.Config(T=6, q=2, d=2, pe="onehot", target=t).resolve())
        assert (obj.d, obj.d_e, obj.N) == (m, 6, 15)
    for bad in ("variance", Target()):
        with pytest.raises(ValueError, match="target"):
            exact_objective(_cfg(5, 2, 2), target=bad)


def _mc_z(t, T, q, d, model, query, seed=0, n_batches=100, B=1000, fault=0.0):
    """``(MC mean − exact)/SE`` of the model's loss at a random point of the invariant set
    (``fault`` is added to the exact value)."""
    rng = np.random.default_rng(seed)
    m = t.feature_dim(d)
    W, V = _state(m, T, 0.8, 0.6, rng)
    exact = exact_objective(_cfg(T, q, d, model, query), target=t).loss(W, V) + fault
    pe = PEBatch(d_e=T, idx=np.arange(T))
    L = [forward_backward(W, V, b.X, b.y, pe, model=model, query=query, target=b.target,
                          need_grad=False)[0]
         for b in (t.draw(rng, B, T, q, d, features=True) for _ in range(n_batches))]
    return (np.mean(L) - exact) / (np.std(L, ddof=1) / math.sqrt(n_batches))


@pytest.mark.parametrize("t,model,query", [
    (Moment(2), "theory", "sum"), (Moment(3), "practical", "mean"), (Pair(), "theory", "sum"),
    (Pair(), "practical", "sum")])
def test_exact_loss_matches_monte_carlo(t, model, query):
    """The model's loss on the target's features, averaged over 10⁵ samples (T = 9, q = 3,
    d = 3, onehot), is the exact loss within 3 SE."""
    z = _mc_z(t, 9, 3, 3, model, query)
    assert abs(z) <= 3, z


def test_monte_carlo_check_fails_on_seeded_faults():
    """A target whose value is not the mean of its features (h_3 features, h_2 value), and
    the constant m/q of Pair left at d/q (d not replaced by dim φ): |z| > 3."""
    assert abs(_mc_z(WrongMoment(3), 9, 3, 3, "theory", "sum")) > 3
    assert abs(_mc_z(Pair(), 9, 3, 3, "theory", "sum", fault=-(6 - 3) / (2 * 3))) > 3


def _full_gd(t, d, model, query, steps, lr_W, lr_V, T=4, q=2):
    """Full-matrix population GD on W, V by exact quadrature (W's token rows held at 0, V_e
    checked to get no gradient), each step's loss also from the exact objective."""
    m = t.feature_dim(d)
    obj = exact_objective(_cfg(T, q, d, model, query), target=t)
    W, V = _state(m, T, 0.0, 0.0)
    out = []
    for _ in range(steps + 1):
        L, dW, dV = _quadrature(W, V, t, T, q, d, 2, model=model, query=query)
        Le, dWe, dVe = obj.loss_grad(W, V)
        dVe1 = _quadrature(W, V, t, T, q, d, 1, model=model, query=query)[2][:, m:]
        out.append((L, Le, np.abs(dW[m:, m:] - dWe[m:, m:]).max() / max(np.abs(dWe).max(), 1e-300),
                    np.abs(dV[:, :m] - dVe[:, :m]).max() / np.abs(dVe).max(),
                    np.abs(dVe1).max(), obj.metrics(W, V)))
        W[m:, m:] -= lr_W * dW[m:, m:]
        V[:, :m] -= lr_V * dV[:, :m]
    return m, out


@pytest.mark.parametrize("t,d,model,query", [(Moment(2), 1, "theory", "sum"),
                                             (Moment(3), 1, "practical", "mean"),
                                             (Pair(), 1, "theory", "sum"),
                                             (Pair(), 1, "practical", "sum")])
def test_full_matrix_population_gd_is_the_reduced_map_at_dim_phi(t, d, model, query):
    """Full-matrix population GD (exact quadrature of the model over X, every subset; T = 4,
    q = 2, onehot, 8 steps) equals GD on the exact objective and the reduced map at
    d = dim φ: loss, gradients, a and γ to 1e-12 relative; V_e gets no gradient."""
    m, out = _full_gd(t, d, model, query, 8, 5.0, 1.0)
    T, q, c = 4, 2, (0.5 if query == "mean" else 1.0)
    ref = reduced_map(T, q, m, {"W": 5.0, "V": 1.0}, T, c=c, practical=model == "practical")
    for (L, Le, rW, rV, ve, met), (Lr, a, b, g) in zip(out, ref):
        assert abs(L - Le) <= 1e-12 * Le and abs(L - Lr) <= 1e-12 * Lr, (L, Le, Lr)
        assert rV <= 1e-12 and (rW <= 1e-12 or not np.isfinite(rW)) and ve <= 1e-14
        assert abs(met["gamma"] - g) <= 1e-12 * max(abs(g), 1e-300)
        if model == "theory":
            assert abs(met["a"] - a) <= 1e-12 * max(abs(a), 1e-300)
    assert out[-1][0] < 0.9 * out[0][0]                         # it moved


def test_reduced_map_check_fails_at_the_wrong_d():
    """The same full-matrix trajectory of Pair against the reduced map at d instead of
    dim φ = 2d: off by far more than 1e-12."""
    m, out = _full_gd(Pair(), 1, "theory", "sum", 4, 5.0, 1.0)
    ref = reduced_map(4, 2, 1, {"W": 5.0, "V": 1.0}, 4)
    assert max(abs(o[0] - r[0]) / r[0] for o, r in zip(out, ref)) > 0.1


def _w_xe(k, T=4, q=2, a=1.5, gamma=0.7, kappa=None):
    """(quadrature ∂L/∂W_xe, its closed form γ κ σ (q/T) 1 1ᵀ) at W_ee = a(I − J/T),
    V_x = γ I (theory model, sum query, d = 1); κ = E h_k³ unless given."""
    t = Moment(k)
    W, V = _state(1, T, a, gamma)
    dW = _quadrature(W, V, t, T, q, 1, 3, n=(3 * k + 2) // 2)[1]       # degree 3k
    if kappa is None:
        x, w = np.polynomial.hermite_e.hermegauss(20)
        kappa = float(w @ hermite(x, k) ** 3 / w.sum())
    sp, sm = math.exp(a) / (q * math.exp(a) + T - q), 1.0 / (q * math.exp(a) + T - q)
    sigma = q * sp * (1 - sp) * (gamma * sp - 1 / q) + (T - q) * sm * (1 - sm) * gamma * sm
    return dW[:1, 1:], np.full((1, T), gamma * kappa * sigma * q / T)


@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_w_xe_gradient_of_features_with_third_moments(k):
    """``E ∂ℓ/∂W_xe`` at W_xe = 0 is ``γ κ σ (q/T)``: 0 for odd k, ≠ 0 for even k (E h_2³ =
    2√2), to 1e-12 of the largest; so W_xe = 0 is invariant only for odd features."""
    got, want = _w_xe(k)
    assert np.abs(got - want).max() <= 1e-12 * max(np.abs(want).max(), 1e-3)
    assert (np.abs(got).max() > 1e-3) == (k % 2 == 0)


def test_w_xe_check_fails_on_a_seeded_fault():
    """The odd-moment argument of the mean (κ = 0) applied to h_2: off."""
    got, want = _w_xe(2, kappa=0.0)
    assert np.abs(got - want).max() > 1e-3


def _variance_fit(floor, n=200_000, K=4):
    """(mean, SE, z against ``floor``) of :func:`variance_linear_fit` at T = 8, q = 3, d = 2
    with ``φ = [h_1, …, h_K]``."""
    mean, se = variance_linear_fit(8, 3, 2, n, K)
    return mean, se, (mean - floor) / se


def test_linear_readout_of_the_variance_stops_at_its_floor():
    """The best linear readout of the ideal attention's features (h_1 … h_4 of every token,
    the positions) has the floor d(q−1)/q³ = 4/27 as its held-out loss, within 3 SE; the
    floor is 2/(q(q+1)) of ½E‖target‖². (The quadratic readout's construction reaches
    < 1e-20: tests/test_targets.py::test_construction_is_exact.)"""
    floor = variance_linear_floor(2, 3)
    assert floor == pytest.approx(4 / 27) and floor / (2 * 8 / 18) == pytest.approx(2 / 12)
    mean, se, z = _variance_fit(floor)
    assert abs(z) <= 3 and se < 0.005 * floor, (mean, se, z)


def test_variance_floor_check_fails_on_a_seeded_fault():
    """The floor with q² for q³ (the non-additive part's E N² without its 1/q): |z| > 3."""
    assert abs(_variance_fit(2 * (3 - 1) / 3 ** 2)[2]) > 3
