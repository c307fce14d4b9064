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
