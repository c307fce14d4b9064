"""Refusals before any work or file, the assessment of a completed run, the records
``load`` refuses, and messages that name what is wrong. docs/model.md, "Failure
behaviour"."""
import os
import time

import numpy as np
import pytest

import stsim
from stsim.cli import main as cli


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


@pytest.mark.parametrize("opts, name", [
    ({"lr": {"W": [0.5], "V": 1}}, r"lr\['W'\]"),
    ({"lr": {"W": np.array([0.5]), "V": 1}}, r"lr\['W'\]"),
    ({"eval_every": "5"}, r"eval_every"),
])
def test_step_and_count_types_refused_before_any_work(tmp_path, opts, name):
    """A step given as a list or an array, or a count given as a string, is refused when the
    options are read, naming the parameter; no training, no checkpoint."""
    out = tmp_path / "c.npz"
    with pytest.raises(ValueError, match=name):
        stsim.run(T=10, q=2, steps=20, checkpoint=out, progress=False, **opts)
    assert not out.exists()


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
    # (the derived default no longer rises here; an explicit single step too large does)
    res = stsim.run(T=20, q=3, model="practical", init="random", init_scale=1e3, steps=10,
                    lr=1.4)
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
    from stsim.core.assessment import plateau_status
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
