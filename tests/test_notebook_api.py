"""What a notebook user touches, without a kernel: sweep progress, registrations that reach
the pool's workers, pandas in one call, short and HTML reprs, a figure that leaves the
backend alone, and a loaded result whose extension is not registered here
(tests/test_notebook.py runs the same in a real Jupyter kernel)."""
import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import stsim
from stsim.core import families
from stsim.sweeps import InlineExecutor, sweep

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def res():
    return stsim.run(T=8, q=2, pe="onehot", steps=40, batch=32, eval_every=10, progress=False)


def _tiny(a, seed):
    return {"v": a * 2}


# ---------------------------------------------------------------- progress of a sweep
@pytest.mark.parametrize("bad", ["yes", 1, 2.0])
def test_sweep_progress_is_checked_before_any_work(tmp_path, bad):
    calls = []

    def f(a, seed):
        calls.append(a)
        return a

    out = tmp_path / "t.csv"
    with pytest.raises(ValueError, match="progress must be True, False, None"):
        sweep(f, {"a": [1]}, executor=InlineExecutor(), out=out, progress=bad)
    assert calls == [] and not os.path.exists(out) and not os.listdir(tmp_path)


def test_sweep_progress_true_draws_a_bar_over_rows(capsys):
    pytest.importorskip("tqdm")
    res = sweep(_tiny, {"a": [1, 2, 3]}, executor=InlineExecutor(), progress=True)
    assert [r["status"] for r in res.rows] == ["ok"] * 3
    err = capsys.readouterr().err
    assert "3/3" in err and "row" in err, err


def test_sweep_progress_true_without_tqdm_prints_lines(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)          # import fails
    res = sweep(_tiny, {"a": [1, 2]}, executor=InlineExecutor(), progress=True)
    assert res.n_failed == 0
    assert "sweep 2/2 rows" in capsys.readouterr().err


def test_sweep_progress_callable_gets_done_total_row():
    seen = []
    sweep(_tiny, {"a": [1, 2]}, executor=InlineExecutor(),
          progress=lambda done, total, row: seen.append((done, total, row["status"])))
    assert seen == [(1, 2, "ok"), (2, 2, "ok")]


def test_no_ipywidgets_means_the_text_bar(monkeypatch):
    """tqdm.auto without ipywidgets warns "IProgress not found" in a kernel: the text bar
    is used instead (seeded fault: with the widget library found, the auto bar is)."""
    pytest.importorskip("tqdm")
    import importlib.util

    import tqdm.auto
    import tqdm.std

    from stsim.core.progress import tqdm_class
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "ipywidgets" else real(name, *a))
    assert tqdm_class() is tqdm.std.tqdm
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: object() if name == "ipywidgets" else real(name, *a))
    assert tqdm_class() is tqdm.auto.tqdm


# ---------------------------------------------------------------- registrations travel
@pytest.fixture
def flipped():
    """An encoding defined here (a local class: cloudpickle sends it by value), registered
    for the test only."""
    class Flipped(stsim.OneHot):          # one-hot, last position first
        name = "flipped-test"

        def sample(self, rng, B, T):
            return stsim.PEBatch(d_e=self.d_e, idx=np.arange(T)[::-1].copy())

    stsim.register_encoding("flipped-test", Flipped)
    yield Flipped
    families._REGISTERED.pop("flipped-test", None)


def _with_flipped(lr, seed):
    res = stsim.run(T=6, q=2, pe="flipped-test", lr=lr, steps=10, batch=8, seed=seed,
                    progress=False)
    return {"val": res.final("val")}


@pytest.mark.pool
def test_registered_encoding_reaches_the_default_pool(flipped, monkeypatch):
    res = sweep(_with_flipped, {"lr": [0.5, 1.0]}, max_workers=2)
    assert [r["status"] for r in res.rows] == ["ok", "ok"], [r["error"] for r in res.rows]
    # seeded fault: the registrations do not travel -> the workers do not know the name
    from stsim.sweeps.carry import Registrations
    monkeypatch.setattr(stsim.sweeps.runner, "_registrations", lambda: Registrations({}))
    bad = sweep(_with_flipped, {"lr": [0.5]}, max_workers=2)
    assert bad.rows[0]["status"] == "error" and "pe must be one of" in bad.rows[0]["error"]


def test_registrations_carry_only_the_callers_entries(flipped):
    from stsim.sweeps.carry import snapshot
    names = snapshot().names()
    assert "flipped-test" in names["_REGISTERED"]
    carried = {n for v in names.values() for n in v}
    assert not carried & {"onehot", "sgd", "adam", "transformer", "fcn", "population"}
    # installing where the entry is the same object changes nothing
    before = dict(families._REGISTERED)
    snapshot().install()
    assert all(families._REGISTERED[k] is v for k, v in before.items())


def test_registrations_install_into_a_table_that_lacks_them(flipped):
    from stsim.sweeps.carry import snapshot
    regs = snapshot()
    families._REGISTERED.pop("flipped-test")           # as in a fresh worker
    with pytest.raises(ValueError, match="pe must be one of"):
        families.canonical_pe("flipped-test")
    regs.install()
    assert families.canonical_pe("flipped-test") == "flipped-test"


# ---------------------------------------------------------------- pandas, reprs
def test_result_to_pandas_is_indexed_by_step(res):
    pd = pytest.importorskip("pandas")
    df = res.to_pandas()
    assert isinstance(df, pd.DataFrame) and df.index.name == "step"
    assert list(df.index) == list(res.history["step"])
    assert list(df.columns) == [k for k in res.history if k != "step"]
    np.testing.assert_array_equal(df["val"].to_numpy(), res.history["val"])


def test_sweep_to_pandas_gives_the_rows(tmp_path):
    pd = pytest.importorskip("pandas")
    t = sweep(_tiny, {"a": [1, 2]}, seeds=2, executor=InlineExecutor(), out=tmp_path / "t.csv")
    df = t.to_pandas()
    assert isinstance(df, pd.DataFrame) and list(df.columns) == t.columns
    assert len(df) == 4 and list(df["v"]) == [2, 2, 4, 4]


def test_to_pandas_without_pandas_names_the_extra(res, monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match=r'stsim\[pandas\]'):
        res.to_pandas()
    with pytest.raises(ImportError, match=r'stsim\[pandas\]'):
        sweep(_tiny, {"a": [1]}, executor=InlineExecutor()).to_pandas()


def test_short_reprs_and_html(res, tmp_path):
    r = repr(res)
    assert "\n" not in r and len(r) < 160 and r.startswith("<stsim.Result completed")
    html = res._repr_html_()
    assert "<pre>" in html and "data:image/png;base64," in html
    assert "http" not in html.split("<pre>")[0]
    # the PNG once: inside the HTML, with no second rich form that would store it again
    assert html.count("data:image/png;base64,") == 1
    assert not hasattr(res, "_repr_png_") and not hasattr(res, "_repr_mimebundle_")
    t = sweep(_tiny, {"a": list(range(30))}, executor=InlineExecutor(), out=tmp_path / "t.csv")
    tr = repr(t)
    assert "\n" not in tr and len(tr) < 300 and "30 rows (30 ok, 0 error)" in tr
    th = t._repr_html_()
    assert th.count("<tr>") == 1 + 20 + 1 and "10 rows not shown" in th  # header, 20, gap


def test_plot_figure_displays_as_png(res):
    fig = res.plot()
    assert fig._repr_png_()[:4] == b"\x89PNG"


def test_plot_attention_draws_the_weights_and_marks_the_subsets(res, tmp_path):
    fig = res.plot_attention(tmp_path / "a.png", n=3, seed=2)
    s, _, y = res.attention(n=3, seed=2, return_inputs=True)
    ax = fig.axes[0]
    assert np.array_equal(ax.images[0].get_array(), s)
    marks = ax.lines[0]
    assert np.array_equal(marks.get_xdata(), y.ravel())
    assert (tmp_path / "a.png").stat().st_size > 1000


def test_a_sweep_table_plots_a_column_against_a_parameter(tmp_path):
    def f(a, b, seed):
        return {"v": a * b + seed % 7}

    t = sweep(f, {"a": [1, 2, 3], "b": [10, 20]}, seeds=3, executor=InlineExecutor())
    fig = t.plot("a", "v", tmp_path / "s.png")
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["b=10", "b=20"]
    means = sorted(tuple(np.round(np.asarray(c.lines[0].get_ydata(), dtype=float), 9))
                   for c in ax.containers)         # the mean lines of the error bars
    want = sorted(tuple(np.round([np.mean(t.column("v", a=a, b=b)) for a in (1, 2, 3)], 9))
                  for b in (10, 20))
    assert means == want and ax.get_xlabel() == "a"
    assert (tmp_path / "s.png").stat().st_size > 1000
    with pytest.raises(ValueError, match="y must be a column of the table"):
        t.plot("a", "w")


def test_the_figure_is_titled_in_words_and_every_panel_labelled(res):
    fig = res.plot()
    title = fig._suptitle.get_text()
    assert title.startswith("STS_2: T = 8 tokens in d = 5, onehot encodings of width 8")
    assert "softmax-attention transformer (theory model), SGD, lr " in title
    assert title.endswith(": completed") and "=W" not in title and "held=" not in title
    for ax in fig.axes:
        assert ax.get_xlabel() and ax.get_ylabel() and ax.get_title(), ax.get_title()


@pytest.mark.parametrize("target, task", [("variance", "variance of q = 3 tokens"),
                                          ("moment:3", "moment:3 of q = 3 tokens")])
def test_the_figure_names_its_target(target, task):
    from stsim.util.figure import title
    res = stsim.run(T=8, q=3, target=target, steps=4, batch=8, progress=False)
    assert title(res).startswith(f"{task}: T = 8 tokens") and "STS_" not in title(res)


# ---------------------------------------------------------------- the backend is left alone
_BACKEND = textwrap.dedent("""
    import sys, matplotlib
    before = dict.__getitem__(matplotlib.rcParams, "backend")
    import stsim
    res = stsim.run(T=6, q=2, steps=10, batch=8, progress=False)
    fig = res.plot("fig.png")
    {fault}
    after = dict.__getitem__(matplotlib.rcParams, "backend")
    print("PYPLOT", "matplotlib.pyplot" in sys.modules, "SAME", before is after)
""")


@pytest.mark.parametrize("fault", ["", "import stsim.util.plotting"])
def test_plot_never_changes_the_backend(tmp_path, fault):
    """A script's ``res.plot()`` leaves matplotlib's backend unselected (before: it became
    Agg, and a desktop user's later ``plt.show()`` showed nothing). Seeded fault: the
    study plotting module does select Agg, and the check sees it."""
    env = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"}
    env["PYTHONPATH"] = ROOT
    proc = subprocess.run([sys.executable, "-c", _BACKEND.format(fault=fault)], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "fig.png").stat().st_size > 1000
    expect = "PYPLOT False SAME True" if not fault else "PYPLOT True SAME False"
    assert expect in proc.stdout, proc.stdout


# ---------------------------------------------------------------- unregistered extension
def test_loading_a_result_of_an_unregistered_encoding_says_how_to_register(flipped, tmp_path):
    run = stsim.run(T=6, q=2, pe="flipped-test", steps=10, batch=8, progress=False)
    path = run.save(tmp_path / "r.npz")
    families._REGISTERED.pop("flipped-test")           # a new process: not registered
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        back = stsim.load(path)
    msg = " ".join(str(x.message) for x in w)
    assert "stsim.register_encoding('flipped-test', YourEncoding)" in msg, msg
    assert w[0].filename == __file__                    # attributed to the caller's line
    back.plot()                                         # the history needs nothing
    with pytest.raises(ValueError, match=r"register_encoding\('flipped-test'"):
        back.attention()
    stsim.register_encoding("flipped-test", flipped)    # registered again: it works
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert stsim.load(path).attention(n=2).shape == (2, 6)
