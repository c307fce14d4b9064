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
