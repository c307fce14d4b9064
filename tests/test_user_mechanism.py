"""A mechanism of one's own, defined only in this file — softplus attention,
``s = log(1 + e^l)/n`` — through everything a built-in one goes through: its gradients,
:func:`stsim.run` (no default step unless it declares a rule), the reduced dynamics against
finite differences and full-matrix population GD, a config that runs it again,
``Result.attention``, and the attention study's quick mode. The ``Attention`` base class
itself, which defines no map, is refused before any work."""
import json

import numpy as np
import pytest

import stsim
from conftest import SMALL
from stsim.core.attention import Attention, Sigmoid
from stsim.core.attention_dynamics import reduced_gd, reduced_loss_grad
from stsim.core.gradcheck import check_grad


class Softplus(Attention):
    """``s = log(1 + e^l)/n``; ``∂s/∂l = σ(l)/n = (1 − e^{−n s})/n`` (from ``s`` alone)."""

    name = "softplus"

    def phi(self, l, n=1):
        return np.logaddexp(0.0, l) / n

    def dphi_from_s(self, s, n=1):
        return -np.expm1(-n * s) / n


class SoftplusNorm(Softplus):
    """Declares itself element-wise and normalised (``n = N``): the paper model's step."""

    name = "softplus-norm"
    normalised = True


def test_gradients_by_finite_differences():
    rng = np.random.default_rng(0)
    B, T, q, d = 4, 7, 2, 3
    batch = stsim.sample_batch(rng, B, T, q, d)
    P = rng.standard_normal((T, 9)) / 3
    W, V = 0.5 * rng.standard_normal((d + 9,) * 2), 0.5 * rng.standard_normal((d, d + 9))
    for att, model in ((Softplus(0.7), "theory"), (SoftplusNorm(), "practical")):
        def fg(p):
            loss, dW, dV = stsim.loss_and_grad(p[0], p[1], batch.X, batch.y, P, model=model,
                                               attention=att)
            return loss, [dW, dV]
        check_grad(fg, [W, V], rng, n_dirs=4, h=1e-6, rtol=1e-6)


def test_run_asks_for_lr_before_any_work(tmp_path):
    """No rule declared: no default step (the softmax one diverged at step 2), said before
    any work; with an lr, or with a declared rule, it trains."""
    out = tmp_path / "c.npz"
    with pytest.raises(ValueError, match=r"no default lr is known for the softplus "
                                         r"mechanism: give lr"):
        stsim.run(T=20, q=2, attention=Softplus(), steps=300, checkpoint=out)
    assert not out.exists()
    res = stsim.run(T=12, q=2, attention=Softplus(), lr=0.2, steps=300, batch=64,
                    progress=False)       # measured: 0.78 of the initial loss (as a sigmoid,
    assert res.status == "completed" and res.config["attention_object"] == "Softplus"
    assert res.history["val"][-1] < 0.85 * res.history["val"][0]   # every token weighs in)
    declared = type("Measured", (Softplus,), {"measured_lr": (2.0, 0.1)})()   # min(0.1, 2/T)
    assert stsim.Config.from_options(T=12, q=2, attention=declared).lr == 0.1
    cfg = stsim.Config.from_options(T=12, q=2, attention=SoftplusNorm())
    assert cfg.lr == stsim.Config.from_options(T=12, q=2, attention="relu-norm").lr
    res = stsim.run(config=cfg, steps=300, batch=64, progress=False)
    assert res.status == "completed" and res.history["val"][-1] < 0.5 * res.history["val"][0]


def test_attention_base_class_refused_before_work(tmp_path):
    ck = tmp_path / "ck.npz"
    for lr in (None, 0.1):
        with pytest.raises(ValueError, match="attention: Attention.*defines no map"):
            stsim.run(**SMALL, steps=3, lr=lr, init="random", attention=Attention(),
                      checkpoint=ck)
    assert not ck.exists()


def test_a_step_of_ones_own_is_obeyed_and_can_diverge():
    """docs/attention.md's numbers at T = 20, q = 2 (2 000 steps, batch 256): undeclared,
    lr 0.2 diverges at step 24 and lr 0.1 ends at 64% of L(0); declared normalised, the
    paper model's step learns (2.2%)."""
    bad = stsim.run(T=20, q=2, attention=Softplus(), lr=0.2, progress=False)
    assert bad.status == "diverged" and "at step 24" in bad.message
    slow = stsim.run(T=20, q=2, attention=Softplus(), lr=0.1, progress=False)
    assert slow.status == "completed"
    assert 0.60 < slow.final("val") / slow.history["val"][0] < 0.68
    good = stsim.run(T=20, q=2, attention=SoftplusNorm(), progress=False)
    assert good.final("val") / good.history["val"][0] == pytest.approx(0.0216, abs=0.001)


def test_user_mechanism_round_trips_through_its_config(tmp_path):
    """``attention`` given as one's own object is recorded like ``pe``, ``optimizer`` and
    ``arch`` (``attention_object``): the config runs again with the object given again
    (bit-identical), without it the message says to pass it."""
    r = stsim.run(T=8, q=2, attention=Softplus(), init="random", lr=0.1, steps=20,
                  batch=32, progress=False)
    assert r.config["attention_object"] == "Softplus"
    again = stsim.run(config=r.config, attention=Softplus(), progress=False)
    assert again.config == r.config and np.array_equal(again.W, r.W)
    with pytest.raises(ValueError, match=r"attention was an object \(Softplus.*pass the "
                                         r"object again"):
        stsim.run(config=r.config, progress=False)
    builtin = stsim.run(T=8, q=2, attention=Sigmoid(), steps=2, progress=False)
    assert "attention_object" not in builtin.config    # a built-in one: its name


def test_result_attention_of_a_user_mechanism(tmp_path):
    """``Result.attention`` uses the run's mechanism object (before: refused as not a
    built-in name); a loaded result asks for it again (``mechanism=``) and then gives the
    same weights."""
    r = stsim.run(T=8, q=2, attention=Softplus(), init="random", lr=0.1, steps=20,
                  batch=32, progress=False)
    s, X, y = r.attention(n=2, return_inputs=True)
    assert s.shape == (2, 8) and np.all(s > 0)
    assert not np.allclose(s.sum(1), 1.0)        # not softmax: softplus of each logit
    loaded = stsim.load(r.save(tmp_path / "r.npz"))
    with pytest.raises(ValueError, match=r"mechanism was an object \(Softplus.*"
                                         r"mechanism=<the Softplus>"):
        loaded.attention(n=2)
    assert np.array_equal(loaded.attention(n=2, mechanism=Softplus()), s)


@pytest.mark.parametrize("att", [Softplus(), SoftplusNorm(0.6)])
@pytest.mark.parametrize("practical", [False, True])
def test_reduced_loss_grad_by_finite_differences(att, practical):
    x = np.array([0.4, 0.15, 0.7])
    args = (9, 3, 4)

    def L(v):
        return float(reduced_loss_grad(att, *v, *args, practical=practical)[0])
    grad = [float(g) for g in reduced_loss_grad(att, *x, *args, practical=practical)[1:]]
    h = 1e-6
    fd = [(L(x + h * e) - L(x - h * e)) / (2 * h) for e in np.eye(3)]
    np.testing.assert_allclose(grad, fd, rtol=1e-7, atol=1e-10)
    assert abs(grad[1]) > 1e-3          # b matters for an element-wise mechanism


@pytest.mark.parametrize("att", [Softplus(), SoftplusNorm(0.6)])
def test_reduced_dynamics_equal_full_matrix_population_gd(att):
    T, q, d, lr, steps = 6, 2, 3, 0.4, 150
    obj = stsim.make_population_objective(dict(T=T, q=q, d=d, d_e=T, pe="onehot",
                                               sampler="slots", query="sum",
                                               model="practical", attention=att))
    W, V = np.zeros((d + T,) * 2), np.zeros((d, d + T))
    full = []
    for _ in range(steps + 1):
        loss, dW, dV = obj.loss_grad(W, V)
        full.append(loss)
        W, V = W - lr * dW, V - lr * dV
    red = reduced_gd(att, T, q, d, lr, T, steps, practical=True)
    np.testing.assert_allclose(red["loss"], full, rtol=1e-10)
    assert full[-1] < 0.8 * full[0]
    bad = reduced_gd(att, T, q, d, lr, T + 1, steps, practical=True)   # the wrong n: caught
    assert np.abs(bad["loss"] - full).max() > 1e-6 * full[0]


def test_the_attention_study_takes_it(tmp_path):
    from stsim.studies import attention
    from stsim.studies.contract import run_study
    small = {"mechanisms": ["softmax", Softplus()], "seeds": 2, "steps": 40, "T": 8,
             "T_test": [10], "tune_steps": 10, "tune_mults": [1.0, 0.1], "rank_T": [6],
             "rank_r": [2], "rank_steps": 20, "width_T": [8, 16], "width_mechs": ["linear"],
             "fam_n_start": 64, "fam_n_max": 64, "fam_replicates": 2, "width_max": 64, "taus": [0.5], "tau_T": 10, "train_T": 8,
             "train_widths": [16], "train_steps": 10}
    run_study(attention, str(tmp_path / "a"), mode="quick", overrides=small)
    data = json.loads((tmp_path / "a" / "attention.json").read_text())
    assert data["config"]["mechanisms"] == ["softmax", "softplus"]
    assert data["mechanisms"]["softplus"]["runs"] == 2
    assert any(c["claim"].startswith("softplus learns") for c in data["checks"])
    with pytest.raises(ValueError, match="mechanisms must be distinct"):
        run_study(attention, str(tmp_path / "b"), mode="quick",
                  overrides=dict(small, mechanisms=[Softplus(), Softplus()]))
