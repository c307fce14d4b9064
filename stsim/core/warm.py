"""A warm start: ``init=`` given a :class:`~stsim.core.result.Result`, the path of a file
written by ``Result.save`` (or a checkpoint), or a dict of parameters.

The run is a new run (step 0, a fresh optimiser, its own seed) whose parameters start at
the source's. The config records ``init="params:<hash>"``, the first 16 hex digits of the
SHA-256 of the source's parameters (names, shapes and bytes), and the source itself as an
object: ``run(config=res.config)`` asks for it again, and a source with another hash is
refused. The parameters must have this run's names and shapes; which runs that allows
(another T, another encoding) is said by :func:`fit_message` when they do not.
"""
from __future__ import annotations

import hashlib
import os

import numpy as np

from stsim.util.io import load_npz

__all__ = ["StartParams", "start_params", "is_source", "fit_message", "initial_params", "LABEL"]

#: the prefix of the ``init`` a warm start records
LABEL = "params:"


class StartParams:
    """The parameters a run starts from: ``params`` (name -> float array, copied),
    ``name`` (``"params:<hash>"``, what the config records) and ``source`` (what it was
    given as, for messages)."""

    def __init__(self, params: dict, source: str):
        self.params = params
        self.source = source
        h = hashlib.sha256()
        for k in sorted(params):
            v = params[k]
            h.update(f"{k}:{v.shape}:".encode())
            h.update(np.ascontiguousarray(v).tobytes())
        self.name = LABEL + h.hexdigest()[:16]

    def __repr__(self):
        shapes = ", ".join(f"{k} {v.shape}" for k, v in sorted(self.params.items()))
        return f"StartParams({self.name}: {shapes}; from {self.source})"


def is_source(init, names) -> bool:
    """Whether ``init`` is a warm start's source, not one of the initialisation ``names``
    (a string that is not a name, ignoring case, is taken as a path)."""
    if isinstance(init, str):
        return init.lower() not in {n.lower() for n in names} and not init.startswith(LABEL)
    return init is not None     # anything else is checked as a source (start_params)


def start_params(init) -> StartParams:
    """``init`` (a Result, a path, a dict of arrays) as :class:`StartParams`, checked:
    ``ValueError`` naming ``init`` for a file that is not there or is not a result, or
    arrays that are not finite real numbers."""
    if isinstance(init, StartParams):
        return init
    if isinstance(init, (str, os.PathLike)):
        path = os.fspath(init)
        if not os.path.exists(path):
            raise ValueError(f"init must be one of ('zero', 'random', 'random_rows0') or the "
                             f"path of an existing file (a result saved with res.save(), or "
                             f"a checkpoint), got {path!r}: no such name or file")
        if os.path.isdir(path) and os.path.isfile(os.path.join(path, "result.npz")):
            path = os.path.join(path, "result.npz")        # a run's output folder
        try:        # a result's or a checkpoint's parameters: the arrays param/<name>
            arrays, meta = load_npz(path, what="result")
        except ValueError as exc:
            raise ValueError(f"init={path!r}: {exc}") from None
        params = {k[len("param/"):]: v for k, v in arrays.items() if k.startswith("param/")}
        if "config" not in meta or not params:
            raise ValueError(f"init={path!r} holds no run's parameters (not a result saved "
                             f"with res.save(), nor a checkpoint)")
        return _checked(params, f"the file {path!r}")
    if isinstance(init, dict):
        return _checked(init, "the dict of parameters")
    if hasattr(init, "params") and hasattr(init, "config"):
        return _checked(init.params, "the Result")
    raise ValueError(f"init must be one of ('zero', 'random', 'random_rows0'), a Result, "
                     f"the path of a saved result or a dict of parameters; got a "
                     f"{type(init).__name__}")


def _checked(params, source: str) -> StartParams:
    if not isinstance(params, dict) or not params:
        raise ValueError(f"init: {source} holds no parameters")
    out = {}
    for k, v in params.items():
        a = np.asarray(v)
        if not isinstance(k, str) or a.dtype.kind not in "fiu" or a.ndim == 0:
            raise ValueError(f"init: {source}'s entry {k!r} is not an array of real numbers "
                             f"(got {a.dtype} of shape {a.shape})")
        if not np.all(np.isfinite(a)):
            raise ValueError(f"init: {source}'s {k!r} holds non-finite values")
        out[k] = np.array(a, dtype=float)
    return StartParams(out, source)


def fit_message(start: StartParams, template: dict, cfg) -> str | None:
    """``None`` when ``start``'s parameters have the names and shapes of ``template`` (a
    run's initial parameters), else what differs and why, for the config ``cfg``."""
    src, want = start.params, template
    if set(src) != set(want):
        return (f"init: {start.source} has the parameters {sorted(src)}, this run "
                f"{sorted(want)} (another architecture, or a rank given or not)")
    bad = [k for k in sorted(want) if src[k].shape != want[k].shape]
    if not bad:
        return None
    shapes = "; ".join(f"{k} {src[k].shape} there, {want[k].shape} here" for k in bad)
    d_e = getattr(cfg, "d_e", None)
    src_de = None
    if "V" in src and "V" in want and d_e is not None:
        src_de = src["V"].shape[-1] - (want["V"].shape[-1] - d_e)    # D = dim φ + d_e
    why = ""
    if cfg.resolved.encoding is not None and d_e is not None:
        pe, sampler = cfg.pe, getattr(cfg, "sampler", None)
        if pe == "onehot":
            why = (f"; the one-hot encoding has d_e = max(T, T_test) ({d_e} here), so its "
                   f"parameters fit only runs of the same max(T, T_test): a position beyond "
                   f"the source's has no row to start from")
        elif src_de is not None and src_de > 0:
            keeps = {"sphere": "the sphere encoding keeps its width at any T",
                     "slots": f"the slots encoding keeps its width while max(T, T_test) "
                              f"<= d_e"}.get(sampler if pe == "stochastic" else "",
                                             f"{pe} keeps its width at any T")
            why = (f" (D = dim φ + d_e: d_e = {src_de} there, {d_e} here); give "
                   f"d_e={src_de}: {keeps}")
    return f"init: {start.source}'s parameters do not fit this run: {shapes}{why}"


def initial_params(problem, cfg, rng) -> dict:
    """The parameters a run of ``cfg`` starts from: ``problem.init_params(rng)``, or for a
    warm start the source's values in arrays laid out as those (W in Fortran order), after
    :func:`fit_message` found them to fit (``ValueError`` with that message otherwise)."""
    start = cfg.resolved.objects.get("init")
    if start is None:
        return problem.init_params(rng)
    own = problem.cfg
    problem.cfg = cfg.keeping_resolved(init="zero")     # the template: names, shapes, order
    try:
        template = problem.init_params(rng)
    finally:
        problem.cfg = own
    msg = fit_message(start, template, cfg)
    if msg is not None:
        raise ValueError(msg)
    for k, v in template.items():
        v[...] = start.params[k]
    return template
