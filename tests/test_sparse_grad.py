"""The sparse gradient of W for index encodings (stsim.core.sparse_grad): equal to
the dense reference, bit-identical updates, the finite check, both memory orders of W, and
no (D, D) or (B, d_e) temporaries."""
import itertools
import tracemalloc

import numpy as np
import pytest
from scipy.sparse import csr_matrix

import stsim
from stsim.core import problem as problem_mod
from stsim.core.families import make_encoding
from stsim.core.model import forward_backward, loss_and_grad
from stsim.core.optim import SGD, Adam, all_finite
from stsim.core.sparse_grad import SparseGradW

B, T, q, d = 24, 9, 3, 4


@pytest.fixture(autouse=True)
def always_sparse(monkeypatch):
    """These tests are about the sparse form: no dense dW at small D (index_form._DENSE_W)."""
    import stsim.core.index_form as M
    monkeypatch.setattr(M, "_DENSE_W", 0)
# (pe, d_e): one-hot with d_e = T and d_e > T (length generalisation), slots
INDEX = [("onehot", 9), ("onehot", 20), ("stochastic", 13), ("stochastic", 40)]
CASES = list(itertools.product(INDEX, ["theory", "practical"], ["sum", "mean"], [False, True]))


def _setup(pe, d_e, seed=0, scale=0.7, with_xq=False):
    rng = np.random.default_rng(seed)
    enc = make_encoding(pe, T_max=T, d_e=d_e, rng=rng)
    batch = stsim.sample_batch(rng, B, T, q, d)
    peb = enc.sample(rng, B, T)
    D = d + d_e
    W = scale * rng.standard_normal((D, D))
    V = scale * rng.standard_normal((d, D))
    xq = rng.standard_normal((B, d)) if with_xq else None
    return rng, batch, peb, W, V, xq


def _rel(a, b):
    """Normwise relative difference ``max|a − b| / max|b|``."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


def _sparse(pe, d_e, model, query, with_xq, seed=3):
    rng, batch, peb, W, V, xq = _setup(pe, d_e, seed=seed, with_xq=with_xq)
    out = forward_backward(W, V, batch.X, batch.y, peb, model=model, query=query, x_query=xq,
                           sparse_grad=True)
    return out, (W, V, batch, peb, xq)


@pytest.mark.parametrize("pe_de,model,query,with_xq", CASES)
def test_sparse_gradient_equals_dense_reference(pe_de, model, query, with_xq):
    """The sparse dW (and loss, dV) of the index path against the dense reference
    ``loss_and_grad``: equal up to summation order (r = V h, g = Zᵀ Vᵀ r, dV are summed in
    another order; measured ≤ 3e-15 normwise at this scale)."""
    (loss, dW, dV), (W, V, batch, peb, xq) = _sparse(*pe_de, model, query, with_xq)
    assert isinstance(dW, SparseGradW)
    ref = loss_and_grad(W, V, batch.X, batch.y, peb.dense(), model=model, query=query,
                        x_query=xq)
    for got, want in zip((loss, dW, dV), ref):
        assert _rel(got, want) <= 1e-14
    # the support: with x_q = 0 only the query's columns d + κ (and never more than B q)
    dense = np.asarray(dW)
    cols = np.flatnonzero(np.any(dense != 0, axis=0))
    idx = np.broadcast_to(peb.idx, (B, T))
    ky = np.take_along_axis(idx, batch.y, axis=1)
    allowed = set((d + ky).ravel()) | (set(range(d)) if with_xq else set())
    assert set(cols) <= allowed and len(set((d + ky).ravel())) <= B * q


@pytest.mark.parametrize("pe_de", INDEX)
@pytest.mark.parametrize("with_xq", [False, True])
def test_shared_columns_by_bincount_scale_by_the_query_coefficient(pe_de, with_xq,
                                                                   monkeypatch):
    """The shared columns summed by ``np.bincount`` (forced: ``_DENSE_ROWS = 0``; it is
    taken by itself only at large d_e) with the mean query, ``c = 1/q``: both the token
    rows and the encoding rows carry ``c`` — against the dense reference."""
    import stsim.core.sparse_grad as SG
    monkeypatch.setattr(SG, "_DENSE_ROWS", 0)
    (loss, dW, dV), (W, V, batch, peb, xq) = _sparse(*pe_de, "theory", "mean", with_xq)
    assert dW.c == 1.0 / q and dW.c2.size and dW.rows2 is not None   # the bincount route
    ref = loss_and_grad(W, V, batch.X, batch.y, peb.dense(), query="mean", x_query=xq)[1]
    assert _rel(dW, ref) <= 1e-14


def test_sparse_gradient_check_fails_on_faults():
    """The comparison above sees a dropped shared-column sum and a shifted column."""
    (loss, dW, dV), (W, V, batch, peb, xq) = _sparse("onehot", 9, "theory", "sum", False)
    ref = loss_and_grad(W, V, batch.X, batch.y, peb.dense())[1]
    assert dW.c2.size and _rel(dW, ref) <= 1e-14
    dW.block2 = 0.0 * dW.block2
    assert _rel(dW, ref) > 1e-3
    (loss, dW, dV), (W, V, batch, peb, xq) = _sparse("stochastic", 40, "theory", "sum", False)
    ref = loss_and_grad(W, V, batch.X, batch.y, peb.dense())[1]
    dW.c1 = dW.c1.copy()
    dW.c1[0] += 1
    assert _rel(dW, ref) > 1e-3


def _dense_u(dW):
    """``u = Z δ`` as the dense (B, D) array the step used before the sparse gradient of W."""
    u = np.zeros((dW.u_e.shape[0], dW.D))
    u[:, :dW.d] = dW.u_x
    np.put_along_axis(u[:, dW.d:], dW.idx, dW.u_e, axis=1)
    return u


@pytest.mark.parametrize("pe_de", INDEX)
@pytest.mark.parametrize("model", ["theory", "practical"])
@pytest.mark.parametrize("dense_rows", [0, 10 ** 9])
def test_entries_bit_identical_to_the_dense_product(pe_de, model, dense_rows, monkeypatch):
    """With x_q = 0 the entries equal those of the dense product Σ_b u_b z_qᵀ as scipy
    forms it (sparse p_q times dense u, summed over b in increasing order), bit for bit —
    the shared columns summed either way (bincount on their rows, or the sparse product
    over all rows: ``_DENSE_ROWS``)."""
    import stsim.core.sparse_grad as SG
    monkeypatch.setattr(SG, "_DENSE_ROWS", dense_rows)
    rng, batch, peb, W, V, _ = _setup(*pe_de, seed=1)
    _, dW, _ = forward_backward(W, V, batch.X, batch.y, peb, model=model, sparse_grad=True)
    u = _dense_u(dW)
    d_e = pe_de[1]
    S = csr_matrix((np.full(B * q, dW.c), dW.ky.ravel(),
                    np.arange(0, B * q + 1, q)), shape=(B, d_e))
    old = np.zeros(dW.shape)
    old[:, d:] = (S.T @ u).T
    np.testing.assert_array_equal(dW.todense(), old)
    assert (dW.rows2 is None) == (dense_rows > 0) or dW.c2.size == 0
    # seeded fault: the shared columns summed in the reverse order of b (>= 3 terms)
    if pe_de[0] == "onehot":
        bad = np.zeros(dW.shape)
        for k in range(d_e):
            rows = np.flatnonzero(S[:, k].toarray()[:, 0])[::-1]
            acc = np.zeros(dW.D)
            for b in rows:
                acc += dW.c * u[b]
            bad[:, d + k] = acc
        assert not np.array_equal(bad, old)


@pytest.mark.parametrize("pe_de", INDEX)
@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("dense_rows", [0, 10 ** 9])
def test_updates_bit_identical_to_dense(pe_de, order, dense_rows, monkeypatch):
    """SGD and Adam with the sparse gradient give the parameters of the same optimisers fed
    its dense form, bit for bit, for W in C and in Fortran order (shared columns either
    way)."""
    import stsim.core.sparse_grad as SG
    monkeypatch.setattr(SG, "_DENSE_ROWS", dense_rows)
    rng, batch, peb, W, V, _ = _setup(*pe_de, seed=2)
    W = np.asarray(W, order=order)

    def both(make):
        p_sparse = {"W": W.copy(order="K"), "V": V.copy()}
        p_dense = {"W": W.copy(order="K"), "V": V.copy()}
        o_sparse, o_dense = make(), make()
        for _ in range(3):
            for p, o, dense in ((p_sparse, o_sparse, False), (p_dense, o_dense, True)):
                _, dW, dV = forward_backward(p["W"], p["V"], batch.X, batch.y, peb,
                                             sparse_grad=True)
                o.step(p, {"W": dW.todense() if dense else dW, "V": dV})
        return p_sparse, p_dense
    for make in (lambda: SGD(0.3), lambda: Adam(0.01)):
        p_sparse, p_dense = both(make)
        np.testing.assert_array_equal(p_sparse["W"], p_dense["W"])
        np.testing.assert_array_equal(p_sparse["V"], p_dense["V"])
        assert p_sparse["W"].flags.f_contiguous == (order == "F")
    # seeded fault in stsim: the sparse update's step one ulp off; the comparison sees it
    real = SG.SparseGradW.axpy
    monkeypatch.setattr(SG.SparseGradW, "axpy", lambda self, A, alpha, square=False:
                        real(self, A, np.nextafter(alpha, 0.0), square))
    p_sparse, p_dense = both(lambda: SGD(0.3))
    assert not np.array_equal(p_sparse["W"], p_dense["W"])


def test_memory_order_of_W_changes_nothing():
    """W in C or Fortran order: the same loss and gradients, bit for bit."""
    for pe, d_e in INDEX:
        for model in ("theory", "practical"):
            rng, batch, peb, W, V, xq = _setup(pe, d_e, seed=4, with_xq=True)
            outs = [forward_backward(np.asarray(W, order=o), V, batch.X, batch.y, peb,
                                     model=model, x_query=xq) for o in "CF"]
            for a, b in zip(*outs):
                np.testing.assert_array_equal(a, b)


def _rebuilt(dW, u_e):
    return SparseGradW(dW.D, d, dW.idx, dW.ky, dW.c, dW.u_x, u_e, dW.x_block)


@pytest.mark.parametrize("pe_de", [("stochastic", 40), ("onehot", 9)])
def test_all_finite_matches_the_dense_check(pe_de):
    (loss, dW, dV), _ = _sparse(*pe_de, "theory", "sum", False)
    assert all_finite(dW) and np.all(np.isfinite(np.asarray(dW)))
    for b in (0, 5, B - 1):                        # seeded fault: one non-finite entry
        u_e = dW.u_e.copy()
        u_e[b, 2] = np.nan
        bad = _rebuilt(dW, u_e)
        assert not all_finite(bad) and not np.all(np.isfinite(np.asarray(bad)))
    # finite terms whose sum in a shared column overflows
    (loss, dW, dV), _ = _sparse("onehot", 9, "theory", "sum", False)
    k = dW.c2[0] - d
    pairs = np.argwhere(dW.ky == k)[:2, 0]          # two samples whose query uses slot k
    u_e = dW.u_e.copy()
    u_e[pairs, 0] = 1e308
    bad = _rebuilt(dW, u_e)
    assert np.all(np.isfinite(bad.u_e))
    assert not all_finite(bad) and not np.all(np.isfinite(np.asarray(bad)))


@pytest.mark.parametrize("with_xq", [False, True])
def test_no_square_or_batch_by_width_temporaries(with_xq):
    """At d_e ≫ B·T the index step (forward, backward, SGD update) allocates far less than
    one (B, d_e) array, let alone (D, D) — its memory is linear in the batch's tokens."""
    Bn, Tn, d_e = 128, 8, 4000
    rng = np.random.default_rng(0)
    batch = stsim.sample_batch(rng, Bn, Tn, q, d)
    peb = make_encoding("stochastic", T_max=Tn, d_e=d_e).sample(rng, Bn, Tn)
    D = d + d_e
    W = np.zeros((D, D), order="F")
    V = 0.1 * rng.standard_normal((d, D))
    xq = rng.standard_normal((Bn, d)) if with_xq else None
    opt = SGD(0.5)

    def step(sparse):
        _, dW, dV = forward_backward(W, V, batch.X, batch.y, peb, x_query=xq,
                                     model="practical", sparse_grad=sparse)
        opt.step({"W": W, "V": V}, {"W": dW, "V": dV})

    peaks = {}
    for sparse in (True, False):               # False: the dense (D, D) gradient, the fault
        tracemalloc.start()
        step(sparse)
        peaks[sparse] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    limit = Bn * d_e * 8 // 2
    assert peaks[True] < limit, peaks
    assert peaks[False] > D * D * 8, peaks


@pytest.mark.parametrize("fault", [False, True])
@pytest.mark.parametrize("opts", [dict(pe="stochastic"), dict(pe="onehot", d_e=14),
                                  dict(pe="stochastic", optimizer="gd", n_train=40),
                                  dict(pe="stochastic", optimizer="adam"),
                                  dict(pe="stochastic", model="practical", query="mean")])
def test_run_equals_run_with_dense_gradient_and_C_order(monkeypatch, opts, fault):
    """stsim.run with the sparse gradient and W in Fortran order ends where a run with the
    dense gradient and W in C order does, bit for bit (same losses, same parameters); only
    cos_W may differ in the last bits (‖W‖_F is summed in memory order)."""
    kw = dict(T=10, q=2, d=3, steps=40, batch=16, eval_every=10, seed=1, lr=1.0)
    kw.update(opts)
    if kw.get("optimizer") == "adam":
        kw["lr"] = 0.02
    if fault:       # seeded fault: the sparse update skips the shared columns -> runs differ
        monkeypatch.setattr(SparseGradW, "_sum_shared", lambda self, b, g: (
            setattr(self, "rows2", np.arange(0)) or np.zeros((self.c2.size, 0))))
    a = stsim.run(**kw)
    monkeypatch.undo()
    real_fb = problem_mod.forward_backward_unchecked
    real_init = problem_mod.TransformerProblem.init_params

    def dense_fb(*args, **kwargs):
        loss, dW, dV = real_fb(*args, **kwargs)
        return loss, (dW.todense() if isinstance(dW, SparseGradW) else dW), dV

    monkeypatch.setattr(problem_mod, "forward_backward_unchecked", dense_fb)
    monkeypatch.setattr(problem_mod.TransformerProblem, "init_params",
                        lambda self, rng: {k: np.ascontiguousarray(v)
                                           for k, v in real_init(self, rng).items()})
    b = stsim.run(**kw)
    assert a.params["W"].flags.f_contiguous and b.params["W"].flags.c_contiguous
    if fault:
        assert not np.array_equal(a.params["W"], b.params["W"])
        return
    for k in a.history:
        if k == "cos_W":
            np.testing.assert_allclose(a.history[k], b.history[k], rtol=1e-14, atol=0)
        else:
            np.testing.assert_array_equal(a.history[k], b.history[k])
    for k in a.params:
        np.testing.assert_array_equal(a.params[k], b.params[k])


@pytest.mark.parametrize("model", ["theory", "practical"])
def test_parts_of_the_batch_change_no_bit(monkeypatch, model):
    """A batch computed in parts (_IndexOps.parts, cache-sized) gives the loss and
    gradients of the whole batch at once, bit for bit; a part left out is seen."""
    import stsim.core.index_form as M
    rng, batch, peb, W, V, _ = _setup("stochastic", 40, seed=6)
    W = np.asfortranarray(W)

    def run():
        out = forward_backward(W, V, batch.X, batch.y, peb, model=model, sparse_grad=True)
        return out[0], out[1].todense(), out[2]

    whole = run()
    monkeypatch.setattr(M, "_PART", 2 * T * d)          # parts of two samples
    n_parts = len(M._IndexOps(peb.idx, 40, batch.y, 1.0, d, False, None).parts(batch.X))
    assert n_parts == B // 2
    for a, b in zip(whole, run()):
        np.testing.assert_array_equal(a, b)
    real = M._IndexOps.parts                             # seeded fault: the last part dropped
    monkeypatch.setattr(M._IndexOps, "parts", lambda self, X: real(self, X)[:-1])
    assert not all(np.array_equal(a, b) for a, b in zip(whole, run()))


@pytest.mark.parametrize("pe_de", INDEX)
@pytest.mark.parametrize("with_xq", [False, True])
def test_small_widths_give_the_same_entries_dense(pe_de, with_xq, monkeypatch):
    """At small D the index form returns dW dense (index_form._DENSE_W): the entries of the
    sparse form, bit for bit, and the SGD step they give."""
    import stsim.core.index_form as M
    rng, batch, peb, W, V, xq = _setup(*pe_de, seed=8, with_xq=with_xq)
    sparse = forward_backward(W, V, batch.X, batch.y, peb, x_query=xq, sparse_grad=True)
    monkeypatch.setattr(M, "_DENSE_W", 10 ** 9)
    dense = forward_backward(W, V, batch.X, batch.y, peb, x_query=xq, sparse_grad=True)
    assert isinstance(sparse[1], SparseGradW) and isinstance(dense[1], np.ndarray)
    np.testing.assert_array_equal(sparse[1].todense(), dense[1])
    a, b = np.asfortranarray(W), np.asfortranarray(W)
    SGD(0.4).step({"W": a}, {"W": sparse[1]})
    SGD(0.4).step({"W": b}, {"W": dense[1]})
    np.testing.assert_array_equal(a, b)
    # seeded fault in stsim's dense path: its entries one ulp off; the comparison sees it
    real = M._IndexOps._dense_grad_W
    monkeypatch.setattr(M._IndexOps, "_dense_grad_W",
                        lambda self, *a: real(self, *a) * (1.0 + 2.0 ** -52))
    faulty = forward_backward(W, V, batch.X, batch.y, peb, x_query=xq, sparse_grad=True)
    assert not np.array_equal(sparse[1].todense(), faulty[1])
