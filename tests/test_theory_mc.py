"""The Monte-Carlo estimates of the theorem checks report standard errors of their means
(not the spread of their batches), and the OOD infimum's θ → ∞ limit is the closed form's."""
import numpy as np
import pytest

from stsim.core.families import make_encoding
from stsim.theory.embedded import block_gradients, mc_ood
from stsim.theory.ood import ood_min_limit, ood_min_onehot
from stsim.theory.reduced import ood_loss_onehot, reduced_gd_scalar, reduced_loss


def test_mc_ood_standard_error_is_the_spread_of_its_mean():
    """Over 30 independent repeats, the SD of the reported means matches the reported SE
    (their ratio is ~1 ± 0.13; an SE that is the batches' SD is √10 too large)."""
    T, Tt, q, d = 9, 16, 2, 3
    enc = make_encoding("stochastic", T_max=Tt, d_e=16)
    tr = reduced_gd_scalar(T, q, d, 0.5, 300, pe=enc)
    a, g = float(tr.a[0, -1]), float(tr.gamma[0, -1])
    rng = np.random.default_rng(5)
    out = np.array([mc_ood(a, g, 16, enc, Tt, q, d, 2000, rng, "sum") for _ in range(30)])
    ratio = out[:, 0].std(ddof=1) / out[:, 1].mean()
    assert 0.6 < ratio < 1.6, ratio
    # and the mean estimates the closed form
    assert abs(out[:, 0].mean() - reduced_loss(a, g, Tt, q, d)) < 4 * out[:, 1].mean() / 5


def test_block_gradient_z_scores_are_those_of_a_standard_error():
    """Per block, the z-scores |mean − exact|/SE are those of t variables: root mean
    square ≈ 1 (18 to 288 entries each), the largest > 1.5; with the batches' SD in place
    of the SE of their mean (in W or in V) every z of that block shrinks by √40."""
    T, q, d = 12, 2, 3
    enc = make_encoding("onehot", T_max=T, d_e=T)
    tr = reduced_gd_scalar(T, q, d, 1 / 180, 20000)
    pts = [2000, 20000]
    bg = block_gradients(T, q, d, enc, "sum", pts,
                         [(tr.a[0, p], tr.gamma[0, p]) for p in pts], n_samples=8000)
    assert 1.5 < bg["max_z_onset"] <= bg["k"] and 1.5 < bg["max_z_offset"] <= bg["k"], bg
    for block, rms in bg["rms_z"].items():           # ≈ 1.03 each; 0.16 for the SD
        assert 0.6 < rms < 1.6, (block, rms)


@pytest.mark.parametrize("T, Tt, q, d", [(12, 16, 2, 3), (12, 48, 2, 3), (200, 400, 3, 5),
                                         (20, 40, 3, 3)])
def test_ood_infimum_limit_is_the_closed_form_at_large_logits(T, Tt, q, d):
    """lim_{θ→∞} min_γ L: the closed form at θ = 60 (e^-60: the limit to rounding),
    minimised over γ (L is quadratic in γ), including the m = 0 term (no selected token
    inside the trained range: uniform attention over all T' tokens)."""
    L = [ood_loss_onehot(60.0, g, T, Tt, q, d) for g in (-1.0, 0.0, 1.0)]
    A, B = (L[0] + L[2] - 2 * L[1]) / d, (L[0] - L[2]) / (2 * d)
    direct = 0.5 * d * (1.0 / q - B * B / A)
    assert ood_min_limit(T, Tt, q, d) == pytest.approx(direct, rel=1e-9)
    F, _ = ood_min_onehot(T, Tt, q, d)
    assert F <= ood_min_limit(T, Tt, q, d) * (1 + 1e-12)
