"""Two things for every test session.

* Subprocesses (the CLI, scripts, pool workers) import the stsim of this checkout even when
  it is not installed: its root is put in front of ``PYTHONPATH`` (setup.cfg's
  ``pythonpath = .`` covers only the pytest process).
* Tests marked ``pool`` need a real process pool (loky, the optional extra "pool", which
  the test extra installs); without loky they are skipped with a reason, rather than run
  on the inline executor that stands in for the pool (where a test that kills its worker
  would kill the test run).
"""
import importlib.util
import os

import pytest

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
os.environ["PYTHONPATH"] = os.pathsep.join(
    [_ROOT] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])


def pytest_collection_modifyitems(config, items):
    if importlib.util.find_spec("loky") is not None:
        return
    skip = pytest.mark.skip(reason='needs loky, the extra "pool": pip install ".[test]"')
    for item in items:
        if item.get_closest_marker("pool") is not None:
            item.add_marker(skip)
