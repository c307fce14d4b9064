"""Every Python code block of every page under docs/ runs as written: a page's blocks in
order, pasted into a fresh interpreter (``python -`` in an empty folder, as a reader
would), must exit 0, and no run of theirs may diverge (a diverged run returns a result,
so a hook ahead of the blocks, not part of them, records every run's status). The blocks that take long run under ``-m slow`` (with the page's
blocks before them); the doctest blocks (``>>>``) are run as doctests by the tests named
in ``DOCTESTS``. The README's blocks are tests/test_readme.py's."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted((ROOT / "docs").glob("*.md"))
#: (page, block index) -> why it is slow; they run under -m slow only
SLOW = {
    ("attention.md", 0): "four runs of the built-in mechanisms at T = 20 (~12 s idle)",
    ("guide.md", 0): "the T = 200 run with T_test (the default schedule, ~12 s idle)",
    ("attention.md", 2): "the attention study's quick mode with a mechanism of one's own",
}
#: pages whose ``>>>`` blocks are doctests, and the test that runs them
DOCTESTS = {"architecture.md": ("tests/test_architecture.py::test_architecture_doc_examples_run",
                                "tests/test_contract.py")}


def python_blocks(text: str) -> list:
    """The ``python`` fenced blocks of a Markdown page, in order."""
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)


#: ahead of a page's blocks: a run that ends "diverged" makes the interpreter exit 3
HOOK = """\
import atexit as _atexit, os as _os, sys as _sys
from stsim.core import session as _session
_finish, _diverged = _session.Session.finish, []
def _recording_finish(self, *args, **kwargs):
    res = _finish(self, *args, **kwargs)
    if res.status == "diverged":
        _diverged.append(res.message)
    return res
_session.Session.finish = _recording_finish
def _report():
    if _diverged:
        _sys.stderr.write("a run of the page diverged: " + _diverged[0] + "\\n")
        _sys.stderr.flush()
        _os._exit(3)
_atexit.register(_report)
"""


def _run(code: str, cwd) -> subprocess.CompletedProcess:
    code = HOOK + code
    env = dict(os.environ, MPLBACKEND="Agg")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return subprocess.run([sys.executable, "-"], input=code, capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=900)


def _blocks(page):
    blocks = python_blocks(page.read_text(encoding="utf-8"))
    return [(i, b) for i, b in enumerate(blocks) if not b.lstrip().startswith(">>>")]


RUNNABLE = [p for p in PAGES if _blocks(p)]


@pytest.mark.parametrize("page", RUNNABLE, ids=[p.name for p in RUNNABLE])
def test_the_blocks_of_a_page_run_as_pasted(page, tmp_path):
    code = "\n".join(b for i, b in _blocks(page) if (page.name, i) not in SLOW)
    proc = _run(code, tmp_path)
    assert proc.returncode == 0, f"{page.name}:\n{proc.stderr[-3000:]}"


@pytest.mark.slow
@pytest.mark.parametrize("key", sorted(SLOW), ids=[f"{p}-{i}" for p, i in sorted(SLOW)])
def test_the_slow_blocks_run_as_pasted(key, tmp_path):
    page = ROOT / "docs" / key[0]
    code = "\n".join(b for i, b in _blocks(page) if i <= key[1])
    proc = _run(code, tmp_path)
    assert proc.returncode == 0, f"{key}:\n{proc.stderr[-3000:]}"


def test_every_block_is_run_somewhere():
    """Each python block is run here or is a doctest of a page in DOCTESTS; SLOW names
    blocks that exist."""
    for page in PAGES:
        for i, block in enumerate(python_blocks(page.read_text(encoding="utf-8"))):
            if block.lstrip().startswith(">>>"):
                assert page.name in DOCTESTS, f"{page.name} block {i}: a doctest run nowhere"
    for name, i in SLOW:
        assert (name, i) in {(p.name, j) for p in PAGES for j, _ in _blocks(p)}, (name, i)
    assert {p.name for p in RUNNABLE} >= {"getting-started.md", "guide.md", "attention.md",
                                          "model.md", "targets.md"}


def test_a_failing_or_diverging_block_fails_the_page(tmp_path):
    """The check sees seeded faults: the docs' own-mechanism example as it stood (an
    undeclared mechanism at lr 0.2 diverges at step 24, and returns a result), and a
    block that raises."""
    code = ("import numpy as np, stsim\nfrom stsim.core.attention import Attention\n"
            "class S(Attention):\n    name = 'softplus'\n"
            "    def phi(self, l, n=1): return np.logaddexp(0.0, l) / n\n"
            "    def dphi_from_s(self, s, n=1): return -np.expm1(-n * s) / n\n"
            "res = stsim.run(T=20, q=2, attention=S(), lr=0.2, steps=40)\n")
    proc = _run(code, tmp_path)
    assert proc.returncode == 3 and "diverged" in proc.stderr and "step 24" in proc.stderr
    assert _run(code.replace("lr=0.2", "lr=0.01"), tmp_path).returncode == 0
    assert _run(code.replace(", lr=0.2, steps=40", ""), tmp_path).returncode == 1   # no lr
    assert python_blocks("x\n```python\na = 1\n```\n\n```python\nb = 2\n```\n") == \
        ["a = 1\n", "b = 2\n"]
