"""README.md reads in order and what it shows works: it starts with exactly the
two set-up commands, whose extras exist and whose run writes what the README says; then
what the tool is and its figure, the Python quick start (run as pasted), then the details.
The links and quoted sections of the README are tests/test_api_docs.py's."""
import configparser
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")

COMMAND_1 = ('python3 -m venv .venv && . .venv/bin/activate && pip install ".[fast]" && '
             'stsim run --T 50 --out runs/demo')
COMMAND_2 = 'python3 -m venv .venv && . .venv/bin/activate && pip install ".[test]" && pytest'
#: the sections in reading order: what it is, the quick start, then the details
ORDER = ["What it is", "Quick start (Python)", "The task and the model", "The Python API",
         "Examples", "Command line", "Timings", "Documentation"]


def setup_commands(text) -> list:
    """The lines of the code block that opens the README, right under its title and one line
    saying what the tool is (``[]`` when something else comes first)."""
    m = re.match(r"# [^\n]+\n\n[^\n`#][^\n]*\n\n```bash\n(.*?)```\n", text, flags=re.S)
    return m.group(1).strip().splitlines() if m else []


def sections(text) -> list:
    """The README's ``##`` headings in order, outside code blocks."""
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    return re.findall(r"^## (.+?)\s*$", text, flags=re.M)


def python_blocks(text, after) -> list:
    """The ``python`` code blocks of the section ``## after``."""
    part = text.split(f"\n## {after}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", part, flags=re.S)


def test_the_readme_starts_with_exactly_the_two_set_up_commands():
    assert setup_commands(README) == [COMMAND_1, COMMAND_2]
    first = README.split("\n")[2]
    assert first.startswith("A NumPy simulator") and len(first) < 140     # one line: what it is


def test_the_readme_reads_in_order():
    assert sections(README) == ORDER
    intro = README.split("\n## What it is\n", 1)[1].split("\n## ", 1)[0]
    assert "![" in intro and "docs/figures/readme/loss.png" in intro    # the picture


def test_the_checks_see_a_seeded_fault():
    assert setup_commands("# stsim\n\nOne line.\n\nMore prose first.\n\n```bash\n" + COMMAND_1
                          + "\n```\n") \
        == []
    swapped = README.replace("## Quick start (Python)", "## Quick start").replace(
        "## What it is", "## Quick start (Python)").replace("## Quick start\n", "## What it is\n")
    assert sections(swapped) != ORDER
    assert setup_commands(README.replace('".[fast]"', '".[fastest]"')) != [COMMAND_1, COMMAND_2]


def test_the_extras_the_commands_and_examples_name_exist():
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    extras = cfg["options.extras_require"]
    for name in re.findall(r'pip install "\.\[(\w+)\]"', README):
        assert name in extras, name
    # the Dask example's note: command 1's extra lacks Dask, command 2's has it
    row = next(line for line in README.splitlines() if line.startswith("| `examples/dask_sweep"))
    assert '".[dask]"' in row and "dask" in extras["dask"]
    assert "dask" not in extras["fast"] and "dask" in extras["test"]


def test_command_1_writes_its_result_and_figure(tmp_path, monkeypatch, capsys):
    """The ``stsim run`` of command 1, from a fresh folder, writes the files the README
    lists and learns as the README's figure shows (0.63% of the initial loss)."""
    import json

    from stsim.cli import main
    monkeypatch.chdir(tmp_path)
    argv = COMMAND_1.split(" && ")[-1].split()
    assert argv[0] == "stsim" and main(argv[1:] + ["--quiet"]) == 0
    summary = json.loads(capsys.readouterr().out)
    for f in ("result.npz", "config.json", "history.csv", "loss.png"):
        assert (tmp_path / "runs" / "demo" / f).is_file(), f
    assert summary["status"] == "completed" and summary["message"].endswith(
        "learned: loss 0.63% of initial")
    assert "to 0.63% of the initial loss in 600" in README
    # the README's figure is this run's (to rounding: the last bits of a matrix product
    # depend on the BLAS build and its thread count)
    import numpy as np
    committed, new = (np.genfromtxt(p, delimiter=",", names=True) for p in (
        ROOT / "docs" / "figures" / "readme" / "history.csv",
        tmp_path / "runs" / "demo" / "history.csv"))
    assert committed.dtype.names == new.dtype.names and len(committed) == len(new) == 101
    for k in committed.dtype.names:
        assert np.allclose(new[k], committed[k], rtol=1e-6, atol=1e-9), k


def test_the_quick_start_runs_as_pasted(tmp_path):
    """The quick start, as one would paste it (a fresh interpreter fed on stdin, so the
    sweep's function lives in ``<stdin>``, as in a notebook)."""
    code, = python_blocks(README, "Quick start (Python)")
    env = dict(os.environ, MPLBACKEND="Agg")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-"], input=code, capture_output=True, text=True,
                          cwd=tmp_path, env=env, timeout=900)
    secs = time.perf_counter() - t0
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.splitlines()
    assert out[1].startswith("status: completed (learned)")
    assert (tmp_path / "run.png").is_file()
    assert out[-7] == "True"                    # the most attended positions are y
    rows = [line.split() for line in out[-6:]]
    assert sorted(r[0] for r in rows) == ["0.5", "0.5", "1.0", "1.0", "2.0", "2.0"]
    print(f"quick start: {secs:.1f} s")


def test_the_api_block_runs(tmp_path, monkeypatch):
    """The Python API block, its one long run (T = 200) made small; the gradient lines as
    written."""
    code, = python_blocks(README, "The Python API")
    first = re.search(r"^res = stsim\.run\(.*$", code, flags=re.M).group(0)
    code = code.replace(first, 'res = stsim.run(T=20, q=3, pe="stochastic", T_test=[250, 300], '
                               'd_e=300, steps=50)')
    monkeypatch.chdir(tmp_path)
    scope = {}
    exec(compile(code, "README.md", "exec"), scope)
    assert scope["dW"].shape == (25, 25) and scope["dV"].shape == (5, 25)
    assert scope["res"].status == "completed" and (tmp_path / "run.npz").is_file()


@pytest.mark.parametrize("stale", ["Theorems 1–2", "Theorems 1-2", '"gd" |'])
def test_no_stale_names(stale):
    assert stale not in README
