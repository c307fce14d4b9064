"""README.md is a map that reads in order and what it shows works: it starts with exactly
the two set-up commands, whose extras exist and whose run writes what the README says; then
what the tool is and its figure, the Python quick start (run as pasted), a table of tasks,
a command per paper figure (each parsed, the single run's settings the study's), the
documents; at most 150 lines, and its list of ``stsim.run`` keywords is the signature's.
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
ORDER = ["What it is", "Quick start (Python)", "I want to …", "The paper's figures",
         "Documentation"]
MAX_LINES = 150


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
    # the Dask example's note (the guide's table of examples): command 1's extra lacks
    # Dask, command 2's has it
    guide = (ROOT / "docs" / "guide.md").read_text(encoding="utf-8")
    row = next(line for line in guide.splitlines() if line.startswith("| `examples/dask_sweep"))
    assert '".[dask]"' in row and "dask" in extras["dask"]
    assert "dask" not in extras["fast"] and "dask" in extras["test"]


def test_command_1_writes_its_result_and_figure(tmp_path, monkeypatch, capsys):
    """The ``stsim run`` of command 1, from a fresh folder, writes the files the README
    lists and learns as the README's figure shows (0.96% of the initial loss, where the stop rule ends it)."""
    import json

    from stsim.cli import main
    monkeypatch.chdir(tmp_path)
    argv = COMMAND_1.split(" && ")[-1].split()
    assert argv[0] == "stsim" and main(argv[1:] + ["--quiet"]) == 0
    summary = json.loads(capsys.readouterr().out)
    for f in ("result.npz", "config.json", "history.csv", "loss.png"):
        assert (tmp_path / "runs" / "demo" / f).is_file(), f
    assert summary["status"] == "completed" and summary["message"].endswith(
        "learned: loss 0.96% of initial") and "the stop rule held" in summary["message"]
    assert "to 0.96% of the initial loss in 456" in " ".join(README.split())
    # the README's figure is this run's (to rounding: the last bits of a matrix product
    # depend on the BLAS build and its thread count)
    import numpy as np
    committed, new = (np.genfromtxt(p, delimiter=",", names=True) for p in (
        ROOT / "docs" / "figures" / "readme" / "history.csv",
        tmp_path / "runs" / "demo" / "history.csv"))
    assert committed.dtype.names == new.dtype.names and len(committed) == len(new) == 77
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
    assert out[-8] == "True"                    # the most attended positions are y
    assert out[-7].startswith("status: completed (learned)") and "target variance" in out[-7]
    rows = [line.split() for line in out[-6:]]
    assert sorted(r[0] for r in rows) == ["0.5", "0.5", "1.0", "1.0", "2.0", "2.0"]
    print(f"quick start: {secs:.1f} s")


def test_the_readme_is_a_map_of_at_most_150_lines():
    assert README.count("\n") <= MAX_LINES
    table = README.split("\n## I want to …\n", 1)[1].split("\n## ", 1)[0]
    rows = [r for r in table.splitlines() if r.startswith("| ") and "---" not in r][1:]
    assert len(rows) >= 10 and all(r.count(" | ") == 2 for r in rows)
    assert 'target="variance"' in table


def run_keywords(text) -> list:
    """The keywords the README's paragraph "``stsim.run``'s keywords" lists, in order."""
    para = text.split("**`stsim.run`'s keywords**", 1)[1].split("\n\n", 1)[0]
    return re.findall(r"`(\w+)`", para)


def test_the_keyword_list_is_the_signature_of_run():
    """The list is run's own keywords then Config's fields, in the signature's order: a
    field added to Config (or renamed) fails here until the README names it."""
    import dataclasses
    import inspect

    import stsim
    fields = [f.name for f in dataclasses.fields(stsim.Config)]
    own = [p for p in inspect.signature(stsim.run).parameters if p not in fields]
    assert run_keywords(README) == own + fields
    assert "target" in fields and "n_train" in fields and "checkpoint" in own
    stale = README.replace("`n_train`, ", "")
    assert run_keywords(stale) != own + fields


def figure_commands(text) -> dict:
    """``{figN: argv}`` of the lines of "The paper's figures" that reproduce one figure."""
    part = text.split("\n## The paper's figures\n", 1)[1].split("\n## ", 1)[0]
    out = {}
    for line in part.splitlines():
        m = re.match(r"\s+stsim (figures .*?)\s+# Fig\. (\d)", line)
        if m:
            out[f"fig{m.group(2)}"] = m.group(1).split()
    return out


def test_one_command_per_paper_figure_at_the_full_preset():
    from stsim.cli import build_parser
    cmds = figure_commands(README)
    assert sorted(cmds) == ["fig1", "fig2", "fig3", "fig4", "fig5"]
    for fig, argv in cmds.items():
        args = build_parser(argv[0]).parse_args(argv[1:])
        assert args.mode == "full" and args.preset_only == fig and args.out == f"runs/{fig}", argv


def test_the_single_fig2_run_has_the_studys_settings():
    """The one-line ``stsim run`` of Fig. 2 is the full preset's fig2 run (seed 0, the
    stochastic encoding): every setting the preset names."""
    import stsim
    from stsim.cli import build_parser
    from stsim.studies.figures import study
    line = next(line for line in README.splitlines() if line.strip().startswith("stsim run "))
    args = build_parser("run").parse_args(line.split()[2:])
    cfg = stsim.Config.from_options(**{k: getattr(args, k) for k in (
        f.name for f in __import__("dataclasses").fields(stsim.Config))})
    preset = study.PRESETS["full"]["fig2"]
    for key in ("T", "q", "d", "d_e", "pe", "sampler", "batch", "init", "model", "query",
                "optimizer", "lr", "steps", "n_val"):
        assert getattr(cfg, key) == preset[key], key
    assert list(cfg.T_test) == preset["T_test"] and list(cfg.q_test) == preset["q_test"]
    assert cfg.seed == 0 and cfg.lr_decay == "none" and not cfg.freeze


@pytest.mark.parametrize("stale", ["Theorems 1–2", "Theorems 1-2", '"gd" |'])
def test_no_stale_names(stale):
    assert stale not in README
