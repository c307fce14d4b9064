"""The callback and the Session (stsim.core.session): a callback returning true stops
the run at that record, the stopped result saves and loads, an exception in the callback
(or a progress callable) keeps the run's result and checkpoint, and a Session advanced in
pieces, or finished early and resumed from its checkpoint, is the run in one go; a
finished session is final (its result's arrays its own) and ``Session`` takes a Config
or a dict of options, nothing else."""
import numpy as np
import pytest

import stsim
from conftest import RUN, SMALL, _same     # bit for bit: parameters and every history entry
from stsim.core.config import Config
from stsim.core.session import Session


# ---- the callback -----------------------------------------------------------------------
def test_callback_true_at_step_100_stops_there():
    rows = []

    def cb(row):
        rows.append(row)
        return row["step"] >= 100

    res = stsim.run(callback=cb, **dict(RUN, steps=300))
    whole = stsim.run(**dict(RUN, steps=300))
    assert res.status == "stopped" and not res.success
    assert "step 100" in res.message and res.info["stopped_at_step"] == 100
    assert list(res.history["step"]) == list(range(0, 101, 20))
    assert [r["step"] for r in rows] == list(range(0, 101, 20))
    assert set(rows[-1]) == set(res.history) and rows[-1]["val"] == res.history["val"][-1]
    n = len(res.history["step"])
    for k in res.history:                           # the run so far, as in one go
        np.testing.assert_array_equal(res.history[k], whole.history[k][:n])
    # the parameters of the record at step 100: its cosines
    cw, cv = stsim.cosine_to_target(res.W, res.V, RUN["d"])
    assert (cw, cv) == (res.history["cos_W"][-1], res.history["cos_V"][-1])


def test_a_stopped_result_saves_and_loads(tmp_path):
    """A stopped run's result file loads as written (its status was refused before)."""
    res = stsim.run(callback=lambda row: row["step"] >= 20, **dict(RUN, steps=60))
    back = stsim.load(res.save(tmp_path / "stopped.npz"))
    assert back.status == "stopped" and back.message == res.message
    np.testing.assert_array_equal(back.W, res.W)


@pytest.mark.parametrize("where", ["callback", "progress"])
def test_an_exception_in_the_callback_keeps_the_run(tmp_path, where):
    class Boom(RuntimeError):
        pass

    def bad(*args):
        row = args[-1]
        if row["step"] == 60:
            raise Boom("at 60")

    ck = tmp_path / "c.npz"
    with pytest.raises(Boom, match="at 60") as info:
        stsim.run(checkpoint=ck, **{where: bad}, **RUN)
    res = info.value.result
    assert res.status == "stopped" and "Boom: at 60" in res.message
    assert res.history["step"][-1] == 60 and res.params["W"].shape == (3 + 20, 3 + 20)
    assert ck.exists()
    _same(stsim.run(config=res.config, checkpoint=ck), stsim.run(**RUN))


def test_callback_must_be_callable():
    with pytest.raises(ValueError, match="callback must be a callable"):
        stsim.run(callback=3, **RUN)


# ---- the session pieces -----------------------------------------------------------------
def test_session_advanced_in_pieces_is_the_run_in_one_go():
    cfg = stsim.Config.from_options(**RUN)
    s = Session(cfg)
    seen = []
    while not s.advance(35):
        seen.append(s.state.step)
    assert seen == [35, 70, 105, 140]
    _same(s.finish(), stsim.run(**RUN))
    early = Session(cfg)
    early.advance(50)
    res = early.finish()
    assert res.status == "stopped" and res.history["step"][-1] == 40


def test_a_session_finished_early_resumes_from_its_checkpoint(tmp_path):
    ck = tmp_path / "c.npz"
    s = Session(stsim.Config.from_options(**RUN), checkpoint=str(ck))
    assert not s.advance(50) and s.state.step == 50
    assert s.finish().status == "stopped" and ck.exists()
    _same(stsim.run(checkpoint=ck, **RUN), stsim.run(**RUN))


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
