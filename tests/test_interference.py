"""The near-orthogonal interference law (stsim.theory.interference) against independent
computations: the covariance of the in-subset overlaps, the one-hot limit (where the
closed-form reduced loss is exact), and the shape of the floor in q and d_e."""
import numpy as np
import pytest

from stsim.theory.interference import (interference_floor_approx, interference_floor_mc,
                                       interference_loss_mc, random_table)
from stsim.theory.reduced import reduced_loss


def test_overlap_covariance_gives_the_spread_constant():
    # E Σ_i (ξ_i − ξ̄)² = (q − 1)(q − 2)/d_e for ξ_i = Σ_{j∈y, j≠i} <p_i, p_j>
    rng = np.random.default_rng(0)
    q, d_e, n = 4, 32, 20000
    P = random_table(rng, n * q, d_e).reshape(n, q, d_e)
    G = np.einsum("bik,bjk->bij", P, P)
    xi = G.sum(axis=2) - 1.0
    spread = ((xi - xi.mean(axis=1, keepdims=True)) ** 2).sum(axis=1).mean()
    assert spread == pytest.approx((q - 1) * (q - 2) / d_e, rel=0.05)


def test_onehot_table_has_no_interference_and_matches_reduced_loss():
    T, q, d = 30, 3, 5
    eye = np.eye(T)
    for c, g in ((0.0, 0.0), (2.0, 0.8), (6.0, 1.1)):
        L, _ = interference_loss_mc(c, T, q, d, eye, gamma=g, n_mc=500)
        assert float(L) == pytest.approx(float(reduced_loss(c, g, T, q, d)), rel=1e-10)


def test_floor_vanishes_at_q2_and_falls_with_width():
    rng = np.random.default_rng(1)
    T, d = 50, 5
    tab = random_table(rng, T, 64)
    _, L2 = interference_floor_mc(T, 2, d, tab, n_mc=1500, rng=rng)
    _, L3 = interference_floor_mc(T, 3, d, tab, n_mc=1500, rng=rng)
    assert L2 < 0.25 * L3                      # the spread term is (q-1)(q-2) = 0 at q = 2
    floors = [interference_floor_mc(T, 3, d, random_table(rng, T, de), n_mc=1500, rng=rng)[1]
              for de in (32, 128)]
    # ~1/d_e up to a log² factor: 4x the width divides the floor by 2 to 4
    assert 2.0 < floors[0] / floors[1] < 4.0
    c_a, L_a = interference_floor_approx(T, 3, d, 64)
    assert interference_floor_approx(T, 2, d, 64) == (float("inf"), 0.0)
    assert 0.6 < L_a / L3 < 1.0                # first order: below the Monte-Carlo floor
