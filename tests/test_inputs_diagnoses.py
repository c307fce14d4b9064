"""Inputs refused before any work and diagnoses that name what they see: a step that is
not a number, a step count given as a string, a temperature outside the range the steps can
be computed in, blocks that cannot move, and a mechanism of one's own carried through a
config."""
import numpy as np
import pytest

import stsim


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


@pytest.mark.parametrize("tau", [1e-300, 1e300, 0.0, float("inf")])
@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_temperature_outside_its_range_refused_before_any_work(tmp_path, tau, optimizer):
    """τ enters the steps as τ^±2: outside TAU_RANGE = [1e-100, 1e100] that is 0 or inf (a
    raw ZeroDivisionError/OverflowError, or Adam's overflow warnings); refused first, naming
    ``temperature`` and the range."""
    out = tmp_path / "c.npz"
    with pytest.raises(ValueError, match=r"temperature must be a finite number >= 1e-100 "
                                         r"and <= 1e\+100"):
        stsim.run(T=10, q=2, temperature=tau, optimizer=optimizer, checkpoint=out,
                  progress=False)
    assert not out.exists()


def test_temperature_range_on_the_command_line(tmp_path, capsys):
    from stsim.cli import main
    out = tmp_path / "r"
    assert main(["run", "--T", "10", "--q", "2", "--temperature", "1e300", "--out",
                 str(out), "--quiet"]) == 2
    assert "temperature must be a finite number >= 1e-100" in capsys.readouterr().err
    assert not out.exists()


def test_temperature_range_is_one_and_runs_at_both_ends(recwarn):
    """The attention study takes the run's range (one constant); runs at its ends complete
    with no warning, with SGD and with Adam."""
    from stsim.core.attention import TAU_RANGE
    from stsim.studies.attention import runs
    assert runs.TAU_RANGE is TAU_RANGE == (1e-100, 1e100)
    for tau in TAU_RANGE:
        for optimizer in ("sgd", "adam"):
            res = stsim.run(T=10, q=2, temperature=tau, optimizer=optimizer, steps=30,
                            progress=False)
            assert res.status == "completed"
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]
