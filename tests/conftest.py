"""Six things for every test session.

* Subprocesses (the CLI, scripts, pool workers) import the stsim of this checkout even when
  it is not installed: its root is put in front of ``PYTHONPATH`` (setup.cfg's
  ``pythonpath = .`` covers only the pytest process).
* Tests marked ``pool`` need a real process pool (loky, the optional extra "pool", which
  the test extra installs); without loky they are skipped with a reason, rather than run
  on the inline executor that stands in for the pool (where a test that kills its worker
  would kill the test run).
* ``small_setup``: the small problem of the gradient tests (test_model.py,
  test_attention.py), of sizes ``B, T, q, d`` (imported from here).
* ``RUN`` and ``_same``: the small run of several run-level test files and the
  bit-for-bit comparison of two results: parameters and every history entry (imported
  from here); ``SMALL``, the options of a smaller run that each test gives its ``steps``
  (test_registries.py, test_session.py, test_user_mechanism.py).
* ``shared_reduced_map``: the reduced trajectories of ``check_theorem`` computed once per
  session and shared by the theory tests that ask for it (test_theory.py,
  test_theory_gate.py).
"""
import importlib.util
import os
import signal

import numpy as np
import pytest

B, T, q, d = 5, 9, 3, 4

RUN = dict(T=10, q=2, d=3, batch=16, steps=160, eval_every=20, seed=3)
SMALL = dict(T=8, q=2, batch=16, n_val=16, progress=False)


def _same(a, b):
    """Bit for bit: parameters and every history entry."""
    assert set(a.params) == set(b.params) and set(a.history) == set(b.history)
    for k in a.params:
        np.testing.assert_array_equal(a.params[k], b.params[k], err_msg=k)
    for k in a.history:
        np.testing.assert_array_equal(a.history[k], b.history[k], err_msg=k)


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


def _small(pe, sampler, d_e, seed=0, scale=0.7):
    from stsim.core.families import make_encoding
    from stsim.core.task import sample_batch
    rng = np.random.default_rng(seed)
    enc = make_encoding(pe, T_max=T, d_e=d_e, sampler=sampler, rng=rng)
    batch = sample_batch(rng, B, T, q, d)
    peb = enc.sample(rng, B, T)
    D = d + d_e
    W = scale * rng.standard_normal((D, D))
    V = scale * rng.standard_normal((d, D))
    return rng, batch, peb, W, V


@pytest.fixture
def small_setup():
    """``small_setup(pe, sampler, d_e, seed=0, scale=0.7) -> (rng, batch, peb, W, V)``: the
    encoding ``pe`` (:func:`stsim.core.families.make_encoding`), a batch of the task, its
    encodings and ``W`` (D, D), ``V`` (d, D) with N(0, scale²) entries, of sizes
    ``B, T, q, d``, all drawn in that order from ``seed``."""
    return _small


@pytest.fixture
def default_sigint():
    """Python's default SIGINT handler for the test (a background job inherits SIGINT
    ignored; another test's library may have left it so), the previous one put back
    after."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


@pytest.fixture(scope="session")
def _reduced_runs():
    """The memo of ``shared_reduced_map``: one for the session."""
    return {}


@pytest.fixture
def shared_reduced_map(monkeypatch, _reduced_runs):
    """``check_theorem``'s reduced trajectories (``reduced_gd_scalar`` as
    :mod:`stsim.theory.checks` calls it), each computed once per session and then shared:
    the map is a deterministic function of its arguments, and its encoding enters only
    through ``reduced_n`` — keyed here by the encoding's class and width, so a registered
    copy of a family is still run on its own. The arrays are made read-only (a check that
    wrote into a shared trajectory would raise). Only for tests whose seeded fault, if
    any, lies downstream of the map (not in the map, its gradient or its step); returns
    the memo (key -> trajectory)."""
    import stsim.theory.checks as checks_mod
    real = checks_mod.reduced_gd_scalar

    def once(T, q, d, lr, steps, *, pe="onehot", d_e=None, **kw):
        enc = pe if isinstance(pe, str) else (type(pe), pe.d_e)
        key = (T, q, d, lr, steps, enc, d_e, tuple(sorted(kw.items())))
        if key not in _reduced_runs:
            tr = real(T, q, d, lr, steps, pe=pe, d_e=d_e, **kw)
            for v in vars(tr).values():
                if isinstance(v, np.ndarray):
                    v.flags.writeable = False
            _reduced_runs[key] = tr
        return _reduced_runs[key]
    monkeypatch.setattr(checks_mod, "reduced_gd_scalar", once)
    return _reduced_runs
