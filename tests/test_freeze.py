"""Freeze: blocks held at their initial value (``freeze=``, decided with the steps by
stsim.core.schedule). Held blocks keep their value and the others move, with SGD and Adam
and a step per parameter, resuming bit for bit; the names are checked; a caller's freeze
is kept beside the default one; a run in which nothing can move is refused before any
work; and a run whose held blocks are ones the reduced dynamics move, or whose step per
block was copied without its freeze, says so."""
import warnings

import numpy as np
import pytest

import stsim
from conftest import RUN, _same     # bit for bit: parameters and every history entry
from stsim.core.config import Config


# ---- frozen blocks ----------------------------------------------------------------------
@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
@pytest.mark.parametrize("pe,extra", [("onehot", {}), ("stochastic", {}),
                                      ("stochastic", dict(sampler="sphere", d_e=16))])
def test_frozen_blocks_keep_their_initial_value(optimizer, pe, extra):
    opts = dict(RUN, pe=pe, optimizer=optimizer, init="random", init_scale=0.3,
                lr=0.05 if optimizer == "adam" else 1.0, **extra)
    init = stsim.run(**dict(opts, steps=0))
    res = stsim.run(freeze=("W_xe", "W_xx", "V_e"), **opts)
    free = stsim.run(**opts)
    d = RUN["d"]
    assert res.config["freeze"] == ["W_xx", "W_xe", "V_e"]        # the blocks' order
    np.testing.assert_array_equal(res.W[:d], init.W[:d])          # W's token rows
    np.testing.assert_array_equal(res.V[:, d:], init.V[:, d:])
    assert not np.array_equal(free.W[:d], init.W[:d])             # they would move
    assert not np.array_equal(free.V[:, d:], init.V[:, d:])
    assert not np.array_equal(res.W[d:], init.W[d:])              # the others move
    assert not np.array_equal(res.V[:, :d], init.V[:, :d])


def test_freeze_names_are_checked():
    with pytest.raises(ValueError, match=r"freeze must name blocks of \('W_xx', 'W_xe', "
                                         r"'W_ex', 'W_ee', 'V_x', 'V_e'\), got \['W_yy'\]"):
        stsim.run(freeze=("W_xe", "W_yy"), **RUN)
    with pytest.raises(ValueError, match="freeze: arch='fcn' has no named blocks"):
        stsim.Config.from_options(arch="fcn", T=8, q=2, steps=10, freeze=("W_xe",))
    assert stsim.Config.from_options(T=8, q=2, steps=10, lr=1.0).freeze == ()
    assert "freeze" not in stsim.Config.from_options(T=8, q=2, steps=10, lr=1.0).to_dict()
    # the derived default holds W's token rows when it takes a step per block
    assert stsim.Config.from_options(T=8, q=2, steps=10).freeze == ("W_xx", "W_xe")


@pytest.mark.parametrize("lr", [None, 1.0, {"W": 20.0, "V": 2.0}], ids=str)
def test_a_given_freeze_is_kept_beside_the_default_one(lr):
    """The plan merges the caller's freeze with the default's (W's token rows, held by
    the derived step per block): a block the caller holds stays held, with the default lr
    and with a given one (the seeded fault: the default's freeze in place of the
    caller's dropped V_e)."""
    given = ("W_xx", "W_xe", "V_e")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cfg = Config.from_options(T=200, q=3, freeze=given, lr=lr)
    plan = cfg.resolved.plan
    assert cfg.freeze == plan.freeze == given and cfg.to_dict()["freeze"] == list(given)
    assert plan.lr.names == (("W", "V") if lr is None else plan.lr.names)
    assert Config.from_options(T=200, q=3, freeze=("V_e",), steps=100).freeze == ("V_e",)


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_step_per_parameter_and_frozen_blocks_resume_bit_for_bit(tmp_path, optimizer):
    """Stopped by the callback at step 100 with a checkpoint, then resumed: the same
    numbers as the run in one go (parameters, optimiser state, history)."""
    lr = {"W": 0.05, "V": 0.02} if optimizer == "adam" else {"W": 4.0, "V": 1.5}
    opts = dict(RUN, steps=200, lr=lr, optimizer=optimizer, freeze=("W_xx", "W_xe"),
                lr_decay="linear")
    whole = stsim.run(**opts)
    ck = tmp_path / "c.npz"
    part = stsim.run(checkpoint=ck, callback=lambda row: row["step"] == 100, **opts)
    assert part.status == "stopped" and part.history["step"][-1] == 100
    rest = stsim.run(config=part.config, checkpoint=ck)
    assert rest.status == "completed"
    _same(whole, rest)
    assert np.all(rest.W[:RUN["d"]] == 0)


# ---- blocks that cannot move, and blocks the reduced dynamics move -------------------
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


def test_a_step_per_block_copied_without_its_freeze_says_so():
    res = stsim.run(T=20, q=2, steps=40, progress=False)      # the derived step per block
    assert res.config["freeze"] == ["W_xx", "W_xe"]
    copied = stsim.run(T=20, q=2, lr=res.config["lr"], steps=40, progress=False)
    assert "W_xx, W_xe trained" in copied.message and "freeze=" in copied.message
    assert "trained (the derived" not in res.message
    plain = stsim.run(T=12, q=2, lr=1.0, steps=5, batch=16, progress=False)
    assert "trained (the derived" not in plain.message
