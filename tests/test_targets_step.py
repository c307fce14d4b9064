"""The default step of each target (docs/targets.md, "Default step"):
the targets' fourth moments by Gauss–Hermite quadrature, the batch terms they enter
(stsim.core.stability.fourth_excess) against the expectations they are derived from, the
plan decided by the schedule from the target's facts, and cos_W / cos_V against the
target's own construction."""
import itertools
import warnings

import numpy as np
import pytest

import stsim
from stsim import Config
from stsim.core.encodings import PEBatch
from stsim.core.constructions import NO_COS_V, cosine_to_target, target_params, unique_V
from stsim.core.schedule import LongRunWarning
from stsim.core.stability import (KAPPA_W, SAFETY, eta_W_cap, fourth_excess,
                                  sample_curvature)
from stsim.core.constructions import construction
from stsim.core.targets import Mean, Moment, Target, Variance, make_target


def _grid(n_var, nodes):
    """Gauss–Hermite nodes and weights of ``n_var`` independent N(0, 1) variables (exact
    for polynomials of degree < 2 nodes in each)."""
    x, w = np.polynomial.hermite_e.hermegauss(nodes)
    w = w / w.sum()
    pts = np.array(list(itertools.product(x, repeat=n_var)))
    wts = np.prod(np.array(list(itertools.product(w, repeat=n_var))), axis=1)
    return pts, wts


def _quadrature_moments(t, d, nodes=20):
    """``(max_e E[|φ|² (eᵀφ)²], E|φ|⁴)`` of ``t``'s features under x ~ N(0, I_d), exactly."""
    X, w = _grid(d, nodes)
    phi = t.features(X[None])[0]                       # (points, m)
    sq = (phi * phi).sum(axis=1)
    K = np.einsum("p,p,pa,pb->ab", w, sq, phi, phi)
    return np.linalg.eigvalsh(K).max(), float(w @ (sq * sq))


@pytest.mark.parametrize("target", ["mean", "moment:1", "moment:2", "moment:3", "moment:5",
                                    "moment:8", "variance"])
def test_fourth_moments_equal_quadrature(target):
    """``Target.fourth_moments`` (closed forms: ``E h_k⁴ = Σ_j C(k,j)² C(2j,j)`` = 3, 15,
    93, …) against Gauss–Hermite quadrature at d = 2, exact to rounding."""
    t = make_target(target)
    got = t.fourth_moments(2)
    assert got == pytest.approx(_quadrature_moments(t, 2), rel=1e-10)


def test_fourth_moment_check_fails_on_a_seeded_fault():
    """The Gaussian values (the base class's, for φ(x) = x) are not moment:3's."""
    assert Target.fourth_moments(Mean(), 2) != pytest.approx(
        _quadrature_moments(Moment(3), 2), rel=1e-3)


def test_own_features_have_no_assumed_moments():
    class Squares(Target):
        name = "squares"

        def features(self, X):
            return X * X

        def value(self, X, y):
            return X[:, 0]

    assert Squares().fourth_moments(3) is None and fourth_excess(Squares(), 3, 3) == (0, 0)
    assert Mean().fourth_moments(3) == (5.0, 15.0) and fourth_excess(Mean(), 3, 3) == (0, 0)


def _ideal_attention_terms(t, d, q, nodes):
    """By quadrature over q tokens of dimension d with weights 1/q (the solution):
    ``E[|h|² (h·e)²]`` for the worst unit ``e`` (h = Σ_j φ(x_j)/q) and
    ``q E tr((Φ A Φᵀ)²)/(m tr A)``, ``A = (I − J/q)/q²``."""
    X, w = _grid(q * d, nodes)
    phi = t.features(X.reshape(-1, q, d))                # (points, q, m)
    m = phi.shape[2]
    h = phi.mean(axis=1)
    K = np.einsum("p,p,pa,pb->ab", w, (h * h).sum(axis=1), h, h)
    A = (np.eye(q) - 1.0 / q) / q ** 2
    G = np.einsum("pia,ij,pjb->pab", phi, A, phi)        # Φ A Φᵀ per point
    ms = float(w @ np.einsum("pab,pba->p", G, G))
    return np.linalg.eigvalsh(K).max(), q * ms / (m * np.trace(A))


@pytest.mark.parametrize("target,d,q", [("moment:3", 1, 3), ("moment:2", 2, 2),
                                        ("variance", 1, 2), ("mean", 2, 2)])
def test_batch_terms_equal_their_expectations(target, d, q):
    """The derivation of *Heavy tails* (stsim.core.schedule): at the solution,
    ``E[|h|²(h·e)²] = (m + 2)/q² + ε_V/q³`` and ``E tr((JJᵀ)²)/E tr(JJᵀ) =
    c²((q + m)/q + ε_W)`` (c = γ = 1), by exact quadrature over the q selected tokens."""
    t = make_target(target)
    m = t.feature_dim(d)
    e_V, e_W = fourth_excess(t, d, q)
    v, ms = _ideal_attention_terms(t, d, q, nodes=8)
    assert v == pytest.approx((m + 2) / q ** 2 + e_V / q ** 3, rel=1e-9)
    assert ms == pytest.approx((q + m) / q + e_W, rel=1e-9)
    # the step is built from it: V's part of one sample's curvature is q E[|h|²(h·e)²]
    # (W's parts off: c = 0), and W's cap is 2B·SAFETY over that ratio's excess
    assert sample_curvature(q, m, 0.0, False, e_V) == pytest.approx(q * v, rel=1e-9)
    assert eta_W_cap(256, 1.0, e_W) == pytest.approx(SAFETY * 2 * 256 / (KAPPA_W + e_W))


def test_the_step_is_built_from_the_effective_dim_and_the_excess():
    """Each number the default step is built from, pinned where a one-line fault moves it:
    the variance's effective d is dim φ = 2d (its W step at T = 200 is 20, 40 on d);
    ε_V enters one sample's curvature as ε_V/q (moment:3's V step at T = 200 is 2.603,
    2.163 with ε_V); the label "derived" only for the mean task on features."""
    assert [Variance().effective_dim(d) for d in (1, 5)] == [2, 10]
    assert _lr("variance", T=200)[0]["W"] == pytest.approx(20.0021, abs=1e-4)
    assert _lr("moment:3", T=200)[0]["V"] == pytest.approx(2.6034, abs=1e-4)
    assert _lr("variance", T=200)[0]["V"] == pytest.approx(2.789, abs=1e-3)

    class Squares(Target):                     # separable, linear, features not orthonormal
        name, separable = "squares", True

        def features(self, X):
            return X * X

        def value(self, X, y):
            return np.take_along_axis(X * X, y[:, :, None], axis=1).mean(axis=1)

    note = _lr(Squares(), T=50, steps=10, lr=0.1)[2].note
    assert "derived" not in note.split("target squares:")[-1].split("neither")[0]
    assert "neither derived nor measured" in _lr(Squares(), T=50)[2].note


def test_batch_term_check_fails_on_a_seeded_fault():
    """With the Gaussian excess (0, 0) in place of moment:3's the check is off by far."""
    v, ms = _ideal_attention_terms(Moment(3), 1, 3, nodes=8)
    assert v != pytest.approx(3 / 9, rel=0.1) and ms != pytest.approx(4 / 3, rel=0.1)


# ---- the plan: the schedule decides, the target gives facts ---------------------------------
def _lr(target, **kw):
    with warnings.catch_warnings():                  # long default runs warn: not run here
        warnings.simplefilter("ignore", LongRunWarning)
        c = Config(q=3, target=target, **kw).resolve()
    return c.lr, c.steps, c.resolved.plan


def test_mean_and_moment_1_plans_are_the_mean_plan():
    for kw in (dict(T=50), dict(T=200), dict(T=12, batch=64), dict(T=2000)):
        assert _lr("mean", **kw)[:2] == _lr("moment:1", **kw)[:2]


def test_heavy_tails_shrink_the_step():
    """V's step (its batch term ``ε_V/q²``) and W's cap ``B/(c²(KAPPA_W + ε_W))`` fall
    with E h_k⁴; at T = 200 moment:3's W step is the cap 256/21 and its step count grows."""
    lrs = [_lr(f"moment:{k}", T=200)[0] for k in (1, 2, 3, 4)]
    assert all(a["V"] > b["V"] for a, b in zip(lrs, lrs[1:]))
    assert all(a["W"] >= b["W"] for a, b in zip(lrs, lrs[1:]))
    lr, steps, _ = _lr("moment:3", T=200)
    e_W = fourth_excess(Moment(3), 5, 3)[1]
    assert e_W == pytest.approx(20.0) and lr["W"] == pytest.approx(256 / (KAPPA_W + e_W))
    assert steps > _lr("mean", T=200)[1]


def test_the_plan_follows_the_targets_facts():
    """A moment:3 that reports Gaussian fourth moments gets the mean's numbers; one that
    reports a larger effective d gets that d's plan (the schedule asks, never the name)."""
    class Light(Moment):
        def fourth_moments(self, d):
            return Target.fourth_moments(Mean(), d)

    class Wide(Moment):
        def effective_dim(self, d):
            return 2 * d

    for kw in (dict(T=50), dict(T=200)):
        assert _lr(Light(3), **kw)[:2] == _lr("moment:1", **kw)[:2]
        assert _lr(Wide(1), **kw)[:2] == _lr("moment:1", d=10, **kw)[:2]
    assert "eps_V = 90" in _lr("moment:3", T=50, steps=10)[2].note
    assert not hasattr(Target, "plan")


def test_variance_plan_keeps_its_measured_factors():
    lr, _, p = _lr("variance", T=50)
    assert lr["b"] == lr["Q"] == pytest.approx(0.05 * lr["V"])
    assert "measured on T=50" in p.note


# ---- cos_W, cos_V against the target's construction -----------------------------------------
@pytest.mark.parametrize("target", ["mean", "moment:2", "variance"])
def test_target_params_are_the_construction(target):
    W, V = target_params(3, 7, target)
    p = construction(target, 3, 7, beta=1.0)
    assert np.array_equal(W, p["W"]) and np.array_equal(V, p["V"])


def test_cosines_against_the_targets_construction():
    rng = np.random.default_rng(0)
    d, d_e = 3, 7
    for target in ("mean", "moment:3"):
        W, V = target_params(d, d_e, target)
        assert cosine_to_target(2.0 * W, 3.0 * V, d, target) == pytest.approx((1.0, 1.0))
        Vr = rng.standard_normal(V.shape)
        cv = np.sum(Vr * V) / (np.linalg.norm(Vr) * np.linalg.norm(V))
        assert cosine_to_target(W, Vr, d, target)[1] == pytest.approx(cv)
    W, V = target_params(d, d_e, "variance")            # m = 2d: W* on the last d_e rows
    cw, cv = cosine_to_target(W, V, d, "variance")
    assert W.shape == (2 * d + d_e,) * 2 and cw == pytest.approx(1.0) and cv is None
    assert unique_V("variance", d) is None and unique_V("moment:2", d) is not None


def test_variance_construction_is_not_unique():
    """The reason cos_V is omitted: with one-hot encodings ``Σ_k (h_e)_k = 1``, so moving
    the constant from b to ``V_e = u 1ᵀ`` leaves the loss at 0 while ``V`` changes."""
    T, q, d = 8, 3, 2
    rng = np.random.default_rng(1)
    t = make_target("variance")
    p = construction(t, d, T)
    V2, b2 = p["V"].copy(), p["b"] - 0.7
    V2[:, t.feature_dim(d):] += 0.7
    b = t.draw(rng, 256, T, q, d, features=True)
    pe = PEBatch(d_e=T, idx=np.arange(T))
    for V, bb in ((p["V"], p["b"]), (V2, b2)):
        loss = stsim.forward_backward(p["W"], V, b.X, b.y, pe, target=b.target,
                                      readout={"b": bb, "Q": p["Q"]}, need_grad=False)[0]
        assert loss < 1e-20
    Vs = p["V"]
    assert np.sum(V2 * Vs) / (np.linalg.norm(V2) * np.linalg.norm(Vs)) < 0.9


def test_runs_record_cosines_against_their_target():
    m3 = stsim.run(T=12, q=2, steps=20, batch=16, target="moment:3", progress=False)
    W, V = m3.params["W"], m3.params["V"]
    assert m3.history["cos_V"][-1] == cosine_to_target(W, V, 5, "moment:3")[1]
    va = stsim.run(T=12, q=2, steps=20, batch=16, target="variance", progress=False)
    assert "cos_V" not in va.history and "cos_W" in va.history
    assert va.info["cos_V"] == NO_COS_V and NO_COS_V in va.summary()
    labels = [ln.get_label() for ln in va.plot().axes[2].get_lines()]
    assert labels == ["cos(W, W*)"]                 # the figure draws what is recorded
    mean = stsim.run(T=12, q=2, steps=20, batch=16, progress=False)
    assert "cos_V" in mean.history and "cos_V" not in mean.info


@pytest.mark.slow
def test_moment_3_learns_at_T200_with_its_default_step():
    """``stsim.run(T=200, q=3, target="moment:3")`` at its default (W 12.19, V 2.603, 3000
    steps), seed 0: 0.0073 of L(0) measured (seeds 1, 2: docs/targets.md); before the
    fourth moment entered the batch terms, W 40, V 2.898, 1200 steps: 0.11."""
    res = stsim.run(T=200, q=3, target="moment:3", seed=0, progress=False)
    assert res.final("val") <= 0.02 * Moment(3).zero_loss(5, 3)
    assert "derived" in res.message
