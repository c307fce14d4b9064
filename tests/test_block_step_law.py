"""The derived step per block (stsim.core.stability, *A step per block*): W_ee's one-sample
curvature kappa_W against finite differences, its bound c² along the reduced map, W's step
as the smaller of the plateau cap and half W_ee's mean-square bound, and the arithmetic of
the up-front time estimate."""
import math
import warnings

import numpy as np
import pytest

from stsim.core.config import Config
from stsim.core.reduced import reduced_map, reduced_map_steps
from stsim.core import cost, stability
from stsim.core.cost import wall_seconds
from stsim.core.stability import KAPPA_W, NOISE_W, eta_V_max, eta_W_block, kappa_W


def _output(Wee, X, slots, sel, gamma, c):
    """The theory model's output on one sample with W's token rows and V_e at 0:
    ``γ X softmax(c Σ_{s∈S} W_ee[slot_k, s])`` (docs/model.md, "Forward and backward")."""
    z = c * Wee[np.ix_(slots, sel)].sum(axis=1)
    s = np.exp(z - z.max())
    return gamma * X @ (s / s.sum())


def _fd_curvature(a, gamma, T, q, c, n, samples, rng, h=1e-6):
    """Mean over samples of tr(J Jᵀ)/d, J the output's Jacobian in W_ee by central
    differences over the T q entries a sample's logits read."""
    d = 4
    Wee = a * np.eye(n)
    out = []
    for _ in range(samples):
        slots = rng.choice(n, T, replace=False)
        sel = slots[:q]
        X = rng.standard_normal((d, T))
        J = []
        for i in slots:
            for j in sel:
                Wp, Wm = Wee.copy(), Wee.copy()
                Wp[i, j] += h
                Wm[i, j] -= h
                J.append((_output(Wp, X, slots, sel, gamma, c)
                          - _output(Wm, X, slots, sel, gamma, c)) / (2 * h))
        J = np.array(J).T                                  # (d, T q)
        out.append(np.trace(J @ J.T) / d)
    return np.mean(out), np.std(out, ddof=1) / math.sqrt(samples)


@pytest.mark.parametrize("a, gamma, T, q, c", [(0.0, 0.7, 8, 3, 1.0), (2.5, 3.0, 10, 2, 1.0),
                                                (6.0, 1.3, 7, 3, 1 / 3), (12.0, 1.0, 6, 2, 1.0)])
def test_kappa_W_is_one_samples_curvature_through_W_ee(a, gamma, T, q, c):
    """kappa_W = c² q γ² tr Σ_s² is E tr(J Jᵀ)/d; the seeded fault — the solution's value
    c²(q−1)γ²/q used off the solution — is far outside the error."""
    rng = np.random.default_rng(7)
    mean, se = _fd_curvature(a, gamma, T, q, c, 2 * T, 300, rng)
    k = kappa_W(a, gamma, T, q, c)
    assert abs(mean - k) < 4 * se + 1e-9, (mean, se, k)
    if a < 10:
        wrong = c * c * (q - 1) * gamma * gamma / q
        assert abs(mean - wrong) > 8 * se, (mean, se, wrong)
    else:                                        # at the solution the two agree
        assert k == pytest.approx(c * c * (q - 1) * gamma * gamma / q, rel=1e-3)


@pytest.mark.parametrize("q", [2, 3, 5])
@pytest.mark.parametrize("T", [20, 200, 1000])
@pytest.mark.parametrize("query", ["sum", "mean"])
def test_kappa_W_stays_below_c2_along_the_map_and_far_above_its_solution_value(q, T, query):
    """Along the reduced map of the derived default (W's step and V's), sup kappa_W <= c²
    (KAPPA_W, the bound W's step uses), and it exceeds the solution's c²(q−1)/q: γ
    overshoots while the attention concentrates."""
    c = 1.0 if query == "sum" else 1.0 / q
    n, d, B = 2 * T, 5, 256
    lr = {"W": eta_W_block(q, d, n, c, B), "V": 0.5 * eta_V_max(q, d, B, c, token_rows=False)}
    tgt = reduced_map_steps(T, q, d, lr, n, c=c)[1]
    sup = max(kappa_W(a, g, T, q, c) for _, (L, a, b, g) in
              zip(range(2 * tgt), reduced_map(T, q, d, lr, n, c=c)))
    assert sup <= c * c * KAPPA_W
    assert sup > max(0.6, (q - 1) / q) * c * c


def _expected_W(q, d, n, c, B):
    return min(NOISE_W * B * n / (c * c * q * d), B / (c * c))


def test_W_step_is_the_smaller_of_the_plateau_cap_and_half_W_ees_bound(monkeypatch):
    """eta_W = min(NOISE_W B n/(c² q d), B/c²): unchanged up to n = q d/NOISE_W (T = 1000
    with slots keeps n/10), B/c² beyond (T = 2000: 256, not n/10 = 400)."""
    for q, d, n, c, B in [(3, 5, 400, 1.0, 256), (3, 5, 2000, 1.0, 256), (3, 5, 4000, 1.0, 256),
                          (3, 5, 4000, 1 / 3, 256), (2, 5, 9000, 1.0, 32), (5, 5, 4000, 1.0, 1)]:
        assert eta_W_block(q, d, n, c, B) == pytest.approx(_expected_W(q, d, n, c, B))
    cross = 3 * 5 / NOISE_W
    assert eta_W_block(3, 5, cross * 0.999, 1.0, 256) < 256 == eta_W_block(3, 5, cross * 1.001,
                                                                           1.0, 256)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        low = Config.from_options(T=1000, q=3)
        assert low.lr["W"] == pytest.approx(NOISE_W * 256 * 2000 / 15)     # n/10, unchanged
        high = Config.from_options(T=2000, q=3)
        assert high.lr["W"] == pytest.approx(256.0) and high.freeze == ("W_xx", "W_xe")
        # the seeded fault: without the descent bound T = 2000 takes n/10 = 400
        monkeypatch.setattr(stability, "KAPPA_W", 1e-9)
        assert Config.from_options(T=2000, q=3).lr["W"] == pytest.approx(400.0, rel=1e-3)


def test_wall_seconds_is_its_formula():
    """START_S + steps · (B T SECONDS_PER_TOKEN_AHEAD) + records · RECORD_COST of a step per
    training batch of validation tokens (arithmetic only: no timing)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cfg = Config.from_options(T=200, q=3)
    per = cost.SECONDS_PER_TOKEN_AHEAD * cfg.batch * cfg.T
    n_rec = cfg.steps // cfg.eval_every + 2
    rec = cost.RECORD_COST * per * cfg.n_val / cfg.batch
    assert wall_seconds(cfg, ahead=True, statistics=False) == pytest.approx(
        cost.START_S + cfg.steps * per + n_rec * rec, rel=1e-12)
    one = cost.SECONDS_PER_TOKEN * cfg.batch * cfg.T
    assert wall_seconds(cfg, ahead=False) == pytest.approx(
        cost.START_S + cfg.steps * one + n_rec * cost.RECORD_COST * one * 0.5,
        rel=1e-12)
    assert wall_seconds(cfg, steps=10, ahead=True) < wall_seconds(cfg, ahead=True)
    # the default call draws its tokens through their statistics: its own per-token cost,
    # measured with the records, and the schedule's estimate is that one
    assert cfg.draws == "statistics"
    stats = cost.START_S + cfg.steps * cost.SECONDS_PER_TOKEN_STATS * cfg.batch * cfg.T
    assert wall_seconds(cfg, ahead=True) == pytest.approx(stats, rel=1e-12)
    assert cfg.resolved.plan.estimated_s == pytest.approx(wall_seconds(cfg), rel=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tok = Config.from_options(T=200, q=3, draws="tokens")
    assert tok.resolved.plan.estimated_s == pytest.approx(
        wall_seconds(tok, statistics=False), rel=1e-12)
