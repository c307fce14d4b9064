"""Parameter sweeps on any ``concurrent.futures.Executor``, resumable, into one CSV table.

>>> from stsim.sweep import sweep, InlineExecutor
>>> def f(a, b, seed):                       # module-level (picklable) for process pools
...     return {"s": a + b}
>>> res = sweep(f, {"a": [1, 2], "b": [10]}, seeds=2, executor=InlineExecutor())
>>> [(r["a"], r["seed_index"], r["s"]) for r in res.rows]
[(1, 0, 11), (1, 1, 11), (2, 0, 12), (2, 1, 12)]

Design
------
* **Grid** — a dict ``{name: values}`` (Cartesian product, the last name varying
  fastest) or a sequence of dicts (explicit points). Values are scalars (int, float,
  str, bool, None): they are written to the CSV and identify the point.
* **Seeds** — ``SeedSequence(root_seed).spawn(seeds)``: replicate ``r`` of *every*
  point gets the integer ``seed = child_r.generate_state(1)[0]`` (paired replicates:
  common random numbers across the grid). It depends only on ``(root_seed, r)``, never
  on the executor, the worker count, the completion order or which points ran before,
  so the table does not either. ``fn(**point, seed=seed)`` is called once per
  (point, replicate).
* **Table** — one row per (point, replicate): the parameters, ``seed_index``, ``seed``,
  ``status`` (``ok`` | ``error``), ``error`` (``"Type: message"``) and the entries of the
  dict returned by ``fn`` (a scalar return becomes the column ``value``). Rows are sorted
  by parameter values, then ``seed_index``; columns are the grid's parameters, the
  bookkeeping columns, then result names sorted. No timing column, so two executors give
  byte-identical tables; timings are kept in the journal.
* **Resumable** — every finished row is appended (one JSON line, flushed and fsync'ed) to
  the journal ``<out>.journal.jsonl`` as soon as it arrives, and the CSV ``out`` is
  rewritten atomically from the journal. A rerun reads the journal and skips the
  (point, replicate) pairs already finished (``ok``); rows with ``status="error"`` are
  tried again unless ``retry_failed=False``. An interrupted sweep loses no finished row
  (at most a torn last journal line, which is ignored). Several sweeps may share one
  ``out`` from threads of one process (journal and table are written under a per-file
  lock, and the table is rebuilt from the whole journal); separate processes need
  separate ``out`` files.
* **Bad input** — an empty grid, a point with a parameter ``fn`` does not take (unless
  it takes ``**kwargs``), a missing required parameter, a non-scalar value, duplicate
  points, or a point rejected by ``validate(point)`` raise ``ValueError`` before any work
  starts. An exception inside ``fn`` is recorded in the row and the sweep continues.
"""
from __future__ import annotations

import concurrent.futures as cf
import csv
import inspect
import itertools
import json
import math
import multiprocessing as mp
import numbers
import os
import pickle
import threading
import time
import traceback
from dataclasses import dataclass, field

import numpy as np

from stsim.util.io import atomic_write, to_jsonable
from stsim.util.validate import check_int

__all__ = ["sweep", "SweepResult", "InlineExecutor", "OneThreadProcessPool", "expand_grid",
           "spawn_seeds", "read_table",
           "BOOKKEEPING"]

BOOKKEEPING = ("seed_index", "seed", "status", "error")
_SCALARS = (str, bool, numbers.Integral, numbers.Real, type(None))


class InlineExecutor(cf.Executor):
    """Run every task in the calling thread at ``submit`` (debugging, tests, lambdas)."""

    def submit(self, fn, /, *args, **kwargs):
        fut = cf.Future()
        try:
            fut.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # noqa: BLE001 - delivered through the future
            fut.set_exception(exc)
        return fut


THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


class OneThreadProcessPool(cf.ProcessPoolExecutor):
    """A spawned process pool whose workers all run single-threaded BLAS.

    Two workers × default BLAS threads oversubscribe 2 cores, and a trial's last bits
    depend on the BLAS thread count, so the table would depend on which worker ran it.
    A spawned worker reads the variables when it imports numpy, and workers start on
    demand, so the variables stay set in this process until :meth:`shutdown` (numpy is
    already loaded here: they do not change this process)."""

    def __init__(self, workers):
        self._saved = {k: os.environ.get(k) for k in THREAD_VARS}
        for k, v in self._saved.items():
            if v is None:
                os.environ[k] = "1"
        super().__init__(workers, mp_context=mp.get_context("spawn"))

    def shutdown(self, *args, **kwargs):
        try:
            super().shutdown(*args, **kwargs)
        finally:
            for k, v in self._saved.items():
                if v is None:
                    os.environ.pop(k, None)


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
        key = _point_key(p)
        if key in seen:
            raise ValueError(f"grid point {p} appears twice")
        seen.add(key)
    return points


def _point_key(point) -> str:
    return json.dumps(point, sort_keys=True)


def _check_signature(fn, points):
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


def _call(fn, point, seed):
    """Worker side: ``fn(**point, seed=seed)`` -> (status, result, error, traceback, seconds)."""
    t0 = time.perf_counter()
    try:
        out = fn(**point, seed=seed)
        if not isinstance(out, dict):
            out = {"value": out}
        out = {str(k): to_jsonable(v) for k, v in out.items()}
        return "ok", out, "", "", time.perf_counter() - t0
    except Exception as exc:  # noqa: BLE001 - recorded in the table, the sweep goes on
        return ("error", {}, f"{type(exc).__name__}: {exc}", traceback.format_exc(),
                time.perf_counter() - t0)


@dataclass
class SweepResult:
    """The table of a sweep.

    Attributes
    ----------
    rows : list of dict — every row of the table (all rows of the journal, including
        those of earlier sweeps on the same ``out``), in table order.
    columns : list of str — CSV column order.
    path, journal : str or None — the CSV and its journal.
    n_run, n_skipped, n_failed : rows computed now, found finished, and failed now.
    """

    rows: list
    columns: list
    path: str | None = None
    journal: str | None = None
    n_run: int = 0
    n_skipped: int = 0
    n_failed: int = 0
    times: dict = field(default_factory=dict)

    def select(self, **params) -> list:
        """Rows whose parameters equal ``params`` (e.g. ``select(width=8, T=16)``)."""
        return [r for r in self.rows if all(r.get(k) == v for k, v in params.items())]

    def column(self, name, **params) -> list:
        return [r.get(name) for r in self.select(**params)]


_LOCKS: dict = {}
_LOCKS_GUARD = threading.Lock()


def _lock_for(path):
    """One lock per journal file, shared by the threads of this process."""
    with _LOCKS_GUARD:
        return _LOCKS.setdefault(os.path.abspath(path), threading.Lock())


def _journal_path(out):
    return os.fspath(out) + ".journal.jsonl"


def _load_journal(path) -> dict:
    """``{(point_key, seed_index): record}``, the last record of a pair winning; a torn
    (unparsable) line, as left by a crash during a write, is skipped."""
    recs = {}
    if path is None or not os.path.exists(path):
        return recs
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            try:
                rec = json.loads(line)
                recs[(_point_key(rec["point"]), int(rec["seed_index"]))] = rec
            except (ValueError, KeyError, TypeError):
                continue
    return recs


def _append_journal(path, rec):
    with open(path, "a+", encoding="utf-8") as fh:
        fh.seek(0, os.SEEK_END)
        if fh.tell() > 0:
            fh.seek(fh.tell() - 1)
            if fh.read(1) != "\n":  # a torn line from a crash: end it, it will be skipped
                fh.write("\n")
        fh.write(json.dumps(rec, sort_keys=True) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def _sort_value(v):
    if v is None:
        return (0, 0.0, "")
    if isinstance(v, (bool, numbers.Real)):
        return (1, float(v), "")
    return (2, 0.0, str(v))


def _table(records, param_order):
    names = list(param_order)
    extra = sorted({k for r in records for k in r["point"]} - set(names))
    names += extra
    results = sorted({k for r in records for k in r["result"]})
    rows = []
    for r in records:
        row = {k: r["point"].get(k) for k in names}
        row.update(seed_index=r["seed_index"], seed=r["seed"], status=r["status"],
                   error=r["error"])
        for k in results:
            row[k] = r["result"].get(k)
        rows.append(row)
    rows.sort(key=lambda row: tuple(_sort_value(row[k]) for k in names) + (row["seed_index"],))
    return rows, names + list(BOOKKEEPING) + results


def _cell(v):
    if v is None:
        return ""
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, (list, dict)):
        return json.dumps(v)
    return str(v)


def _write_csv(path, rows, columns):
    with atomic_write(path, "w") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(columns)
        for row in rows:
            w.writerow([_cell(row.get(c)) for c in columns])


def _parse_cell(text):
    if text == "":
        return None
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    if text in ("True", "False"):
        return text == "True"
    return text


def read_table(path) -> list:
    """Read a sweep CSV back: a list of dicts with numbers parsed (empty cell -> None)."""
    with open(path, newline="", encoding="utf-8") as fh:
        return [{k: _parse_cell(v) for k, v in row.items()} for row in csv.DictReader(fh)]


def sweep(fn, grid, *, seeds=1, root_seed=0, executor=None, out=None, max_workers=2,
          validate=None, retry_failed=True, progress=None) -> SweepResult:
    """Run ``fn(**point, seed=seed)`` for every grid point and replicate; collect a table.

    Parameters
    ----------
    fn : callable(**point, seed) -> dict of scalars (or a scalar)
        Must be picklable (a module-level function) for process executors.
    grid : dict ``{name: values}`` (Cartesian product) or sequence of dicts.
    seeds : int >= 1 — replicates per point (seeds from ``SeedSequence.spawn``).
    root_seed : int >= 0 — entropy of the root ``SeedSequence``.
    executor : concurrent.futures.Executor, optional
        Any executor (``ProcessPoolExecutor``, ``distributed.Client.get_executor()``,
        :class:`InlineExecutor`, ...). Default: a ``ProcessPoolExecutor`` with
        ``min(max_workers, os.cpu_count())`` workers, created and shut down here. A
        passed executor is left running.
    out : path, optional — the CSV table; its journal is ``<out>.journal.jsonl``. Without
        ``out`` nothing is written and nothing is resumed.
    max_workers : int >= 1 — workers of the default executor.
    validate : callable(point), optional — called on every point before any work; it
        raises ``ValueError`` for bad points. Default: ``fn.validate`` if present.
    retry_failed : bool — rerun rows recorded as errors (default) or keep them.
    progress : callable(done, total, row), optional — after each finished row.

    Returns
    -------
    SweepResult

    Raises
    ------
    ValueError — before any work, for the bad inputs listed in the module docstring.
    """
    points = expand_grid(grid)
    seed_values = spawn_seeds(seeds, root_seed)
    max_workers = check_int("max_workers", max_workers, 1)
    _check_signature(fn, points)
    validate = validate if validate is not None else getattr(fn, "validate", None)
    if validate is not None:
        for p in points:
            try:
                validate(p)
            except ValueError as exc:
                raise ValueError(f"invalid grid point {p}: {exc}") from None
    own = executor is None
    if own:
        try:
            pickle.dumps(fn)
        except Exception as exc:  # noqa: BLE001
            raise ValueError(f"fn must be picklable for the default process pool "
                             f"(define it at module level, or pass executor=InlineExecutor()): "
                             f"{exc}") from None
    elif not isinstance(executor, cf.Executor):
        raise ValueError(f"executor must be a concurrent.futures.Executor, "
                         f"got {type(executor).__name__}")

    journal = _journal_path(out) if out is not None else None
    if out is not None:
        os.makedirs(os.path.dirname(os.path.abspath(os.fspath(out))) or ".", exist_ok=True)
    lock = _lock_for(journal) if journal is not None else threading.Lock()
    with lock:
        records = _load_journal(journal)
    todo, n_skipped = [], 0
    for p in points:
        for r, s in enumerate(seed_values):
            rec = records.get((_point_key(p), r))
            if rec is not None and (rec["status"] == "ok" or not retry_failed):
                n_skipped += 1
            else:
                todo.append((p, r, s))
    param_order = list(dict.fromkeys(k for p in points for k in p))

    def flush_table():
        with lock:  # rebuilt from the journal: rows of concurrent sweeps are kept
            recs = _load_journal(journal) if journal is not None else records
            rows, columns = _table(list(recs.values()), param_order)
            if out is not None:
                _write_csv(out, rows, columns)
        return rows, columns

    n_failed, times = 0, {}
    if todo:
        ex = (cf.ProcessPoolExecutor(max_workers=min(max_workers, os.cpu_count() or 1))
              if own else executor)
        futures = {}

        def finish(fut, done):
            nonlocal n_failed
            p, r, s = futures.pop(fut)
            try:
                status, result, err, tb, secs = fut.result()
            except Exception as exc:  # noqa: BLE001 - e.g. a worker died
                status, result, err, tb, secs = ("error", {}, f"{type(exc).__name__}: {exc}",
                                                 traceback.format_exc(), float("nan"))
            rec = {"point": p, "seed_index": r, "seed": s, "status": status, "error": err,
                   "result": result, "traceback": tb, "time_s": secs}
            records[(_point_key(p), r)] = rec
            times[(_point_key(p), r)] = secs
            n_failed += status != "ok"
            if journal is not None:
                with lock:
                    _append_journal(journal, rec)
                flush_table()
            if progress is not None:
                progress(done, len(todo), rec)

        try:
            if isinstance(ex, InlineExecutor):  # one at a time: each row is saved at once
                for done, (p, r, s) in enumerate(todo, 1):
                    fut = ex.submit(_call, fn, p, s)
                    futures[fut] = (p, r, s)
                    finish(fut, done)
            else:
                for p, r, s in todo:
                    futures[ex.submit(_call, fn, p, s)] = (p, r, s)
                for done, fut in enumerate(cf.as_completed(list(futures)), 1):
                    finish(fut, done)
        except BaseException:  # interrupted: finished rows are journaled already
            for f in futures:
                f.cancel()
            if own:
                ex.shutdown(wait=False, cancel_futures=True)
            raise
        if own:
            ex.shutdown(wait=True)
    rows, columns = flush_table()
    return SweepResult(rows=rows, columns=columns, path=None if out is None else os.fspath(out),
                       journal=journal, n_run=len(todo), n_skipped=n_skipped,
                       n_failed=n_failed, times=times)
