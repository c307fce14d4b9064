"""The grid of a sweep: points, replicate seeds, and the checks made before any work."""
from __future__ import annotations

import inspect
import itertools
import json
import math
import numbers

import numpy as np

from stsim.util.io import to_jsonable
from stsim.util.validate import check_int

__all__ = ["expand_grid", "spawn_seeds", "point_key", "check_signature", "BOOKKEEPING"]

BOOKKEEPING = ("seed_index", "seed", "status", "error")
_SCALARS = (str, bool, numbers.Integral, numbers.Real, type(None))


def spawn_seeds(n: int, root_seed: int = 0) -> list:
    """Integer seeds of the ``n`` replicates: ``SeedSequence(root_seed).spawn(n)``, each
    child reduced to one uint32 word (``generate_state(1)[0]``)."""
    n = check_int("seeds", n, 1)
    root_seed = check_int("root_seed", root_seed, 0)
    return [int(c.generate_state(1)[0]) for c in np.random.SeedSequence(root_seed).spawn(n)]


def expand_grid(grid) -> list:
    """The list of points (dicts) of ``grid``; ``ValueError`` if it is empty or malformed."""
    if isinstance(grid, dict):
        if not grid:
            raise ValueError("grid is empty: give at least one parameter with values")
        names, values = [], []
        for name, vals in grid.items():
            if isinstance(vals, (str, bytes)) or not hasattr(vals, "__iter__"):
                vals = [vals]
            vals = list(vals)
            if not vals:
                raise ValueError(f"grid is empty: parameter {name!r} has no values")
            names.append(name)
            values.append(vals)
        points = [dict(zip(names, combo)) for combo in itertools.product(*values)]
    else:
        try:
            points = [p for p in grid]
        except TypeError:
            raise ValueError(f"grid must be a dict of value lists or a sequence of dicts, "
                             f"got {type(grid).__name__}") from None
        if not points:
            raise ValueError("grid is empty: the sequence of points has no element")
        for p in points:
            if not isinstance(p, dict):
                raise ValueError(f"every grid point must be a dict, got {p!r}")
        points = [dict(p) for p in points]
    seen = set()
    for p in points:
        for k, v in p.items():
            if not isinstance(k, str) or not k:
                raise ValueError(f"parameter names must be non-empty strings, got {k!r}")
            if k in BOOKKEEPING:
                raise ValueError(f"parameter name {k!r} is reserved by the sweep (it is a table "
                                 f"column; seeds come from the 'seeds' argument)")
            v = to_jsonable(v)
            if not isinstance(v, _SCALARS) or (isinstance(v, float) and not math.isfinite(v)):
                raise ValueError(f"grid value {k}={p[k]!r} must be a finite scalar "
                                 f"(int, float, str, bool or None)")
            p[k] = v
        key = point_key(p)
        if key in seen:
            raise ValueError(f"grid point {p} appears twice")
        seen.add(key)
    return points


def point_key(point) -> str:
    """A canonical string identifying a grid point (its items, sorted, as JSON)."""
    return json.dumps(point, sort_keys=True)


def check_signature(fn, points):
    """``ValueError`` before any work if a point names a parameter ``fn`` does not take,
    or misses a required one (``seed`` is supplied by the sweep)."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):  # builtins without a signature: nothing to check
        return
    params = sig.parameters
    if any(p.kind == p.VAR_KEYWORD for p in params.values()):
        return
    accepted = {n for n, p in params.items() if p.kind in (p.POSITIONAL_OR_KEYWORD,
                                                          p.KEYWORD_ONLY)}
    if "seed" not in accepted:
        raise ValueError(f"fn {getattr(fn, '__name__', fn)!r} must accept a 'seed' keyword")
    required = {n for n, p in params.items() if p.default is p.empty
                and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)} - {"seed"}
    for point in points:
        unknown = sorted(set(point) - accepted)
        if unknown:
            raise ValueError(f"unknown parameter(s) {unknown} in grid point {point}; "
                             f"{getattr(fn, '__name__', 'fn')} accepts {sorted(accepted - {'seed'})}")
        missing = sorted(required - set(point))
        if missing:
            raise ValueError(f"grid point {point} lacks required parameter(s) {missing}")
