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


# ---------------------------------------------------------------------------------------
# usability: seeds, run(config=...), progress, warnings at the caller's line
# ---------------------------------------------------------------------------------------
import signal  # noqa: E402
import textwrap  # noqa: E402
import warnings  # noqa: E402

from stsim.core import progress as P  # noqa: E402
from stsim.core.schedule import LongRunWarning  # noqa: E402

TINY = dict(T=8, q=2, steps=20, batch=16, lr=1.0, eval_every=5)


def _same(a, b):
    return all(np.array_equal(a.history[k], b.history[k]) for k in a.history) and \
        np.array_equal(a.W, b.W)


def test_seed_accepts_a_seedsequence_the_numpy_way():
    by_int = stsim.run(seed=3, **TINY)
    by_ss = stsim.run(seed=np.random.SeedSequence(3), **TINY)
    assert by_ss.config["seed"] == 3 and _same(by_int, by_ss)
    child = np.random.SeedSequence(3).spawn(2)[1]
    r = stsim.run(seed=child, **TINY)
    assert r.config["seed"] == {"entropy": 3, "spawn_key": [1], "pool_size": 4}
    assert not _same(r, by_int)
    assert _same(stsim.run(config=r.config), r)           # reproduced from its saved config


def test_seed_generator_is_consumed_and_recorded_reproducibly(tmp_path):
    rng = np.random.default_rng(7)
    a = stsim.run(seed=rng, **TINY)
    b = stsim.run(seed=rng, **TINY)       # the Generator moved on: another run
    assert isinstance(a.config["seed"], int) and a.config["seed"] != b.config["seed"]
    assert not _same(a, b)
    again = stsim.load(a.save(tmp_path / "a.npz"))
    assert _same(stsim.run(config=again.config), a)    # the saved config reruns the numbers
    assert a.config["seed"] == int.from_bytes(np.random.default_rng(7).bytes(16), "little")


def test_run_accepts_a_config_and_options_override_it():
    cfg = stsim.Config(T=8, q=2, steps=20, batch=16, lr=1.0, eval_every=5)
    a = stsim.run(config=cfg)
    assert a.config["T"] == 8 and _same(a, stsim.run(**TINY))
    b = stsim.run(config=cfg, steps=10, seed=1)
    assert b.config["steps"] == 10 and b.config["seed"] == 1 and b.config["T"] == 8
    assert stsim.run(config=stsim.Config.from_options(**TINY)).config == a.config


def test_progress_true_draws_a_tqdm_bar(capsys):
    pytest.importorskip("tqdm")
    stsim.run(progress=True, **TINY)
    err = capsys.readouterr().err
    assert "stsim" in err and "20/20" in err and "step" in err


def test_progress_true_without_tqdm_prints_lines(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)     # import fails
    stsim.run(progress=True, **TINY)
    err = capsys.readouterr().err.splitlines()
    assert err[0].lstrip("[ ").split("s]")[1].strip().startswith("step       0/20")
    assert "step      20/20" in err[-1]


def test_progress_default_on_only_for_long_interactive_runs(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)
    monkeypatch.setattr(P, "PROGRESS_AFTER_S", 0.0)
    monkeypatch.setattr(P, "interactive_session", lambda: True)
    stsim.run(**TINY)
    assert "step      20/20" in capsys.readouterr().err
    monkeypatch.setattr(P, "interactive_session", lambda: False)
    stsim.run(**TINY)
    assert capsys.readouterr().err == ""
    monkeypatch.setattr(P, "interactive_session", lambda: True)
    monkeypatch.setattr(P, "PROGRESS_AFTER_S", 1e9)
    stsim.run(**TINY)
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("how, expected", [("stdin", False), ("-c", False), ("script", False),
                                           ("stdin-tty", True), ("-c-tty", True)])
def test_interactive_session_detection(tmp_path, how, expected):
    """Code from stdin or -c is watched only with a terminal on stderr (a log is not)."""
    code = "from stsim.core.progress import interactive_session as i; print(i())\n"
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    if how.endswith("-tty"):
        import pty
        master, slave = pty.openpty()
        args = ["-"] if how == "stdin-tty" else ["-c", code]
        out = subprocess.run([sys.executable, *args], input=code if how == "stdin-tty" else None,
                             stdout=subprocess.PIPE, stderr=slave, text=True, env=env,
                             timeout=120)
        os.close(slave)
        os.close(master)
    elif how == "stdin":
        out = subprocess.run([sys.executable, "-"], input=code, capture_output=True, text=True,
                             env=env, timeout=120)
    elif how == "-c":
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             env=env, timeout=120)
    else:
        (tmp_path / "s.py").write_text(code)
        out = subprocess.run([sys.executable, str(tmp_path / "s.py")], capture_output=True,
                             text=True, env=env, timeout=120)
    assert out.stdout.strip() == str(expected), out.stderr


def test_long_run_warning_points_at_the_callers_line(monkeypatch):
    import stsim.core.schedule as S
    monkeypatch.setattr(S, "LONG_RUN_S", 0.0)
    with pytest.warns(LongRunWarning) as w:
        stsim.run(T=8, q=2, batch=16, eval_every=50)
    assert len(w) == 1 and w[0].filename == __file__
    with pytest.warns(LongRunWarning) as w:
        stsim.Config.from_options(T=8, q=2)
    assert w[0].filename == __file__


def test_the_headline_call_on_stdin_shows_progress_and_warns_at_the_users_line():
    """As a notebook runs it: code on stdin, no main guard; shortened by a given steps
    budget through the warning threshold (the call itself is the headline one)."""
    code = textwrap.dedent("""
        import stsim.core.schedule as S
        S.LONG_RUN_S = 0.0
        import stsim.core.progress as P
        P.PROGRESS_AFTER_S = 0.0
        import stsim
        res = stsim.run(T=12, q=3, pe="stochastic")
        print(res.status)
    """)
    out = subprocess.run([sys.executable, "-"], input=code, capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=os.getcwd(), MPLBACKEND="Agg"),
                         timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "completed", out.stderr
    assert "<stdin>:7: LongRunWarning" in out.stderr         # the user's line
    assert "stsim" in out.stderr and "step" in out.stderr     # the bar (or the lines)


def test_train_loop_hands_back_the_kept_memory(monkeypatch):
    import stsim.core.session as R
    calls = []
    monkeypatch.setattr(R, "release_freed_memory", lambda: calls.append(1))
    stsim.run(**TINY)
    assert calls == [1]

    def boom(params):
        raise RuntimeError("x")

    with pytest.raises(RuntimeError):
        R.train_loop(boom, None, {}, 5)
    assert calls == [1, 1]


def test_release_freed_memory_hands_back_a_freed_block():
    """A 20 MB block, below the raised mmap threshold, comes from the heap; freed, it is
    kept (below the raised trim threshold) until release_freed_memory trims it."""
    code = ("import numpy as np\nfrom stsim.util.malloc import keep_freed_memory, "
            "release_freed_memory\napplied = keep_freed_memory()\n"
            "a = np.ones(2_500_000); del a\nprint(applied, release_freed_memory())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=os.getcwd()), timeout=120)
    applied, released = out.stdout.split()
    assert released == applied           # glibc: trimmed; elsewhere: nothing to do
    if sys.platform.startswith("linux"):
        assert applied == "True"


def test_line_printer_stops_quietly_when_its_stream_closes():
    import io
    stream = io.StringIO()
    show = P.LinePrinter(file=stream)
    show(0, 10, {"step": 0, "loss": 1.0, "val": 1.0})
    assert "step       0/10" in stream.getvalue()
    stream.close()                          # the reader went away (2>&1 | head)
    show(10, 10, {"step": 10, "loss": 0.5})
    assert show.dead


def test_plateau_prediction_says_it_is_population_gd_and_that_sgd_lags():
    """The warning's step is the reduced map's (population GD); online SGD leaves the
    plateau later (measured in benchmarks/bench_sgd_lag.py), and the text says so."""
    from stsim.core.schedule import predict
    # the plain single step (lr=1 on every parameter: W's token rows free) is slow at T=200
    s = predict(stsim.Config.from_options(T=200, q=3, steps=10), lr=1.0, steps=None)
    assert "population gradient descent, i.e. the reduced dynamics, leaves the " \
           "plateau near step 9304" in s.warning
    # at most two lines; the measured lag is behind the link
    assert "online SGD leaves it later" in s.warning and s.warning.count("\n") == 1
    assert "docs/model.md#where-the-plateau-ends" in s.warning
    res = stsim.run(T=50, q=3, lr=1.0, steps=20, batch=32)
    assert "(population gradient descent) predict the escape" in res.message
    assert "online SGD escapes later" in res.message and res.message.count("\n") == 1
    assert "docs/model.md#where-the-plateau-ends" in res.message
    gd = stsim.run(T=8, q=2, pe="onehot", optimizer="gd", lr=0.01, steps=5, n_train=16)
    assert gd.assessment == "plateau" and "SGD" not in gd.message
