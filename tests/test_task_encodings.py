"""Task sampler and positional encodings."""
import itertools
import math

import numpy as np
import pytest
from scipy import stats

import stsim
from stsim.core.encodings import coherence
from stsim.core.families import make_encoding


def test_batch_shapes_and_target():
    rng = np.random.default_rng(0)
    b = stsim.sample_batch(rng, 7, 10, 3, 4)
    assert b.X.shape == (7, 10, 4) and b.X.dtype == np.float64
    assert b.y.shape == (7, 3) and b.target.shape == (7, 4)
    for i in range(7):
        assert len(set(b.y[i])) == 3 and b.y[i].min() >= 0 and b.y[i].max() < 10
        np.testing.assert_allclose(b.target[i], b.X[i, b.y[i]].mean(axis=0))


def test_subsets_are_uniform():
    """Chi-square test of the 15 subsets of size 2 of {0..5} over 60000 draws."""
    rng = np.random.default_rng(1)
    y = np.sort(stsim.sample_subsets(rng, 60000, 6, 2), axis=1)
    index = {s: i for i, s in enumerate(itertools.combinations(range(6), 2))}
    counts = np.bincount([index[tuple(r)] for r in y], minlength=15)
    assert stats.chisquare(counts).pvalue > 1e-3
    # q = T gives the whole set; q = 1 is uniform over positions
    assert set(stsim.sample_subsets(rng, 1, 5, 5)[0]) == set(range(5))


def test_same_seed_same_numbers():
    a = stsim.sample_batch(np.random.default_rng(5), 3, 8, 2, 3)
    b = stsim.sample_batch(np.random.default_rng(5), 3, 8, 2, 3)
    np.testing.assert_array_equal(a.X, b.X)
    np.testing.assert_array_equal(a.y, b.y)


@pytest.mark.parametrize("kw,match", [
    (dict(B=2, T=5, q=0, d=3), "q must be an integer in \\[1, 5\\]"),
    (dict(B=2, T=5, q=6, d=3), "q must be an integer in \\[1, 5\\]"),
    (dict(B=2, T=5, q=2.5, d=3), "q must be an integer"),
    (dict(B=0, T=5, q=2, d=3), "B must be"),
    (dict(B=2, T=5, q=2, d=0), "d must be"),
])
def test_task_bad_input(kw, match):
    with pytest.raises(ValueError, match=match):
        stsim.sample_batch(np.random.default_rng(0), **kw)


def test_slots_distinct_sorted_and_uniform():
    rng = np.random.default_rng(2)
    enc = make_encoding("stochastic", T_max=6, d_e=10, sampler="slots")
    pe = enc.sample(rng, 20000, 6)
    idx = pe.idx
    assert pe.is_index and idx.shape == (20000, 6)
    assert np.all(np.diff(idx, axis=1) > 0) and idx.min() >= 0 and idx.max() < 10
    # every slot is used with probability T/d_e = 0.6
    freq = np.bincount(idx.ravel(), minlength=10) / 20000
    np.testing.assert_allclose(freq, 0.6, atol=0.015)


def test_onehot_and_sphere_and_near_orthogonal():
    rng = np.random.default_rng(3)
    oh = make_encoding("onehot", T_max=5, d_e=8).sample(rng, 4, 5)
    np.testing.assert_array_equal(oh.dense(), np.eye(8)[:5])
    sp = make_encoding("stochastic", T_max=5, d_e=16, sampler="sphere").sample(rng, 4, 5)
    np.testing.assert_allclose(np.linalg.norm(sp.P, axis=-1), 1.0)
    no = make_encoding("near-orthogonal", T_max=50, d_e=256, rng=rng)
    P = no.sample(rng, 4, 50).P
    G = P @ P.T
    np.testing.assert_allclose(np.diag(G), 1.0)
    assert no.delta == pytest.approx(np.abs(G - np.diag(np.diag(G))).max())
    # random unit vectors: δ ≈ sqrt(2 log(n²)/d_e) — well below 1 and of that order
    assert 0.1 < no.delta < 2 * math.sqrt(4 * math.log(50) / 256)
    # fixed: the same table for every call
    np.testing.assert_array_equal(P, no.sample(rng, 2, 50).P)


def test_coherence_blocks():
    rng = np.random.default_rng(4)
    P = rng.standard_normal((37, 5))
    G = P @ P.T
    np.fill_diagonal(G, 0)
    assert coherence(P, block=8) == pytest.approx(np.abs(G).max())


@pytest.mark.parametrize("args,match", [
    (dict(pe="onehot", T_max=10, d_e=9), "d_e=9 is too small"),
    (dict(pe="stochastic", T_max=10, d_e=5, sampler="slots"), "d_e=5 is too small"),
    (dict(pe="rope", T_max=10), "pe must be one of"),
    (dict(pe="stochastic", T_max=10, sampler="gauss"), "sampler must be one of"),
    (dict(pe="near-orthogonal", T_max=10, d_e=8), "rng is required"),
    (dict(pe="onehot", T_max=10, d_e=0), "d_e must be"),
])
def test_encoding_bad_input(args, match):
    with pytest.raises(ValueError, match=match):
        make_encoding(**args)


@pytest.mark.parametrize("n,k", [(6, 3), (7, 5), (5, 1)])
def test_sorted_subsets_uniform_over_subsets(n, k):
    """Every one of the C(n, k) subsets is equally likely (chi-square), rows increasing."""
    from scipy.stats import chisquare
    from stsim.core.encodings import sorted_subsets
    N = 30000
    idx = sorted_subsets(np.random.default_rng(11), N, n, k)
    assert idx.shape == (N, k) and np.all(np.diff(idx, axis=1) > 0)
    code = (idx * n ** np.arange(k)).sum(axis=1)
    subsets = list(itertools.combinations(range(n), k))
    table = {sum(s[i] * n ** i for i in range(k)): j for j, s in enumerate(subsets)}
    counts = np.bincount([table[c] for c in code], minlength=len(subsets))
    assert counts.sum() == N and counts.min() > 0
    assert chisquare(counts).pvalue > 1e-3
    np.testing.assert_array_equal(sorted_subsets(np.random.default_rng(0), 3, 4, 4),
                                  np.tile(np.arange(4), (3, 1)))


def test_sorted_subsets_redraws_tied_rows():
    """A row whose k-th and (k+1)-th keys tie is drawn again (the others are kept)."""
    from stsim.core.encodings import sorted_subsets

    class Keys:
        def __init__(self, arrays):
            self.arrays = list(arrays)

        def random(self, shape):
            a = self.arrays.pop(0)
            assert a.shape == shape
            return a

    first = np.array([[0.1, 0.5, 0.5, 0.9], [0.4, 0.3, 0.2, 0.1]])   # row 0: tie at k = 2
    again = np.array([[0.8, 0.2, 0.6, 0.1]])
    idx = sorted_subsets(Keys([first, again]), 2, 4, 2)
    np.testing.assert_array_equal(idx, [[1, 3], [2, 3]])


def test_unit_rows_blockwise_is_the_same_stream():
    """The block-wise sphere sampler gives, bit for bit, the numbers of one big draw
    normalised at once."""
    from stsim.core import encodings
    shape = (7, 300, 33)                       # several blocks, a partial last one
    G = np.random.default_rng(4).standard_normal(shape)
    G /= np.sqrt(np.einsum("...i,...i->...", G, G))[..., None]
    np.testing.assert_array_equal(encodings._unit_rows(np.random.default_rng(4), shape), G)


def test_sinusoid_codes_are_unit_smooth_and_ordered():
    """The smooth randomised ordered encoding: unit codes whose inner product is
    ``(2/d_e) Σ_j cos(ω_j (k − k'))``, a function of the gap alone (derivation in its
    docstring), near 1 for neighbours and small far apart; per sample the indices are
    distinct and increasing (decoded from the codes); bad widths and lengths refused."""
    from stsim.core.encodings import StochasticSinusoid
    enc = StochasticSinusoid(32, span=200)
    P = enc.table
    assert np.allclose(np.linalg.norm(P, axis=1), 1.0)
    omega = 200.0 ** (-2.0 * np.arange(16) / 32)
    for k, k2 in ((0, 1), (17, 18), (5, 60), (120, 199)):
        want = (2 / 32) * np.cos(omega * (k - k2)).sum()
        assert P[k] @ P[k2] == pytest.approx(want, abs=1e-12)
    assert P[10] @ P[11] == pytest.approx(P[150] @ P[151], abs=1e-12)   # gap only
    assert P[10] @ P[11] > 0.9 and P[10] @ P[11] > P[10] @ P[14] > P[10] @ P[74]
    assert (round(P[10] @ P[11], 2), round(P[10] @ P[12], 2)) == (0.94, 0.79)   # docs
    pe = enc.sample(np.random.default_rng(0), 50, 40)
    idx = np.argmax(pe.P @ P.T, axis=-1)                                  # decode
    assert np.allclose(pe.P, P[idx]) and (np.diff(idx, axis=1) > 0).all()
    assert pe.P.shape == (50, 40, 32) and not pe.is_index
    with pytest.raises(ValueError, match="d_e must be even"):
        StochasticSinusoid(33, span=100)
    with pytest.raises(ValueError, match="span=200"):
        enc.sample(np.random.default_rng(0), 1, 201)


def test_sinusoid_is_a_sampler_of_run():
    import stsim
    r = stsim.run(T=12, q=2, pe="stochastic", sampler="sinusoid", d_e=16, steps=5,
                  progress=False, T_test=(20,))
    assert (r.config["sampler"], r.config["d_e"]) == ("sinusoid", 16)
    again = stsim.run(**r.config)
    assert np.array_equal(again.params["W"], r.params["W"])
