"""The O(k) draw of sorted uniform k-subsets of {0..n-1} for n large against k
(encodings._sparse_subsets, used by sorted_subsets and so by stochastic/slots when
d_e >= 4T): uniform over the subsets, rows increasing, and where it is used."""
import itertools
import math

import numpy as np
import pytest
from scipy.stats import chisquare

from stsim.core import encodings as E


def _subset_counts(idx, n, k):
    subsets = {s: j for j, s in enumerate(itertools.combinations(range(n), k))}
    counts = np.zeros(len(subsets), dtype=int)
    for row in map(tuple, idx):
        counts[subsets[row]] += 1
    return counts


@pytest.mark.parametrize("n,k", [(30, 1), (32, 2)])
def test_sparse_subsets_uniform_over_subsets(n, k):
    """Every one of the C(n, k) subsets is equally likely (chi-square), rows increasing,
    and sorted_subsets takes this path at these sizes."""
    assert n >= 4 * k and n >= 2 * E._sparse_mean(k)
    N = 40000
    idx = E._sparse_subsets(np.random.default_rng(5), N, n, k)
    assert idx.shape == (N, k) and idx.dtype == np.int64
    assert np.all(np.diff(idx, axis=1) > 0) and idx.min() >= 0 and idx.max() < n
    counts = _subset_counts(idx, n, k)
    assert counts.min() > 0 and chisquare(counts).pvalue > 1e-3
    np.testing.assert_array_equal(E.sorted_subsets(np.random.default_rng(5), N, n, k), idx)


def test_sparse_subsets_marginals_at_a_larger_size():
    """n = 400, k = 50: each slot in a row with probability k/n, each pair with
    k(k−1)/(n(n−1)) (within 5 standard errors)."""
    n, k, N = 400, 50, 20000
    idx = E._sparse_subsets(np.random.default_rng(6), N, n, k)
    assert np.all(np.diff(idx, axis=1) > 0) and idx.max() < n
    freq = np.bincount(idx.ravel(), minlength=n) / N
    p = k / n
    assert np.all(np.abs(freq - p) < 5 * math.sqrt(p * (1 - p) / N) + 1e-12)
    M = np.zeros((N, n), dtype=bool)
    np.put_along_axis(M, idx, True, axis=1)
    pair = (M[:, 0] & M[:, n - 1]).mean(), (M[:, 10] & M[:, 11]).mean()
    p2 = k * (k - 1) / (n * (n - 1))
    for v in pair:
        assert abs(v - p2) < 5 * math.sqrt(p2 * (1 - p2) / N)


def test_a_biased_variant_fails_the_checks():
    """Seeded fault: keeping the first k members of the Bernoulli set (keys increasing with
    the position) instead of k uniform ones favours small slots; the chi-square rejects it."""

    class FirstK:                                   # the real gaps, position-ordered keys
        def __init__(self, rng):
            self.rng = rng

        def standard_exponential(self, shape):
            return self.rng.standard_exponential(shape)

        def random(self, shape):
            return np.broadcast_to(np.linspace(0, 0.5, shape[1]), shape).copy()

    n, k, N = 32, 2, 40000
    idx = E._sparse_subsets(FirstK(np.random.default_rng(5)), N, n, k)
    assert np.all(np.diff(idx, axis=1) > 0)
    assert chisquare(_subset_counts(idx, n, k)).pvalue < 1e-6


def test_dense_slots_keep_their_stream():
    """d_e < 4T (the default d_e = 2T): the key-and-partition draw, as before."""
    rng_a, rng_b = np.random.default_rng(8), np.random.default_rng(8)
    B, n, k = 5, 20, 10
    keys = rng_b.random((B, n))
    expect = np.sort(np.argsort(keys, axis=1)[:, :k], axis=1)
    np.testing.assert_array_equal(E.sorted_subsets(rng_a, B, n, k), expect)


def test_sparse_subsets_refuses_a_dense_size():
    with pytest.raises(ValueError, match="n >= 2"):
        E._sparse_subsets(np.random.default_rng(0), 2, 10, 5)
