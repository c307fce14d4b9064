"""Inputs refused before any work and diagnoses that name what they see: a step that is
not a number, a step count given as a string, a temperature outside the range the steps can
be computed in, blocks that cannot move, and a mechanism of one's own carried through a
config."""
import numpy as np
import pytest

import stsim
from test_user_mechanism import Softplus     # one's own mechanism, defined once
from stsim.core.attention import Sigmoid


@pytest.mark.parametrize("opts, name", [
    ({"lr": {"W": [0.5], "V": 1}}, r"lr\['W'\]"),
    ({"lr": {"W": np.array([0.5]), "V": 1}}, r"lr\['W'\]"),
    ({"eval_every": "5"}, r"eval_every"),
])
def test_step_and_count_types_refused_before_any_work(tmp_path, opts, name):
    """A step given as a list or an array, or a count given as a string, is refused when the
    options are read, naming the parameter; no training, no checkpoint."""
    out = tmp_path / "c.npz"
    with pytest.raises(ValueError, match=name):
        stsim.run(T=10, q=2, steps=20, checkpoint=out, progress=False, **opts)
    assert not out.exists()


@pytest.mark.parametrize("tau", [1e-300, 1e300, 0.0, float("inf")])
@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_temperature_outside_its_range_refused_before_any_work(tmp_path, tau, optimizer):
    """τ enters the steps as τ^±2: outside TAU_RANGE = [1e-100, 1e100] that is 0 or inf (a
    raw ZeroDivisionError/OverflowError, or Adam's overflow warnings); refused first, naming
    ``temperature`` and the range."""
    out = tmp_path / "c.npz"
    with pytest.raises(ValueError, match=r"temperature must be a finite number >= 1e-100 "
                                         r"and <= 1e\+100"):
        stsim.run(T=10, q=2, temperature=tau, optimizer=optimizer, checkpoint=out,
                  progress=False)
    assert not out.exists()


def test_temperature_range_on_the_command_line(tmp_path, capsys):
    from stsim.cli import main
    out = tmp_path / "r"
    assert main(["run", "--T", "10", "--q", "2", "--temperature", "1e300", "--out",
                 str(out), "--quiet"]) == 2
    assert "temperature must be a finite number >= 1e-100" in capsys.readouterr().err
    assert not out.exists()


def test_temperature_range_is_one_and_runs_at_both_ends(recwarn):
    """The attention study takes the run's range (one constant); runs at its ends complete
    with no warning, with SGD and with Adam."""
    from stsim.core.attention import TAU_RANGE
    from stsim.studies.attention import runs
    assert runs.TAU_RANGE is TAU_RANGE == (1e-100, 1e100)
    for tau in TAU_RANGE:
        for optimizer in ("sgd", "adam"):
            res = stsim.run(T=10, q=2, temperature=tau, optimizer=optimizer, steps=30,
                            progress=False)
            assert res.status == "completed"
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]


@pytest.mark.parametrize("freeze, init, rank, match", [
    (("W_xx", "W_xe", "W_ex", "W_ee", "V_x", "V_e"), "zero", None, r"freeze holds every block"),
    (("W_xx", "W_xe", "W_ex", "W_ee", "V_x", "V_e"), "random", None, r"freeze holds every "
                                                                     r"block"),
    (("W_K", "W_Q", "V_x", "V_e"), "random", 2, r"freeze holds every block"),
    (("V_x", "V_e"), "zero", None, r"freeze holds V_x and V_e at their initial value 0 .*no "
                                   r"gradient reaches W"),
])
def test_nothing_can_move_refused_before_any_work(tmp_path, freeze, init, rank, match):
    """Every block held, or V held at 0 from zero init (V = 0: f = V Z s = 0 and
    ∂ℓ/∂s = Zᵀ Vᵀ r = 0, so ∂ℓ/∂W = 0): nothing trains, refused before any work naming
    ``freeze`` (before: "completed … still on the initial plateau … the reduced dynamics
    predict the escape near step 15")."""
    out = tmp_path / "c.npz"
    with pytest.raises(ValueError, match=match):
        stsim.run(T=10, q=2, freeze=freeze, init=init, rank=rank, checkpoint=out,
                  progress=False)
    assert not out.exists()


def test_v_at_zero_really_gets_no_gradient():
    """The derivation behind the refusal, on the model functions: with V = 0 the gradient
    in W is exactly 0 for every mechanism (and in V it is not)."""
    from stsim.core.attention import ATTENTIONS
    rng = np.random.default_rng(0)
    B, T, q, d = 4, 7, 2, 3
    batch = stsim.sample_batch(rng, B, T, q, d)
    P = rng.standard_normal((T, 9))
    W, V = rng.standard_normal((d + 9,) * 2), np.zeros((d, d + 9))
    for att in ATTENTIONS:
        for model in ("theory", "practical"):
            _, dW, dV = stsim.loss_and_grad(W, V, batch.X, batch.y, P, model=model,
                                            attention=att)
            assert not np.any(dW) and np.any(dV), (att, model)


@pytest.mark.parametrize("freeze, init, held", [
    (("V_x", "V_e"), "random", "V_x"),
    (("W_xx", "W_xe", "W_ex", "W_ee"), "zero", "W_ee"),
])
def test_holding_a_block_the_reduced_dynamics_move_is_named(freeze, init, held):
    """Blocks the reduced dynamics move (W_ee = aI − bJ, V_x = γI) held: the run did not
    learn, and the diagnosis names the blocks held instead of predicting an escape."""
    res = stsim.run(T=10, q=2, freeze=freeze, init=init, steps=60, progress=False)
    assert res.status == "completed" and res.assessment in ("plateau", "not converged")
    assert f"freeze holds {held} at the initial value" in res.message
    assert "predict the escape" not in res.message


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
