"""The notebook-facing Result API: plot(), attention(), history_array(), history_csv()."""
import numpy as np
import pytest

import stsim
from stsim.core.encodings import PEBatch
from stsim.core.families import make_encoding
from stsim.core.model import attention_weights, forward_backward
from stsim.core.seeds import Streams
from stsim.util.io import read_csv


def _figure_class():
    """matplotlib's Figure; the plot tests skip (with the reason) where the dependency is
    missing, and the other tests of this module still run."""
    return pytest.importorskip("matplotlib.figure", reason="matplotlib (a dependency of "
                               "stsim) is not installed: pip install .").Figure


@pytest.fixture(scope="module")
def res():
    return stsim.run(T=12, q=2, pe="onehot", steps=300, batch=64, T_test=[14], seed=3)


def test_plot_returns_figure_and_writes(res, tmp_path):
    Figure = _figure_class()
    fig = res.plot()
    assert isinstance(fig, Figure) and len(fig.axes) == 3
    path = tmp_path / "loss.png"
    assert isinstance(res.plot(path), Figure) and path.stat().st_size > 1000


def test_plot_of_empty_history():
    Figure = _figure_class()
    r = stsim.Result(config={}, params={}, history={}, status="diverged",
                     message="diverged: non-finite loss (nan) at step 0")
    fig = r.plot()
    assert isinstance(fig, Figure) and len(fig.axes) == 3
    for ax in fig.axes:         # each panel says there is nothing to draw, and why
        assert not ax.lines
        assert [t.get_text() for t in ax.texts] == ["no record\n" + r.message]
    assert fig._suptitle.get_text().endswith(": diverged")


def test_history_array_and_csv(res, tmp_path):
    a = res.history_array()
    assert a.dtype.names == tuple(res.history)
    assert a["step"].dtype == np.int64 and len(a) == len(res.history["step"])
    np.testing.assert_array_equal(a["val/T=14"], res.history["val/T=14"])
    rows = read_csv(res.history_csv(tmp_path / "h.csv"))
    assert [r["step"] for r in rows] == list(res.history["step"])
    assert [r["loss"] for r in rows] == list(res.history["loss"])  # round-trip exact
    # to_csv: the same file (the alias a pandas user reaches for)
    assert res.to_csv(tmp_path / "t.csv") == tmp_path / "t.csv"
    assert (tmp_path / "t.csv").read_bytes() == (tmp_path / "h.csv").read_bytes()


def test_attention_selects_after_training(res):
    s, X, y = res.attention(n=5, seed=1, return_inputs=True)
    assert s.shape == (5, 12) and X.shape == (5, 12, 5) and y.shape == (5, 2)
    np.testing.assert_allclose(s.sum(axis=1), 1.0)
    assert np.take_along_axis(s, y, 1).sum(1).min() > 0.6       # selected positions light up
    # given inputs, and an OOD length within d_e
    s2 = res.attention(X, y)
    np.testing.assert_allclose(s2, s)
    assert res.attention(n=2, T=14).shape == (2, 14)


def test_attention_is_the_models_own():
    # the weights reproduce the model's output: f = V Z s gives the loss forward_backward
    # computes, also for the practical model and the run's own near-orthogonal table
    r = stsim.run(T=6, q=2, pe="near-orthogonal", d_e=8, model="practical", query="mean",
                  steps=30, batch=16, seed=5)
    s, X, y = r.attention(n=7, return_inputs=True)
    assert s.shape == (7, 7)
    cfg = stsim.Config.from_options(**{k: v for k, v in r.config.items()})
    enc = make_encoding(cfg.pe, T_max=cfg.T_max, d_e=cfg.d_e, rng=Streams(cfg.seed).encoding())
    pe = enc.sample(None, 7, 6)
    P = np.broadcast_to(pe.P, (7, 6, 8))
    zq = np.concatenate([np.zeros((7, 5)), P[np.arange(7)[:, None], y].mean(1)], axis=1)
    Z = np.concatenate([np.concatenate([X, P], 2), zq[:, None]], axis=1)
    f = np.einsum("bnD,bn->bD", Z, s) @ r.V.T
    loss = 0.5 * np.mean(np.sum((f - X[np.arange(7)[:, None], y].mean(1)) ** 2, 1))
    ref, _, _ = forward_backward(r.W, r.V, X, y, pe, model="practical", query="mean",
                                 need_grad=False)
    assert loss == pytest.approx(ref, rel=1e-10)


def test_attention_weights_index_equals_dense():
    rng = np.random.default_rng(0)
    W = rng.standard_normal((9, 9))
    X = rng.standard_normal((3, 4, 3))
    y = np.array([[0, 1], [2, 3], [1, 3]])
    idx = np.array([[0, 2, 3, 5], [1, 2, 4, 5], [0, 1, 2, 3]])
    a = attention_weights(W, X, y, PEBatch(d_e=6, idx=idx))
    b = attention_weights(W, X, y, PEBatch(d_e=6, P=np.eye(6)[idx]))
    np.testing.assert_allclose(a, b)


def test_attention_errors():
    r = stsim.run(T=6, q=2, arch="fcn", width=4, steps=2, batch=4)
    with pytest.raises(ValueError, match="transformer"):
        r.attention()
    r = stsim.run(T=6, q=2, steps=2, batch=4)
    with pytest.raises(ValueError, match="without"):
        r.attention(X=np.zeros((1, 6, 5)))
    with pytest.raises(ValueError, match="shape"):
        r.attention(np.zeros((1, 6, 4)), np.array([[0, 1]]))


def test_history_csv_writes_step_as_a_whole_number(res, tmp_path):
    text = res.history_csv(tmp_path / "h.csv").read_text().splitlines()
    steps = [line.split(",")[0] for line in text[1:]]
    assert steps[:2] == ["0", "3"] and all(s.isdigit() for s in steps)
    assert res.history["step"].dtype == np.int64


def test_fcn_results_summarise_as_fcns_and_name_their_parameters():
    r = stsim.run(T=6, q=2, arch="fcn", width=4, depth=2, steps=2, batch=4)
    text = r.summary()
    first = text.splitlines()[0]
    assert "arch=fcn" in first and "width=4" in first and "depth=2" in first
    assert "pe=" not in first and "model=" not in first and "d_e=" not in first
    for name in ("W", "V"):
        with pytest.raises(AttributeError, match=r"arch='fcn' run, whose parameters are "
                                                 r"res.params \['A', 'W1', 'W2'"):
            getattr(r, name)
    t = stsim.run(T=6, q=2, steps=2, batch=4).summary().splitlines()[0]
    assert "pe=stochastic" in t and "width" not in t


def test_summary_names_the_mechanism_and_the_held_blocks():
    """The first line of a summary names every setting that differs from the paper's model
    (mechanism, temperature, held blocks); the paper's model prints none of them."""
    head = stsim.run(T=12, q=2, attention="linear", temperature=0.5, freeze=("V_e",),
                     steps=5, progress=False).summary().splitlines()[0]
    assert "attention=linear" in head and "temperature=0.5" in head and "freeze=V_e" in head
    plain = stsim.run(T=12, q=2, lr=1.0, steps=5, progress=False).summary().splitlines()[0]
    assert "attention=" not in plain and "temperature=" not in plain and "freeze=" not in plain


def test_the_runs_target_is_its_object(tmp_path):
    """``res.target``: the run's Target (what a study asks for L(0)), in this process and
    after loading (a mean run's config records no target: the mean)."""
    from stsim.core.targets import Mean, Variance
    for target, kind in (("mean", Mean), ("variance", Variance)):
        r = stsim.run(T=6, q=2, d=3, steps=3, batch=8, target=target, progress=False)
        r.save(tmp_path / f"{target}.npz")
        back = stsim.Result.load(tmp_path / f"{target}.npz")
        assert type(r.target) is kind and type(back.target) is kind
    assert stsim.Result.load(tmp_path / "mean.npz").target.zero_loss(3, 2) == 3 / 4


def test_a_written_figure_has_its_data_beside_it(tmp_path):
    """``plot(path)`` writes the history beside the figure, ``plot_attention(path)`` the
    weights (one row per sample and position, the selected ones marked)."""
    import csv
    res = stsim.run(T=8, q=2, steps=20, batch=16, progress=False)
    res.plot(tmp_path / "h.png")
    rows = list(csv.DictReader(open(tmp_path / "h.csv")))
    assert len(rows) == len(res.history["step"]) and float(rows[-1]["val"]) == \
        pytest.approx(res.history["val"][-1])
    res.plot_attention(tmp_path / "a.png", n=3, seed=1)
    rows = list(csv.DictReader(open(tmp_path / "a.csv")))
    s, _, y = res.attention(n=3, seed=1, return_inputs=True)
    assert len(rows) == 3 * 8 and sum(int(r["selected"]) for r in rows) == 3 * 2
    assert float(rows[0]["weight"]) == pytest.approx(s[0, 0])
