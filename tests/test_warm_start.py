"""A warm start: ``init=`` a Result, a ``res.save()`` file or a dict of parameters starts a
new run from those parameters, recorded by their hash; where the shapes do not fit (another
T with the one-hot encoding, another d_e) the refusal says why, before any work; a saved
result given as ``checkpoint=`` says to use ``init=`` and never to remove the file."""
import os

import numpy as np
import pytest

import stsim
from stsim.core.warm import start_params

RUN = dict(T=12, q=2, progress=False)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    res = stsim.run(steps=200, **RUN)
    path = tmp_path_factory.mktemp("warm") / "run.npz"
    res.save(path)
    return res, str(path)


def _source(kind, trained):
    res, path = trained
    return {"result": res, "file": path, "dict": dict(res.params)}[kind]


@pytest.mark.parametrize("kind", ["result", "file", "dict"])
def test_init_trains_on_from_the_saved_parameters(trained, kind):
    res, _ = trained
    cold = stsim.run(steps=50, **RUN)
    warm = stsim.run(steps=50, init=_source(kind, trained), **RUN)
    # its first record is the source's model on the same validation set: where res ended
    assert warm.history["val"][0] == pytest.approx(res.final("val"), rel=1e-12)
    assert warm.history["val"][0] < 0.05 * cold.history["val"][0]
    assert warm.final("val") < res.final("val") and warm.status == "completed"
    label = start_params(res).name
    assert warm.config["init"] == label and label.startswith("params:") and len(label) == 23


def test_the_hash_names_the_parameters(trained):
    res, _ = trained
    other = {k: v + 1e-9 for k, v in res.params.items()}
    assert start_params(other).name != start_params(res).name
    assert start_params(dict(res.params)).name == start_params(res).name


def test_a_warm_run_reruns_with_its_source_and_asks_for_it(trained):
    res, path = trained
    warm = stsim.run(steps=30, init=res, **RUN)
    again = stsim.run(config=warm.config, init=path, progress=False)
    assert np.array_equal(again.W, warm.W) and np.array_equal(again.V, warm.V)
    with pytest.raises(ValueError, match="init was a warm start .* pass its source again"):
        stsim.run(config=warm.config, progress=False)
    with pytest.raises(ValueError, match="records a warm start"):
        stsim.run(init=warm.config["init"], **RUN)


def test_a_warm_run_resumes_from_its_checkpoint(trained, tmp_path):
    res, _ = trained
    ck = str(tmp_path / "ck.npz")
    whole = stsim.run(steps=60, init=res, **RUN)
    stsim.run(steps=40, init=res, checkpoint=ck, checkpoint_every=20, lr_decay="none",
              lr=whole.config["lr"], freeze=whole.config["freeze"], **RUN)
    resumed = stsim.run(steps=60, init=res, checkpoint=ck, lr_decay="none",
                        lr=whole.config["lr"], freeze=whole.config["freeze"], **RUN)
    assert resumed.status == "completed" and resumed.history["step"][-1] == 60
    assert np.allclose(resumed.W, whole.W, rtol=1e-12, atol=1e-14)


def test_the_sphere_encoding_trains_on_at_a_larger_T():
    """At a fixed d_e the sphere encoding's parameters fit any T: a run at T = 24 started
    from one trained at T = 12 starts at 8% of a cold start's loss (measured 0.079)."""
    sphere = dict(q=2, pe="stochastic", sampler="sphere", d_e=24, progress=False)
    short = stsim.run(T=12, steps=300, **sphere)
    cold = stsim.run(T=24, steps=5, **sphere)
    longer = stsim.run(T=24, steps=5, init=short, **sphere)
    assert longer.history["val"][0] < 0.15 * cold.history["val"][0]


@pytest.mark.parametrize("options, why", [
    (dict(T=20), r"give d_e=24: the slots encoding keeps its width while max\(T, T_test\) <= d_e"),
    (dict(T=20, sampler="sphere"), r"give d_e=24: the sphere encoding keeps its width at any T"),
    (dict(T=20, pe="onehot"), r"one-hot encoding has d_e = max\(T, T_test\)"),
    (dict(T=12, rank=2), r"has the parameters \['V', 'W'\], this run \['V', 'W_K', 'W_Q'\]"),
])
def test_parameters_that_do_not_fit_are_refused_saying_why(trained, tmp_path, options, why):
    res, _ = trained
    opts = {**RUN, **options}
    with pytest.raises(ValueError, match=why) as err:
        stsim.run(steps=5, init=res, checkpoint=str(tmp_path / "ck.npz"), **opts)
    assert "init: the Result" in str(err.value)
    assert os.listdir(tmp_path) == []          # nothing written


@pytest.mark.parametrize("bad, match", [
    ("missing.npz", r"init must be one of .* or the path of an existing file .* no such"),
    ({"W": np.full((2, 2), np.nan)}, "'W' holds non-finite values"),
    ({"W": "x"}, "'W' is not an array of real numbers"),
    ({}, "holds no parameters"),
    (3.5, r"init must be one of .*, a Result, .* got a float"),
])
def test_bad_sources_are_refused(bad, match):
    with pytest.raises(ValueError, match=match):
        stsim.run(steps=5, init=bad, **RUN)


def test_a_saved_result_as_checkpoint_points_to_init_and_is_kept(trained):
    _, path = trained
    with pytest.raises(ValueError, match=r"is a saved result, not a checkpoint: .* "
                                         r"init=") as err:
        stsim.run(steps=300, checkpoint=path, **RUN)
    assert "remove" not in str(err.value) and "delete" not in str(err.value)
    assert os.path.isfile(path)


def test_no_checkpoint_message_advises_removing_a_file():
    import inspect

    from stsim.core import state
    text = inspect.getsource(state)
    assert "remove it" not in text and "delete it" not in text


def test_a_run_folder_is_a_source_and_a_text_file_is_not(trained, tmp_path):
    res, path = trained
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "result.npz").write_bytes(open(path, "rb").read())
    warm = stsim.run(steps=5, init=str(folder), **RUN)
    assert warm.config["init"] == start_params(res).name
    text = tmp_path / "table.csv"
    text.write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match=r"init='.*table.csv': .* text file"):
        stsim.run(steps=5, init=str(text), **RUN)
