"""The quick start as a researcher runs it: cells of a notebook executed in a real Jupyter
kernel (nbclient + ipykernel, kernel "python3", the checkout's stsim on its PYTHONPATH).

It checks what a notebook shows and does: ``res.plot()`` is stored as ``image/png`` (no
``%matplotlib inline`` needed) and ``res`` as its summary and figure in HTML (the PNG once), ``sweep(progress=True)`` gives ``ok``
rows, an encoding registered in the notebook works in a sweep on the default pool, and
``to_pandas()`` returns DataFrames.

examples/beyond_the_paper.ipynb, the options beyond the paper in the user guide's own
words: every line of its code is a line of the Python API block of docs/guide.md and of
docs/getting-started.md, and every cell runs; a check cell appended here (not in the
notebook) asks the kernel what the lines promise."""
import os
import re
import textwrap

import pytest

nbformat = pytest.importorskip("nbformat", reason='needs nbformat (the extra "test")')
nbclient = pytest.importorskip("nbclient", reason='needs nbclient (the extra "test")')
pytest.importorskip("ipykernel", reason='needs ipykernel (the extra "test")')

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOTEBOOK = os.path.join(ROOT, "examples", "beyond_the_paper.ipynb")

CELLS = [
    """
    import numpy as np
    import stsim
    res = stsim.run(T=12, q=2, pe="onehot", steps=300, batch=32, progress=False)
    print(res.status)
    """,
    "res.plot()",
    "res",
    """
    def val_loss(lr, seed):
        return {"val": stsim.run(T=8, q=2, lr=lr, steps=40, batch=16, seed=seed,
                                 progress=False).final("val")}

    table = stsim.sweep(val_loss, {"lr": [0.5, 1.0]}, seeds=2, progress=True)
    print("PROGRESS", [r["status"] for r in table.rows])
    """,
    """
    class Flipped(stsim.OneHot):             # an encoding of the notebook's own
        name = "flipped"
        def sample(self, rng, B, T):
            return stsim.PEBatch(d_e=self.d_e, idx=np.arange(T)[::-1].copy())

    stsim.register_encoding("flipped", Flipped)

    def flipped_run(lr, seed):
        return {"val": stsim.run(T=8, q=2, pe="flipped", lr=lr, steps=40, batch=16,
                                 seed=seed, progress=False).final("val")}

    pooled = stsim.sweep(flipped_run, {"lr": [0.5, 1.0]}, max_workers=2)
    print("REGISTERED", [r["status"] for r in pooled.rows], [r["error"] for r in pooled.rows])
    """,
    """
    import pandas as pd
    print("PANDAS", isinstance(res.to_pandas(), pd.DataFrame),
          isinstance(table.to_pandas(), pd.DataFrame), res.to_pandas().index.name)
    """,
    "table",
]


def _stdout(cell):
    return "".join(o.get("text", "") for o in cell.outputs if o.get("name") == "stdout")


def _data(cell):
    return [o["data"] for o in cell.outputs if o.get("output_type") == "execute_result"]


@pytest.mark.pool
def test_quick_start_in_a_real_kernel(tmp_path, monkeypatch):
    pytest.importorskip("pandas", reason='needs pandas (the extra "test")')
    # the kernel (and the pool's workers it starts) import this checkout's stsim
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [ROOT] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    monkeypatch.delenv("MPLBACKEND", raising=False)       # the kernel's own default
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(textwrap.dedent(c).strip()) for c in CELLS]
    client = nbclient.NotebookClient(nb, kernel_name="python3", timeout=600,
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    run, plot, shown, swept, registered, frames, table = nb.cells
    assert _stdout(run).strip() == "completed"
    # the figure of res.plot() and of res itself: image/png in the notebook
    assert any("image/png" in d for d in _data(plot)), plot.outputs
    (res_data,) = _data(shown)
    assert set(res_data) == {"text/html", "text/plain"}      # the figure's PNG stored once
    assert res_data["text/html"].count("data:image/png;base64,") == 1
    assert res_data["text/plain"].startswith("<stsim.Result completed")
    assert "PROGRESS ['ok', 'ok', 'ok', 'ok']" in _stdout(swept), swept.outputs
    assert "REGISTERED ['ok', 'ok'] ['', '']" in _stdout(registered), registered.outputs
    assert "PANDAS True True step" in _stdout(frames), frames.outputs
    (table_data,) = _data(table)
    assert "<table>" in table_data["text/html"] and "4 rows (4 ok" in table_data["text/plain"]
    # no warning on stderr in any cell (e.g. tqdm's "IProgress not found")
    errs = [o.get("text", "") for c in nb.cells for o in c.outputs if o.get("name") == "stderr"]
    assert not any("Warning" in e for e in errs), errs


# ---- examples/beyond_the_paper.ipynb ----------------------------------------------------
def _code_lines(path, section=None):
    """The stripped lines of the python blocks of ``path`` (of its ``## section``)."""
    text = open(os.path.join(ROOT, path), encoding="utf-8").read()
    if section is not None:
        text = text.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    return {line.strip() for block in re.findall(r"```python\n(.*?)```", text, flags=re.S)
            for line in block.splitlines()}


def _notebook_lines(nb):
    return [line.strip() for c in nb.cells if c.cell_type == "code"
            for line in c.source.splitlines() if line.strip()]


def test_the_notebook_says_only_what_the_guide_and_getting_started_say():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    lines = _notebook_lines(nb)
    for where in (_code_lines("docs/guide.md", "The Python API"),
                  _code_lines("docs/getting-started.md", "Beyond the paper")):
        assert [line for line in lines if line not in where] == []
    words = " ".join(lines)
    for feature in ("attention=", "rank=", "temperature=", "lr={", "freeze=", "callback=",
                    "stsim.Session(", "NearOrthogonal(", "Adam(", "**res.config"):
        assert feature in words, feature
    assert not any(c.get("outputs") for c in nb.cells if c.cell_type == "code")  # committed clean


def test_the_check_sees_a_line_the_guide_does_not_have():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nb.cells[-1].source += "\nres = stsim.run(T=20, q=2, attention='cubic')"
    assert "res = stsim.run(T=20, q=2, attention='cubic')" not in _code_lines(
        "docs/guide.md", "The Python API")
    assert [line for line in _notebook_lines(nb)
            if line not in _code_lines("docs/guide.md", "The Python API")]


def test_the_notebook_runs_in_a_real_kernel(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [ROOT] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    monkeypatch.delenv("MPLBACKEND", raising=False)
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(textwrap.dedent("""
        import inspect
        same = all(np.array_equal(again.params[k], res.params[k]) for k in res.params) and \\
            all(np.array_equal(again.history[k], res.history[k], equal_nan=True)
                for k in res.history)
        print("CHECK", res.status, again.status, same, again.config == res.config,
              s.finished, "temperature" in inspect.signature(stsim.run).parameters)
    """).strip()))
    client = nbclient.NotebookClient(nb, kernel_name="python3", timeout=600,
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    out = "".join(o.get("text", "") for o in nb.cells[-1].outputs if o.get("name") == "stdout")
    assert "CHECK completed completed True True True True" in out, nb.cells[-1].outputs
    session = next(c for c in nb.cells if "stsim.Session(" in c.source)
    printed = "".join(o.get("text", "") for o in session.outputs if o.get("name") == "stdout")
    assert [line.split()[0] for line in printed.splitlines()] == ["50", "100", "150"]
