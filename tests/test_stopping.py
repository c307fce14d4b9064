"""The stop rule (stsim.core.stopping): when it holds, which runs apply it, what the config
and the message say, and that a resumed run stops at the same record."""
import numpy as np
import pytest

import stsim
from stsim.core.config import Config
from stsim.core.stopping import Settled, resolve_stop


def test_holds_only_below_the_level_for_patience_records_and_settled():
    rule = Settled(level=0.01, patience=3, tol=0.02)
    L0 = 1.0
    assert not rule.holds([L0, 0.005, 0.005])                   # too few records
    assert rule.holds([L0, 0.5, 0.0050, 0.0050, 0.0050])
    assert not rule.holds([L0, 0.5, 0.0200, 0.0050, 0.0050])    # one above the level
    # falling by (0.009 - 0.006) / (2 * 0.006) = 25% per record: not settled
    assert not rule.holds([L0, 0.009, 0.0075, 0.006])
    assert rule.holds([L0, 0.0061, 0.0060, 0.0059])              # 1.7% per record
    assert rule.holds([L0, 0.004, 0.006, 0.009])                 # a rise counts as 0
    assert not Settled(level=0.001).holds([L0, 0.005, 0.005, 0.005])


@pytest.mark.parametrize("kw,match", [({"level": 0}, "stop level"), ({"level": 1.5}, "stop level"),
                                      ({"patience": 1}, "stop patience"),
                                      ({"tol": -0.1}, "stop tol")])
def test_bad_settings_name_themselves(kw, match):
    with pytest.raises(ValueError, match=match):
        Settled(**kw)


def test_which_runs_apply_it():
    assert resolve_stop("auto", steps_given=False, lr_decay="none") == Settled()
    assert resolve_stop("auto", steps_given=True, lr_decay="none") is None
    assert resolve_stop("auto", steps_given=False, lr_decay="linear") is None   # adam's anneal
    assert resolve_stop("none", False, "none") is None
    assert resolve_stop("settled", True, "none") == Settled()
    assert resolve_stop({"rule": "settled", "level": 0.02}, True, "none") == Settled(level=0.02)
    for bad in ("sometimes", 3, {"rule": "other"}, {"level": 0.1, "wait": 2}):
        with pytest.raises(ValueError, match="stop"):
            resolve_stop(bad, False, "none")
    assert Config.from_options(T=20, q=2).stop == Settled().record()
    assert Config.from_options(T=20, q=2, steps=50).stop == "none"
    assert Config.from_options(T=20, q=2, optimizer="adam").stop == "none"


def test_the_default_run_stops_settled_and_says_so():
    res = stsim.run(T=50, q=3, seed=0, progress=False)
    planned, last = res.config["steps"], int(res.history["step"][-1])
    assert res.status == "completed" and last < planned
    assert res.info["settled_at_step"] == last
    assert f"completed at step {last} of at most {planned}: the stop rule held" in res.message
    ratios = res.history["val"][-3:] / res.history["val"][0]
    assert np.all(ratios <= 0.01)
    assert res.config["stop"] == Settled().record()
    full = stsim.run(T=50, q=3, seed=0, stop="none", progress=False)
    assert int(full.history["step"][-1]) == planned and "stop" not in full.config
    # the same steps up to the stop: the rule changes nothing before it
    n = len(res.history["step"])
    assert np.array_equal(full.history["val"][:n], res.history["val"])


def test_given_steps_are_obeyed_exactly_unless_a_rule_is_given():
    res = stsim.run(T=50, q=3, seed=0, steps=900, progress=False)
    assert int(res.history["step"][-1]) == 900 and "settled_at_step" not in res.info
    ruled = stsim.run(T=50, q=3, seed=0, steps=900, stop="settled", progress=False)
    assert int(ruled.history["step"][-1]) < 900


def test_a_rule_that_cannot_hold_runs_every_step():
    res = stsim.run(T=50, q=3, seed=0, stop={"level": 1e-9}, progress=False)
    assert int(res.history["step"][-1]) == res.config["steps"]


def test_resumed_from_its_checkpoint_it_stops_at_the_same_record(tmp_path):
    ck = str(tmp_path / "run.ckpt")
    a = stsim.run(T=50, q=3, seed=0, checkpoint=ck, progress=False)
    b = stsim.run(T=50, q=3, seed=0, checkpoint=ck, progress=False)
    assert b.info["settled_at_step"] == a.info["settled_at_step"]
    assert np.array_equal(a.history["val"], b.history["val"])
    for k in a.params:
        assert np.array_equal(a.params[k], b.params[k])
