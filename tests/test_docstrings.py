"""The docstring examples of every stsim module run as tests (they are documentation: if
one goes stale, this fails)."""
import doctest
import importlib
import pkgutil

import pytest

import stsim

MODULES = sorted(m.name for m in pkgutil.walk_packages(stsim.__path__, "stsim.")
                 if not m.name.endswith("__main__"))


def test_every_module_is_found():
    assert {"stsim.core.run", "stsim.theory.reduced", "stsim.sweeps", "stsim.util.validate"} <= \
        set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    mod = importlib.import_module(name)
    res = doctest.testmod(mod, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert res.failed == 0, f"{res.failed} of {res.attempted} docstring examples fail in {name}"
