"""Fault behaviour: every fault gives a clear error naming what is wrong, and
nothing already computed is lost. See docs/model.md, "Failure behaviour"."""
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import stsim
from stsim.sweeps import InlineExecutor, read_table, sweep
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


@pytest.mark.pool
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
    where = [e.path.name for e in err.traceback]
    assert "config.py" in where and "session.py" not in where and "problem.py" not in where


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


def test_cli_writes_every_output_of_a_diverged_run(tmp_path, capsys):
    out = tmp_path / "d"           # (the command's main in this process: no process of its own)
    code = cli_main(["run", "--T", "30", "--q", "3", "--lr", "20", "--steps", "1000", "--quiet",
                     "--out", str(out)])
    cap = capsys.readouterr()
    assert code == 1 and '"status": "diverged"' in cap.out, cap.err
    for f in ("result.npz", "config.json", "history.csv", "loss.png"):
        assert (out / f).stat().st_size > 0


@pytest.mark.parametrize("out", ["", "/dev/null", "/etc/hostname/x"])
def test_cli_checks_the_output_folder_before_training(out, capsys):
    # the command's main in this process (a traceback would be an exception raised here)
    code = cli_main(["run", "--T", "10", "--q", "2", "--steps", "5", "--quiet", "--out", out])
    err = capsys.readouterr().err
    assert code == 2 and "--out" in err and "Traceback" not in err


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


def test_cli_kill_and_resume_is_bit_identical_and_one_run_per_folder(tmp_path, capsys):
    """The first run is held at step 150 (after its checkpoint at 100) until it is killed:
    it is alive, deterministically, while the second run is refused, and is killed between
    two checkpoints; the resumed run redoes steps 100..150 bit for bit. (The second run and
    the straight run to compare with are this process's: neither needs a process of its
    own; the straight one runs as the command's, on one BLAS thread, not drawing ahead.)"""
    from stsim.util.threads import one_blas_thread
    opts = dict(T=40, q=3, steps=200, batch=64, eval_every=10, checkpoint_every=100)
    args = ["run", *(f"--{k}={v}" for k, v in opts.items()), "--quiet"]
    out = tmp_path / "k"
    (tmp_path / "hold.py").write_text(HOLD_RUN)
    ready = tmp_path / "ready"
    env = dict(os.environ, MPLBACKEND="Agg", OMP_NUM_THREADS="1")
    proc = subprocess.Popen([sys.executable, str(tmp_path / "hold.py"), str(ready), *args,
                             "--out", str(out)],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    t0 = time.time()
    while not ready.exists():
        assert proc.poll() is None, f"the run ended before step 150: {proc.stderr.read()}"
        assert time.time() - t0 < 300, "the run did not reach step 150"
        time.sleep(0.05)
    assert (out / "checkpoint.npz").exists()
    capsys.readouterr()
    busy = cli_main([*args, "--out", str(out)])     # a second run on the same folder
    assert busy == 2 and "another process" in capsys.readouterr().err
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    resumed = subprocess.run([sys.executable, "-m", "stsim", *args, "--out", str(out)],
                             env=env, capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    with one_blas_thread():
        fresh = stsim.run(**opts, checkpoint=tmp_path / "f.npz", prefetch=False,
                          progress=False)
    assert fresh.status == "completed"
    a = stsim.load(out / "result.npz")
    np.testing.assert_array_equal(a.W, fresh.W)
    np.testing.assert_array_equal(a.history["loss"], fresh.history["loss"])


# ---------------------------------------------------------------------------------------
# corrupt checkpoints, incomplete results, paths refused before the work
# ---------------------------------------------------------------------------------------
from stsim.cli import main as cli_main  # noqa: E402
from stsim.util.io import save_npz  # noqa: E402

RUN_ARGS = ["run", "--T", "10", "--q", "2", "--batch", "16", "--lr", "1", "--checkpoint_every", "20",
            "--quiet"]


def _object_array():
    return np.array([{"not": "numbers"}], dtype=object)


CORRUPTIONS = {
    "unequal history": (lambda a, m: a.__setitem__("history/loss", a["history/loss"][:-1]),
                        "unequal lengths"),
    "no param/V": (lambda a, m: a.pop("param/V"), r"missing \['param/V'\]"),
    "W misshapen": (lambda a, m: a.__setitem__("param/W", a["param/W"][:-1]),
                    r"param/W has shape \(24, 25\), the config needs \(25, 25\)"),
    "NaN in W": (lambda a, m: a["param/W"].__setitem__((0, 0), np.nan), "non-finite"),
    "inf in V": (lambda a, m: a["param/V"].__setitem__((1, 3), np.inf), "param/V .*non-finite"),
    "object array": (lambda a, m: a.__setitem__("param/V", _object_array()),
                     r"'param/V' holds Python objects"),
    "history/step not increasing": (
        lambda a, m: a["history/step"].__setitem__(1, 0.0), "history/step is not an increasing list"),
    "history beyond the step": (lambda a, m: m.__setitem__("step", 5),
                                "history reaches step 39, beyond its step 5"),
    "bad generator state": (lambda a, m: m.__setitem__("rng", {"bit_generator": "PCG64"}),
                            "generator state is invalid"),
    "bad accumulator": (lambda a, m: m.__setitem__("acc", [float("nan"), 1]),
                        "loss accumulator"),
}


@pytest.fixture(scope="module")
def good_run_folder(tmp_path_factory):
    """A finished `stsim run` folder with a checkpoint at step 40 (its last step)."""
    out = tmp_path_factory.mktemp("good") / "run"
    assert cli_main(RUN_ARGS + ["--steps", "40", "--out", str(out)]) == 0
    return out


@pytest.mark.parametrize("defect", sorted(CORRUPTIONS))
def test_corrupt_checkpoint_is_refused_and_every_output_kept(good_run_folder, tmp_path,
                                                             defect, capsys):
    """Each defect is refused with one line naming the file and the defect, before anything
    is written: every file of the earlier run stays byte-identical (once overwritten)."""
    import shutil
    out = tmp_path / "run"
    shutil.copytree(good_run_folder, out)
    arrays, meta = load_npz(out / "checkpoint.npz", what="checkpoint")
    corrupt, match = CORRUPTIONS[defect]
    corrupt(arrays, meta)
    save_npz(out / "checkpoint.npz", arrays, meta)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    capsys.readouterr()
    code = cli_main(RUN_ARGS + ["--steps", "80", "--out", str(out)])     # would resume at 40
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert "checkpoint.npz" in err[0] and re.search(match, err[0]), err[0]
    after = {p.name: p.read_bytes() for p in out.iterdir()}
    assert after == before                       # nothing written, nothing removed


def test_a_good_checkpoint_of_the_same_folder_resumes(good_run_folder, tmp_path, capsys):
    """The control of the test above: the uncorrupted copy resumes to step 80."""
    import shutil
    out = tmp_path / "run"
    shutil.copytree(good_run_folder, out)
    assert cli_main(RUN_ARGS + ["--steps", "80", "--out", str(out)]) == 0
    assert stsim.load(out / "result.npz").history["step"][-1] == 80


def test_nan_parameter_ends_diverged_not_learned():
    """A NaN in an entry the loss never reaches (W_xx: the query token has x_q = 0) leaves
    the loss and gradients finite; the run must still not end "completed ... learned"."""
    from stsim.core.optim import SGD, register_optimizer

    class Poison(SGD):
        def step(self, params, grads):
            super().step(params, grads)
            if self.t == 30:
                params["W"][0, 0] = np.nan

    register_optimizer("poison-test", Poison, lr=1.0)
    res = stsim.run(T=8, q=2, pe="onehot", optimizer="poison-test", lr=2.0, steps=200,
                    batch=32, eval_every=10)
    assert res.status == "diverged" and "non-finite parameter(s) ['W']" in res.message
    assert res.history["step"][-1] == 30 and np.isnan(res.history["cos_W"][-1])
    assert "learned" not in res.message


def test_cosine_of_a_non_finite_matrix_is_nan():
    W, V = np.eye(7), np.eye(3, 7)
    assert stsim.cosine_to_target(W, V, 3)[0] > 0
    W[0, 0] = np.nan
    cw, cv = stsim.cosine_to_target(W, V, 3)
    assert np.isnan(cw) and cv == pytest.approx(np.sqrt(3) / np.sqrt(3) / 1.0)
    assert stsim.cosine_to_target(np.zeros((7, 7)), V, 3)[0] == 0.0


@pytest.mark.parametrize("damage, match", [
    (lambda a, m: a.pop("param/W"), r"missing \['param/W'\]"),
    (lambda a, m: a.__setitem__("history/val", a["history/val"][1:]), "unequal lengths"),
    (lambda a, m: a.__setitem__("param/V", a["param/V"][:, :-1]),
     r"param/V has shape \(5, 24\), the config needs \(5, 25\)"),
    (lambda a, m: a.__setitem__("param/V", a["param/V"].astype(int)), "not a float array"),
    (lambda a, m: a.__setitem__("history/loss", np.zeros((6, 2))), "not a 1-D numeric"),
    (lambda a, m: a.__setitem__("param/W", _object_array()), "holds Python objects"),
])
def test_load_refuses_incomplete_or_inconsistent_results(result_file, tmp_path, damage, match):
    arrays, meta = load_npz(result_file)
    damage(arrays, meta)
    bad = tmp_path / "bad.npz"
    save_npz(bad, arrays, meta)
    with pytest.raises(ValueError, match=match) as err:
        stsim.load(bad)
    assert "bad.npz" in str(err.value)


def test_load_of_a_diverged_result_keeps_its_non_finite_values(tmp_path):
    res = stsim.run(T=10, q=2, init="random", init_scale=1e200, steps=5)
    back = stsim.load(res.save(tmp_path / "d.npz"))
    assert back.status == "diverged" and not np.isfinite(back.history["loss"][0])


def test_load_opens_a_checkpoint_as_the_run_so_far(tmp_path):
    ck = tmp_path / "c.npz"
    stsim.run(T=10, q=2, steps=40, batch=8, lr=1.0, checkpoint=ck, checkpoint_every=20)
    res = stsim.load(ck)
    assert res.status == "checkpoint" and "at step 40 of 40" in res.message
    assert res.W.shape == (25, 25) and res.history["step"].dtype == np.int64
    again = stsim.run(config=dict(res.config, steps=60), checkpoint=ck)   # as the message says
    assert again.history["step"][-1] == 60


def test_load_of_a_csv_says_what_the_file_is(tmp_path):
    res = stsim.run(T=10, q=2, steps=5, batch=8)
    path = res.history_csv(tmp_path / "history.csv")
    with pytest.raises(ValueError, match=r"history\.csv.*CSV, header 'step,loss") as err:
        stsim.load(path)
    assert "corrupt" not in str(err.value)


@pytest.mark.parametrize("kw, match", [
    (dict(checkpoint="", checkpoint_every=2), "checkpoint must be a file path, got an empty"),
    (dict(checkpoint_every=2), "checkpoint_every=2 needs checkpoint"),
    (dict(checkpoint="c.npz", checkpoint_every=0), "checkpoint_every must be an integer >= 1"),
    (dict(checkpoint=3), "checkpoint must be a file path"),
    (dict(progress="yes"), "progress must be True, False, None"),
    (dict(prefetch="yes"), "prefetch must be True, False or None"),
    (dict(width=32), "width and depth are options of the FCN"),
    (dict(depth=2), "width and depth are options of the FCN"),
    (dict(lr="0.1"), "lr must be a number, got the string '0.1'"),
    (dict(init="random", init_scale="0.1"), "init_scale must be a number"),
    (dict(seed="3"), "seed must be a non-negative int, a numpy.random.SeedSequence"),
    (dict(seed=-1), "seed must be"),
    (dict(config=42), "config must be a stsim.Config"),
])
def test_bad_run_options_are_refused_before_any_work(kw, match, monkeypatch, tmp_path):
    import stsim.core.session as R
    monkeypatch.chdir(tmp_path)

    def no_work(*a, **k):
        raise AssertionError("the run started")

    monkeypatch.setattr(R, "make_problem", no_work)
    with pytest.raises(ValueError, match=match):
        stsim.run(T=10, q=2, steps=5, **kw)
    assert list(tmp_path.iterdir()) == []


def test_checkpoint_under_a_file_is_refused_before_training(tmp_path, monkeypatch):
    import stsim.core.session as R
    (tmp_path / "f").write_text("x")
    monkeypatch.setattr(R, "make_problem", lambda *a: pytest.fail("the run started"))
    with pytest.raises(ValueError, match="the folder of checkpoint"):
        stsim.run(T=10, q=2, steps=5, checkpoint=tmp_path / "f" / "c.npz")


@pytest.mark.parametrize("k", ["0", "-3"])
def test_cli_checkpoint_every_is_checked_before_the_folder_is_made(tmp_path, k, capsys):
    out = tmp_path / "never"
    assert cli_main(["run", "--T", "10", "--q", "2", "--steps", "5", "--checkpoint_every", k,
                     "--out", str(out)]) == 2
    assert "--checkpoint_every must be an integer >= 1" in capsys.readouterr().err
    assert not out.exists()


def test_choices_ignore_case_alike():
    cfg = stsim.Config.from_options(T=10, q=2, pe="ONEHOT", optimizer="SGD", model="Theory",
                                    query="SUM", init="Zero", sampler="Slots", arch="Transformer",
                                    objective="Online")
    assert (cfg.pe, cfg.optimizer, cfg.model, cfg.query, cfg.init, cfg.sampler, cfg.arch,
            cfg.objective) == ("onehot", "sgd", "theory", "sum", "zero", "slots",
                               "transformer", "online")
    assert stsim.Config.from_options(T=10, q=2, optimizer="GD").objective == "sample"


# ---------------------------------------------------------------------------------------
# the command line: full disk, one-line warnings, lock file, broken pipe
# ---------------------------------------------------------------------------------------
FSIZE_RUN = textwrap.dedent("""
    import resource, signal, sys
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)     # a write past the limit fails (EFBIG)
    limit = int(sys.argv[1])
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    from stsim.cli import main
    sys.exit(main(sys.argv[2:]))
""")


def test_cli_full_disk_is_one_line_naming_what_was_kept(tmp_path):
    """Files above 20 kB cannot be written (a quota, as a full disk): the figure fails;
    the command says so in one line, keeps the other files and prints its summary."""
    (tmp_path / "fsize.py").write_text(FSIZE_RUN)
    out = tmp_path / "o"
    proc = subprocess.run([sys.executable, str(tmp_path / "fsize.py"), "20000", "run", "--T",
                           "10", "--q", "2", "--steps", "20", "--batch", "16", "--lr", "1",
                           "--quiet", "--out", str(out)], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, MPLBACKEND="Agg"))
    err = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(err) == 1, proc.stderr
    assert re.match(r"stsim: error: --out: could not write loss\.png \(File too large\) in .*; "
                    r"kept: result\.npz, history\.csv, config\.json$", err[0]), err[0]
    assert json.loads(proc.stdout)["status"] == "completed"
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "history.csv",
                                                     "manifest.json", "result.npz"]
    assert stsim.load(out / "result.npz").status == "completed"


def test_cli_failed_write_removes_the_earlier_runs_file(tmp_path, monkeypatch, capsys):
    import errno

    import stsim.util.io as io
    out = tmp_path / "o"
    args = ["run", "--T", "10", "--q", "2", "--steps", "20", "--batch", "16", "--lr", "1",
            "--quiet", "--out", str(out)]
    assert cli_main(args) == 0
    real = io.write_json

    def full(path, obj):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(io, "write_json", full)
    capsys.readouterr()
    assert cli_main(args + ["--seed", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "could not write config.json (No space left on device)" in err[0]
    assert "kept: result.npz, history.csv, loss.png" \
        in err[0]
    assert not (out / "config.json").exists()      # not the seed-0 file beside seed-1 results
    monkeypatch.setattr(io, "write_json", real)


# ---- a full disk (ENOSPC simulated: the writes raise, no disk is filled) -----------------
RUN = ["run", "--T", "6", "--q", "2", "--steps", "3", "--batch", "8", "--lr", "1", "--quiet"]


def _enospc(path):
    import errno
    return OSError(errno.ENOSPC, "No space left on device", str(path))


def test_lock_pid_write_on_a_full_disk_names_the_lock_and_leaves_none(tmp_path, monkeypatch,
                                                                      capsys):
    import stsim.util.io as io
    real = io._open_no_follow

    class Full:                         # the lock file, on a disk with no room for its pid
        def __init__(self, fh):
            self.fh = fh

        def __getattr__(self, name):
            return getattr(self.fh, name)

        def flush(self):
            raise _enospc(self.fh.name)

    monkeypatch.setattr(io, "_open_no_follow", lambda path: Full(real(path)))
    out = tmp_path / "o"
    assert cli_main(RUN + ["--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{out / '.stsim-run.lock'}: No space left on device (writing the process id " \
           f"into the lock file)" in err, err
    assert not (out / ".stsim-run.lock").exists()       # no 0-byte lock left behind
    monkeypatch.setattr(io, "_open_no_follow", real)
    assert cli_main(RUN + ["--out", str(out)]) == 0      # and the folder is usable after


@pytest.mark.parametrize("full", [{"result.npz"}, {"result.npz", "manifest.json"},
                                  {"result.npz", "manifest.json", "history.csv",
                                   "config.json", "loss.png"}])
def test_result_not_written_is_named_and_load_says_incomplete(tmp_path, monkeypatch, capsys,
                                                              full):
    """The files that fail are named (result.npz first), not only manifest.json; loading the
    folder then says it is an incomplete run (not "a folder, not a result")."""
    import contextlib

    import stsim.util.io as io
    real, calls = io.atomic_write, []

    @contextlib.contextmanager
    def disk(path, mode="wb"):
        name = os.path.basename(path)
        calls.append(name)
        # manifest.json fails when written last (complete) unless every write fails
        if name in full and (name != "manifest.json" or calls.count(name) > 1
                             or len(full) == 5):
            raise _enospc(path)
        with real(path, mode) as fh:
            yield fh

    monkeypatch.setattr(io, "atomic_write", disk)
    out = tmp_path / "o"
    assert cli_main(RUN + ["--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "could not write result.npz" in err, err
    if "manifest.json" in full:
        assert "manifest.json" in err
    monkeypatch.setattr(io, "atomic_write", real)
    if len(full) == 5:       # not even the manifest: nothing of the run in the folder
        assert "the folder is unchanged" in err and not (out / "manifest.json").exists()
        return
    with pytest.raises(ValueError, match=r"is the folder of an incomplete run: it has no "
                                         r"result\.npz"):
        stsim.load(out)


LONG_WARNING = textwrap.dedent("""
    import sys
    import stsim.core.schedule as s
    s.LONG_RUN_S = 0.0            # every default schedule counts as long
    from stsim.cli import main
    sys.exit(main(sys.argv[1:]))
""")


@pytest.mark.parametrize("quiet", [False, True])
def test_cli_long_run_warning_once_in_one_line_and_not_under_quiet(tmp_path, quiet):
    (tmp_path / "w.py").write_text(LONG_WARNING)
    proc = subprocess.run([sys.executable, str(tmp_path / "w.py"), "run", "--T", "10", "--q",
                           "2", "--batch", "64", "--out", str(tmp_path / "o")]
                          + (["--quiet"] if quiet else []),
                          capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, MPLBACKEND="Agg"))
    assert proc.returncode == 0, proc.stderr
    warned = [line for line in proc.stderr.splitlines() if "warning" in line.lower()]
    if quiet:
        assert proc.stderr == ""
    else:
        assert len(warned) == 1 and warned[0].startswith("stsim: warning: the default schedule")
        assert "warnings.warn" not in proc.stderr and ".py:" not in proc.stderr


def test_cli_run_leaves_no_lock_file(tmp_path, capsys):
    out = tmp_path / "o"
    assert cli_main(["run", "--T", "10", "--q", "2", "--steps", "5", "--quiet",
                     "--out", str(out)]) == 0
    assert not (out / ".stsim-run.lock").exists()
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "history.csv", "loss.png",
                                                     "manifest.json", "result.npz"]


def test_removed_lock_is_refused_while_held_and_free_after(tmp_path):
    from stsim.util.io import FileLock
    path = tmp_path / "x"
    probe = ("import sys\nfrom stsim.util.io import FileLock\n"
             "try:\n    FileLock(sys.argv[1], remove=True).__enter__()\n"
             "except RuntimeError:\n    sys.exit(3)\n")
    with FileLock(path, remove=True):
        assert (tmp_path / "x.lock").exists()
        held = subprocess.run([sys.executable, "-c", probe, str(path)], timeout=60)
        assert held.returncode == 3
    assert not (tmp_path / "x.lock").exists()
    free = subprocess.run([sys.executable, "-c", probe, str(path)], timeout=60)
    assert free.returncode == 0


def test_cli_closed_stdout_ends_without_traceback(tmp_path):
    """`stsim run ... | head -3` with the reader gone before the summary is printed."""
    proc = subprocess.Popen([sys.executable, "-m", "stsim", "run", "--T", "10", "--q", "2",
                             "--steps", "5", "--quiet", "--out", str(tmp_path / "o")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=dict(os.environ, MPLBACKEND="Agg"))
    proc.stdout.close()                     # the reader is gone before anything is written
    err = proc.stderr.read().decode()
    proc.wait(timeout=300)
    assert "Traceback" not in err and "BrokenPipe" not in err, err
    assert proc.returncode == 141
    assert stsim.load(tmp_path / "o" / "result.npz").status == "completed"


# ---------------------------------------------------------------------------------------
# Ctrl-C
# ---------------------------------------------------------------------------------------
READY_RUN = textwrap.dedent("""
    import os, signal, sys
    import stsim.core.state as S

    # as in a terminal: a parent (here pytest, after some libraries' tests) may have left
    # SIGINT ignored, and a child inherits that; Ctrl-C is tested under Python's default
    signal.signal(signal.SIGINT, signal.default_int_handler)

    ready = sys.argv[1]
    record = S.RunState.record

    def mark(self, step, metrics):
        row = record(self, step, metrics)
        if step >= 100 and not os.path.exists(ready):
            open(ready, "w").close()       # the test sends SIGINT once this file exists
        return row

    S.RunState.record = mark
    from stsim.cli import main
    sys.exit(main(sys.argv[2:]))
""")


def test_cli_ctrl_c_exits_130_with_one_line_and_keeps_the_run_so_far(tmp_path):
    (tmp_path / "ready.py").write_text(READY_RUN)
    ready, out = tmp_path / "ready", tmp_path / "o"
    # 10^6 steps: hours; the signal comes as soon as step 100 is recorded
    proc = subprocess.Popen([sys.executable, str(tmp_path / "ready.py"), str(ready), "run",
                             "--T", "20", "--q", "2", "--batch", "16", "--lr", "0.5",
                             "--steps", "1000000",
                             "--eval_every", "50", "--checkpoint_every", "1000", "--quiet",
                             "--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=dict(os.environ, MPLBACKEND="Agg"))
    t0 = time.time()
    while not ready.exists():
        assert proc.poll() is None, proc.stderr.read()
        assert time.time() - t0 < 300, "the run did not reach step 100"
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=300)
    lines = stderr.strip().splitlines()
    assert proc.returncode == 130 and len(lines) == 1, stderr
    assert re.match(r"stsim: interrupted \(Ctrl-C\) at step \d+ of 1000000; kept "
                    r"result\.npz, history\.csv, config\.json, loss\.png, checkpoint\.npz in ",
                    lines[0]), lines[0]
    assert json.loads(stdout)["status"] == "interrupted"
    res, ck = stsim.load(out / "result.npz"), stsim.load(out / "checkpoint.npz")
    step = res.info["interrupted_at_step"]
    assert res.status == "interrupted" and 100 <= step < 1000000
    assert ck.info["checkpoint_step"] == step
    assert sorted(p.name for p in out.iterdir()) == ["checkpoint.npz", "config.json",
                                                     "history.csv", "loss.png",
                                                     "manifest.json", "result.npz"]


def _interrupt_at(step_to_stop):
    """A progress callback that sends this process SIGINT (Ctrl-C) at a record."""
    def progress(step, steps, row):
        if step == step_to_stop:
            os.kill(os.getpid(), signal.SIGINT)
    return progress


def test_python_ctrl_c_returns_the_interrupted_result_and_resumes_bit_identical(
        tmp_path, default_sigint):
    ck = tmp_path / "c.npz"
    opts = dict(T=12, q=2, pe="stochastic", optimizer="adam", lr=0.05, steps=200, batch=16,
                eval_every=10, prefetch=True)
    with pytest.warns(stsim.core.run.RunInterrupted, match="interrupted") as w:
        part = stsim.run(checkpoint=ck, progress=_interrupt_at(60), **opts)
    assert w[0].filename == __file__                    # the caller's line
    assert part.status == "interrupted" and not part.success
    stop = part.info["interrupted_at_step"]
    assert stop == 61                # the next step boundary after the record at 60
    assert part.history["step"][-1] == 60
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler   # put back
    resumed = stsim.run(checkpoint=ck, **opts)
    straight = stsim.run(**opts)
    np.testing.assert_array_equal(resumed.W, straight.W)
    for k in straight.history:
        np.testing.assert_array_equal(resumed.history[k], straight.history[k])


def test_cli_checkpoint_that_cannot_be_written_is_one_line(tmp_path):
    """A checkpoint write that fails mid-run (files above 2 kB refused): one line naming
    the checkpoint, exit 2, no temporary left behind."""
    (tmp_path / "fsize.py").write_text(FSIZE_RUN)
    out = tmp_path / "o"
    proc = subprocess.run([sys.executable, str(tmp_path / "fsize.py"), "2000", "run", "--T",
                           "10", "--q", "2", "--steps", "40", "--batch", "16", "--lr", "1",
                           "--checkpoint_every", "20", "--quiet", "--out", str(out)],
                          capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, MPLBACKEND="Agg"))
    err = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(err) == 1, proc.stderr
    assert err[0].startswith(f"stsim: error: {out / 'checkpoint.npz'}: File too large")
    assert not [p for p in out.iterdir() if p.name.startswith(".tmp")]


# --------------------------------------------------------------------------------------
# sweeps: paths and journals refused before any work, Ctrl-C
# --------------------------------------------------------------------------------------
def _count(a, seed, calls=[]):                    # noqa: B006 - counts calls in this process
    calls.append(a)
    return {"v": a}


@pytest.mark.parametrize("kind", ["folder", "empty", "under_a_file", "journal_folder"])
def test_sweep_out_is_checked_before_any_work(tmp_path, kind):
    """Before: an existing folder ran fn, wrote the journal beside it and then raised
    IsADirectoryError; "" wrote .journal.jsonl into the working folder."""
    (tmp_path / "f").write_text("")
    out = {"folder": tmp_path, "empty": "", "under_a_file": tmp_path / "f" / "t.csv",
           "journal_folder": tmp_path / "t.csv"}[kind]
    if kind == "journal_folder":
        (tmp_path / "t.csv.journal.jsonl").mkdir()
    before = sorted(os.listdir(tmp_path))
    _count.__defaults__[0].clear()
    with pytest.raises(ValueError, match="out"):
        sweep(_count, {"a": [1, 2]}, executor=InlineExecutor(), out=out)
    assert _count.__defaults__[0] == [] and sorted(os.listdir(tmp_path)) == before


GOOD_RECORD = {"point": {"a": 1}, "seed_index": 0, "seed": 5, "status": "ok", "result": {},
               "error": ""}


@pytest.mark.parametrize("line, match", [
    ("[1, 2]\n", "line 2 is not a sweep record.*JSON list"),
    ('{"point": {"a": 2}}\n', "line 2 is not a sweep record.*no 'seed_index'"),
    (json.dumps(dict(GOOD_RECORD, status="done")) + "\n", "'status' is 'done'"),
    (json.dumps(dict(GOOD_RECORD, point=[1])) + "\n", "'point' is \\[1\\], not a dict"),
    (json.dumps(dict(GOOD_RECORD, seed_index=True)) + "\n", "'seed_index' is True"),
    (b"\x89PNG\r\n\x1a\n\xff\xfe junk\n", "line 2 holds binary data"),
])
def test_sweep_journal_that_is_not_a_journal_is_one_error_naming_the_file(tmp_path, line,
                                                                          match):
    out = tmp_path / "t.csv"
    journal = tmp_path / "t.csv.journal.jsonl"
    sweep(_count, {"a": [1]}, executor=InlineExecutor(), out=out)
    with open(journal, "ab") as fh:
        fh.write(line if isinstance(line, bytes) else line.encode())
    before = journal.read_bytes()
    with pytest.raises(ValueError, match=re.escape(str(journal)) + ".*" + match):
        sweep(_count, {"a": [1, 2]}, executor=InlineExecutor(), out=out)
    assert journal.read_bytes() == before
    # a torn line (a crash mid-write) is no defect: skipped, as before
    journal.write_bytes(before.split(b"\n")[0] + b'\n{"point": {"a": 3')
    assert sweep(_count, {"a": [1, 2]}, executor=InlineExecutor(), out=out).n_run == 1


def _interrupted_on_two(a, seed):
    """Row a = 2 gets Ctrl-C in the middle of its stsim.run (at step 20 of 400)."""
    def progress(step, steps, row):
        if a == 2 and step == 20:
            os.kill(os.getpid(), signal.SIGINT)
    res = stsim.run(T=8, q=2, steps=400, batch=16, lr=0.3, eval_every=10, seed=seed,
                    progress=progress)
    return {"run": res.status}


def test_ctrl_c_in_an_inline_sweep_raises_and_journals_no_half_row(tmp_path, default_sigint):
    """Inline, Ctrl-C inside a row's stsim.run would make it return its run so far
    (status "interrupted") as a finished row; in a sweep it raises, the row unrecorded."""
    out = tmp_path / "t.csv"
    with pytest.raises(KeyboardInterrupt):
        sweep(_interrupted_on_two, {"a": [1, 2, 3]}, executor=InlineExecutor(), out=out)
    recs = [json.loads(x) for x in (tmp_path / "t.csv.journal.jsonl").read_text().splitlines()]
    assert [(r["point"]["a"], r["result"]["run"]) for r in recs] == [(1, "completed")]
    assert [r["a"] for r in read_table(out)] == [1]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler   # put back


POOL_CTRL_C = textwrap.dedent("""
    import os, signal, sys, time
    signal.signal(signal.SIGINT, signal.default_int_handler)   # as in a terminal
    import stsim

    def row(a, seed):
        if a >= 2:          # long rows: a stsim.run of hours, which says it has begun
            inside = lambda rec: open(sys.argv[1] + f".inside{a}", "w").close()  # noqa: E731
            stsim.run(T=12, q=2, steps=10 ** 7, batch=16, lr=0.3, eval_every=10 ** 6,
                      seed=seed, progress=False, callback=inside)
        return {"pid": os.getpid()}

    stsim.sweep(row, {"a": [0, 1, 2, 3, 4]}, out=sys.argv[1], max_workers=2)
""")


@pytest.mark.pool
def test_ctrl_c_stops_a_pool_sweep_at_once_and_keeps_the_finished_rows(tmp_path):
    """Ctrl-C from a terminal (SIGINT to the whole process group): the workers ignore it,
    the driver ends them and raises; the journal holds the finished rows only."""
    (tmp_path / "drv.py").write_text(POOL_CTRL_C)
    out, journal = tmp_path / "t.csv", tmp_path / "t.csv.journal.jsonl"
    drv = subprocess.Popen([sys.executable, str(tmp_path / "drv.py"), str(out)],
                           cwd=tmp_path, start_new_session=True, stderr=subprocess.PIPE,
                           text=True, env=dict(os.environ, MPLBACKEND="Agg"))
    t0 = time.time()
    while not (journal.exists() and journal.read_text().count("\n") >= 2):
        assert drv.poll() is None, drv.stderr.read()
        assert time.time() - t0 < 300, "the sweep did not start"
        time.sleep(0.1)
    # the long rows are running: both workers' runs have recorded their step 0 (was: a
    # 1 s sleep, a guess)
    while not all(os.path.exists(f"{out}.inside{a}") for a in (2, 3)):
        assert drv.poll() is None, drv.stderr.read()
        assert time.time() - t0 < 300, "the long rows did not start"
        time.sleep(0.05)
    workers = [int(line.split()[0]) for line in _children(drv.pid)]
    os.killpg(drv.pid, signal.SIGINT)
    _, err = drv.communicate(timeout=60)
    assert "KeyboardInterrupt" in err and drv.returncode != 0
    t0 = time.time()
    while [w for w in workers if _alive(w)] and time.time() - t0 < 15:
        time.sleep(0.2)
    assert not [w for w in workers if _alive(w)]
    recs = [json.loads(x) for x in journal.read_text().splitlines()]
    assert sorted(r["point"]["a"] for r in recs) == [0, 1]
    assert all(r["status"] == "ok" for r in recs)


# --------------------------------------------------------------------------------------
# studies: one line for what a user causes, sizes refused, divergence, Ctrl-C
# --------------------------------------------------------------------------------------
def _cli_main(argv, capsys):
    from stsim.cli import main
    rc = main(argv)
    cap = capsys.readouterr()
    return rc, cap.out, cap.err.strip().splitlines()


@pytest.mark.parametrize("argv, match", [
    (["sparse", "--Ts", "1000000000"], r"sparse: a trial at T=1000000000 \(Ts\).*GiB of "
                                       r"memory.*test sample"),
    (["sparse", "--hidden", "1e9"], r"hidden=1000000000.*hidden activations"),
    (["separation", "--family_Ts", "1e9"], r"the family at T=1000000000 \(family_Ts\).*"
                                           r"scores and softmax"),
    (["separation", "--tf_Ts", "4,1e7"], r"the transformer cell at T=10000000 \(tf_Ts\)"),
    (["expressivity", "--set", "width.Ns=[1e9]"], r"width.*N=1000000000 \(width.Ns\)"),
    (["expressivity", "--set", "seq2seq.Ns=[1e6]"], r"seq2seq.*N=1000000 \(seq2seq.Ns\)"),
])
def test_study_sizes_beyond_the_machine_are_one_line_before_any_work(tmp_path, capsys, argv,
                                                                     match):
    out = tmp_path / "o"
    rc, _, err = _cli_main(argv + ["--out", str(out), "--workers", "1"], capsys)
    assert rc == 2 and len(err) == 1 and re.search(match, err[0]), err
    assert not out.exists()


@pytest.mark.parametrize("study", ["separation", "sparse", "expressivity", "figures"])
def test_study_out_refused_before_any_work(tmp_path, capsys, study):
    """--out "" was silently the default for the studies (run refused it); a file was a
    traceback after the work started."""
    (tmp_path / "file").write_text("")
    for out, match in (("", "--out must be a folder path, got an empty string"),
                       (str(tmp_path / "file"), "exists and is not a folder"),
                       (str(tmp_path / "file" / "sub"), "not a writable folder")):
        rc, _, err = _cli_main([study, "--out", out, "--workers", "1"], capsys)
        assert rc == 2 and len(err) == 1 and match in err[0], err
    rc, _, err = _cli_main([study, "--out", str(tmp_path / "none"), "--analyse-only"], capsys)
    assert rc == 2 and len(err) == 1 and "is not a folder: --analyse-only" in err[0], err
    assert sorted(os.listdir(tmp_path)) == ["file"]


def test_figures_report_of_a_missing_or_garbled_folder_is_one_line(tmp_path, capsys):
    """Before: an empty table and exit 0 (missing folder); a JSON error without the file's
    name (garbled fig1.json)."""
    rc, out, err = _cli_main(["figures", "--report", str(tmp_path / "none")], capsys)
    assert rc == 2 and out == "" and len(err) == 1 and "is not a folder" in err[0]
    rc, out, err = _cli_main(["figures", "--report", str(tmp_path)], capsys)
    assert rc == 2 and len(err) == 1 and "holds no figure summary" in err[0]
    (tmp_path / "fig1.json").write_text('{"settings":\n  ,}')
    rc, out, err = _cli_main(["figures", "--report", str(tmp_path)], capsys)
    assert rc == 2 and len(err) == 1 and str(tmp_path / "fig1.json") in err[0] \
        and "not valid JSON" in err[0] and "line 2" in err[0], err


SPARSE_TINY = ["sparse", "--Ts", "8", "--fns", "and:2", "--m_max", "16", "--seeds", "2",
               "--max_steps", "20", "--workers", "1", "--quiet"]


def test_a_locked_study_folder_is_one_line(tmp_path, capsys):
    from stsim.util.io import FileLock
    out = tmp_path / "o"
    out.mkdir()
    env = dict(os.environ, MPLBACKEND="Agg")
    with FileLock(out / ".stsim-study", remove=True):     # another process holds it
        proc = subprocess.run([sys.executable, "-m", "stsim", *SPARSE_TINY, "--out", str(out)],
                              capture_output=True, text=True, timeout=300, env=env)
    err = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(err) == 1, proc.stderr
    assert re.match(r"stsim: error: --out: another process \(pid \d+\) is writing", err[0])
    assert os.listdir(out) == []          # nothing written, the lock file removed by us


def test_study_files_that_are_not_what_they_should_be_are_one_line(tmp_path, capsys):
    out = tmp_path / "o"
    (out / "trials.csv").mkdir(parents=True)          # a folder where trials.csv should be
    rc, _, err = _cli_main(SPARSE_TINY + ["--out", str(out)], capsys)
    assert rc == 2 and len(err) == 1 and "trials.csv' is a folder" in err[0], err
    (out / "trials.csv").rmdir()
    assert _cli_main(SPARSE_TINY + ["--out", str(out)], capsys)[0] == 0
    journal = out / "trials.csv.journal.jsonl"
    good = journal.read_bytes()
    for junk, match in ((b'{"point": 3}\n', "line .* is not a sweep record"),
                        (b"\x00\xff\xfe\x80binary\n", "holds binary data")):
        journal.write_bytes(good + junk)
        rc, _, err = _cli_main(SPARSE_TINY + ["--out", str(out)], capsys)
        assert rc == 2 and len(err) == 1 and str(journal) in err[0], err
        assert re.search(match, err[0])
    journal.write_bytes(good)
    (out / "run.json").write_text('{"workers": 1,\n oops')          # garbled run record
    rc, _, err = _cli_main(SPARSE_TINY + ["--out", str(out), "--analyse-only"], capsys)
    assert rc == 2 and len(err) == 1 and str(out / "run.json") in err[0] \
        and "not valid JSON" in err[0], err


def test_sparse_full_disk_is_one_line_naming_the_file_and_a_rerun_resumes(tmp_path, capsys):
    """The full disk in a process of its own (a file-size limit); the rerun, with room
    again, in this process."""
    (tmp_path / "fsize.py").write_text(FSIZE_RUN)
    out = tmp_path / "o"
    env = dict(os.environ, MPLBACKEND="Agg")
    argv = [sys.executable, str(tmp_path / "fsize.py")]
    proc = subprocess.run(argv + ["2500"] + SPARSE_TINY + ["--out", str(out)],
                          capture_output=True, text=True, timeout=300, env=env)
    err = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(err) == 1, proc.stderr
    assert re.match(r"stsim: error: \S+/trials\.csv(\.journal\.jsonl)?: File too large \(",
                    err[0]), err[0]
    kept = len(stsim.sweeps.journal.load_journal(out / "trials.csv.journal.jsonl"))
    assert kept >= 1
    rc, _, err = _cli_main(SPARSE_TINY + ["--out", str(out)], capsys)
    assert rc == 0, err
    assert json.loads((out / "summary.json").read_text())["n_run"] == 8 - kept


# --lr_extra "": main's rate extension would otherwise tune past 1e6 to rates that learn
SEP_DIVERGE = ["separation", "--lrs", "1e6", "--lr_extra", "", "--fcn_Ts", "4", "--tf_Ts", "4",
               "--long_Ts", "", "--family_Ts", "4,8", "--seeds", "1", "--steps", "20", "--long_steps", "20",
               "--workers", "1", "--quiet"]


@pytest.fixture(scope="module")
def learning_separation(tmp_path_factory):
    """The study of SEP_DIVERGE at a rate that learns (0.01; --workers 1, in this process),
    run once for the two tests below: ``(exit status, stdout, stderr lines, its folder)``."""
    import contextlib
    import io
    argv = list(SEP_DIVERGE)
    argv[argv.index("1e6")] = "0.01"
    out = tmp_path_factory.mktemp("sep") / "g"
    with contextlib.redirect_stdout(io.StringIO()) as so, \
            contextlib.redirect_stderr(io.StringIO()) as se:
        rc = cli_main(argv + ["--out", str(out)])
    return rc, so.getvalue(), se.getvalue().strip().splitlines(), out


def test_a_study_whose_runs_all_diverge_says_so_and_exits_1(tmp_path, capsys,
                                                            learning_separation):
    """Before: exit 0, an empty width table and no word of divergence anywhere."""
    out = tmp_path / "o"
    rc, _, err = _cli_main(SEP_DIVERGE + ["--out", str(out)], capsys)
    assert rc == 1 and len(err) == 2, err
    assert re.match(r"stsim: warning: (\d+) of \1 runs diverged \(e\.g\. fcn q=2 T=4", err[0])
    assert err[1].startswith("stsim: error: not measured: the smallest width of transformer "
                             "at q=2, T=4: every tuning run diverged")
    summary = json.loads((out / "summary.json").read_text())
    assert summary["diverged"]["runs"] == summary["diverged"]["of"] > 0
    assert len(summary["unmeasured"]) == 2 and summary["widths"] == []
    report = (out / "report.md").read_text()
    assert "## Diverged runs" in report and "every tuning run diverged" in report
    # --analyse-only says the same; a good learning rate measures and exits 0
    assert _cli_main(SEP_DIVERGE + ["--out", str(out), "--analyse-only"], capsys)[0] == 1
    rc, _, err, good = learning_separation
    assert rc == 0 and err == []
    assert json.loads((good / "summary.json").read_text())["unmeasured"] == []


def test_sparse_divergence_accounting():
    """m* censored above in a series where trials diverged is unmeasured; censored
    without divergence is a measurement (seeded fault: the diverged trial removed)."""
    from stsim.studies.sparse.analysis import divergence_of
    rows = [dict(fn="and", s=2, model="fcn", T=8, m=m, diverged=int(m == 16)) for m in (8, 16)]
    panels = [{"level": 0.9, "mstar": [dict(fn="and", s=2, model="fcn", T=8,
                                              censored="above")]}]
    d = divergence_of(rows, panels)
    assert d["diverged"] == {"runs": 1, "of": 2, "where": ["fcn and:2 T=8 m=16"]}
    assert d["unmeasured"] == ["m* at success 0.9 of fcn and:2 at T=8: no m reached it, and "
                               "1 of 2 trials diverged"]
    rows[1]["diverged"] = 0
    assert divergence_of(rows, panels)["unmeasured"] == []


# 84 training runs of 1000 steps (was 3000): seconds of work left when the first ends
CTRL_C_STUDY = ["separation", "--fcn_Ts", "4,8", "--tf_Ts", "4", "--family_Ts", "4,8",
                "--steps", "1000", "--long_steps", "1000", "--long_Ts", "", "--workers", "2"]


@pytest.mark.pool
def test_ctrl_c_on_a_study_is_one_line_exit_130_and_a_rerun_resumes(tmp_path):
    out = tmp_path / "o"
    env = dict(os.environ, MPLBACKEND="Agg")
    journal = out / "raw" / "tune.csv.journal.jsonl"
    proc = subprocess.Popen([sys.executable, "-c", "import signal, sys; signal.signal("
                             "signal.SIGINT, signal.default_int_handler); from stsim.cli "
                             "import main; sys.exit(main(sys.argv[1:]))", *CTRL_C_STUDY,
                             "--quiet", "--out", str(out)], start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    t0 = time.time()
    while not (journal.exists() and journal.read_text().count("\n") >= 1):
        assert proc.poll() is None, proc.communicate()
        assert time.time() - t0 < 300, "no tuning run finished"
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGINT)                 # Ctrl-C in the terminal
    _, err = proc.communicate(timeout=60)
    lines = err.strip().splitlines()
    assert proc.returncode == 130 and len(lines) == 1, err
    assert lines[0] == (f"stsim: interrupted (Ctrl-C); the finished runs are kept in {out}; "
                        f"rerun the same command to resume")
    done = stsim.sweeps.journal.load_journal(journal)
    assert done and all(r["status"] == "ok" for r in done.values())
    assert not (out / ".stsim-study.lock").exists()


def test_rerunning_a_complete_study_never_refuses_itself(tmp_path, capsys,
                                                        learning_separation):
    """A study never refuses its own process: reruns on a complete folder once refused it ("another
    process (pid <own pid>)") 11 times in 36; the race of FileLock is tests/test_lock.py's
    (seeded), twenty reruns as separate processes are the slow test below; here three, on
    two workers, on a copy of the complete folder of the fixture (made with --workers 1:
    the numbers are the same on any number of workers, and run.json only records it)."""
    import shutil
    rc, _, err, made = learning_separation
    assert (rc, err) == (0, [])
    shutil.copytree(made, tmp_path / "S")
    argv = list(SEP_DIVERGE) + ["--out", str(tmp_path / "S")]
    argv[argv.index("1e6")] = "0.01"
    argv[argv.index("--workers") + 1] = "2"
    for _ in range(3):
        rc, out, err = _cli_main(argv, capsys)
        assert (rc, err) == (0, []) and "files in" in out and "(analysed only)" not in out
    assert sorted(p for p in os.listdir(tmp_path / "S") if p.startswith(".")) == []


@pytest.mark.slow
def test_twenty_reruns_of_separation_quick_on_a_complete_folder_never_refuse_themselves(
        tmp_path):
    """Twenty reruns as a user runs them (``for i in $(seq 20); do stsim separation
    --quick --quiet --out S; done``; before the fix 11 of 36 reruns refused their own pid).
    Each rerun is its own process, finds every run finished and computes nothing (the raw
    tables and journals stay byte-identical; ``raw/run.json`` holds the last call's wall
    time) and leaves no lock behind. Slow: ~20 s of training, then 20 processes of import,
    analysis and figure. The race itself, seeded, is tests/test_lock.py's."""
    out = tmp_path / "S"
    cmd = [sys.executable, "-m", "stsim", "separation", "--quick", "--quiet", "--out", str(out)]
    env = dict(os.environ, MPLBACKEND="Agg")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    first = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    assert first.returncode == 0, first.stderr

    def tables():        # run.json holds the last call's wall time; the rest is the data
        return {p.name: p.read_bytes() for p in (out / "raw").iterdir()
                if p.is_file() and p.name != "run.json"}
    raw = tables()
    assert any(n.endswith(".journal.jsonl") for n in raw)
    secs = []
    for i in range(20):
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
        secs.append(time.perf_counter() - t0)
        assert (proc.returncode, proc.stderr) == (0, ""), f"rerun {i + 1}: {proc.stderr}"
        assert tables() == raw
        assert [p for p in os.listdir(out) if p.startswith(".")] == []
    print(f"20 reruns: {sum(secs):.1f} s, {min(secs):.1f}-{max(secs):.1f} s each")


def test_memory_estimate_counts_the_freed_batches_the_allocator_keeps():
    """Two batches' heap-sized arrays (under stsim's 32 MiB mmap threshold) when batches are
    drawn ahead: at T = 3200 (slots, batch 256, d = 5) the tokens (31.25 MiB) and the slots
    (6.25 MiB) both count; at T = 6400 the tokens (62.5 MiB) are mapped and only the slots
    (12.5 MiB) do (docs/model.md, "Scaling in T": the peak RSS measured at both)."""
    MiB = 2 ** 20
    for T, kept in ((3200, 2 * (31.25 + 6.25)), (6400, 2 * 12.5)):
        est = stsim.Config.from_options(T=T, q=3, d=5, d_e=2 * T, batch=256, steps=10,
                                        eval_every=10).memory_estimate()
        assert est["freed batches kept by the allocator"] == kept * MiB
        arrays = sum(v for k, v in est.items() if k not in (
            "total", "interpreter and libraries (measured)",
            "allocator fragmentation (2% of the arrays)"))
        assert est["allocator fragmentation (2% of the arrays)"] == int(0.02 * arrays)
    full = stsim.Config.from_options(T=10, q=2, pe="onehot",
                                     objective="population").memory_estimate()
    assert full["freed batches kept by the allocator"] == 0    # no batch is freed


def test_a_call_resumed_at_its_last_step_re_records_it_bit_identically(tmp_path):
    """Rerunning a finished call (its checkpoint at the last step) re-records the last row.
    BLAS must then run with the threads of the original run (pinned to one while batches
    are drawn ahead), not by whether steps remain: at T = 1000 the multi-threaded
    reduction gave cos_W 1 ulp off (0.0009498113205567739 against ...732) before."""
    ck = tmp_path / "c.npz"
    opts = dict(T=1000, q=3, steps=6, eval_every=3, checkpoint=ck, progress=False,
                prefetch=True)
    first = stsim.run(**opts)
    again = stsim.run(**opts)
    for k in first.history:
        assert np.array_equal(np.asarray(first.history[k]), np.asarray(again.history[k])), k
