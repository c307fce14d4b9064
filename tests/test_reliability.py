"""Reliability: locks never follow links, a run's folder never mixes two runs, SIGTERM and
SIGHUP end a run like Ctrl-C, every refusal comes before any work or file, a completed run's
assessment tells diverging and overfitting apart, and ``load`` refuses what it cannot
trust. docs/model.md, "Failure behaviour"."""
import os
import signal
import subprocess
import sys
import time

import numpy as np
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


def test_terminate_as_interrupt_restores_the_handlers():
    from stsim.util.signals import TerminateAsInterrupt
    before = signal.getsignal(signal.SIGTERM)
    with TerminateAsInterrupt() as term:
        assert signal.getsignal(signal.SIGTERM) != before
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGHUP)
    assert signal.getsignal(signal.SIGTERM) == before and term.exit_status == 129


STUDY = ["separation", "--fcn_Ts", "4,8", "--tf_Ts", "4", "--family_Ts", "4,8",
         "--steps", "3000", "--long_steps", "3000", "--long_Ts", "", "--workers", "2"]


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
    lines = err.strip().splitlines()
    assert proc.returncode == 143 and len(lines) == 1, err
    assert lines[0] == (f"stsim: interrupted (SIGTERM); the finished runs are kept in {out}; "
                        f"rerun the same command to resume")
    done = stsim.sweep.journal.load_journal(journal)
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


# ---- every refusal before any work and before any file or folder ------------------------
@pytest.mark.parametrize("opts, match", [
    (dict(lr=[0.1]), r"lr must be a finite number > 0, got \[0.1\]"),
    (dict(lr=(0.1,)), "lr must be a finite number"),
    (dict(seed={"entropy": [1.5]}), "1.5 is not a whole number"),
    (dict(seed={"entropy": True}), "True is not a whole number"),
    (dict(seed={"entropy": 1, "spawn_key": [0.5]}), "0.5 is not a whole number"),
    (dict(q_test={1: 2}), "q_test must be a sequence of integers, got {1: 2}"),
    (dict(T_test={30, 40}), "T_test must be a sequence"),
    (dict(arch="fcn", pe="onehot"), "pe='onehot': options of the transformer"),
    (dict(arch="fcn", d_e=10), "d_e=10: options of the transformer"),
    (dict(arch="fcn", model="practical"), "model='practical'"),
    (dict(arch="fcn", sampler="sphere", query="mean"), "sampler='sphere', query='mean'"),
    (dict(arch="fcn", T_test=[12]), "T_test=\\[12\\] is not supported for arch='fcn'"),
    (dict(objective="population", arch="fcn"), "objective must be 'online' or 'sample'"),
    (dict(objective="population", T=200, q=3), "objective='population' takes the exact "
                                          "expectation.*1.35e\\+125 configurations"),
])
def test_a_bad_run_option_is_refused_before_any_work_or_file(tmp_path, opts, match):
    # before: lr=[0.1] trained all its steps, then assess_run raised TypeError; the seeds
    # were rounded or taken as 1; q_test={1: 2} became (1,); the FCN ignored pe/d_e/model
    kw = dict(T=8, q=2, steps=50, batch=8, checkpoint=tmp_path / "ck" / "c.npz")
    kw.update(opts)
    with pytest.raises(ValueError, match=match):
        stsim.run(**kw)
    assert os.listdir(tmp_path) == []


def test_the_population_refusal_names_no_option_run_lacks():
    with pytest.raises(ValueError) as err:
        stsim.Config.from_options(objective="population")
    assert "method" not in str(err.value) and "objective='online'" in str(err.value)
    stsim.Config.from_options(objective="population", T=6, q=2, pe="onehot")   # feasible


def test_an_fcn_config_reruns_from_its_own_config():
    res = stsim.run(T=6, q=2, arch="fcn", width=4, steps=2, batch=4)
    assert stsim.run(config=res.config).status == "completed"


@pytest.mark.parametrize("argv", [
    ["run", "--objective", "population"],                 # the default encoding: too large
    ["run", "--objective", "population", "--arch", "fcn"],
    ["run", "--arch", "fcn", "--pe", "onehot"],
    ["figures", "--quick", "--set", "fig1.seeds=[]"],     # before: 107 s, then IndexError
    ["figures", "--quick", "--set", "fig1.seeds=[0.5]"],
    ["figures", "--quick", "--workers", "-1"],
    ["separation", "--workers", "-1"],
    ["sparse", "--workers", "-1"],
    ["expressivity", "--workers", "-1"],
])
def test_a_bad_command_is_one_line_exit_2_before_its_folder_exists(tmp_path, argv, capsys):
    out = tmp_path / "o"
    t0 = time.monotonic()
    assert cli(argv + ["--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("stsim: error: "), err
    assert not out.exists() and time.monotonic() - t0 < 30


# ---- the assessment of a completed run -------------------------------------------------
def test_a_completed_run_whose_loss_rises_is_diverging_not_plateau():
    # before: "still on the initial plateau: loss 839960% of initial"
    res = stsim.run(T=20, q=3, model="practical", init="random", init_scale=1e3, steps=20)
    assert res.status == "completed" and res.assessment == "diverging"
    assert "diverging: loss" in res.message and "plateau" not in res.message


def test_a_fixed_sample_learned_by_heart_is_overfitting_not_plateau():
    # before: training loss 1%, validation 202%, labelled "plateau"
    res = stsim.run(T=20, q=3, objective="sample", n_train=64, lr=3, steps=400)
    assert res.assessment == "overfitting"
    assert "overfitting: training loss 0.9" in res.message
    big = stsim.run(T=20, q=3, objective="sample", n_train=4096, lr=3, steps=400)
    assert big.assessment == "learned"


@pytest.mark.parametrize("val, loss, want", [
    ([1.0, 0.01], [1.0, 0.01], "learned"),
    ([1.0, 2.0], [1.0, 0.01], "overfitting"),
    ([1.0, 0.6], [1.0, 0.1], "overfitting"),
    ([1.0, 0.6], [1.0, 0.2], "not converged"),      # a gap, but not 5x
    ([1.0, 3.0], [1.0, 3.0], "diverging"),
    ([1.0, 3.0], [1.0, 0.9], "diverging"),          # training did not learn either
    ([1.0, 0.95], [1.0, 0.95], "plateau"),
    ([1.0, 0.5], [1.0, 0.5], "not converged"),
    ([], [], "unknown"),
    ([0.0, 0.0], [0.0, 0.0], "unknown"),
])
def test_plateau_status_tells_the_five_apart(val, loss, want):
    from stsim.core.schedule import plateau_status
    hist = {"val": np.array(val), "loss": np.array(loss)}
    assert plateau_status(hist, None)[0] == want
    if want in ("diverging", "plateau", "not converged") and val:   # training loss only
        assert plateau_status({"loss": np.array(val)}, None)[0] == want


# ---- load refuses what it cannot trust ---------------------------------------------------
@pytest.fixture(scope="module")
def good_result(tmp_path_factory):
    path = tmp_path_factory.mktemp("good") / "r.npz"
    stsim.run(T=8, q=2, steps=4, batch=8).save(path)
    return path


def _rewrite(src, dst, edit_meta=None, drop=()):
    from stsim.util.io import load_npz, save_npz
    arrays, meta = load_npz(src)
    if edit_meta:
        edit_meta(meta)
    save_npz(dst, {k: v for k, v in arrays.items() if k not in drop}, meta)
    return dst


def _set(key, value):
    return lambda m: m.__setitem__(key, value)


def _cfg(key, value):
    return lambda m: m["config"].__setitem__(key, value)


@pytest.mark.parametrize("edit, match", [
    (_set("status", "bogus"), "its status is 'bogus'"),
    (_set("status", 42), "its status is 42"),
    (_set("message", None), "its message is None, not text"),
    (_set("info", [1]), "its info record is a list"),
    (_set("config", {}), r"its config record lacks \['T', 'q', 'd', 'steps', 'lr', 'arch'\]"),
    (_set("config", [1]), "its config record is a list"),
    (_cfg("T", "x"), "T='x', not a whole number"),
    (_cfg("q", 99), "q=99 > T=8"),
    (_cfg("lr", -1), "lr=-1, not a finite number > 0"),
    (_cfg("lr", True), "lr=True"),
    (_cfg("d_e", None), "d_e=None"),
    (_cfg("arch", "mystery"), "arch='mystery', which is not registered"),
    (lambda m: m.pop("history_keys"), r"lacks \['history_keys'\] \(it holds \d+ history "
                                     r"array\(s\), which would be dropped\)"),
    (lambda m: m["history_keys"].pop(), r"arrays \['history/.*'\] are not named"),
])
def test_load_refuses_records_no_run_writes(good_result, tmp_path, edit, match):
    # before: each loaded (an unknown arch skipped the shape checks; no history_keys gave
    # an empty history)
    bad = _rewrite(good_result, tmp_path / "bad.npz", edit)
    with pytest.raises(ValueError, match=match):
        stsim.load(bad)


def test_load_still_reads_good_results_of_each_status(good_result, tmp_path):
    assert stsim.load(good_result).status == "completed"
    for status in ("diverged", "interrupted"):
        assert stsim.load(_rewrite(good_result, tmp_path / f"{status}.npz",
                                   _set("status", status))).status == status
    fcn = tmp_path / "fcn.npz"
    stsim.run(T=6, q=2, arch="fcn", width=4, steps=2, batch=4).save(fcn)
    assert stsim.load(fcn).config["arch"] == "fcn"


# ---- messages that name what is wrong ------------------------------------------------------
@pytest.mark.parametrize("opts, names", [
    (dict(arch="fcn", T=10, width=10 ** 4, depth=10 ** 4), ["width=10000", "depth=10000"]),
    (dict(T=20, q=2, T_test=[10 ** 6], lr=0.1, steps=10), ["T_test=[1000000]"]),
])
def test_memory_refusals_name_the_sizes_that_matter(opts, names):
    # before: "d_e=None" for the FCN, no T_test
    with pytest.raises(ValueError, match="would need about") as err:
        stsim.Config.from_options(**opts)
    for n in names:
        assert n in str(err.value)
    if opts.get("arch") == "fcn":
        assert "d_e=" not in str(err.value)


@pytest.fixture
def checkpoint(tmp_path):
    ck = tmp_path / "c.npz"
    stsim.run(T=8, q=2, steps=4, batch=8, lr=0.5, checkpoint=ck, checkpoint_every=2)
    return ck


def test_a_checkpoint_of_another_generator_names_the_file(checkpoint, tmp_path):
    bad = _rewrite(checkpoint, tmp_path / "mt.npz",
                   _set("rng", np.random.MT19937(0).state))
    before = bad.read_bytes()
    with pytest.raises(ValueError, match=r"checkpoint '.*mt\.npz' holds a MT19937 generator "
                                         r"state; this run's training stream is PCG64"):
        stsim.run(T=8, q=2, steps=6, batch=8, lr=0.5, checkpoint=bad)
    assert bad.read_bytes() == before


def test_a_checkpoint_of_another_T_names_the_fields_that_differ(checkpoint):
    # before: "is corrupt: param/W has shape (21, 21), the config needs (23, 23)"
    with pytest.raises(ValueError, match=r"different config \(differs in \['T', 'd_e'\]: "
                                         r"T: 8 there, 9 here"):
        stsim.run(T=9, q=2, steps=6, batch=8, lr=0.5, checkpoint=checkpoint)


SWEEP_TERM = """
import os, signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)
import stsim
from stsim.sweep import InlineExecutor

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
    assert [r["a"] for r in stsim.sweep.read_table(out)] == [0, 1]
    assert not (tmp_path / "t.csv.lock").exists()
