"""Fault behaviour (issue 14): every fault gives a clear error naming what is wrong, and
nothing already computed is lost. See docs/model.md, "Failure behaviour"."""
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import stsim
from stsim.sweep import InlineExecutor, read_table, sweep
from stsim.util.io import atomic_write, load_npz


@pytest.fixture(scope="module")
def result_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("res") / "r.npz"
    stsim.run(T=10, q=2, steps=5, batch=8).save(path)
    return path


@pytest.mark.parametrize("damage", ["truncate", "garble", "garbage", "empty"])
def test_corrupt_result_files_name_the_file(result_file, tmp_path, damage):
    data = result_file.read_bytes()
    bad = tmp_path / f"{damage}.npz"
    bad.write_bytes({"truncate": data[: len(data) // 2],
                     "garble": data[:200] + bytes(255 - b for b in data[200:400]) + data[400:],
                     "garbage": b"this is not an archive" * 10,
                     "empty": b""}[damage])
    with pytest.raises(ValueError, match=str(bad.name)) as err:
        stsim.load(bad)
    assert "allow_pickle" not in str(err.value)


def test_result_missing_an_array_is_detected_at_load(result_file, tmp_path):
    arrays, meta = load_npz(result_file)
    del arrays["history/loss"]
    from stsim.util.io import save_npz
    bad = tmp_path / "partial.npz"
    save_npz(bad, arrays, meta)
    with pytest.raises(ValueError, match=r"partial\.npz.*history/loss"):
        stsim.load(bad)


def test_a_folder_is_not_a_result(tmp_path):
    with pytest.raises(ValueError, match="is a folder"):
        stsim.load(tmp_path)


def _ret_status(a, seed):
    return {"status": "mine", "seed": -1, "x": a}


def test_sweep_result_keys_do_not_overwrite_table_columns(tmp_path):
    out = tmp_path / "t.csv"
    res = sweep(_ret_status, {"a": [1, 2]}, executor=InlineExecutor(), out=out)
    assert res.columns == ["a", "seed_index", "seed", "status", "error", "fn.seed",
                           "fn.status", "x"]
    row = read_table(out)[0]
    assert row["status"] == "ok" and row["fn.status"] == "mine" and row["fn.seed"] == -1
    assert row["seed"] != -1
    header = out.read_text().splitlines()[0].split(",")
    assert len(header) == len(set(header))


def _fails(a, seed):
    raise RuntimeError(f"boom {a}")


def test_failed_row_keeps_its_error_text(tmp_path):
    res = sweep(_fails, {"a": [1]}, executor=InlineExecutor(), out=tmp_path / "f.csv")
    assert res.rows[0]["status"] == "error" and "boom 1" in res.rows[0]["error"]


SLOW_SWEEP = textwrap.dedent("""
    import sys
    import stsim
    from tests_helpers_slow import slow
    if __name__ == "__main__":
        stsim.sweep(slow, {"a": list(range(40))}, out=sys.argv[1], max_workers=2)
""")


def _slow_module(tmp_path):
    """The sweep's function: rows a = 0, 1 finish at once; the others wait for the file
    ``release`` (which the test never writes), so the driver is alive, deterministically,
    until the test kills it — no wall-clock race with a sweep that finishes."""
    (tmp_path / "tests_helpers_slow.py").write_text(textwrap.dedent(f"""
        import os
        import time

        def slow(a, seed):
            while a >= 2 and not os.path.exists({str(tmp_path / "release")!r}):
                time.sleep(0.05)
            return {{'a2': a * a}}
        """))
    (tmp_path / "driver.py").write_text(SLOW_SWEEP)


def _children(pid):
    """Lines ``pid ppid args`` of the processes whose parent is ``pid``."""
    out = subprocess.run(["ps", "-eo", "pid,ppid,args"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines()[1:] if line.split()[1] == str(pid)]


def test_second_process_on_one_table_is_refused_and_killed_driver_leaves_no_workers(tmp_path):
    _slow_module(tmp_path)
    out = tmp_path / "t.csv"
    env = dict(os.environ, PYTHONPATH=str(tmp_path) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    drv = subprocess.Popen([sys.executable, str(tmp_path / "driver.py"), str(out)], env=env,
                           cwd=tmp_path)
    journal = tmp_path / "t.csv.journal.jsonl"
    t0 = time.time()
    while not (journal.exists() and journal.read_text().count("\n") >= 2):
        assert time.time() - t0 < 120, "the sweep did not start"
        # the driver cannot finish (its rows a >= 2 wait for a file never written)
        assert drv.poll() is None, "the driver crashed"
        time.sleep(0.1)
    # a second process on the same out is refused while the first runs
    second = subprocess.run([sys.executable, str(tmp_path / "driver.py"), str(out)], env=env,
                            cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert second.returncode != 0 and "another process" in second.stderr
    workers = [int(line.split()[0]) for line in _children(drv.pid)]
    assert workers, "expected pool workers"
    os.kill(drv.pid, signal.SIGKILL)
    drv.wait()
    t0 = time.time()
    alive = workers
    while alive and time.time() - t0 < 15:
        time.sleep(0.2)
        alive = [w for w in workers if _alive(w)]
    assert not alive, f"pool workers {alive} outlived their killed driver"
    # the finished rows survive; a rerun reuses them
    done = journal.read_text().count("\n")
    assert done >= 2


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is dead for our purpose
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split()[2] != "Z"
    except OSError:
        return False


def test_stale_temporaries_of_dead_writers_are_removed(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / f".tmp-{dead.pid}-abcdx.json"
    stale.write_text("{")
    live = tmp_path / f".tmp-{os.getpid()}-efghx.json"
    live.write_text("{")
    with atomic_write(tmp_path / "x.json", "w") as fh:
        fh.write("{}")
    assert not stale.exists() and live.exists()
    assert (tmp_path / "x.json").read_text() == "{}"


def test_booleans_are_not_integers():
    with pytest.raises(ValueError, match="batch"):
        stsim.run(T=10, q=2, steps=1, batch=True)
    with pytest.raises(ValueError, match="T must be an integer"):
        stsim.run(T=True, q=2, steps=1)


@pytest.mark.parametrize("value", [30.0, np.int64(30)])
def test_T_test_accepts_integral_numbers(value):
    res = stsim.run(T=10, q=2, steps=1, batch=4, T_test=value)
    assert "val/T=30" in res.history


@pytest.mark.parametrize("value", ["30", 30.5, [10, "x"]])
def test_T_test_errors_name_the_parameter(value):
    with pytest.raises(ValueError, match="T_test"):
        stsim.run(T=10, q=2, steps=1, batch=4, T_test=value)


@pytest.mark.parametrize("options, culprit", [
    (dict(d_e=10 ** 6), "W, V"), (dict(T=10 ** 5, q=3), "W, V"),
    (dict(batch=10 ** 9), "batch"), (dict(T_test=[10 ** 7]), "W, V"),
    (dict(sampler="sphere", d_e=4096, batch=4096), "batch tokens and encodings"),
    (dict(arch="fcn", T=10 ** 5, width=10 ** 4), "parameters")])
def test_oversized_runs_are_refused_before_allocating(options, culprit):
    opts = dict(T=200, q=3, steps=1)
    opts.update(options)
    with pytest.raises(ValueError, match=r"would need about .* GiB of memory") as err:
        stsim.run(**opts)
    assert culprit in str(err.value)
    # refused by the config check, before any array was built
    assert err.traceback[-1].path.name == "config.py"


def test_memory_estimate_of_the_default_run_is_small():
    est = stsim.Config.from_options().memory_estimate()
    assert 0 < est["total"] < 2 ** 30 and est["total"] == sum(
        v for k, v in est.items() if k != "total")


def test_init_scale_error_names_the_parameter():
    with pytest.raises(ValueError, match="init_scale"):
        stsim.run(T=10, q=2, steps=1, init="random", init_scale="x")


# ---------------------------------------------------------------------------------------
# runs: checkpoints, divergence, the output folder
# ---------------------------------------------------------------------------------------
CK = dict(T=20, q=2, batch=32, checkpoint_every=50)


def test_resuming_with_fewer_steps_than_the_checkpoint_is_refused(tmp_path):
    ck = tmp_path / "c.npz"
    stsim.run(steps=200, checkpoint=ck, **CK)
    with pytest.raises(ValueError, match="at step 200, beyond steps=100"):
        stsim.run(steps=100, eval_every=2, checkpoint=ck, **CK)


def test_extending_a_run_with_the_default_eval_every(tmp_path):
    ck = tmp_path / "c.npz"
    first = stsim.run(steps=200, checkpoint=ck, **CK)
    longer = stsim.run(steps=400, checkpoint=ck, **CK)           # eval_every left at default
    assert longer.status == "completed" and longer.history["step"][-1] == 400
    # the records keep the checkpoint's grid (every 2 steps), and the first part is unchanged
    np.testing.assert_array_equal(longer.history["step"][:len(first.history["step"])],
                                  first.history["step"])
    assert longer.config["eval_every"] == first.config["eval_every"] == 2
    straight = stsim.run(steps=400, eval_every=2, **{k: v for k, v in CK.items()
                                                      if k != "checkpoint_every"})
    np.testing.assert_array_equal(longer.W, straight.W)


def test_huge_finite_losses_are_divergence():
    # lr 20 at T=30 overshoots to losses of order 1e6 and beyond before any NaN appears
    res = stsim.run(T=30, q=3, lr=20, steps=1000, eval_every=1)
    assert res.status == "diverged" and "above 1e+06 x the first loss" in res.message
    assert np.all(np.isfinite(res.history["loss"]))


def test_divergence_at_step_zero_keeps_one_row():
    res = stsim.run(T=10, q=2, init="random", init_scale=1e200, steps=5)
    assert res.status == "diverged" and "at step 0" in res.message
    assert list(res.history["step"]) == [0] and not np.isfinite(res.history["loss"][0])


def test_checkpoint_must_be_a_file(tmp_path):
    with pytest.raises(ValueError, match="checkpoint must be a file path"):
        stsim.run(T=10, q=2, steps=2, checkpoint=tmp_path)


def test_corrupt_checkpoint_names_the_file(tmp_path):
    ck = tmp_path / "c.npz"
    ck.write_bytes(b"\x00" * 100)
    with pytest.raises(ValueError, match=r"checkpoint .*c\.npz"):
        stsim.run(T=10, q=2, steps=2, checkpoint=ck)


def _cli(*argv):
    return subprocess.run([sys.executable, "-m", "stsim", *argv], capture_output=True,
                          text=True, timeout=300, env=dict(os.environ, MPLBACKEND="Agg"))


def test_cli_writes_every_output_of_a_diverged_run(tmp_path):
    out = tmp_path / "d"
    proc = _cli("run", "--T", "30", "--q", "3", "--lr", "20", "--steps", "1000", "--quiet",
                "--out", str(out))
    assert proc.returncode == 1 and '"status": "diverged"' in proc.stdout, proc.stderr
    for f in ("result.npz", "config.json", "history.csv", "loss.png"):
        assert (out / f).stat().st_size > 0


@pytest.mark.parametrize("out", ["", "/dev/null", "/etc/hostname/x"])
def test_cli_checks_the_output_folder_before_training(out):
    proc = _cli("run", "--T", "10", "--q", "2", "--steps", "5", "--quiet", "--out", out)
    assert proc.returncode == 2 and "--out" in proc.stderr and "Traceback" not in proc.stderr


HOLD_RUN = textwrap.dedent("""
    import os, sys, time
    import stsim.core.state as S

    ready = sys.argv[1]
    record = S.RunState.record

    def hold(self, step, metrics):
        # between the checkpoints at 100 and 200: say so, and wait to be killed
        row = record(self, step, metrics)
        if step == 150:
            open(ready, "w").close()
            while True:
                time.sleep(0.05)
        return row

    S.RunState.record = hold
    from stsim.cli import main
    sys.exit(main(sys.argv[2:]))
""")


def test_cli_kill_and_resume_is_bit_identical_and_one_run_per_folder(tmp_path):
    """The first run is held at step 150 (after its checkpoint at 100) until it is killed:
    it is alive, deterministically, while the second run is refused, and is killed between
    two checkpoints; the resumed run redoes steps 100..150 bit for bit."""
    args = ["run", "--T", "40", "--q", "3", "--steps", "3000", "--batch", "64",
            "--eval_every", "10", "--checkpoint_every", "100", "--quiet"]
    out = tmp_path / "k"
    (tmp_path / "hold.py").write_text(HOLD_RUN)
    ready = tmp_path / "ready"
    proc = subprocess.Popen([sys.executable, str(tmp_path / "hold.py"), str(ready), *args,
                             "--out", str(out)],
                            env=dict(os.environ, MPLBACKEND="Agg", OMP_NUM_THREADS="1"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    t0 = time.time()
    while not ready.exists():
        assert proc.poll() is None, f"the run ended before step 150: {proc.stderr.read()}"
        assert time.time() - t0 < 300, "the run did not reach step 150"
        time.sleep(0.05)
    assert (out / "checkpoint.npz").exists()
    busy = _cli(*args, "--out", str(out))          # a second run on the same folder
    assert busy.returncode == 2 and "another process" in busy.stderr
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    env = dict(os.environ, MPLBACKEND="Agg", OMP_NUM_THREADS="1")
    resumed = subprocess.run([sys.executable, "-m", "stsim", *args, "--out", str(out)],
                             env=env, capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    fresh = subprocess.run([sys.executable, "-m", "stsim", *args, "--out", str(tmp_path / "f")],
                           env=env, capture_output=True, text=True, timeout=600)
    assert fresh.returncode == 0
    a, b = stsim.load(out / "result.npz"), stsim.load(tmp_path / "f" / "result.npz")
    np.testing.assert_array_equal(a.W, b.W)
    np.testing.assert_array_equal(a.history["loss"], b.history["loss"])
