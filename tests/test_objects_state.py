"""Objects passed in carry their settings, never their state; a finished session is final.

* an optimiser object's settings that change the numbers (Adam's ``betas``, ``eps``) are in
  the run's config and a resume must match them;
* a run steps a fresh copy of the optimiser object (stale moments or step count of an
  earlier use are not taken), and the caller's object is left as it was;
* after ``Session.finish`` nothing trains the result's arrays;
* ``Session`` takes a dict of options; an ``Attention`` that defines no map is refused
  before any work; a zero-step run with a decaying schedule is valid.
"""
import numpy as np
import pytest

import stsim
from stsim.core.attention import Attention
from stsim.core.config import Config
from stsim.core.session import Session

SMALL = dict(T=8, q=2, batch=16, n_val=16, progress=False)


def test_optimizer_settings_recorded_and_checked_on_resume(tmp_path):
    a = stsim.run(**SMALL, steps=4, optimizer=stsim.Adam(0.02))
    b = stsim.run(**SMALL, steps=4, optimizer=stsim.Adam(0.02, betas=(0.5, 0.9)))
    assert a.config != b.config
    assert b.config["optimizer_settings"] == {"betas": [0.5, 0.9], "eps": 1e-8}
    assert "optimizer_settings" not in stsim.run(**SMALL, steps=2, optimizer="adam").config
    assert "optimizer_settings" not in stsim.run(**SMALL, steps=2,
                                                 optimizer=stsim.SGD(0.5)).config
    ck = tmp_path / "ck.npz"
    first = stsim.run(**SMALL, steps=12, optimizer=stsim.Adam(0.02), checkpoint=ck,
                      callback=lambda row: row["step"] >= 6)
    assert first.status == "stopped" and ck.exists()
    with pytest.raises(ValueError, match="optimizer_settings"):
        stsim.run(**SMALL, steps=12, optimizer=stsim.Adam(0.02, betas=(0.5, 0.9)),
                  checkpoint=ck)
    with pytest.raises(ValueError, match="optimizer_settings"):
        stsim.run(**SMALL, steps=12, optimizer=stsim.Adam(0.02, eps=1e-6), checkpoint=ck)
    again = stsim.run(**SMALL, steps=12, optimizer=stsim.Adam(0.02), checkpoint=ck)
    assert again.status == "completed"
    # a key only the checkpoint holds is compared too: the object's settings against a name
    ck2 = tmp_path / "ck2.npz"
    stsim.run(**SMALL, steps=12, optimizer=stsim.Adam(0.02, betas=(0.5, 0.9)), checkpoint=ck2,
              callback=lambda row: row["step"] >= 6)
    with pytest.raises(ValueError, match="optimizer_settings"):
        stsim.run(**SMALL, steps=12, optimizer="adam", lr=0.02, checkpoint=ck2)
    # a config dict with the settings reruns with the object given again
    rerun = stsim.run(config=b.config, optimizer=stsim.Adam(0.02, betas=(0.5, 0.9)),
                      progress=False)
    np.testing.assert_array_equal(rerun.params["W"], b.params["W"])


def _stale_adam():
    o = stsim.Adam(0.02)
    o.t = 40
    o.m = {"W": np.full((21, 21), 3.0), "V": np.full((5, 21), -2.0)}
    o.v = {"W": np.full((21, 21), 1e-12), "V": np.full((5, 21), 1e-12)}
    return o


def test_optimizer_state_not_taken_nor_changed():
    fresh = stsim.run(**SMALL, steps=10, optimizer=stsim.Adam(0.02))
    o = _stale_adam()
    stale = stsim.run(**SMALL, steps=10, optimizer=o)
    np.testing.assert_array_equal(stale.params["W"], fresh.params["W"])
    assert o.t == 40 and o.m["W"][0, 0] == 3.0 and o.m["W"].shape == (21, 21)
    # moments of another shape than the run's parameters
    o.m, o.v = {"W": np.zeros((3, 3))}, {"W": np.zeros((3, 3))}
    assert stsim.run(**SMALL, steps=3, optimizer=o).status == "completed"
    # an SGD stepped before: the linear schedule starts at its first update again
    sgd = stsim.SGD(0.5, decay="linear", total=20)
    want = stsim.run(**SMALL, optimizer=sgd)
    sgd.t = 15
    got = stsim.run(**SMALL, optimizer=sgd)
    np.testing.assert_array_equal(got.params["W"], want.params["W"])
    assert sgd.t == 15
    assert sgd.fresh().t == 0 and _stale_adam().fresh().m == {}


def test_finished_session_is_final():
    s = Session(Config.from_options(**{k: v for k, v in SMALL.items() if k != "progress"},
                                    steps=30), progress=False)
    s.advance(10)
    r = s.finish()
    W = r.params["W"].copy()
    with pytest.raises(RuntimeError, match="finished"):
        s.advance(10)
    with pytest.raises(RuntimeError, match="finished"):
        s.finish()
    np.testing.assert_array_equal(r.params["W"], W)
    V = r.params["V"].copy()
    s.state.params["V"] *= 0            # the session's arrays are not the result's
    np.testing.assert_array_equal(r.params["V"], V)


def test_session_takes_a_dict_and_refuses_other_things():
    s = Session({"T": 8, "q": 2, "steps": 3, "batch": 16, "n_val": 16}, progress=False)
    s.advance()
    assert s.finish().status == "completed"
    with pytest.raises(ValueError, match="cfg must be"):
        Session(8)
    with pytest.raises(ValueError, match="unknown option"):
        Session({"T": 8, "tee": 2})


def test_attention_base_class_refused_before_work(tmp_path):
    ck = tmp_path / "ck.npz"
    for lr in (None, 0.1):
        with pytest.raises(ValueError, match="attention: Attention.*defines no map"):
            stsim.run(**SMALL, steps=3, lr=lr, init="random", attention=Attention(),
                      checkpoint=ck)
    assert not ck.exists()


@pytest.mark.parametrize("opts", [dict(lr=1.0, lr_decay="linear"), dict(optimizer="adam")])
def test_zero_steps_with_a_decay(opts):
    res = stsim.run(T=10, q=2, steps=0, progress=False, **opts)
    assert res.status == "completed" and res.config["lr_decay"] == "linear"
    init = stsim.run(T=10, q=2, steps=0, progress=False,
                     **{**opts, "lr_decay": "none"})
    np.testing.assert_array_equal(res.params["W"], init.params["W"])
    assert list(res.history["step"]) == [0]
