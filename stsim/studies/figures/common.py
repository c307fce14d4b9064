"""Shared machinery of the figure experiments: settings, the run pool, CSV/JSON output,
seed bands and claim checks.

Every figure module (``fig1`` … ``fig5``, ``beyond``) exposes

* ``NAME`` and ``SETTINGS = {"quick": {...}, "full": {...}}`` — the chosen values of the
  parameters the paper does not give (d, d_e, lr, steps, ...); each key can be overridden
  (command line: ``stsim figures --set <figure>.key=value``);
* ``jobs(s) -> list[Job]`` — the training runs it needs (figures that share runs return
  jobs with the same name and options; the driver runs them once);
* ``analyse(s, results, out, mode) -> dict`` — writes ``<NAME>.png``, ``<NAME>.csv``
  (every history, long format) and ``<NAME>.json`` (resolved configs, measured numbers,
  checks of the paper's claims) and returns the summary.

Training goes only through :func:`stsim.run`; a finished run is cached as
``<cache>/<job name>.npz`` and reused when its resolved config is unchanged, so figures
can be re-drawn without re-training and a long run that is interrupted keeps what finished.
"""
from __future__ import annotations

import concurrent.futures as cf
import os
import sys
import time
from dataclasses import dataclass, field

import numpy as np

from stsim.util.io import write_csv, write_json
from stsim.core.config import Config
from stsim.core.result import Result
from stsim.core.run import run
from stsim.sweep.pool import OneThreadProcessPool

__all__ = ["Job", "run_jobs", "resolve_settings", "write_histories_csv", "seed_band", "n_seeds",
           "check", "finish", "MODES", "peak_rss_mb"]

MODES = ("quick", "full")
MAX_WORKERS = 2


@dataclass(frozen=True)
class Job:
    """One call ``stsim.run(**options)``; ``name`` is unique and names the cache file."""

    name: str
    options: dict = field(hash=False)

    def config(self) -> dict:
        return Config.from_options(**self.options).to_dict()


def resolve_settings(defaults: dict, overrides: dict | None = None) -> dict:
    """Copy ``defaults`` and apply ``overrides`` (unknown keys raise ``ValueError``)."""
    s = dict(defaults)
    for k, v in (overrides or {}).items():
        if k not in s:
            raise ValueError(f"unknown setting {k!r}; allowed: {sorted(s)}")
        s[k] = v
    return s


def peak_rss_mb() -> float:
    """Peak resident memory of this process in MB (``ru_maxrss``; Linux reports KB)."""
    import resource
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return r / 1024.0 if sys.platform != "darwin" else r / 2**20


# --------------------------------------------------------------------------------------
# running
# --------------------------------------------------------------------------------------
def _cache_path(cache, name):
    return os.path.join(cache, name.replace("/", os.sep) + ".npz")


def _run_one(job: Job, cache: str | None):
    """Worker: load the cached result if its config matches, else train and save it.
    Returns ``(name, path or Result, peak RSS MB, reused)``."""
    path = _cache_path(cache, job.name) if cache else None
    if path and os.path.exists(path):
        try:
            old = Result.load(path)
            if old.config == job.config() and old.success:
                return job.name, path, peak_rss_mb(), True
        except (OSError, ValueError, KeyError):
            pass
    res = run(**job.options)
    res.info["peak_rss_mb"] = peak_rss_mb()
    if path:
        res.save(path)
        return job.name, path, res.info["peak_rss_mb"], False
    return job.name, res, res.info["peak_rss_mb"], False


def _cost(job):
    """Rough cost of a run for load balancing: steps × batch × T × (a dense sphere PE costs
    about d_e/8 times a one-hot one)."""
    o = job.options
    dense = o.get("sampler") == "sphere"
    return o.get("steps", 1000) * o.get("batch", 256) * o.get("T", 200) * \
        (max(1.0, (o.get("d_e") or 64) / 8) if dense else 1.0)


def run_jobs(jobs, *, workers: int = 1, cache: str | None = None, log=None,
             on_done=None, executor=None) -> dict:
    """Run ``jobs`` (deduplicated by name) and return ``{name: Result}``.

    Parameters
    ----------
    workers : processes (at most ``MAX_WORKERS``); ``1`` runs in this process.
    cache : folder for ``<name>.npz`` results (reused when the config matches).
    log : callable(str), optional — one line per finished run.
    on_done : callable(results_so_far), optional — called after every finished run
        (the driver uses it to draw each figure as soon as its runs are in).
    executor : a ``concurrent.futures.Executor`` to use instead of a process pool.
    """
    unique: dict[str, Job] = {}
    for j in jobs:
        if j.name in unique and unique[j.name].options != j.options:
            raise ValueError(f"two jobs named {j.name!r} with different options")
        unique[j.name] = j
    order = sorted(unique.values(), key=_cost, reverse=True)   # longest first
    results: dict[str, Result] = {}
    t0 = time.perf_counter()

    def take(name, obj, rss, reused):
        res = Result.load(obj) if isinstance(obj, str) else obj
        res.info.setdefault("peak_rss_mb", rss)
        results[name] = res
        if log:
            log(f"[{time.perf_counter() - t0:7.1f}s] {'reused' if reused else 'done  '} "
                f"{name}: {res.message}, final loss {res.final('loss'):.4g}, "
                f"{res.info.get('wall_time_s', float('nan')):.1f}s, peak {rss:.0f} MB")
        if on_done:
            on_done(results)

    workers = max(1, min(int(workers), MAX_WORKERS))
    if executor is None and workers == 1:
        for j in order:
            take(*_run_one(j, cache))
        return results
    own = executor is None
    ex = executor or OneThreadProcessPool(workers)
    try:
        futs = [ex.submit(_run_one, j, cache) for j in order]
        for f in cf.as_completed(futs):
            take(*f.result())
    finally:
        if own:
            ex.shutdown()
    return results


# --------------------------------------------------------------------------------------
# output
# --------------------------------------------------------------------------------------
def write_histories_csv(path, results: dict) -> str:
    """All histories in long format: ``run, seed, <history keys…>`` one row per record."""
    keys = []
    for res in results.values():
        keys += [k for k in res.history if k not in keys]
    rows = []
    for name, res in results.items():
        n = len(res.history["step"])
        cols = [res.history.get(k, np.full(n, np.nan)) for k in keys]
        rows += [[name, res.config["seed"]] + [float(c[i]) for c in cols] for i in range(n)]
    return write_csv(path, ["run", "seed"] + keys, rows, float_format=".6g")


def seed_band(ax, results, key, *, label=None, color=None, ls="-", lw=1.6, transform=None,
              upto=None, tail=None):
    """Plot the seed mean of ``history[key]`` with a min–max band over seeds (records at
    steps ``<= upto`` if given; only the last fraction ``tail`` of the common steps, i.e.
    steps ``>= (1 - tail) ·`` the last one, if given).

    All results must share the ``step`` grid. Returns ``(step, mean)``.
    """
    n = min(len(r.history["step"]) for r in results)   # a diverged run stops early
    if upto is not None:
        n = min(n, int(np.searchsorted(results[0].history["step"], upto, "right")))
    steps = results[0].history["step"][:n]
    Y = np.array([r.history[key][:n] for r in results], dtype=float)
    if tail is not None:
        keep = steps >= (1 - tail) * steps[-1]
        steps, Y = steps[keep], Y[:, keep]
    if transform is not None:
        with np.errstate(divide="ignore"):
            Y = transform(Y)
    mean = Y.mean(axis=0)
    line, = ax.plot(steps, mean, ls=ls, lw=lw, color=color, label=label)
    if len(results) > 1:
        ax.fill_between(steps, Y.min(axis=0), Y.max(axis=0), color=line.get_color(),
                        alpha=0.2, lw=0)
    return steps, mean


def n_seeds(seeds) -> str:
    """``"1 seed"`` / ``"3 seeds"`` for a list of seeds (figure titles)."""
    return f"{len(seeds)} seed{'s' * (len(seeds) != 1)}"


def check(claim: str, measured, op: str, threshold, note: str = "") -> dict:
    """A claim with its measured value: ``ok = measured <op> threshold``."""
    m, t = float(measured), float(threshold)
    ok = {"<=": m <= t, ">=": m >= t, "<": m < t, ">": m > t}[op]
    return {"claim": claim, "measured": m, "op": op, "threshold": t, "ok": bool(ok),
            "note": note}


def finish(name, out, s, mode, results: dict, checks: list, measured: dict,
           extra: dict | None = None) -> dict:
    """Write ``<name>.csv`` and ``<name>.json`` (settings, the resolved config of every run,
    wall times, peak memory, measured numbers, checks) and return the summary."""
    os.makedirs(out, exist_ok=True)
    write_histories_csv(os.path.join(out, f"{name}.csv"), results)
    summary = {
        "figure": name, "mode": mode, "settings": s, "measured": measured, "checks": checks,
        "runs": {k: {"config": r.config, "status": r.status, "message": r.message,
                     "wall_time_s": r.info.get("wall_time_s"),
                     "peak_rss_mb": r.info.get("peak_rss_mb")} for k, r in results.items()},
        "total_train_time_s": float(sum(r.info.get("wall_time_s", 0.0)
                                        for r in results.values())),
    }
    if extra:
        summary.update(extra)
    write_json(os.path.join(out, f"{name}.json"), summary)
    return summary
