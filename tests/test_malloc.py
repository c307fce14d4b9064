"""stsim.util.malloc: the kept-memory setting changes no number and can be switched off."""
import json
import os
import subprocess
import sys

import pytest

CODE = r"""
import json, sys
import numpy as np
import stsim
from stsim.util.malloc import keep_freed_memory
r = stsim.run(T=40, q=3, d=3, pe="stochastic", sampler="slots", d_e=48, batch=32, steps=30,
              lr=1.0, seed=3, eval_every=10, n_val=64, prefetch=False)
s = stsim.run(T=12, q=2, d=2, pe="stochastic", sampler="sphere", d_e=16, batch=16, steps=20,
              lr=1.0, seed=4, eval_every=10, n_val=32, prefetch=False)
print(json.dumps({"applied": keep_freed_memory(),
                  "W": r.params["W"].tobytes().hex(), "V": s.params["V"].tobytes().hex()}))
"""


def _run(env_value):
    env = dict(os.environ, STSIM_MALLOC=env_value, OMP_NUM_THREADS="1",
               OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", CODE], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_kept_memory_changes_no_number():
    on, off = _run("1"), _run("0")
    assert off["applied"] is False
    if sys.platform.startswith("linux"):
        assert on["applied"] is True          # glibc: mallopt exists
    assert on["W"] == off["W"] and on["V"] == off["V"]


def test_bad_setting_names_the_variable(monkeypatch):
    from stsim.util import malloc
    monkeypatch.setattr(malloc, "_state", {"done": False, "applied": False})
    monkeypatch.setenv("STSIM_MALLOC", "yes")
    with pytest.raises(ValueError, match="STSIM_MALLOC must be 0 or 1"):
        malloc.keep_freed_memory()
