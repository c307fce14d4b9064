"""Each validation set is drawn from its own stream (stsim.core.seeds): adding, removing or
reordering a T_test or q_test leaves every other set's numbers unchanged; the
in-distribution set is unchanged from the layout where all sets came from stream 1 in
sequence (its first draw); the FCN baseline follows through the shared Problem skeleton."""
import numpy as np
import pytest

import stsim
from stsim.core.config import Config
from stsim.core.problem import make_problem
from stsim.core.seeds import Streams
from stsim.core.task import sample_batch


def _val(**kw):
    cfg = Config.from_options(**dict(dict(T=12, q=3, d=4, pe="stochastic", d_e=24, n_val=16,
                                          seed=3, steps=1, lr=0.1), **kw))
    return make_problem(cfg).val


def _same(a, b):
    (ba, pa), (bb, pb) = a, b
    return (np.array_equal(ba.X, bb.X) and np.array_equal(ba.y, bb.y)
            and np.array_equal(pa.idx, pb.idx))


def test_adding_or_reordering_a_test_set_leaves_the_others_unchanged():
    one = _val(T_test=[16], q_test=[2])
    more = _val(T_test=[20, 16, 24], q_test=[4, 2, 1])
    assert _same(one["val"], more["val"])
    assert _same(one["val/T=16"], more["val/T=16"])
    assert _same(one["val/q=2"], more["val/q=2"])


def test_each_set_has_its_own_stream_and_the_in_distribution_set_is_the_first_draw():
    s = Streams(5)
    a, b = s.validation("T", 30).random(4), s.validation("q", 30).random(4)
    assert not np.array_equal(a, b)                      # kinds do not collide
    assert not np.array_equal(a, s.validation("T", 31).random(4))
    assert np.array_equal(a, Streams(5).validation("T", 30).random(4))
    # the in-distribution set: stream 1 itself, drawn first (the earlier layout)
    b_old = sample_batch(np.random.default_rng(s.child(1)), 8, 10, 2, 3)
    b_new = sample_batch(s.validation(), 8, 10, 2, 3)
    assert np.array_equal(b_old.X, b_new.X) and np.array_equal(b_old.y, b_new.y)
    # the evaluation sets are separate streams again
    assert not np.array_equal(s.evaluation("T", 30).random(4), a)
    assert not np.array_equal(s.evaluation().random(4), s.validation().random(4))


def test_a_bad_kind_or_value_is_refused():
    with pytest.raises(ValueError, match="kind"):
        Streams(0).validation("x", 3)
    with pytest.raises(ValueError, match="T"):
        Streams(0).validation("T", 0)


def test_fcn_validation_sets_follow_the_same_layout():
    kw = dict(T=8, q=2, d=3, arch="fcn", width=8, n_val=16, seed=1, steps=1, lr=0.1)
    one = make_problem(Config.from_options(**kw, q_test=[1])).val
    more = make_problem(Config.from_options(**kw, q_test=[3, 1])).val
    for key in ("val", "val/q=1"):
        assert all(np.array_equal(x, y) for x, y in zip(one[key], more[key]))


def test_run_history_of_one_set_does_not_depend_on_the_others():
    kw = dict(T=10, q=3, d=3, pe="onehot", d_e=16, n_val=32, seed=2, steps=20, lr=0.5,
              eval_every=10, progress=False)
    a = stsim.run(**kw, T_test=[14])
    b = stsim.run(**kw, T_test=[12, 14, 16], q_test=[2])
    np.testing.assert_array_equal(a.history["val/T=14"], b.history["val/T=14"])
    np.testing.assert_array_equal(a.history["val"], b.history["val"])
