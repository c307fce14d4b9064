"""A run that fails names the cause it can see and what to change: the noise floor of
small-batch SGD, dense encodings too narrow for T, an init_scale the derived step does not
assume, a mechanism's measured step; an encoding's bad values (NaN, a slot twice in a
sample) are refused as the encoding's before training."""
import numpy as np
import pytest

import stsim
from stsim.core.assessment import FLAT, floor_cause, narrow_width
from stsim.core.encodings import Encoding, PEBatch


def test_small_batch_run_names_the_noise_floor():
    """batch=2 at T = 8 stops near a third of L(0) long after the reduced dynamics reach 2%:
    the message names the minibatch noise and the remedies, not a late escape."""
    r = stsim.run(T=8, batch=2, progress=False)
    assert r.info["assessment"] == "not converged"
    assert "small-batch SGD" in r.message and "larger batch (>= q kappa = 25)" in r.message
    assert "smaller lr" in r.message and "escapes later" not in r.message


def test_narrow_sphere_encodings_named_with_the_width_to_give():
    r = stsim.run(T=8, sampler="sphere", d_e=2, progress=False)
    assert r.info["assessment"] in ("not converged", "plateau")
    assert "too narrow for T=8" in r.message and "give d_e >= 6" in r.message
    assert "escapes later" not in r.message
    assert narrow_width(8) == 6 and narrow_width(20) == 9 and narrow_width(1024) == 20


def test_a_short_large_batch_run_keeps_the_late_escape_diagnosis():
    """Neither cause at batch 256 and slots encodings: the prediction of the escape stays."""
    r = stsim.run(T=10, q=2, steps=10, progress=False)
    assert "predict the escape" in r.message
    assert "small-batch" not in r.message and "too narrow" not in r.message


def test_floor_or_lag_told_apart_by_the_last_quarters():
    cfg = stsim.Config(T=8, batch=2).resolve()
    plan = cfg.resolved.plan
    flat = {"val": np.r_[1.0, np.full(39, 0.3)]}
    falling = {"val": np.r_[1.0, np.linspace(0.6, 0.2, 39)]}
    assert floor_cause(cfg, flat, plan).startswith("a noise floor of small-batch SGD")
    assert floor_cause(cfg, falling, plan).startswith("small-batch SGD lagging")
    assert floor_cause(cfg, falling, plan).endswith("or more steps")
    big = stsim.Config(T=8, batch=256).resolve()     # kappa/B below 1/q: not the noise
    assert floor_cause(big, flat, big.resolved.plan) is None
    assert 0 < FLAT < 1


def test_divergence_with_a_large_init_scale_names_it():
    """The derived step's bound is taken from a small initialisation: init_scale=1 diverges
    near step 11, and the message names init_scale and its default."""
    r = stsim.run(T=10, init="random", init_scale=1, progress=False)
    assert r.status == "diverged"
    assert "init_scale=1 is above its default 0.02" in r.message
    assert "smaller init_scale, or a smaller lr" in r.message


def test_divergence_of_a_measured_mechanism_suggests_a_smaller_lr():
    r = stsim.run(T=8, q=2, attention="linear", lr=5.0, steps=50, progress=False)
    assert r.status == "diverged"
    assert "a smaller lr: the linear mechanism" in r.message and "calibrated" in r.message
    r = stsim.run(T=8, q=2, lr=500.0, steps=50, progress=False)
    assert r.status == "diverged" and r.message.endswith("a smaller lr")


class _NaNs(Encoding):
    name, index = "nans", False

    def sample(self, rng, B, T):
        P = np.zeros((T, self.d_e))
        P[1, 0] = np.nan
        return PEBatch(self.d_e, P=P)


class _SlotTwice(Encoding):
    name = "slot-twice"

    def sample(self, rng, B, T):
        idx = np.tile(np.arange(T), (B, 1))
        idx[B - 1, 2] = idx[B - 1, 0]
        return PEBatch(self.d_e, idx=idx)


@pytest.mark.parametrize("enc, words", [
    (_NaNs(8), r"P with non-finite entries \(1 NaN, 0 inf\): a bad encoding"),
    (_SlotTwice(10), r"idx with slot 0 twice in sample \d+: each position of a sample needs "
                     r"a slot of its own"),
])
def test_bad_encoding_values_refused_before_training(tmp_path, enc, words):
    """Not "diverged at step 0": the encoding's values are checked where they enter the
    core (the validation sets are drawn before the first step)."""
    out = tmp_path / "c.npz"
    with pytest.raises(ValueError, match=words):
        stsim.run(T=6, q=2, pe=enc, steps=5, lr=0.1, checkpoint=out, progress=False)
    assert not out.exists()


# ---- a full disk (ENOSPC simulated: the writes raise, no disk is filled) -----------------
RUN = ["run", "--T", "6", "--q", "2", "--steps", "3", "--batch", "8", "--lr", "1", "--quiet"]


def _enospc(path):
    import errno
    return OSError(errno.ENOSPC, "No space left on device", str(path))


def test_lock_pid_write_on_a_full_disk_names_the_lock_and_leaves_none(tmp_path, monkeypatch,
                                                                      capsys):
    import stsim.util.io as io
    from stsim.cli import main as cli_main
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
    import os

    import stsim.util.io as io
    from stsim.cli import main as cli_main
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


# ---- the measured steps of linear and ReLU attention, calibrated at q = 2 and 3 ----------
# runs that diverged with the defaults calibrated at q = 2 only (lr 0.3 at T = 8, 0.25 at
# T = 20, 0.1 at T = 50), at the step given: linear T = 8 seed 1 (65), T = 20 seed 0 (155);
# ReLU T = 20 seed 2 (96), T = 50 seed 1 (554)
@pytest.mark.parametrize("mech, T, seed", [("linear", 8, 1), ("linear", 20, 0),
                                           ("relu", 20, 2)])
def test_default_step_of_a_measured_mechanism_holds_at_q3(mech, T, seed):
    r = stsim.run(T=T, q=3, attention=mech, seed=seed, steps=400, progress=False)
    assert r.status == "completed", r.message


@pytest.mark.slow
@pytest.mark.parametrize("mech, T, seed", [("linear", 8, s) for s in range(3)]
                         + [("linear", 20, s) for s in range(3)] + [("relu", 50, 1)])
def test_default_run_of_a_measured_mechanism_learns_at_q3(mech, T, seed):
    r = stsim.run(T=T, q=3, attention=mech, seed=seed, progress=False)
    assert r.status == "completed" and r.info["assessment"] == "learned", r.message


# ---- a pool worker that dies ------------------------------------------------------------
KILLED_WORKER = """
import os, signal, sys
import stsim
from stsim.sweeps import ExecutorFailed

def row(a, seed):
    if a == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    return {"v": a}

if __name__ == "__main__":
    try:
        stsim.sweep(row, {"a": [0, 1, 2, 3]}, out=sys.argv[1], max_workers=2)
    except ExecutorFailed:
        print("executor failed")
"""


@pytest.mark.pool
def test_a_killed_pool_worker_leaves_no_leaked_semaphore_warning(tmp_path):
    import subprocess
    import sys
    pytest.importorskip("loky")
    (tmp_path / "drv.py").write_text(KILLED_WORKER)
    proc = subprocess.run([sys.executable, str(tmp_path / "drv.py"), str(tmp_path / "t.csv")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "executor failed", proc.stderr
    assert "leaked" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
