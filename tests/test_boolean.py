"""Sparse Boolean functions (stsim.studies.sparse.boolean): task, gradients, construction, training, errors."""
import itertools
import math

import numpy as np
import pytest

from stsim.studies.sparse.boolean import (SparseFunction, TrainedRun, attention_weights,
                                          bool_forward_backward, construct, init_bool_params,
                                          make_task, predict, project, select_restart,
                                          train_trial, truth_table)
from stsim.core.gradcheck import check_grad


# ---------------------------------------------------------------------------- task
def _all_bits(s):
    return np.array(list(itertools.product((-1.0, 1.0), repeat=s)))


def test_functions_on_every_input():
    bits = _all_bits(3)
    for row, a, p, m in zip(bits, SparseFunction("and", 3)(bits), SparseFunction("parity", 3)(bits),
                            SparseFunction("majority", 3)(bits)):
        assert a == (1.0 if np.all(row > 0) else -1.0)
        assert p == np.prod(row)
        assert m == np.sign(row.sum())


def test_truth_table_index_is_msb_first_and_01_tables_accepted():
    tab = np.zeros(8)
    tab[0b100] = 1          # +1 only when the first relevant bit is +1, others -1
    g = SparseFunction("table", 3, tab)
    assert g(np.array([[1.0, -1.0, -1.0]]))[0] == 1.0
    assert g(np.array([[-1.0, -1.0, 1.0]]))[0] == -1.0
    np.testing.assert_array_equal(truth_table(g), 2 * tab - 1)
    # a ±1 table gives the same function
    g2 = SparseFunction("table", 3, 2 * tab - 1)
    np.testing.assert_array_equal(g2(_all_bits(3)), g(_all_bits(3)))


def test_default_bias_balances_the_classes_exactly():
    for kind, s in (("and", 1), ("and", 3), ("and", 5), ("parity", 2), ("majority", 3)):
        g = SparseFunction(kind, s)
        p = g.default_p
        bits = _all_bits(s)
        prob = np.prod(np.where(bits > 0, p, 1 - p), axis=1)
        assert abs(prob[g(bits) > 0].sum() - 0.5) < 1e-12, (kind, s)


def test_sampling_is_seeded_nested_and_uses_the_hidden_positions():
    task = make_task(np.random.default_rng(3), 40, 3, "majority")
    assert list(task.positions) == sorted(task.positions) and len(set(task.positions)) == 3
    b1, y1 = task.sample(np.random.default_rng(5), 50)
    b2, y2 = task.sample(np.random.default_rng(5), 80)
    np.testing.assert_array_equal(b1, b2[:50])                 # nested in m
    np.testing.assert_array_equal(y2, np.sign(b2[:, task.positions].sum(axis=1)))
    empirical = np.mean(task.sample(np.random.default_rng(1), 20000)[0] > 0)
    assert abs(empirical - 0.5) < 0.01
    task_and = make_task(np.random.default_rng(3), 40, 3, "and")
    b, y = task_and.sample(np.random.default_rng(2), 40000)
    assert abs(np.mean(b > 0) - 2 ** (-1 / 3)) < 0.01 and abs(np.mean(y > 0) - 0.5) < 0.01


# ---------------------------------------------------------------------------- gradients
@pytest.mark.parametrize("model,pos,values", [("attention", "onehot", "token"),
                                              ("attention", "onehot", "token+position"),
                                              ("attention", "learned", "token"),
                                              ("attention", "learned", "token+position"),
                                              ("fcn", "onehot", "token")])
@pytest.mark.parametrize("wd", [0.0, 0.01])
def test_gradients_match_finite_differences(model, pos, values, wd):
    rng = np.random.default_rng(11)
    T = 10
    task = make_task(rng, T, 3, "and")
    b, y = task.sample(rng, 24)
    p = init_bool_params(rng, T, model, d_v=3, hidden=6, pos=pos, k=4 if pos == "learned" else None,
                    values=values)
    for key in p:  # a random point, away from the symmetric init
        p[key] = p[key] + 0.5 * rng.standard_normal(p[key].shape)
    names = sorted(p)

    def f(ps):
        loss, grads, _ = bool_forward_backward(dict(zip(names, ps)), b, y, weight_decay=wd)
        return loss, [grads[n] for n in names]

    worst = check_grad(f, [p[n] for n in names], rng, n_dirs=6)
    assert worst < 1e-6
    # each block alone (a wrong block cannot hide behind a large correct one)
    _, grads, _ = bool_forward_backward(p, b, y, weight_decay=wd)
    for n in names:
        def g(ps, n=n):
            q = dict(p)
            q[n] = ps[0]
            return bool_forward_backward(q, b, y, weight_decay=wd)[0], None
        h = 1e-6
        u = rng.standard_normal(p[n].shape)
        num = (g([p[n] + h * u])[0] - g([p[n] - h * u])[0]) / (2 * h)
        ana = float(np.sum(grads[n] * u))
        assert abs(num - ana) <= 1e-6 * max(abs(num), abs(ana), 1e-8), n


def test_zero_init_attends_uniformly_and_scores_match_predict():
    rng = np.random.default_rng(0)
    p = init_bool_params(rng, 12, "attention")
    b, y = make_task(rng, 12, 2, "parity").sample(rng, 7)
    np.testing.assert_allclose(attention_weights(p, b), 1 / 12)
    _, _, f = bool_forward_backward(p, b, y)
    np.testing.assert_allclose(f, predict(p, b))


def test_softmax_is_stable_at_huge_logits():
    rng = np.random.default_rng(0)
    p = init_bool_params(rng, 8, "attention")
    p["a_p"][:] = np.array([1e300, 0, 0, 0, 0, 0, 0, -1e300])
    b, y = make_task(rng, 8, 1, "and").sample(rng, 5)
    loss, grads, _ = bool_forward_backward(p, b, y)
    assert np.isfinite(loss) and all(np.all(np.isfinite(g)) for g in grads.values())


def test_projection_bounds_every_block():
    p = {"x": np.full(4, 10.0), "y": np.ones(3)}
    assert project(p, 5.0) == pytest.approx(5.0)
    assert np.linalg.norm(p["x"]) == pytest.approx(5.0) and np.all(p["y"] == 1.0)


# ---------------------------------------------------------------------------- representation
@pytest.mark.parametrize("fn,s,T", [("and", 3, 16), ("parity", 3, 512), ("majority", 5, 300),
                                    ("table", 4, 1024)])
def test_explicit_head_computes_any_sparse_function_with_log_norm(fn, s, T):
    rng = np.random.default_rng(4)
    table = rng.integers(0, 2, 2 ** s) if fn == "table" else None
    task = make_task(rng, T, s, fn, table=table)
    params = construct(task, leak=1e-3)
    b, y = task.sample(rng, 3000)
    f = predict(params, b)
    assert np.min(y * f) > 1 - 1e-9            # every sample correct with unit margin
    # ‖a_p‖ = ‖G + j ln 2‖ with G = ln((T-s)/leak): logarithmic in T
    G = np.log((T - s) / 1e-3)
    assert np.linalg.norm(params["a_p"]) <= np.sqrt(s) * (G + (s - 1) * np.log(2)) + 1e-9


# ---------------------------------------------------------------------------- training
def test_trial_is_reproducible_and_paired_across_models():
    r1 = train_trial(32, 64, 3, "majority", "attention", seed=7, max_steps=60, n_test=300)
    r2 = train_trial(32, 64, 3, "majority", "attention", seed=7, max_steps=60, n_test=300)
    r1.pop("cpu_time_s"), r2.pop("cpu_time_s")
    assert r1 == r2
    r3 = train_trial(32, 128, 3, "majority", "fcn", seed=7, max_steps=10, n_test=300)
    assert r3["positions"] == r1["positions"] and r3["attn_on_support"] is None


def test_attention_head_learns_majority_from_few_samples_at_long_T():
    """T=256 with m=128 < T samples: the head finds the 3 positions in most seeds."""
    rows = [train_trial(256, 128, 3, "majority", "attention", seed=s, n_test=1000)
            for s in range(4)]
    assert sum(r["success"] for r in rows) >= 3, rows
    good = [r for r in rows if r["success"]]
    # attention on the 3 relevant positions, against 3/256 = 0.012 at the uniform start
    assert min(r["attn_on_support"] for r in good) > 0.2
    assert all(r["max_block_norm"] <= 20.0 + 1e-9 for r in rows)


def test_early_stop_on_margin_and_divergence_flag():
    r = train_trial(16, 32, 2, "and", "fcn", seed=0, margin=0.5, max_steps=500, n_test=200)
    assert r["fitted"] == 1 and r["steps"] < 500 and r["train_acc"] == 1.0
    for model in ("attention", "fcn"):
        # an absurd rate without projection overflows after one step: reported, not raised
        r = train_trial(16, 32, 2, "and", model, seed=0, lr=1e200, max_norm=None,
                        max_steps=50, n_test=200)
        assert r["diverged"] == 1 and r["steps"] == 1 and r["fitted"] == 0
        assert r["success"] == 0 and r["test_acc"] is None and r["train_loss"] is None
    # a large but finite rate is bounded by Adam: no divergence
    r = train_trial(16, 32, 2, "and", "attention", seed=0, lr=1e30, max_norm=None,
                    max_steps=50, n_test=200)
    assert r["diverged"] == 0 and r["steps"] == 50


# ---------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("kwargs,match", [
    (dict(T=8, m=16, s=9), r"s must be an integer in \[1, 8\]"),
    (dict(T=8, m=16, s=0), r"s must be an integer in \[1, 8\]"),
    (dict(T=8, m=0), r"m must be an integer >= 1"),
    (dict(T=8, m=16, s=3, fn="table", table=[1, -1, 1]), r"table must have 2\*\*s = 8"),
    (dict(T=8, m=16, s=3, fn="table"), r"fn='table' needs table"),
    (dict(T=8, m=16, s=2, fn="and", table=[1, -1, 1, 1]), r"table is only used"),
    (dict(T=8, m=16, s=2, fn="majority"), r"s must be odd"),
    (dict(T=8, m=16, fn="xor"), r"fn must be one of"),
    (dict(T=8, m=16, model="rnn"), r"model must be one of"),
    (dict(T=8, m=16, pos="sinusoid"), r"pos must be one of"),
    (dict(T=8, m=16, values="all"), r"values must be one of"),
    (dict(T=8, m=16, p=1.0), r"p \(the probability of a \+1 bit\) must lie in \(0, 1\)"),
    (dict(T=8, m=16, lr=-1.0), r"lr must be a finite number > 0"),
    (dict(T=8, m=16, lr=float("nan")), r"lr must be a finite number > 0"),
    (dict(T=8, m=16, weight_decay=float("inf")), r"weight_decay must be a finite number >= 0"),
    (dict(T=8, m=16, max_norm=0.0), r"max_norm must be a finite number > 0"),
    (dict(T=8, m=16, threshold=1.5), r"threshold \(test accuracy\) must lie in \[0.5, 1\]"),
    (dict(T=8, m=16, k=3), r"k must equal T=8 for pos='onehot'"),
])
def test_bad_input_names_the_parameter(kwargs, match):
    with pytest.raises(ValueError, match=match):
        train_trial(**kwargs)


def test_select_restart_prefers_the_smallest_norm_fit():
    y = np.array([1.0, -1.0, 1.0])
    def run(norm, f, loss, diverged=False):
        return TrainedRun(params={"w": np.array([norm])}, f=np.array(f), fitted=False,
                          steps=1, diverged=diverged, data_loss=loss)
    fit, miss = [1.0, -1.0, 1.0], [1.0, 1.0, 1.0]
    # two fits: the smaller norm wins even with a larger loss; a non-fit never wins
    assert select_restart([run(5.0, fit, 0.1), run(2.0, fit, 0.3), run(1.0, miss, 0.01)], y) == 1
    # no fit: the lowest training loss; a diverged run (loss inf) is never kept
    assert select_restart([run(1.0, miss, 0.5), run(9.0, miss, 0.2),
                           run(0.1, fit, math.inf, diverged=True)], y) == 1


def test_table_entries_must_be_boolean():
    with pytest.raises(ValueError, match=r"table entries must all be in"):
        SparseFunction("table", 1, [2, 3])


def test_restarts_keep_the_smallest_norm_fit_and_one_restart_is_the_default():
    kw = dict(T=64, m=96, s=3, fn="majority", model="attention", seed=3, max_steps=150,
              n_test=300)
    one = train_trial(**kw)
    same = train_trial(**kw, restarts=1)
    one.pop("cpu_time_s"), same.pop("cpu_time_s")
    assert one == same and one["chosen"] == 0
    three = train_trial(**kw, restarts=3)
    assert one["train_acc"] >= 0.99   # restart 0 fits, so the kept fit has no larger norm
    assert three["max_block_norm"] <= one["max_block_norm"] + 1e-12
    assert three["chosen"] != 0 or three == dict(one, cpu_time_s=three["cpu_time_s"])
    with pytest.raises(ValueError, match=r"restarts must be an integer >= 1"):
        train_trial(**dict(kw, restarts=0))


def test_truth_table_strings():
    ref = SparseFunction("table", 2, [0, 1, 1, 0])
    for text in ("0110", "-++-", "0,1,1,0", "-1,1,1,-1"):
        g = SparseFunction("table", 2, text)
        np.testing.assert_array_equal(g.table, ref.table)
    assert ref.table_string() == "-++-"
    with pytest.raises(ValueError, match="table must list 2"):
        SparseFunction("table", 2, "01x0")
