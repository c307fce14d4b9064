"""Reliability: locks never follow links, a run's folder never mixes two runs, SIGTERM and
SIGHUP end a run, a study and a sweep like Ctrl-C, Ctrl-C during the imports is one line
(refusals, assessment and ``load``'s checks: tests/test_refusals.py). docs/model.md,
"Failure behaviour"."""
import os
import signal
import subprocess
import sys
import time

import pytest

import stsim
from stsim.cli import main as cli
from stsim.util.io import FileLock

QUICK = ["--T", "8", "--q", "2", "--steps", "4", "--batch", "8", "--quiet"]


# ---- the lock never follows a symbolic link --------------------------------------------
def test_a_symlinked_run_lock_is_refused_and_its_target_kept(tmp_path, capsys):
    out = tmp_path / "OUT"
    out.mkdir()
    victim = tmp_path / "precious.txt"
    victim.write_text("do not truncate me\n")
    os.symlink(victim, out / ".stsim-run.lock")
    # before: the victim was truncated and held the run's pid
    assert cli(["run", *QUICK, "--out", str(out)]) == 2
    assert "symbolic link" in capsys.readouterr().err
    assert victim.read_text() == "do not truncate me\n"
    assert not (out / "result.npz").exists()


@pytest.mark.parametrize("kind", ["dangling link", "link to a file", "folder", "fifo"])
def test_file_lock_opens_only_a_regular_file(tmp_path, kind):
    lock = tmp_path / "t.csv.lock"
    target = tmp_path / "target"
    if kind == "dangling link":
        os.symlink(target, lock)
    elif kind == "link to a file":
        target.write_text("x")
        os.symlink(target, lock)
    elif kind == "folder":
        lock.mkdir()
    else:
        os.mkfifo(lock)
    with pytest.raises(ValueError, match="lock file"):
        with FileLock(tmp_path / "t.csv"):
            pass
    assert not target.exists() or target.read_text() == "x"


def test_file_lock_still_works_on_a_regular_file(tmp_path):
    with FileLock(tmp_path / "t.csv"):
        assert (tmp_path / "t.csv.lock").read_text() == str(os.getpid())


# ---- a run's folder never passes for one run while it holds files of two ----------------
RUN = [sys.executable, "-m", "stsim", "run", "--T", "10", "--q", "2", "--batch", "8",
       "--quiet"]


def _run_folder(out, seed, steps=4):
    assert cli(["run", *QUICK[:-1], "--seed", str(seed), "--steps", str(steps), "--out",
                str(out)]) == 0


def _consistent(out):
    """The files of ``out`` all belong to the run ``stsim.load`` returns (or load refuses)."""
    import json
    try:
        res = stsim.load(out / "result.npz")
    except ValueError as exc:
        return "refused", str(exc)
    cfg = json.loads((out / "config.json").read_text())["config"]
    assert cfg["seed"] == res.config["seed"]
    hist = stsim.util.io.read_csv(out / "history.csv")
    assert [r["loss"] for r in hist] == list(res.history["loss"])
    return "consistent", res.config["seed"]


def test_a_writer_killed_after_result_npz_leaves_a_folder_load_refuses(tmp_path):
    out = tmp_path / "OUT"
    _run_folder(out, seed=1)
    assert _consistent(out) == ("consistent", 1)
    # seed 2 into the same folder, the process dying right after its result.npz is written
    # (before: result.npz was seed 2, config.json and history.csv seed 1, nothing said so)
    script = (
        "import os, stsim\n"
        "from stsim.cli import run as r\n"
        "from stsim.core.result import Result\n"
        "Result.history_csv = lambda self, p: os._exit(9)\n"
        f"res = stsim.run(T=8, q=2, steps=4, batch=8, seed=2)\n"
        f"r.write_outputs(res, {str(out)!r})\n")
    proc = subprocess.run([sys.executable, "-c", script], timeout=120)
    assert proc.returncode == 9
    verdict, why = _consistent(out)
    assert verdict == "refused" and "stopped before it finished" in why
    _run_folder(out, seed=3)                   # a rerun makes the folder whole again
    assert _consistent(out) == ("consistent", 3)
    assert stsim.load(out).config["seed"] == 3          # the folder itself loads too


def test_a_result_npz_of_another_run_copied_in_is_refused(tmp_path):
    a, b = tmp_path / "A", tmp_path / "B"
    _run_folder(a, seed=1)
    _run_folder(b, seed=2)
    (a / "result.npz").write_bytes((b / "result.npz").read_bytes())
    with pytest.raises(ValueError, match="mixes two runs"):
        stsim.load(a / "result.npz")
    (a / "manifest.json").write_text("{garbled")
    with pytest.raises(ValueError, match="not a manifest"):
        stsim.load(a / "result.npz")


def test_a_checkpoint_beside_an_incomplete_manifest_still_loads(tmp_path):
    out = tmp_path / "OUT"
    assert cli(["run", *QUICK, "--checkpoint_every", "2", "--out", str(out)]) == 0
    from stsim.util.manifest import begin_manifest
    begin_manifest(out)
    assert stsim.load(out / "checkpoint.npz").status == "checkpoint"
    with pytest.raises(ValueError, match="stopped before it finished"):
        stsim.load(out)


def test_kill_9_while_writing_never_leaves_a_folder_that_loads_as_one_run(tmp_path):
    """A real kill -9 as soon as the new result.npz appears: whatever moment it lands,
    the folder either loads as one run (every file that run's) or is refused."""
    out = tmp_path / "OUT"
    _run_folder(out, seed=1)
    verdicts = []
    for seed in (2, 3):
        proc = subprocess.Popen(RUN + ["--steps", "30", "--seed", str(seed), "--out",
                                       str(out)], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        before = (out / "result.npz").stat().st_mtime_ns if (out / "result.npz").exists() \
            else None
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline:
            p = out / "result.npz"
            if p.exists() and p.stat().st_mtime_ns != before:
                break
            time.sleep(0.001)
        proc.kill()
        proc.wait(30)
        verdicts.append(_consistent(out)[0])
    assert set(verdicts) <= {"refused", "consistent"}


# ---- SIGTERM and SIGHUP end a command as Ctrl-C does ------------------------------------
READY = """
import os, signal, sys
import stsim.core.state as S
signal.signal(signal.SIGINT, {sigint})
for s in (signal.SIGTERM, signal.SIGHUP):  # the dispositions tested, not inherited (nohup)
    signal.signal(s, signal.SIG_DFL)
ready = sys.argv[1]
record = S.RunState.record

def mark(self, step, metrics):
    row = record(self, step, metrics)
    if step >= 100 and not os.path.exists(ready):
        open(ready, "w").close()           # the test signals once this file exists
    return row

S.RunState.record = mark
from stsim.cli import main
sys.exit(main(sys.argv[2:]))
"""


def _signal_a_run(tmp_path, signum, *, checkpoint=True, sigint="signal.default_int_handler"):
    (tmp_path / "ready.py").write_text(READY.format(sigint=sigint))
    ready, out = tmp_path / "ready", tmp_path / "o"
    args = ["run", "--T", "12", "--q", "2", "--batch", "16", "--lr", "0.5", "--steps",
            "1000000", "--eval_every", "50", "--quiet", "--out", str(out)]
    if checkpoint:
        args += ["--checkpoint_every", "1000"]
    proc = subprocess.Popen([sys.executable, str(tmp_path / "ready.py"), str(ready), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, MPLBACKEND="Agg"))
    t0 = time.monotonic()
    while not ready.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() - t0 < 120, "the run did not reach step 100"
        time.sleep(0.05)
    os.kill(proc.pid, signum)
    _, err = proc.communicate(timeout=120)
    return proc.returncode, err.strip().splitlines(), out


@pytest.mark.parametrize("signum, name", [(signal.SIGTERM, "SIGTERM"),
                                          (signal.SIGHUP, "SIGHUP")])
def test_sigterm_and_sighup_end_a_run_like_ctrl_c(tmp_path, signum, name):
    # before: rc -15 / -1, nothing printed, the lock left, a run without checkpoint lost
    rc, lines, out = _signal_a_run(tmp_path, signum, checkpoint=(name == "SIGTERM"))
    assert rc == 128 + signum and len(lines) == 1, lines
    assert lines[0].startswith(f"stsim: interrupted ({name}) at step ")
    res = stsim.load(out / "result.npz")
    assert res.status == "interrupted" and res.info["interrupted_by"] == name
    assert res.history["step"][-1] >= 100
    assert not (out / ".stsim-run.lock").exists()
    if name == "SIGTERM":
        assert stsim.load(out / "checkpoint.npz").info["checkpoint_step"] == \
            res.info["interrupted_at_step"]


def test_sigterm_reaches_a_run_whose_ctrl_c_is_ignored(tmp_path):
    """A background job of a script (``stsim run … &``) starts with SIGINT ignored: Ctrl-C
    does not reach it, but SIGTERM still stops it with its result kept."""
    rc, lines, out = _signal_a_run(tmp_path, signal.SIGTERM, checkpoint=False,
                                   sigint="signal.SIG_IGN")
    assert rc == 143 and len(lines) == 1 and "interrupted (SIGTERM)" in lines[0]
    assert stsim.load(out / "result.npz").status == "interrupted"
    assert not (out / ".stsim-run.lock").exists()


def test_a_nested_route_gives_the_outer_route_back():
    # before: leaving an inner route (a run's loop inside a study) dropped the study's
    # route, so a later SIGTERM no longer ended the study's pool
    from stsim.util.signals import TerminateAsInterrupt, route_termination
    seen = []
    with TerminateAsInterrupt():
        with route_termination(lambda s, f: seen.append("outer")):
            with route_termination(lambda s, f: seen.append("inner")):
                pass
            try:
                signal.raise_signal(signal.SIGTERM)
            except KeyboardInterrupt:
                seen.append("no route")
    assert seen == ["outer"]


def test_terminate_as_interrupt_restores_the_handlers():
    from stsim.util.signals import TerminateAsInterrupt
    # the dispositions tested, set here rather than inherited (under nohup SIGHUP is ignored)
    saved = {s: signal.signal(s, signal.SIG_DFL) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        with TerminateAsInterrupt() as term:
            assert signal.getsignal(signal.SIGTERM) != signal.SIG_DFL
            with pytest.raises(KeyboardInterrupt):
                signal.raise_signal(signal.SIGHUP)
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL and term.exit_status == 129
        assert signal.getsignal(signal.SIGHUP) == signal.SIG_DFL
    finally:
        for s, h in saved.items():
            signal.signal(s, h)



def test_deferred_signals_leave_an_ignored_signal_ignored():
    """While a run's files are written, an ignored signal stays ignored (nohup: SIGHUP)
    and a SIGTERM after it still comes on leaving (before: the ignored SIGHUP was noted as
    the pending signal, and the SIGTERM behind it dropped)."""
    from stsim.util.signals import deferred_signals
    came = []
    saved = {signal.SIGHUP: signal.signal(signal.SIGHUP, signal.SIG_IGN),
             signal.SIGTERM: signal.signal(signal.SIGTERM, lambda s, f: came.append(s))}
    try:
        with deferred_signals():
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
            signal.raise_signal(signal.SIGHUP)
            signal.raise_signal(signal.SIGTERM)
            assert came == []                        # waits until the files are whole
        assert came == [signal.SIGTERM]
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    finally:
        for s, h in saved.items():
            signal.signal(s, h)


NOHUP_RUN = """
import signal
import numpy as np
import stsim
assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN    # as a background job under nohup
ck = {ck!r}
kw = dict(T=8, q=2, pe="stochastic", optimizer="adam", batch=16, steps=30, eval_every=5)
full = stsim.run(**kw)

def signals_then_stop(row):       # SIGINT and SIGHUP mid-run: ignored; then a stop at 15
    signal.raise_signal(signal.SIGINT)
    signal.raise_signal(signal.SIGHUP)
    return row["step"] == 15

cut = stsim.run(checkpoint=ck, checkpoint_every=10, callback=signals_then_stop, **kw)
assert cut.status == "stopped" and cut.history["step"][-1] == 15, cut.message
resumed = stsim.run(checkpoint=ck, checkpoint_every=10, **kw)
assert resumed.status == "completed", resumed.message
np.testing.assert_array_equal(resumed.W, full.W)
for k in full.history:
    np.testing.assert_array_equal(resumed.history[k], full.history[k])
assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
print("ok")
"""


def _ignore_sigint_and_sighup():
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)


def test_a_run_under_nohup_completes_and_leaves_the_ignored_signals_ignored(tmp_path):
    """``nohup python script.py &`` from a script: SIGINT and SIGHUP ignored, stdin from
    /dev/null. A decaying run stopped and resumed from its checkpoint ends bit for bit as
    the straight one, and stsim turns neither ignored signal, sent mid-run, into a
    ``KeyboardInterrupt`` or an end of the process: both stay ignored."""
    code = NOHUP_RUN.format(ck=str(tmp_path / "ck.npz"))
    proc = subprocess.run([sys.executable, "-c", code], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=300,
                          preexec_fn=_ignore_sigint_and_sighup,
                          env=dict(os.environ, MPLBACKEND="Agg"))
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr

# 84 training runs of 1000 steps (was 3000): seconds of work left when the first ends
STUDY = ["separation", "--fcn_Ts", "4,8", "--tf_Ts", "4", "--family_Ts", "4,8",
         "--steps", "1000", "--long_steps", "1000", "--long_Ts", "", "--workers", "2"]


@pytest.mark.pool
def test_sigterm_on_a_study_is_one_line_exit_143_and_keeps_the_finished_runs(tmp_path):
    out = tmp_path / "o"
    journal = out / "raw" / "tune.csv.journal.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "stsim", *STUDY, "--quiet", "--out",
                             str(out)], start_new_session=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, MPLBACKEND="Agg"))
    t0 = time.monotonic()
    while not (journal.exists() and journal.read_text().count("\n") >= 1):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() - t0 < 300, "no tuning run finished"
        time.sleep(0.1)
    os.kill(proc.pid, signal.SIGTERM)          # as timeout(1) or a scheduler does
    _, err = proc.communicate(timeout=60)
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()         # no resource tracker's warnings either
    assert proc.returncode == 143 and len(lines) == 1, err
    assert lines[0] == (f"stsim: interrupted (SIGTERM); the finished runs are kept in {out}; "
                        f"rerun the same command to resume")
    done = stsim.sweeps.journal.load_journal(journal)
    assert done and all(r["status"] == "ok" for r in done.values())
    assert not (out / ".stsim-study.lock").exists()


def _numpy_loaded(pid):
    try:
        with open(f"/proc/{pid}/maps") as fh:
            return "numpy" in fh.read()
    except OSError:
        return False


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="needs /proc")
def test_ctrl_c_during_the_imports_is_one_line_exit_130(tmp_path):
    # before: a traceback from whichever import was running
    proc = subprocess.Popen([sys.executable, "-m", "stsim", "run", "--T", "8", "--steps",
                             "3", "--out", str(tmp_path / "o")], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT,
                                                             signal.SIG_DFL))
    t0 = time.monotonic()
    while not _numpy_loaded(proc.pid):          # stsim's imports have begun
        assert proc.poll() is None and time.monotonic() - t0 < 60
        time.sleep(0.002)
    os.kill(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert (proc.returncode, err) == (130, "stsim: interrupted (Ctrl-C)\n")
    assert not (tmp_path / "o").exists()


SWEEP_TERM = """
import os, signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)
import stsim
from stsim.sweeps import InlineExecutor

def row(a, seed):
    if a >= 2:
        open(sys.argv[2], "w").close()
        time.sleep(300)
    return {"v": a}

stsim.sweep(row, {"a": [0, 1, 2, 3]}, out=sys.argv[1], executor=InlineExecutor())
"""


def test_sigterm_ends_a_python_sweep_after_saving_its_rows_and_lock(tmp_path):
    (tmp_path / "drv.py").write_text(SWEEP_TERM)
    out, ready = tmp_path / "t.csv", tmp_path / "ready"
    proc = subprocess.Popen([sys.executable, str(tmp_path / "drv.py"), str(out), str(ready)],
                            stderr=subprocess.PIPE, text=True)
    t0 = time.monotonic()
    while not ready.exists():
        assert proc.poll() is None and time.monotonic() - t0 < 120, proc.communicate()
        time.sleep(0.05)
    proc.terminate()
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGTERM and "Traceback" not in err   # as by default
    # before: the rows were in the journal, but the table was stale and the lock stayed
    assert [r["a"] for r in stsim.sweeps.read_table(out)] == [0, 1]
    assert not (tmp_path / "t.csv.lock").exists()


SWEEP_TERM_POOL = """
import os, signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)
import stsim

def row(a, seed):
    if a >= 2:
        open(sys.argv[2] + str(a), "w").close()
        time.sleep(300)
    return {"v": a}

if __name__ == "__main__":
    stsim.sweep(row, {"a": [0, 1, 2, 3]}, out=sys.argv[1], max_workers=2)
"""


# a loaded machine, made certain: the pool's manager thread slow between a killed worker's
# semaphore unlink and its unregistration, the driver slow before its exit finalizers
SLOW_POOL_EXIT = """
import threading, time
import loky.backend.resource_tracker as tracker
import stsim.util.signals as signals
unregister, release = tracker.unregister, signals._release_semaphores

def slow_unregister(name, rtype):
    if threading.current_thread().name == "ExecutorManagerThread":
        time.sleep(1)
    unregister(name, rtype)

def slow_release():
    time.sleep(0.5)
    release()

tracker.unregister, signals._release_semaphores = slow_unregister, slow_release
"""


@pytest.mark.pool
@pytest.mark.parametrize("timing", ["as it comes", "the kill still running"])
def test_sigterm_on_a_pool_sweep_ends_it_quietly(tmp_path, timing):
    # before: loky's manager thread raised InvalidStateError on the futures the sweep had
    # cancelled, and its resource tracker warned of leaked semaphores (the process died by
    # the signal without running multiprocessing's exit finalizers). And, with the kill
    # still running (3 of 3 runs before): the sweep's shutdown after the signal handler's
    # kill returned at once, the process ended by the signal while the pool's thread was
    # between a worker semaphore's unlink and its unregistration, and the tracker warned
    # "1 leaked semlock", then FileNotFoundError for it (seen now and then unseeded)
    seeded = SLOW_POOL_EXIT if timing == "the kill still running" else ""
    (tmp_path / "drv.py").write_text(seeded + SWEEP_TERM_POOL)
    out, ready = tmp_path / "t.csv", str(tmp_path / "ready")
    proc = subprocess.Popen([sys.executable, str(tmp_path / "drv.py"), str(out), ready],
                            stderr=subprocess.PIPE, text=True)
    t0 = time.monotonic()
    while not (os.path.exists(ready + "2") and os.path.exists(ready + "3")):
        assert proc.poll() is None and time.monotonic() - t0 < 120, proc.communicate()
        time.sleep(0.05)
    proc.terminate()
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGTERM
    assert "Traceback" not in err and "leaked" not in err, err
    assert [r["a"] for r in stsim.sweeps.read_table(out)] == [0, 1]
    assert not (tmp_path / "t.csv.lock").exists()



@pytest.mark.pool
def test_a_shutdown_after_a_kill_keeps_the_kill_and_waits_for_it():
    # before: kill() (not waiting, as from a signal handler) then shutdown(wait=True) set
    # loky's kill_workers back to False and returned at once: the workers ran their rows
    # on (a SIGTERM-ed `stsim attention` printed its line, then hung, 3 of 12 runs)
    from stsim.sweeps.pool import OneThreadProcessPool
    ex = OneThreadProcessPool(2)
    futs = [ex.submit(time.sleep, 60) for _ in range(2)]
    workers = list(ex._processes.values())
    try:
        ex.kill()
        ex.shutdown(wait=True)
        assert not any(w.is_alive() for w in workers)
        assert all(f.exception(timeout=5) is not None for f in futs)
    finally:
        for w in workers:          # (before) this test's own workers, still running
            if w.is_alive():
                w.kill()

BACKGROUND_STUDIES = {   # the command, and the lock its sweep of hours-long runs takes
    # its sweeps driven from threads: the driver waited in the thread pool's exit
    "separation": (["separation", "--fcn_Ts", "4,8", "--tf_Ts", "4", "--family_Ts", "4,8",
                    "--steps", "10000000", "--long_steps", "10000000", "--long_Ts", ""],
                   "tune.csv.lock"),
    # its sweeps in the main thread: the driver waited in the pool's shutdown
    "attention": (["attention", "--quick", "--steps", "10000000", "--mechanisms", "softmax,linear",
                   "--tune_steps", "20", "--tune_mults", "1"], "runs.csv.lock"),
}


# on the PYTHONPATH of a study and its pool workers: each process whose run passes step 100
# (only the hours-long runs do: the tuning runs before them are shorter) writes the file
# inside-<pid> into $STSIM_TEST_INSIDE; stsim.core.state is patched when it is imported
INSIDE_A_RUN = """
import importlib.abc, importlib.util, os, sys

class _MarkLongRuns(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "stsim.core.state":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        load = spec.loader.exec_module

        def exec_module(module):
            load(module)
            accumulate, said = module.RunState.accumulate, []

            def mark(self, *args, **kwargs):
                accumulate(self, *args, **kwargs)
                if self.step >= 100 and not said:
                    said.append(True)
                    open(os.path.join(os.environ["STSIM_TEST_INSIDE"],
                                      f"inside-{os.getpid()}"), "w").close()
            module.RunState.accumulate = mark

        spec.loader.exec_module = exec_module
        return spec

sys.meta_path.insert(0, _MarkLongRuns())
"""


@pytest.mark.parametrize("study,workers", [
    pytest.param("separation", "2", marks=pytest.mark.pool),
    # before: now and then (3 of 12 runs under load) it printed its one line and then did
    # not exit within the 90 s guard: the command's shutdown after the kill had set loky's
    # kill_workers back to False (test_a_shutdown_after_a_kill_keeps_the_kill_and_waits_for_it)
    # (slow: the unit test above guards the same race in the default suite)
    pytest.param("attention", "2", marks=[pytest.mark.pool, pytest.mark.slow]),
    # in this process: before, each SIGTERM stopped only the run in hand (its loop took the
    # signal for itself) and the study went on with the next row
    ("attention", "1")])
def test_sigterm_on_a_background_study_ends_its_running_workers(tmp_path, study, workers):
    # a study launched in the background (`stsim figures ... &` from a script: SIGINT
    # ignored). Before: SIGTERM raised in the driver, which then waited for the workers'
    # running runs to finish (they ignore SIGINT; here hours of steps) before exiting, and
    # loky's kill printed an InvalidStateError traceback for the futures the sweep cancelled
    out, hook, inside = tmp_path / "o", tmp_path / "hook", tmp_path / "inside"
    hook.mkdir()
    inside.mkdir()
    (hook / "sitecustomize.py").write_text(INSIDE_A_RUN)
    argv, long_runs = BACKGROUND_STUDIES[study]
    proc = subprocess.Popen([sys.executable, "-m", "stsim", *argv,
                             "--workers", workers, "--quiet", "--out", str(out)],
                            start_new_session=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, MPLBACKEND="Agg", STSIM_TEST_INSIDE=str(inside),
                                     PYTHONPATH=os.pathsep.join(
                                         [str(hook), os.environ["PYTHONPATH"]])),
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    t0 = time.monotonic()
    while not (out / "raw" / long_runs).exists():    # the hours-long runs are submitted
        assert proc.poll() is None and time.monotonic() - t0 < 120, proc.communicate()
        time.sleep(0.1)
    # and every worker is inside one (was: a 3 s sleep, a guess on a loaded machine)
    while len(os.listdir(inside)) < int(workers):
        assert proc.poll() is None and time.monotonic() - t0 < 240, proc.communicate()
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGTERM)
    try:
        _, err = proc.communicate(timeout=90)  # a hang guard: the runs take hours
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail("the study did not end on SIGTERM: it waited for its running runs")
    assert proc.returncode == 143, err
    assert "Traceback" not in err, err
    assert err.strip().splitlines() == [f"stsim: interrupted (SIGTERM); the finished runs "
                                        f"are kept in {out}; rerun the same command to "
                                        f"resume"], err


SLOW_WRITE = """
import os, signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)
import stsim.util.plotting as P
ready, real = sys.argv[1], P.plot_history

def slow(res, path):
    open(ready, "w").close()               # the test signals once the writing has begun
    t0 = time.monotonic()                  # and says so once it has: the signal is here
    while not os.path.exists(ready + ".sent") and time.monotonic() - t0 < 120:
        time.sleep(0.01)
    return real(res, path)

P.plot_history = slow
from stsim.cli import main
sys.exit(main(sys.argv[2:]))
"""


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_while_the_files_are_written_waits_until_they_are_whole(tmp_path, signum):
    # before: the writing stopped half-way (a seed's result.npz beside no loss.png, the
    # manifest incomplete: the run's result refused)
    (tmp_path / "w.py").write_text(SLOW_WRITE)
    ready, out = tmp_path / "ready", tmp_path / "o"
    proc = subprocess.Popen([sys.executable, str(tmp_path / "w.py"), str(ready), "run",
                             *QUICK, "--out", str(out)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, MPLBACKEND="Agg"))
    t0 = time.monotonic()
    while not ready.exists():
        assert proc.poll() is None and time.monotonic() - t0 < 120, proc.communicate()
        time.sleep(0.02)
    os.kill(proc.pid, signum)
    (tmp_path / "ready.sent").touch()      # (was: the writing slept 3 s, a guess)
    _, err = proc.communicate(timeout=120)
    name = "Ctrl-C" if signum == signal.SIGINT else "SIGTERM"
    assert proc.returncode == 128 + signum and err == f"stsim: interrupted ({name})\n"
    assert (out / "loss.png").exists() and stsim.load(out).status == "completed"
    assert not (out / ".stsim-run.lock").exists()
