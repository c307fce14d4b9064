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
