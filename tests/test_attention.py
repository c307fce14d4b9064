"""Attention mechanisms (stsim.core.attention): finite differences for every mechanism,
temperature and the rank-r key/query pair; the index path against the dense reference and
an independent per-sample oracle; the exact linear solution; the stationary zero
initialisations; the temperature <-> step equivalence, trajectory against trajectory."""
import numpy as np
import pytest

import stsim
from conftest import B, T, d, q
from stsim.core.attention import (ATTENTIONS, Sigmoid, Softmax, lowrank_grad, lowrank_W,
                                  make_attention)
from stsim.core.encodings import PEBatch
from stsim.core.families import make_encoding
from stsim.core.gradcheck import check_grad
from stsim.core.model import forward_backward, loss_and_grad
from stsim.core.constructions import target_params

FAMILIES = [("onehot", "slots", 11), ("stochastic", "slots", 13), ("stochastic", "sphere", 6)]


def _phi(name, l, n):
    """The forward formulas written again, independently of stsim.core.attention."""
    if name == "softmax":
        e = np.exp(l - l.max())
        return e / e.sum()
    if name == "linear":
        return l.copy()
    if name == "sigmoid-bias":           # the fixed bias -ln N, N = n attended tokens
        return 1 / (1 + n * np.exp(-l))
    base, _, norm = name.partition("-")
    s = np.maximum(l, 0) if base == "relu" else 1 / (1 + np.exp(-l))
    return s / n if norm else s


def _oracle_loss(W, V, X, y, P, model, query, name, tau):
    """Per-sample loss from the definitions (Z built densely), any mechanism."""
    total = 0.0
    for b in range(X.shape[0]):
        Pb = P if P.ndim == 2 else P[b]
        Z = np.concatenate([X[b].T, Pb.T], axis=0)
        c = 1.0 if query == "sum" else 1.0 / len(y[b])
        zq = np.concatenate([np.zeros(X.shape[2]), c * Pb[y[b]].sum(axis=0)])
        if model == "practical":
            Z = np.concatenate([Z, zq[:, None]], axis=1)
        s = _phi(name, Z.T @ W @ zq / tau, Z.shape[1])
        r = V @ Z @ s - X[b][y[b]].mean(axis=0)
        total += 0.5 * r @ r
    return total / X.shape[0]


@pytest.mark.parametrize("name", ATTENTIONS)
@pytest.mark.parametrize("pe,sampler,d_e", FAMILIES)
@pytest.mark.parametrize("model,query,tau", [("theory", "sum", 1.0), ("practical", "mean", 1.0),
                                             ("theory", "mean", 0.6), ("practical", "sum", 1.7)])
def test_finite_differences_every_mechanism(small_setup, name, pe, sampler, d_e, model, query,
                                           tau):
    rng, batch, peb, W, V = small_setup(pe, sampler, d_e, seed=1)

    def fg(params):
        loss, dW, dV = forward_backward(params[0], params[1], batch.X, batch.y, peb,
                                        model=model, query=query, attention=name,
                                        temperature=tau)
        return loss, [np.asarray(dW), dV]

    check_grad(fg, [W, V], rng, n_dirs=4, h=1e-6, rtol=1e-6)
    check_grad(lambda p: (fg([p[0], V])[0], [fg([p[0], V])[1][0]]), [W], rng, h=1e-6, rtol=1e-6)
    # the index path (sparse dW) against the dense reference and the oracle
    fast = forward_backward(W, V, batch.X, batch.y, peb, model=model, query=query,
                            attention=name, temperature=tau, sparse_grad=True)
    ref = loss_and_grad(W, V, batch.X, batch.y, peb.dense(), model=model, query=query,
                        attention=name, temperature=tau)
    for a, b_ in zip(fast, ref):
        np.testing.assert_allclose(np.asarray(a), b_, rtol=0, atol=1e-12)
    orc = _oracle_loss(W, V, batch.X, batch.y, peb.dense(), model, query, name, tau)
    assert ref[0] == pytest.approx(orc, rel=1e-12)


@pytest.mark.parametrize("name", ["softmax", "linear", "sigmoid"])
@pytest.mark.parametrize("model", ["theory", "practical"])
def test_finite_differences_rank(small_setup, name, model):
    rng, batch, peb, W, V = small_setup("stochastic", "slots", 13, seed=2)
    D, r = W.shape[0], 4
    WK, WQ = 0.5 * rng.standard_normal((r, D)), 0.5 * rng.standard_normal((r, D))

    def fg(params):
        loss, (dK, dQ), dV = forward_backward((params[0], params[1]), params[2], batch.X,
                                              batch.y, peb, model=model, attention=name,
                                              rank=r)
        return loss, [dK, dQ, dV]

    check_grad(fg, [WK, WQ, V], rng, n_dirs=6, rtol=1e-6)
    # the same numbers as the merged W = W_Kᵀ W_Q (dense reference)
    l1, dW1, _ = loss_and_grad((WK, WQ), V, batch.X, batch.y, peb.dense(), model=model,
                               attention=name, rank=r)
    l2, G, _ = loss_and_grad(WK.T @ WQ, V, batch.X, batch.y, peb.dense(), model=model,
                             attention=name)
    assert l1 == pytest.approx(l2, rel=1e-13)
    np.testing.assert_allclose(dW1[0], WQ @ G.T, rtol=1e-12, atol=1e-14)


def test_a_wrong_backward_is_caught(small_setup):
    """Seeded faults: the sigmoid's derivative without the normalisation, and the rank
    gradient with W_K and W_Q swapped, fail the finite-difference check."""
    rng, batch, peb, W, V = small_setup("stochastic", "sphere", 6, seed=3)

    class Wrong(Sigmoid):
        def dphi_from_s(self, s, n=1):
            return s * (1.0 - s)          # should be s (1 − n s)

    def fg(att):
        def f(params):
            loss, dW, dV = forward_backward(params[0], V, batch.X, batch.y, peb, attention=att)
            return loss, [dW]
        return f

    check_grad(fg(Sigmoid(normalised=True)), [W], rng)
    with pytest.raises(AssertionError, match="gradient check failed"):
        check_grad(fg(Wrong(normalised=True)), [W], rng)
    D = W.shape[0]
    WK, WQ = rng.standard_normal((2, D)), rng.standard_normal((2, D))

    def swapped(params):
        loss, G, _ = forward_backward(lowrank_W(*params), V, batch.X, batch.y, peb)
        dK, dQ = lowrank_grad(params[1], params[0], G)
        return loss, [dK, dQ]

    with pytest.raises(AssertionError, match="gradient check failed"):
        check_grad(swapped, [WK, WQ], rng)


def test_softmax_is_bit_identical(small_setup):
    rng, batch, peb, W, V = small_setup("stochastic", "slots", 13, seed=4)
    base = forward_backward(W, V, batch.X, batch.y, peb, model="practical")
    for kw in ({"attention": "softmax"}, {"attention": Softmax()}, {"temperature": 1.0}):
        other = forward_backward(W, V, batch.X, batch.y, peb, model="practical", **kw)
        assert other[0] == base[0]
        np.testing.assert_array_equal(other[1], base[1])
        np.testing.assert_array_equal(other[2], base[2])


@pytest.mark.parametrize("query,scale", [("sum", None), ("mean", 1.0)])
@pytest.mark.parametrize("model", ["theory", "practical"])
@pytest.mark.parametrize("pe", ["onehot", "stochastic"])
@pytest.mark.parametrize("name", ["linear", "relu", "relu-norm"])
def test_linear_attention_solves_sts_exactly(small_setup, query, scale, model, pe, name):
    """W_ee = I/q (sum query) or I (mean query), V = [I 0]: loss 0 with one-hot / slots,
    for linear and ReLU attention (the logits are 1/q and 0); times N (the attended
    tokens) for the length-normalised ReLU."""
    d_e = 9 if pe == "onehot" else 20
    rng, batch, peb, _, _ = small_setup(pe, "slots", d_e, seed=5)
    Ws, Vs = target_params(d, d_e)
    N = (T + 1 if model == "practical" else T) if name == "relu-norm" else 1
    W = N * (Ws / q if scale is None else Ws * scale)
    loss, dW, dV = forward_backward(W, Vs, batch.X, batch.y, peb, model=model, query=query,
                                    attention=name)
    assert loss < 1e-28 and np.abs(dW).max() < 1e-13 and np.abs(dV).max() < 1e-14
    # the other convention's scale is not a solution (the check has teeth)
    W_bad = N * Ws * (1.0 if scale is None else 1.0 / q)
    assert forward_backward(W_bad, Vs, batch.X, batch.y, peb, model=model, query=query,
                            attention=name)[0] > 0.1


@pytest.mark.parametrize("name", ["linear", "relu", "relu-norm"])
def test_zero_init_is_stationary(small_setup, name):
    rng, batch, peb, W, V = small_setup("stochastic", "sphere", 6, seed=6)
    assert make_attention(name).zero_saddle
    for model in ("theory", "practical"):
        loss, dW, dV = forward_backward(0 * W, 0 * V, batch.X, batch.y, peb, model=model,
                                        attention=name)
        assert loss > 0 and not np.any(dW) and not np.any(dV)      # exactly 0


@pytest.mark.parametrize("name", ["softmax", "linear", "sigmoid"])
def test_rank_zero_init_is_stationary(small_setup, name):
    rng, batch, peb, W, V = small_setup("stochastic", "slots", 13, seed=7)
    Z = np.zeros((3, W.shape[0]))
    _, (dK, dQ), dV = forward_backward((Z, Z), V, batch.X, batch.y, peb, attention=name, rank=3)
    assert not np.any(dK) and not np.any(dQ)                      # even with V ≠ 0
    assert np.any(dV) != make_attention(name).zero_saddle       # V learns, W_K, W_Q never


@pytest.mark.parametrize("name", ["softmax", "sigmoid", "sigmoid-norm"])
def test_uniform_at_zero_gives_V_a_gradient(small_setup, name):
    rng, batch, peb, W, V = small_setup("stochastic", "sphere", 6, seed=8)
    assert not make_attention(name).zero_saddle
    _, dW, dV = forward_backward(0 * W, 0 * V, batch.X, batch.y, peb, attention=name)
    assert np.abs(dV).max() > 1e-3 and not np.any(dW)


@pytest.mark.parametrize("name", ["softmax", "sigmoid", "linear"])
def test_temperature_is_a_step_scaling(name):
    """GD at temperature τ with step η on (W, V) equals GD at τ = 1 on (W/τ, V) with step
    η/τ² on W and η on V: the two trajectories side by side, on the same minibatches."""
    tau, eta, steps = 0.5, 0.05, 60
    rng = np.random.default_rng(9)
    enc = make_encoding("stochastic", T_max=T, d_e=13, sampler="slots", rng=rng)
    D = d + 13
    W = 0.1 * rng.standard_normal((D, D))
    V = 0.1 * rng.standard_normal((d, D))
    Wp, Vp = W / tau, V.copy()
    Wbad, Vbad = W / tau, V.copy()          # seeded fault: W' stepped by η, not η/τ²
    for _ in range(steps):
        batch = stsim.sample_batch(rng, 16, T, q, d)
        pe = enc.sample(rng, 16, T)
        _, dW, dV = forward_backward(W, V, batch.X, batch.y, pe, attention=name,
                                     temperature=tau)
        _, dWp, dVp = forward_backward(Wp, Vp, batch.X, batch.y, pe, attention=name)
        _, dWb, dVb = forward_backward(Wbad, Vbad, batch.X, batch.y, pe, attention=name)
        W, V = W - eta * dW, V - eta * dV
        Wp, Vp = Wp - eta / tau ** 2 * dWp, Vp - eta * dVp
        Wbad, Vbad = Wbad - eta * dWb, Vbad - eta * dVb
    np.testing.assert_allclose(W / tau, Wp, rtol=1e-11, atol=1e-13 * np.abs(Wp).max())
    np.testing.assert_allclose(V, Vp, rtol=1e-11, atol=1e-14)
    assert np.abs(W / tau - Wbad).max() > 1e-3 * np.abs(Wbad).max()


def test_bad_input(small_setup):
    rng, batch, peb, W, V = small_setup("onehot", "slots", 11)
    with pytest.raises(ValueError, match="attention must be one of"):
        forward_backward(W, V, batch.X, batch.y, peb, attention="tanh")
    with pytest.raises(ValueError, match="temperature must be a finite number >= 1e-100"):
        forward_backward(W, V, batch.X, batch.y, peb, temperature=0.0)
    with pytest.raises(ValueError, match="rank must be an integer"):
        loss_and_grad((W[:2], W[:2]), V, batch.X, batch.y, peb.dense(), rank=0)
    with pytest.raises(ValueError, match="pair"):
        loss_and_grad(W, V, batch.X, batch.y, peb.dense(), rank=2)


def test_rank_r_with_onehot_is_a_fixed_width_r_encoding():
    """W_K = W_Q = [0, √κ R] (R: r × d_e, unit columns t_k) with one-hot encodings gives the
    logits κ t_iᵀ Σ_j t_j of the fixed encodings t_k of width r at W_ee = κ I_r: the same
    loss, so rank r represents whatever a fixed width-r table does."""
    rng = np.random.default_rng(10)
    d_e, r, kappa = T, 4, 3.0
    R = rng.standard_normal((r, d_e))
    R /= np.linalg.norm(R, axis=0)
    WK = np.zeros((r, d + d_e))
    WK[:, d:] = np.sqrt(kappa) * R
    V = np.zeros((d, d + d_e))
    V[:, :d] = 0.8 * np.eye(d)
    batch = stsim.sample_batch(rng, 50, T, q, d)
    l_rank = forward_backward((WK, WK), V, batch.X, batch.y, PEBatch(d_e=d_e, idx=np.arange(T)),
                              rank=r, need_grad=False)[0]
    W2 = np.zeros((d + r, d + r))
    W2[d:, d:] = kappa * np.eye(r)
    V2 = np.zeros((d, d + r))
    V2[:, :d] = 0.8 * np.eye(d)
    l_table = loss_and_grad(W2, V2, batch.X, batch.y, R.T)[0]
    assert l_rank == pytest.approx(l_table, rel=1e-12)


def test_relu_norm_solution_holds_at_its_training_length_only():
    """ReLU's exact solution (logits 1/q, 0) holds at every length; the length-normalised
    ReLU's (W scaled by N) only at the N it was scaled for: at N + 4 tokens the weights are
    N/(N + 4) of the right ones."""
    rng = np.random.default_rng(12)
    d_e, Tl = 20, T + 4
    Ws, Vs = target_params(d, d_e)
    batch = stsim.sample_batch(rng, 50, Tl, q, d)
    enc = make_encoding("stochastic", T_max=Tl, d_e=d_e, sampler="slots", rng=rng)
    pe = enc.sample(rng, 50, Tl)
    assert forward_backward(Ws / q, Vs, batch.X, batch.y, pe, attention="relu")[0] < 1e-28
    loss = forward_backward(T * Ws / q, Vs, batch.X, batch.y, pe, attention="relu-norm")[0]
    # f = (T/(T+4)) · target, so ℓ = ½ (4/(T+4))² ‖target‖², E‖target‖² = d/q
    assert loss == pytest.approx(0.5 * (4 / Tl) ** 2 * d / q, rel=0.3)


def test_sigmoid_bias_gradient_and_its_seeded_fault(small_setup, monkeypatch):
    """sigmoid-bias: s = σ(l − ln N), δ = g s(1 − s)/τ (the bias fixed): float64 finite
    differences at τ = 0.7, both models; the weights at zero are 1/(N + 1). Seeded fault:
    the derivative taken at the unbiased logit, σ'(l) in place of σ'(l − ln N), fails."""
    rng, batch, peb, W, V = small_setup("stochastic", "slots", 13, seed=3)

    def fg(params, model, name="sigmoid-bias"):
        loss, dW, dV = forward_backward(params[0], params[1], batch.X, batch.y, peb,
                                        model=model, attention=name, temperature=0.7)
        return loss, [np.asarray(dW), dV]
    for model in ("theory", "practical"):
        check_grad(lambda p: fg(p, model), [W, V], rng, n_dirs=4, h=1e-6, rtol=1e-6)
        assert abs(fg([W, V], model)[0] - fg([W, V], model, "sigmoid")[0]) > 1e-3
    N = T + 1
    s = make_attention("sigmoid-bias").weights(np.zeros((2, N)))
    np.testing.assert_allclose(s, 1.0 / (N + 1), rtol=1e-15)
    assert make_attention("sigmoid-bias") == Sigmoid(log_bias=True) != Sigmoid()
    with pytest.raises(ValueError, match="log_bias"):
        Sigmoid(normalised=True, log_bias=True)

    def unbiased_slope(self, s, n=1):       # σ'(l) at l = logit(s) + ln N
        u = 1.0 / (1.0 + (1.0 - s) / (s * self._N))
        return u * (1.0 - u)
    real = Sigmoid.weights

    def remember_N(self, a):
        self._N = a.shape[-1]
        return real(self, a)
    monkeypatch.setattr(Sigmoid, "weights", remember_N)
    monkeypatch.setattr(Sigmoid, "dphi_from_s", unbiased_slope)
    with pytest.raises(AssertionError):
        check_grad(lambda p: fg(p, "theory"), [W, V], rng, n_dirs=4, h=1e-6, rtol=1e-6)


def test_softmax_family_is_a_fact_of_the_mechanism():
    """Only softmax (at any temperature, or a subclass of it) has the softmax family; the
    theory's family loss asks the attribute."""
    from stsim.core.attention import MECHANISMS, Attention
    from stsim.theory.attention import best_mechanism_family_loss
    from stsim.theory.family import best_family_loss
    assert {n for n, m in MECHANISMS.items() if m.softmax_family} == {"softmax"}
    assert Softmax(0.5).softmax_family and not Attention.softmax_family
    r = best_mechanism_family_loss(Softmax(2.0), 8, 2, 16, n_mc=256, rng=3)
    ref = best_family_loss(8, 2, 1, 16, n_mc=256, rng=3)
    assert r == {"rel": ref["rel"], "a": ref["a"] * 2.0}
