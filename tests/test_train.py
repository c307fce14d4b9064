"""Training loop, results, checkpoints, divergence and bad input."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import stsim
from stsim.cli import main as cli_main

SMALL = dict(T=12, q=2, d=3, steps=60, batch=32, eval_every=10)


def test_same_seed_identical_history_other_seed_differs():
    a = stsim.run(pe="stochastic", seed=4, **SMALL)
    b = stsim.run(pe="stochastic", seed=4, **SMALL)
    c = stsim.run(pe="stochastic", seed=5, **SMALL)
    for k in a.history:
        np.testing.assert_array_equal(a.history[k], b.history[k])
    assert not np.array_equal(a.history["loss"], c.history["loss"])


@pytest.mark.parametrize("pe,sampler,extra", [
    ("onehot", "slots", {}),
    ("stochastic", "slots", {}),
    ("stochastic", "sphere", dict(d_e=32)),
    ("near-orthogonal", "slots", dict(d_e=32)),
])
def test_sgd_learns(pe, sampler, extra):
    """Online SGD from zero: loss falls well below L(0) = d/(2q) = 0.75."""
    res = stsim.run(T=12, q=2, d=3, pe=pe, sampler=sampler, steps=400, batch=64, lr=2.0,
                    **extra)
    assert res.success
    h = res.history
    assert h["step"][0] == 0 and h["step"][-1] == 400
    assert h["loss"][0] == pytest.approx(0.75, rel=0.25)
    assert h["val"][-1] < 0.35 * h["val"][0]
    assert h["cos_V"][-1] > 0.9


def test_history_keys_and_ood_sets():
    res = stsim.run(pe="onehot", T_test=[16, 20], q_test=[1, 3], d_e=20, **SMALL)
    assert set(res.history) == {"step", "loss", "val", "val/T=16", "val/T=20", "val/q=1",
                                "val/q=3", "cos_W", "cos_V"}
    lengths = {len(v) for v in res.history.values()}
    assert lengths == {7}
    # fixed one-hot: positions 12..19 never trained → OOD length loss above in-distribution
    assert res.history["val/T=20"][-1] > res.history["val"][-1]


def test_gd_fixed_sample_is_deterministic_descent():
    res = stsim.run(pe="onehot", optimizer="gd", n_train=64, lr=1.0, T=12, q=2, d=3,
                    steps=100, eval_every=1)
    loss = res.history["loss"]
    assert np.all(np.diff(loss) <= 1e-12)          # small-step GD on a fixed sample
    assert loss[-1] < 0.5 * loss[0]


def test_adam_and_random_init_and_practical_model():
    res = stsim.run(pe="stochastic", optimizer="adam", lr=0.02, init="random",
                    model="practical", query="mean", **SMALL)
    assert res.success and res.history["loss"][-1] < res.history["loss"][0]
    assert res.config["lr"] == 0.02 and res.config["init"] == "random"


def test_save_load_roundtrip(tmp_path):
    res = stsim.run(pe="stochastic", **SMALL)
    path = res.save(tmp_path / "r.npz")
    back = stsim.load(path)
    assert back.config == res.config and back.status == res.status
    np.testing.assert_array_equal(back.W, res.W)
    for k in res.history:
        np.testing.assert_array_equal(back.history[k], res.history[k])
    assert not [f for f in os.listdir(tmp_path) if f.startswith(".tmp")]


def test_checkpoint_resume_is_bit_identical(tmp_path):
    ck = tmp_path / "ck.npz"
    full = stsim.run(pe="stochastic", optimizer="adam", lr=0.05, **SMALL)
    half = dict(SMALL, steps=30)
    part = stsim.run(pe="stochastic", optimizer="adam", lr=0.05, checkpoint=ck,
                     checkpoint_every=7, **half)
    assert part.history["step"][-1] == 30
    resumed = stsim.run(pe="stochastic", optimizer="adam", lr=0.05, checkpoint=ck,
                        checkpoint_every=7, **SMALL)
    np.testing.assert_array_equal(resumed.W, full.W)
    for k in full.history:
        np.testing.assert_array_equal(resumed.history[k], full.history[k])


@pytest.mark.parametrize("prefetch", [(False, True), (True, False), (True, True)])
def test_checkpoint_resume_mixing_prefetch_is_bit_identical(tmp_path, prefetch):
    # the checkpoint saves the generator state before the next batch *taken*, not the
    # state the prefetch thread has reached
    ck = tmp_path / "ck.npz"
    full = stsim.run(pe="stochastic", optimizer="adam", lr=0.05, prefetch=False, **SMALL)
    stsim.run(pe="stochastic", optimizer="adam", lr=0.05, checkpoint=ck, checkpoint_every=7,
              prefetch=prefetch[0], **dict(SMALL, steps=30))
    resumed = stsim.run(pe="stochastic", optimizer="adam", lr=0.05, checkpoint=ck,
                        checkpoint_every=7, prefetch=prefetch[1], **SMALL)
    np.testing.assert_array_equal(resumed.W, full.W)
    for k in full.history:
        np.testing.assert_array_equal(resumed.history[k], full.history[k])


@pytest.mark.parametrize("opts", [dict(pe="stochastic"), dict(pe="stochastic", sampler="sphere"),
                                  dict(pe="onehot", optimizer="gd"), dict(arch="fcn", width=8)])
def test_prefetch_gives_the_same_numbers(opts):
    a = stsim.run(prefetch=False, **SMALL, **opts)
    b = stsim.run(prefetch=True, **SMALL, **opts)
    for k in a.params:
        np.testing.assert_array_equal(a.params[k], b.params[k])
    for k in a.history:
        np.testing.assert_array_equal(a.history[k], b.history[k])


def test_checkpoint_with_other_config_refused(tmp_path):
    ck = tmp_path / "ck.npz"
    stsim.run(pe="stochastic", checkpoint=ck, **SMALL)
    with pytest.raises(ValueError, match="differs in \\['lr'\\]"):
        stsim.run(pe="stochastic", checkpoint=ck, lr=0.5, **SMALL)


def test_divergence_stops_and_keeps_history():
    res = stsim.run(pe="onehot", T=12, q=2, d=3, steps=400, batch=32, lr=1e6, eval_every=1)
    assert res.status == "diverged" and not res.success
    assert "at step" in res.message
    step = int(res.message.split("at step ")[1].split(";")[0])
    assert 0 < step < 400
    assert len(res.history["loss"]) == step          # records 0 .. step-1 kept
    assert np.all(np.isfinite(res.history["loss"]))


@pytest.mark.parametrize("kw,match", [
    (dict(q=0), "q must be an integer in \\[1, 12\\]"),
    (dict(q=13), "q must be an integer in \\[1, 12\\]"),
    (dict(T=12.5), "T must be an integer"),
    (dict(pe="onehot", d_e=10), "d_e=10 is too small"),
    (dict(pe="stochastic", d_e=20, T_test=[30]), "d_e=20 is too small .* T=30"),
    (dict(pe="fourier"), "pe must be one of"),
    (dict(model="deep"), "model must be one of"),
    (dict(query="max"), "query must be one of"),
    (dict(optimizer="lbfgs"), "optimizer must be one of"),
    (dict(init="ones"), "init must be one of"),
    (dict(lr=float("nan")), "lr must be a finite number > 0"),
    (dict(lr=-0.1), "lr must be a finite number > 0"),
    (dict(lr=0), "lr must be a finite number > 0"),
    (dict(lr=float("inf")), "lr must be a finite number > 0"),
    (dict(steps=-1), "steps must be"),
    (dict(T_test=[1]), "T_test must be an integer >= 2"),
    (dict(q_test=[40]), "q_test must be an integer in"),
    (dict(learning_rate=0.1), "unknown option"),
])
def test_run_bad_input(kw, match):
    args = dict(T=12, q=2, pe="stochastic", steps=5)
    args.update(kw)
    with pytest.raises(ValueError, match=match):
        stsim.run(**args)


def test_onehot_default_d_e_covers_T_test():
    res = stsim.run(pe="onehot", T_test=[30], **SMALL)
    assert res.config["d_e"] == 30 and res.W.shape == (33, 33)


def test_cli_end_to_end(tmp_path, capsys):
    out = tmp_path / "run"
    code = cli_main(["run", "--T", "10", "--q", "2", "--d", "3", "--steps", "40", "--batch",
                     "16", "--T_test", "12", "--d_e", "12", "--out", str(out), "--quiet"])
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["status"] == "completed" and summary["final_loss"] < summary["initial_loss"]
    for name in ("result.npz", "config.json", "history.csv", "loss.png"):
        assert (out / name).stat().st_size > 0
    header = (out / "history.csv").read_text().splitlines()[0].split(",")
    assert header[:2] == ["step", "loss"] and "val/T=12" in header
    assert stsim.load(out / "result.npz").config["T"] == 10


def test_cli_bad_input_one_line(capsys):
    assert cli_main(["run", "--q", "0", "--out", "/tmp/never"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("stsim: error: q must be")


def test_python_dash_m(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "stsim", "run", "--pe", "bogus"],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "pe must be one of" in proc.stderr


def test_divergence_at_step_zero_still_writes_outputs(tmp_path):
    """Nothing recorded: the Result, the CLI files and the figure are still written."""
    from stsim.cli.run import write_outputs
    res = stsim.run(T=10, q=2, init="random", init_scale=1e200, steps=5)
    assert res.status == "diverged" and "at step 0" in res.message
    assert not np.isfinite(res.final("loss"))      # the one row: the loss that diverged
    paths = write_outputs(res, tmp_path)
    assert all(os.path.getsize(p) > 0 for p in paths.values())
    assert stsim.load(paths["result"]).status == "diverged"
