"""A target of one's own checked once, before any work (:func:`check_target`, called by
:func:`stsim.core.targets.resolve_target`): each method's result against the shape and
values the run will need, a failure naming the method."""
from __future__ import annotations

import math

import numpy as np

from stsim.core.task import draw_subsets

__all__ = ["check_target"]


def _bad(t, method, what) -> ValueError:
    return ValueError(f"target: {type(t).__name__}.{method} {what}")


def _dim(t, method, d) -> int:
    n = getattr(t, method)(d)
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise _bad(t, f"{method}({d})", f"must be an integer >= 1, got {n!r}")
    return int(n)


def _array(t, method, a, shape) -> np.ndarray:
    a = np.asarray(a)
    if a.dtype.kind not in "fiu":
        raise _bad(t, method, f"must return real numbers, got dtype {a.dtype}")
    if a.shape != shape:
        raise _bad(t, method, f"must return an array of shape {shape}, got {a.shape}")
    if not np.all(np.isfinite(a)):
        raise _bad(t, method, "returned values that are not finite (NaN or inf)")
    return a


def check_target(t, d: int, q: int, T: int) -> None:
    """Check a target of one's own once, before any work (``ValueError`` naming the method
    and what it returned): ``dim``, ``feature_dim``, ``effective_dim`` integers ≥ 1;
    ``features`` and ``value`` on a probe batch (2 samples of ``T`` tokens, a generator
    seeded 0) of shapes ``(2, T, feature_dim)`` and ``(2, dim)``, real and finite;
    ``fourth_moments`` None or two finite numbers ≥ 0; ``exact`` (when it has one) the
    readout's blocks of their shapes."""
    m, n = _dim(t, "feature_dim", d), _dim(t, "dim", d)
    _dim(t, "effective_dim", d)
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((2, T, d)), draw_subsets(rng, 2, T, q)
    _array(t, "features(X)", t.features(X), (2, T, m))
    _array(t, "value(X, y)", t.value(X, y), (2, n))
    fm = t.fourth_moments(d)
    if fm is not None:
        try:
            ok = len(fm) == 2 and all(math.isfinite(float(v)) and float(v) >= 0 for v in fm)
        except (TypeError, ValueError):
            ok = False
        if not ok:
            raise _bad(t, f"fourth_moments({d})", f"must return None or two finite numbers "
                                                  f">= 0 (M_V, M_4), got {fm!r}")
    try:
        ex = t.exact(d)
    except NotImplementedError:
        return
    if not isinstance(ex, dict) or "V_x" not in ex:
        raise _bad(t, f"exact({d})", f"must return a dict with 'V_x', got {ex!r}")
    _array(t, f"exact({d})['V_x']", ex["V_x"], (n, m))
    if not t.linear_readout:
        _array(t, f"exact({d})['b']", ex.get("b", ()), (n,))
        _array(t, f"exact({d})['Q']", ex.get("Q", ()), (n, m, m))
