"""Model: analytic gradients (finite differences), fast paths vs the reference, and an
independent per-sample oracle that builds Z explicitly."""
import itertools
import warnings

import numpy as np
import pytest

import stsim
from conftest import B, T, d, q
from stsim.core.encodings import PEBatch
from stsim.core.gradcheck import check_grad
from stsim.core.model import forward_backward, loss_and_grad
from stsim.core.constructions import cosine_to_target, target_params

FAMILIES = [("onehot", "slots", 11), ("near-orthogonal", "slots", 7),
            ("stochastic", "slots", 13), ("stochastic", "sphere", 6)]


def _oracle(W, V, X, y, P, model, query, x_query=None):
    """Per-sample loop straight from the definitions, Z built densely; the
    gradients by the one-sample formulas. Independent of stsim.core.model."""
    Bn, Tn, dn = X.shape
    loss, dW, dV = 0.0, np.zeros_like(W), np.zeros_like(V)
    for b in range(Bn):
        Pb = P if P.ndim == 2 else P[b]
        Z = np.concatenate([X[b].T, Pb.T], axis=0)          # (D, T), columns are tokens
        c = 1.0 if query == "sum" else 1.0 / len(y[b])
        xq = np.zeros(dn) if x_query is None else x_query[b]
        zq = np.concatenate([xq, c * Pb[y[b]].sum(axis=0)])
        if model == "practical":
            Z = np.concatenate([Z, zq[:, None]], axis=1)
        a = Z.T @ W @ zq
        s = np.exp(a - a.max())
        s /= s.sum()
        h = Z @ s
        r = V @ h - X[b][y[b]].mean(axis=0)
        loss += 0.5 * r @ r
        dV += np.outer(r, h)
        g = Z.T @ V.T @ r
        delta = s * (g - s @ g)
        dW += np.outer(Z @ delta, zq)
    return loss / Bn, dW / Bn, dV / Bn


@pytest.mark.parametrize("pe,sampler,d_e", FAMILIES)
@pytest.mark.parametrize("model", ["theory", "practical"])
@pytest.mark.parametrize("query", ["sum", "mean"])
def test_finite_differences(small_setup, pe, sampler, d_e, model, query):
    rng, batch, peb, W, V = small_setup(pe, sampler, d_e)

    def fg(params):
        loss, dW, dV = forward_backward(params[0], params[1], batch.X, batch.y, peb,
                                        model=model, query=query)
        return loss, [dW, dV]

    check_grad(fg, [W, V], rng, n_dirs=4, h=1e-5, rtol=1e-6)
    # each block separately as well (a wrong block could hide in a joint direction)
    check_grad(lambda p: (fg([p[0], V])[0], [fg([p[0], V])[1][0]]), [W], rng, rtol=1e-6)
    check_grad(lambda p: (fg([W, p[0]])[0], [fg([W, p[0]])[1][1]]), [V], rng, rtol=1e-6)


@pytest.mark.parametrize("pe,sampler,d_e", FAMILIES)
@pytest.mark.parametrize("model,query", list(itertools.product(["theory", "practical"],
                                                                ["sum", "mean"])))
@pytest.mark.parametrize("with_xq", [False, True])
def test_paths_agree_with_reference_and_oracle(small_setup, pe, sampler, d_e, model, query,
                                               with_xq):
    rng, batch, peb, W, V = small_setup(pe, sampler, d_e, seed=3)
    xq = rng.standard_normal((B, d)) if with_xq else None
    fast = forward_backward(W, V, batch.X, batch.y, peb, model=model, query=query, x_query=xq)
    ref = loss_and_grad(W, V, batch.X, batch.y, peb.dense(), model=model, query=query,
                        x_query=xq)
    orc = _oracle(W, V, batch.X, batch.y, peb.dense(), model, query, xq)
    for a, b_, c in zip(fast, ref, orc):
        np.testing.assert_allclose(a, b_, rtol=0, atol=1e-12)
        np.testing.assert_allclose(b_, c, rtol=1e-10, atol=1e-12)


def test_x_query_gradients(small_setup):
    rng, batch, peb, W, V = small_setup("stochastic", "slots", 13, seed=5)
    xq = rng.standard_normal((B, d))

    def fg(params):
        loss, dW, dV = forward_backward(params[0], params[1], batch.X, batch.y, peb,
                                        model="practical", query="mean", x_query=xq)
        return loss, [dW, dV]

    check_grad(fg, [W, V], rng, rtol=1e-6)


def test_index_path_builds_no_dense_encoding(small_setup, monkeypatch):
    """The one-hot families must never materialise a d_e × T matrix."""
    rng, batch, peb, W, V = small_setup("stochastic", "slots", 13)

    def boom(self):
        raise AssertionError("dense() called on the hot path")

    monkeypatch.setattr(PEBatch, "dense", boom)
    forward_backward(W, V, batch.X, batch.y, peb, model="practical")
    assert peb.P is None and peb.idx.shape == (B, T)


@pytest.mark.parametrize("big", [1e4, -1e4, 1e300])
def test_softmax_extreme_logits(small_setup, big):
    """Logits of ±1e4 (and beyond) give finite losses and gradients, and no warnings."""
    rng, batch, peb, W, V = small_setup("onehot", "slots", 11)
    W2 = np.zeros_like(W)
    W2[d:, d:] = big * np.eye(11)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for model in ("theory", "practical"):
            loss, dW, dV = forward_backward(W2, V, batch.X, batch.y, peb, model=model)
            assert np.isfinite(loss) and np.all(np.isfinite(dW)) and np.all(np.isfinite(dV))


def test_hard_attention_limit_is_exact(small_setup):
    """With W_ee = c I, c → ∞, and V = V*, the theory model outputs the mean of the
    selected tokens: loss → 0."""
    rng, batch, peb, W, V = small_setup("onehot", "slots", 11)
    Ws, Vs = target_params(d, 11)
    loss, _, _ = forward_backward(1e3 * Ws, Vs, batch.X, batch.y, peb)
    assert loss < 1e-20


def test_zero_init_loss_is_d_over_2q():
    """At zero init L(0) = d/(2q) in expectation (docs/model.md); check with a large batch."""
    rng = np.random.default_rng(1)
    batch = stsim.sample_batch(rng, 20000, 12, 3, 4)
    D = 4 + 12
    loss, _, _ = forward_backward(np.zeros((D, D)), np.zeros((4, D)), batch.X, batch.y,
                                  PEBatch(d_e=12, idx=np.arange(12)))
    assert loss == pytest.approx(4 / 6, rel=0.03)


def test_cosine_to_target():
    Ws, Vs = target_params(3, 5)
    assert cosine_to_target(Ws, Vs, 3) == pytest.approx((1.0, 1.0))
    assert cosine_to_target(-2 * Ws, 0 * Vs, 3) == pytest.approx((-1.0, 0.0))


@pytest.mark.parametrize("bad,match", [
    (dict(W=np.zeros((3, 3))), "W must have shape"),
    (dict(V=np.zeros((2, 20))), "V must have shape"),
    (dict(y=np.array([[0, 99]] * B)), "positions in"),
    (dict(y=np.zeros((B, 2)) + 0.5), "integer"),
    (dict(P=np.zeros((4, 11))), "P must have shape"),
    (dict(X=np.zeros((B, T))), "X must have shape"),
    (dict(model="big"), "model must be one of"),
    (dict(query="max"), "query must be one of"),
])
def test_bad_input(small_setup, bad, match):
    rng, batch, peb, W, V = small_setup("onehot", "slots", 11)
    args = dict(W=W, V=V, X=batch.X, y=batch.y, P=peb.dense())
    kw = {}
    for k, v in bad.items():
        (kw if k in ("model", "query") else args).__setitem__(k, v)
    with pytest.raises(ValueError, match=match):
        loss_and_grad(args["W"], args["V"], args["X"], args["y"], args["P"], **kw)


def _xent_target(rng, n_class):
    """One-hot rows of random classes, and a soft distribution, (B, n_class) each."""
    hard = np.eye(n_class)[rng.integers(n_class, size=B)]
    soft = rng.random((B, n_class))
    return hard, soft / soft.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("pe,sampler,d_e", FAMILIES)
@pytest.mark.parametrize("model", ["theory", "practical"])
def test_cross_entropy_readout_finite_differences(small_setup, pe, sampler, d_e, model):
    """``loss="xent"``: logits ``V h`` over ``o`` classes, ``ℓ = logsumexp − f·y``; its
    analytic gradients against float64 finite differences on the index (onehot, slots)
    and dense (near-orthogonal, sphere) paths, with hard and soft targets, and against a
    per-sample oracle of the definition."""
    rng, batch, peb, W, _ = small_setup(pe, sampler, d_e)
    o = 5
    V = 0.7 * rng.standard_normal((o, W.shape[0]))
    for y_t in _xent_target(rng, o):
        def fg(params):
            loss, dW, dV = forward_backward(params[0], params[1], batch.X, batch.y, peb,
                                            model=model, target=y_t, loss="xent")
            return loss, [dW, dV]
        check_grad(fg, [W, V], rng, n_dirs=4, h=1e-5, rtol=1e-6)
        check_grad(lambda p: (fg([W, p[0]])[0], [fg([W, p[0]])[1][1]]), [V], rng, rtol=1e-6)
        # the definition, sample by sample (the attended vector from the squared path)
        P = peb.dense()
        L = 0.0
        for b in range(B):
            Pb = P if P.ndim == 2 else P[b]
            Z = np.concatenate([batch.X[b].T, Pb.T], axis=0)
            zq = np.concatenate([np.zeros(d), Pb[batch.y[b]].sum(axis=0)])
            if model == "practical":
                Z = np.concatenate([Z, zq[:, None]], axis=1)
            a = Z.T @ W @ zq
            s = np.exp(a - a.max()) / np.exp(a - a.max()).sum()
            f = V @ (Z @ s)
            L += np.log(np.exp(f - f.max()).sum()) + f.max() - f @ y_t[b]
        assert fg([W, V])[0] == pytest.approx(L / B, rel=1e-12)


def test_cross_entropy_check_fails_on_a_seeded_fault(small_setup, monkeypatch):
    """``r = softmax(f) − y`` with the softmax's normaliser dropped: the finite differences
    catch it."""
    import stsim.core.kernels as K
    import stsim.core.model as M
    rng, batch, peb, W, _ = small_setup("stochastic", "sphere", 6)
    V = 0.7 * rng.standard_normal((4, W.shape[0]))
    y_t = _xent_target(rng, 4)[0]
    real = K._residual

    def faulty(f, y_true, xent=False):
        loss, r = real(f, y_true, xent)
        return loss, (r + y_true) * 1.3 - y_true      # a wrong ∂ℓ/∂f
    monkeypatch.setattr(M, "_residual", faulty)

    def fg(params):
        loss, dW, dV = forward_backward(params[0], params[1], batch.X, batch.y, peb,
                                        target=y_t, loss="xent")
        return loss, [dW, dV]
    with pytest.raises(AssertionError):
        check_grad(fg, [W, V], rng, n_dirs=4, h=1e-5, rtol=1e-6)


def test_cross_entropy_refusals(small_setup):
    rng, batch, peb, W, V = small_setup("onehot", "slots", 11)
    with pytest.raises(ValueError, match="loss must be one of"):
        forward_backward(W, V, batch.X, batch.y, peb, loss="hinge")
    with pytest.raises(ValueError, match="needs target"):
        forward_backward(W, V, batch.X, batch.y, peb, loss="xent")
