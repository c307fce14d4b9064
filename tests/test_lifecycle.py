"""Lifecycle: a run's folder whose manifest.json is not a readable file is refused (never
read as absent), a dropped Session leaks no prefetch thread, a callback's return value is
checked and a KeyboardInterrupt or SystemExit it raises keeps the run's result and
checkpoint. docs/model.md, "Failure behaviour"."""
import gc
import os
import threading
import time

import numpy as np
import pytest

import stsim
from conftest import _same     # bit for bit: parameters and every history entry
from stsim.cli import main as cli
from stsim.core.session import RunInterrupted

QUICK = ["--T", "8", "--q", "2", "--steps", "4", "--batch", "8", "--quiet"]


# ---- a manifest.json in any form is a manifest to verify ---------------------------------
@pytest.fixture(scope="module")
def two_folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    for name, seed in (("A", 1), ("B", 2)):
        assert cli(["run", *QUICK, "--seed", str(seed), "--out", str(root / name)]) == 0
    return root


@pytest.mark.parametrize("kind", ["folder", "dangling link", "link to a folder"])
def test_a_manifest_that_is_not_a_file_is_refused_not_read_as_absent(two_folders, tmp_path,
                                                                     kind):
    out = tmp_path / "OUT"
    out.mkdir()
    for f in os.listdir(two_folders / "A"):
        if f != "manifest.json":
            (out / f).write_bytes((two_folders / "A" / f).read_bytes())
    (out / "result.npz").write_bytes((two_folders / "B" / "result.npz").read_bytes())
    man = out / "manifest.json"
    if kind == "folder":
        man.mkdir()
    elif kind == "dangling link":
        os.symlink(tmp_path / "gone.json", man)
    else:
        (tmp_path / "d").mkdir()
        os.symlink(tmp_path / "d", man)
    # before: the seed-2 result.npz loaded as the folder's one run
    for path in (out / "result.npz", out):
        with pytest.raises(ValueError, match="manifest.json.*not a manifest"):
            stsim.load(path)


def test_a_folder_without_a_manifest_still_loads(two_folders, tmp_path):
    res = stsim.load(two_folders / "A")
    path = tmp_path / "r.npz"
    res.save(path)
    assert stsim.load(path).config["seed"] == 1


# ---- a session dropped without finish() leaks no thread -----------------------------------
def _threads_settle(target, timeout=5.0):
    deadline = time.monotonic() + timeout
    while threading.active_count() > target and time.monotonic() < deadline:
        gc.collect()
        time.sleep(0.02)
    return threading.active_count()


def _session(**kw):
    from stsim.core.session import Session
    return Session(stsim.Config.from_options(T=8, q=2, steps=50, batch=8), prefetch=True, **kw)


def test_sessions_dropped_unfinished_leak_no_prefetch_thread():
    start = _threads_settle(threading.active_count())
    for _ in range(10):
        s = _session()
        assert s.state.source is not None          # it draws ahead on a thread
        s.advance(3)
        del s
    gc.collect()
    # before: one "stsim-prefetch" thread per dropped session, alive until exit
    assert _threads_settle(start) == start
    assert not [t for t in threading.enumerate() if t.name == "stsim-prefetch"]


def test_a_session_as_context_manager_stops_its_thread_and_keeps_its_numbers():
    start = threading.active_count()
    with _session() as s:
        s.advance(5)
        assert threading.active_count() == start + 1
    assert threading.active_count() == start
    res = s.finish()          # the run so far, as if never drawn ahead
    ref = _session()
    ref.advance(5)
    ref.close()
    assert np.array_equal(res.params["W"], ref.finish().params["W"])


# ---- the callback: its return value checked, Ctrl-C and SystemExit keep the run -----------
RUN = dict(T=10, q=2, d=3, batch=16, steps=120, eval_every=20, seed=3, prefetch=True)


@pytest.fixture(scope="module")
def whole():
    return stsim.run(**RUN)


@pytest.mark.parametrize("value", [np.array([1, 2]), "yes", 1.0, [True]])
def test_a_callback_returning_neither_none_nor_a_bool_is_named(tmp_path, whole, value):
    ck = tmp_path / "c.npz"
    # before: an array gave numpy's "truth value ... is ambiguous", not naming the callback;
    # a string, a float, a list were taken as "stop"
    with pytest.raises(ValueError, match=r"callback must return None, True or False.*"
                                         r"step 40") as info:
        stsim.run(checkpoint=ck, callback=lambda row: value if row["step"] == 40 else None,
                  **RUN)
    assert repr(value)[:8] in str(info.value)
    part = info.value.result                   # the run so far kept, and resumable
    assert part.status == "stopped" and part.history["step"][-1] == 40
    _same(whole, stsim.run(config=part.config, checkpoint=ck))


def test_numpy_bools_and_none_are_accepted(whole):
    res = stsim.run(callback=lambda row: np.bool_(row["step"] >= 60), **RUN)
    assert res.status == "stopped" and res.history["step"][-1] == 60
    _same(whole, stsim.run(callback=lambda row: None, **RUN))


def _raise_at_40(exc):
    def cb(row):
        if row["step"] == 40:
            raise exc
    return cb


def test_a_callback_raising_keyboardinterrupt_is_a_ctrl_c(tmp_path, whole, default_sigint):
    ck = tmp_path / "c.npz"
    # before: the KeyboardInterrupt went through run(): no result, no checkpoint
    try:
        with pytest.warns(RunInterrupted):
            part = stsim.run(checkpoint=ck, callback=_raise_at_40(KeyboardInterrupt), **RUN)
    except KeyboardInterrupt:               # not pytest's own: it would end the session
        pytest.fail("the callback's KeyboardInterrupt went through run()")
    assert part.status == "interrupted" and "Ctrl-C" in part.message
    assert 40 <= part.info["interrupted_at_step"] <= 41 and ck.exists()
    _same(whole, stsim.run(config=part.config, checkpoint=ck))


def test_a_callback_raising_systemexit_keeps_the_run_then_exits(tmp_path, whole):
    ck = tmp_path / "c.npz"
    with pytest.raises(SystemExit) as info:       # before: no .result, no checkpoint
        stsim.run(checkpoint=ck, callback=_raise_at_40(SystemExit(3)), **RUN)
    assert info.value.code == 3
    part = info.value.result
    assert part.status == "stopped" and "SystemExit" in part.message
    assert part.history["step"][-1] == 40 and ck.exists()
    _same(whole, stsim.run(config=part.config, checkpoint=ck))
