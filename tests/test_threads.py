"""The second core (stsim.util.threads): the shared thread pool, BLAS pinning, and the
split draw of large sphere encodings — none of them changes a number."""
import threading

import numpy as np
import pytest

import stsim
from stsim.core import encodings
from stsim.util.threads import map_threads, n_cpus, one_blas_thread, parallel_default

THREAD_ENV = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def _unpinned(monkeypatch):
    for k in THREAD_ENV:
        monkeypatch.delenv(k, raising=False)


def test_map_threads_keeps_order_and_uses_the_pool_only_when_allowed(monkeypatch):
    _unpinned(monkeypatch)
    names = []

    def f(x):
        names.append(threading.current_thread().name)
        return x * x
    assert map_threads(f, range(8)) == [x * x for x in range(8)]
    if n_cpus() >= 2:
        assert parallel_default() and all(n.startswith("stsim-fill") for n in names)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")          # a pinned pool worker
    names.clear()
    assert not parallel_default()
    assert map_threads(f, range(8)) == [x * x for x in range(8)]
    assert set(names) == {threading.current_thread().name}


def test_map_threads_raises_the_error_of_an_item(monkeypatch):
    _unpinned(monkeypatch)

    def f(x):
        if x == 3:
            raise ValueError("item 3")
        return x
    with pytest.raises(ValueError, match="item 3"):
        map_threads(f, range(6))


def test_one_blas_thread_pins_and_restores():
    threadpoolctl = pytest.importorskip("threadpoolctl")

    def blas_threads():
        return [p["num_threads"] for p in threadpoolctl.threadpool_info()
                if p["user_api"] == "blas"]
    before = blas_threads()
    with one_blas_thread() as pinned:
        assert pinned and blas_threads() and set(blas_threads()) == {1}
    assert blas_threads() == before
    with one_blas_thread(False) as pinned:
        assert not pinned and blas_threads() == before


def test_pinned_blas_run_matches_unpinned():
    # matrices large enough for OpenBLAS to thread its products (D = 405); prefetch=True
    # pins BLAS to one thread, prefetch=False leaves it alone. The parameters and losses
    # agree bit for bit; the cosines with W*, V* (a BLAS dot product over D^2 entries,
    # reduced in another order on two threads) in the last bits only
    opts = dict(T=200, q=3, d=5, pe="stochastic", d_e=400, steps=6, batch=64, lr=1.0,
                eval_every=3, n_val=64, seed=2)
    a = stsim.run(prefetch=False, **opts)
    b = stsim.run(prefetch=True, **opts)
    for k in a.params:
        np.testing.assert_array_equal(a.params[k], b.params[k])
    for k in a.history:
        if k.startswith("cos_"):
            np.testing.assert_allclose(a.history[k], b.history[k], rtol=1e-12, atol=1e-15)
        else:
            np.testing.assert_array_equal(a.history[k], b.history[k])


BIG = (40, 100, 80)      # 320 000 elements > 2^18: 2 child streams of 3276 rows


def test_large_sphere_draw_same_on_one_thread_or_two(monkeypatch):
    _unpinned(monkeypatch)
    two = encodings._unit_rows(np.random.default_rng(7), BIG)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    one = encodings._unit_rows(np.random.default_rng(7), BIG)
    np.testing.assert_array_equal(one, two)


def test_large_sphere_draw_moves_the_generator_by_four_words():
    rng = np.random.default_rng(11)
    encodings._unit_rows(rng, BIG)
    ref = np.random.default_rng(11)
    ref.integers(0, 2 ** 63, size=4)
    assert rng.bit_generator.state == ref.bit_generator.state


def test_large_sphere_draw_blocks_are_unit_independent_and_centred():
    # 600 000 rows of R^4 in 10 child blocks of 65 536 rows (the last shorter)
    G = encodings._unit_rows(np.random.default_rng(3), (600, 1000, 4)).reshape(-1, 4)
    np.testing.assert_allclose(np.linalg.norm(G, axis=1), 1.0, atol=1e-14)
    per = encodings._BLOCK // 4
    blocks = [G[s:s + per] for s in range(0, len(G), per)]
    assert len(blocks) == 10
    # uniform on S^3: E p = 0, E p p^T = I / 4; each block's mean within 5 standard errors
    for b in blocks:
        se = np.sqrt(0.25 / len(b))
        assert np.all(np.abs(b.mean(axis=0)) < 5 * se)
        # p_k^2 ~ Beta(1/2, 3/2): variance 1/16
        np.testing.assert_allclose((b ** 2).mean(axis=0), 0.25, atol=5 * 0.25 / np.sqrt(len(b)))
    # consecutive blocks are different streams: their first rows are uncorrelated
    a, b = blocks[0][:60000, 0], blocks[1][:60000, 0]
    assert abs(np.corrcoef(a, b)[0, 1]) < 5 / np.sqrt(60000)
    assert not np.array_equal(blocks[0][:10], blocks[1][:10])


@pytest.mark.parametrize("shape", [(8, 50, 64),          # 25 600 elements: small
                                   (1, 5000, 64),        # one sample (a table), 320 000
                                   (5000, 64)])          # a 2-D table, 320 000
def test_small_draws_and_tables_are_one_stream_from_the_generator(shape):
    G = np.random.default_rng(5).standard_normal(shape)
    G /= np.sqrt(np.einsum("...i,...i->...", G, G))[..., None]
    np.testing.assert_array_equal(encodings._unit_rows(np.random.default_rng(5), shape), G)


def test_sphere_run_with_split_draws_resumes_bit_for_bit(tmp_path):
    opts = dict(T=100, q=3, d=3, pe="stochastic", sampler="sphere", d_e=48, batch=64,
                lr=0.5, eval_every=2, n_val=32, seed=6)      # 307 200 elements per batch
    full = stsim.run(steps=6, **opts)
    ck = tmp_path / "ck.npz"
    stsim.run(steps=3, checkpoint=ck, **opts)
    resumed = stsim.run(steps=6, checkpoint=ck, **opts)
    np.testing.assert_array_equal(resumed.W, full.W)
    for k in full.history:
        np.testing.assert_array_equal(resumed.history[k], full.history[k])
