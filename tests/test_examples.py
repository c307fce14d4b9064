"""Every script in examples/ runs, in its small setting (STSIM_EXAMPLE_SMOKE=1), so none
can rot. They run in this process (runpy, as ``__main__``): one import of stsim for all."""
import os
import re
import runpy
import time

import pytest

# matplotlib is a runtime dependency of stsim (pip install .); without it these tests are
# skipped with that reason instead of breaking the collection of the whole suite
matplotlib = pytest.importorskip("matplotlib", reason="matplotlib (a dependency of stsim) "
                                 "is not installed: pip install .")
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "examples")
NAMES = sorted(f[:-3] for f in os.listdir(EXAMPLES) if f.endswith(".py"))
EXPECTED = {"quickstart", "theory_vs_simulation", "own_encoding", "dask_sweep",
            "checkpoint_resume", "transformer_vs_fcn"}
FIGURES = {"quickstart": ["quickstart.png", "quickstart_history.png"],
           "theory_vs_simulation": ["theory_vs_simulation.png"],
           "dask_sweep": ["dask_sweep.png", "dask_sweep.csv"],
           "checkpoint_resume": ["long_run.npz"],
           "transformer_vs_fcn": ["transformer_vs_fcn.png"]}


def test_every_example_is_listed():
    assert EXPECTED <= set(NAMES)


def gallery_title(source: str):
    """The title sphinx-gallery reads from an example: the first line of its docstring,
    underlined with "=" at least as long (None when it has none)."""
    m = re.match(r'"""(.+)\n(=+)\n', source)
    return m.group(1) if m and len(m.group(2)) >= len(m.group(1)) else None


@pytest.mark.parametrize("name", NAMES)
def test_every_example_has_a_gallery_title(name):
    with open(os.path.join(EXAMPLES, f"{name}.py"), encoding="utf-8") as f:
        assert gallery_title(f.read()), f"{name}.py: no underlined title for the gallery"
    assert gallery_title('"""A title\n===\n"""') is None          # the check sees a short line


def test_the_docs_build_the_gallery_from_the_docs_extra():
    import configparser
    root = os.path.join(EXAMPLES, "..")
    conf = open(os.path.join(root, "docs", "conf.py"), encoding="utf-8").read()
    assert '"sphinx_gallery.gen_gallery"' in conf and '"examples_dirs": "../examples"' in conf
    assert os.path.isfile(os.path.join(EXAMPLES, "GALLERY_HEADER.rst"))
    cfg = configparser.ConfigParser()
    cfg.read(os.path.join(root, "setup.cfg"))
    assert "sphinx-gallery" in cfg["options.extras_require"]["docs"]
    assert "sphinx" not in cfg["options"]["install_requires"]      # not a runtime dependency


@pytest.mark.parametrize("name", NAMES)
def test_example_runs(name, tmp_path, monkeypatch, capsys):
    if name == "dask_sweep":
        pytest.importorskip("dask.distributed")
    path = os.path.join(EXAMPLES, f"{name}.py")
    with open(path, encoding="utf-8") as fh:
        n_lines = sum(1 for _ in fh)
    assert n_lines <= 70, f"{name}.py has {n_lines} lines: examples stay short"
    monkeypatch.setenv("STSIM_EXAMPLE_SMOKE", "1")
    monkeypatch.setenv("STSIM_EXAMPLE_OUT", str(tmp_path / "out"))
    monkeypatch.chdir(tmp_path)
    t0 = time.perf_counter()
    try:
        runpy.run_path(path, run_name="__main__")
    finally:
        plt.close("all")
    secs = time.perf_counter() - t0
    out = capsys.readouterr().out
    assert out.strip(), f"{name}.py printed nothing"
    for f in FIGURES.get(name, []):
        assert (tmp_path / "out" / f).stat().st_size > 0, f"{name}.py did not write {f}"
    if name == "checkpoint_resume":
        assert "bit for bit: True" in out
    if name == "dask_sweep":
        assert "rows found finished" in out
    if name == "own_encoding":      # the failing family says why it fails
        assert "sinusoid  coherence max|<p_i, p_j>| over 16 positions: 0.914" in out
        assert 'Why "sinusoid" does not learn' in out
    print(f"{name}: {secs:.1f} s")


def test_dask_example_without_dask_says_what_to_install_in_one_line(tmp_path):
    """README command 1 (``.[fast]``) does not install Dask: the example says so."""
    import subprocess
    import sys
    code = ("import runpy, sys; sys.modules['dask'] = None; sys.modules['distributed'] = None; "
            "sys.modules['dask.distributed'] = None; "
            f"runpy.run_path({os.path.join(EXAMPLES, 'dask_sweep.py')!r}, run_name='__main__')")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=tmp_path, timeout=300, env=dict(os.environ, MPLBACKEND="Agg"))
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [
        'examples/dask_sweep.py needs Dask: pip install ".[dask]" (the extra stsim[dask])']
