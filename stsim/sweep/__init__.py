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
  the journal ``<out>.journal.jsonl`` as soon as it arrives; the CSV ``out`` is
  rewritten atomically from the rows at most every ``FLUSH_SECONDS`` and at the end
  (also when interrupted). A rerun reads the journal and skips the
  (point, replicate) pairs already finished (``ok``) — unless ``keep(record)`` rejects
  one (say, the file it wrote is gone or now holds another config's output); rows with
  ``status="error"`` are tried again unless ``retry_failed=False``. An interrupted sweep
  loses no finished row (at most a torn last journal line, which is ignored). Several
  sweeps may share one ``out`` from threads of one process (journal and table are written
  under a per-file lock, and the table is rebuilt from all rows); a second *process* on
  the same ``out`` is refused with ``RuntimeError`` while the first runs (``<out>.lock``,
  released by the kernel if the holder dies).
* **Dask** — pass ``client.get_executor(pure=False)``: Dask names a task by its function
  and arguments, so with ``pure=True`` the rerun of a row whose task an interrupted sweep
  cancelled gets the cancelled task back and fails with ``CancelledError``.
* **Column names** — a result key equal to a parameter or bookkeeping column (e.g. the
  ``status`` and ``seed`` of a :func:`stsim.run` result) is written as ``fn.<key>``.
* **Bad input** — an empty grid, a point with a parameter ``fn`` does not take (unless
  it takes ``**kwargs``), a missing required parameter, a non-scalar value, duplicate
  points, or a point rejected by ``validate(point)`` raise ``ValueError`` before any work
  starts. An exception inside ``fn`` is recorded in the row and the sweep continues.
"""
from __future__ import annotations

import concurrent.futures as cf
import contextlib
import os
import pickle
import sys
import threading
import time
import traceback
import types
from dataclasses import dataclass, field

from stsim.sweep.grid import (BOOKKEEPING, check_signature, expand_grid, point_key,
                              spawn_seeds)
from stsim.sweep.journal import (append_journal, build_table, journal_path, lock_for,
                                 shared_records)
from stsim.sweep.pool import InlineExecutor, OneThreadProcessPool, make_executor
from stsim.util.io import FileLock, read_csv, to_jsonable, write_csv
from stsim.util.validate import check_int

__all__ = ["sweep", "SweepResult", "InlineExecutor", "OneThreadProcessPool", "make_executor",
           "expand_grid", "spawn_seeds", "read_table", "BOOKKEEPING"]

read_table = read_csv  # a sweep table is a CSV written by stsim.util.io.write_csv
FLUSH_SECONDS = 2.0     # the CSV is rewritten at most this often while a sweep runs


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
        """The values of column ``name`` in the rows matching ``params`` (table order).

        >>> SweepResult(rows=[{"lr": 1, "loss": 0.5}], columns=["lr", "loss"]).column("loss", lr=1)
        [0.5]
        """
        return [r.get(name) for r in self.select(**params)]


def sweep(fn, grid, *, seeds=1, root_seed=0, executor=None, out=None, max_workers=2,
          validate=None, retry_failed=True, progress=None, keep=None) -> SweepResult:
    """Run ``fn(**point, seed=seed)`` for every grid point and replicate; collect a table.

    Parameters
    ----------
    fn : ``callable(**point, seed) -> dict`` of scalars (or a scalar)
        Must be picklable (a module-level function) for process executors.
    grid : dict ``{name: values}`` (Cartesian product) or sequence of dicts.
    seeds : int >= 1 — replicates per point (seeds from ``SeedSequence.spawn``).
    root_seed : int >= 0 — entropy of the root ``SeedSequence``.
    executor : concurrent.futures.Executor, optional
        Any executor (``ProcessPoolExecutor``, ``distributed.Client.get_executor()``,
        :class:`InlineExecutor`, ...). Default: ``make_executor(max_workers)`` (the one
        pool, :mod:`stsim.sweep.pool`: this process for ``max_workers`` 1, else a
        :class:`OneThreadProcessPool`, one BLAS thread per worker, with
        ``min(max_workers, os.cpu_count())`` workers), created and shut down here. A
        passed executor is left running.
    out : path, optional — the CSV table; its journal is ``<out>.journal.jsonl``. Without
        ``out`` nothing is written and nothing is resumed.
    max_workers : int >= 1 — workers of the default executor (1: this process).
    validate : callable(point), optional — called on every point before any work; it
        raises ``ValueError`` for bad points. Default: ``fn.validate`` if present.
    retry_failed : bool — rerun rows recorded as errors (default) or keep them.
    progress : callable(done, total, row), optional — after each finished row.
    keep : callable(record) -> bool, optional
        Asked for every row the journal holds as finished (``ok``; ``record`` has
        ``point``, ``seed_index``, ``seed``, ``result``): ``False`` means it no longer
        stands (e.g. the file it wrote is gone or was overwritten) and it is computed
        again. Default: every finished row stands.

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
    check_signature(fn, points)
    validate = validate if validate is not None else getattr(fn, "validate", None)
    if validate is not None:
        for p in points:
            try:
                validate(p)
            except ValueError as exc:
                raise ValueError(f"invalid grid point {p}: {exc}") from None
    own = executor is None
    if own:
        if max_workers > 1:          # the default executor is a process pool
            try:
                pickle.dumps(fn)
            except Exception as exc:  # noqa: BLE001
                raise ValueError(f"fn must be picklable for the default process pool "
                                 f"(define it at module level, or pass "
                                 f"executor=InlineExecutor()): {exc}") from None
    elif not isinstance(executor, cf.Executor):
        raise ValueError(f"executor must be a concurrent.futures.Executor, "
                         f"got {type(executor).__name__}")

    journal = journal_path(out) if out is not None else None
    if out is not None:
        os.makedirs(os.path.dirname(os.path.abspath(os.fspath(out))) or ".", exist_ok=True)
    # one process writes a table at a time (a second one is refused, see FileLock)
    held = FileLock(out) if out is not None else contextlib.nullcontext()
    with held:
        lock = lock_for(journal) if journal is not None else threading.Lock()
        with lock:  # the process-wide store of this journal, refreshed from the file once
            records = shared_records(journal) if journal is not None else {}
        todo, n_skipped = [], 0
        for p in points:
            for r, s in enumerate(seed_values):
                rec = records.get((point_key(p), r))
                if rec is not None and rec["status"] == "ok" and keep is not None \
                        and not keep(rec):
                    rec = None                       # finished once, but no longer stands
                if rec is not None and (rec["status"] == "ok" or not retry_failed):
                    n_skipped += 1
                else:
                    todo.append((p, r, s))
        param_order = list(dict.fromkeys(k for p in points for k in p))

        last_flush = [time.monotonic()]

        def flush_table():
            # from the shared store (rows of concurrent sweeps in this process are kept); the
            # journal is the per-row record, the CSV is rewritten at most every FLUSH_SECONDS
            # during the sweep and once at its end (so the cost stays linear in the rows)
            with lock:
                rows, columns = build_table(list(records.values()), param_order)
                if out is not None:
                    write_csv(out, columns, rows)
            last_flush[0] = time.monotonic()
            return rows, columns

        n_failed, times = 0, {}
        if todo:
            ex = make_executor(max_workers) if own else executor
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
                records[(point_key(p), r)] = rec
                times[(point_key(p), r)] = secs
                n_failed += status != "ok"
                if journal is not None:
                    with lock:
                        append_journal(journal, rec)
                    if time.monotonic() - last_flush[0] >= FLUSH_SECONDS:
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
                if out is not None:
                    flush_table()
                raise
            if own:
                ex.shutdown(wait=True)
        rows, columns = flush_table()
        return SweepResult(rows=rows, columns=columns, path=None if out is None else os.fspath(out),
                           journal=journal, n_run=len(todo), n_skipped=n_skipped,
                           n_failed=n_failed, times=times)


class _CallableModule(types.ModuleType):
    """``stsim.sweep`` is this module AND the function: ``stsim.sweep(fn, grid, ...)`` calls
    :func:`sweep`, and ``stsim.sweep.InlineExecutor`` etc. are its members."""

    def __call__(self, *args, **kwargs):
        return sweep(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
