"""Parameter sweeps on any ``concurrent.futures.Executor``, resumable, into one CSV table:
:func:`sweep`, whose docstring (its design under "Notes") is also this module's, so that
``help(stsim.sweep)`` shows it (``stsim.sweep`` is this module and the function at once).
"""
from __future__ import annotations

import concurrent.futures as cf
import contextlib
import inspect
import os
import sys
import threading
import time
import traceback
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field


from stsim.sweep.grid import (BOOKKEEPING, check_signature, expand_grid, point_key,
                              spawn_seeds)
from stsim.sweep.journal import (append_journal, build_table, check_seeds, journal_path,
                                 lock_for, shared_records)
from stsim.sweep import pool as _pool
from stsim.sweep.carry import snapshot as _registrations
from stsim.sweep.rows import call_with_timeout, check_timeout, result_row
from stsim.sweep.pool import (InlineExecutor, OneThreadProcessPool, ShutdownExecutorError,
                              make_executor, pool_dumps, stop_on_interrupt)
from stsim.core.progress import check_progress, make_counter
from stsim.util.signals import end_like_interrupt
from stsim.util.io import FileLock, check_writable_file, read_csv, write_csv
from stsim.util.validate import check_int

__all__ = ["sweep", "SweepResult", "ExecutorFailed", "InlineExecutor", "OneThreadProcessPool",
           "make_executor", "check_runs", "expand_grid", "spawn_seeds", "read_table",
           "BOOKKEEPING"]

read_table = read_csv  # a sweep table is a CSV written by stsim.util.io.write_csv
FLUSH_SECONDS = 2.0     # the CSV is rewritten at most this often while a sweep runs


class ExecutorFailed(RuntimeError):
    """The executor stopped running a sweep's rows (a worker died, the pool was shut down
    or broke): no row is recorded for the tasks it lost; the finished ones are in the
    journal, and a rerun computes the rest."""


# a future's exception that is the executor's failure, not the row's
_EXECUTOR_FAULTS = (cf.BrokenExecutor, cf.CancelledError, ShutdownExecutorError)


def check_out(out):
    """``out`` as a path (``None`` stays ``None``), checked before any work: ``ValueError``
    for an empty path, a folder, or a place where no file can be written."""
    if out is None:
        return None
    out = check_writable_file(out, "out")
    journal = journal_path(out)
    if os.path.isdir(journal):
        raise ValueError(f"out={out!r}: its journal {journal!r} is a folder")
    return out


def _ready(fn):
    """A task carrying ``fn`` that does nothing: the executor can unpickle and call it."""
    return callable(fn)


def check_runs(executor, fn) -> None:
    """``ValueError`` unless ``executor`` can run ``fn``: one task carrying ``fn`` is sent
    and awaited before any row (a worker that cannot start, cannot import ``fn``'s
    module, or a pool that breaks, says so here rather than in a table of error rows)."""
    try:
        ok = executor.submit(_ready, fn).result()
    except Exception as exc:  # noqa: BLE001 - whatever it is, nothing ran yet
        hint = ""
        if isinstance(exc, cf.BrokenExecutor):
            hint = (" (a spawned concurrent.futures.ProcessPoolExecutor re-runs the main "
                    "script in every worker and finds functions by name: guard the script "
                    "with if __name__ == '__main__', or use the default executor, which "
                    "runs from scripts, stdin and notebooks alike)")
        raise ValueError(f"the executor cannot run fn "
                         f"{getattr(fn, '__name__', type(fn).__name__)!r}: "
                         f"{type(exc).__name__}: {exc}{hint}") from None
    if ok is not True:
        raise ValueError(f"the executor cannot run fn: its probe returned {ok!r}")


def _call(fn, point, seed, registrations=None, timeout=None):
    """Worker side: ``fn(**point, seed=seed)`` -> (status, result, error, traceback, seconds),
    after installing the caller's ``registrations`` (:mod:`stsim.sweep.carry`). A result
    the table cannot store, or a row over ``timeout``, is an error row
    (:mod:`stsim.sweep.rows`)."""
    t0 = time.perf_counter()
    try:
        if registrations:
            registrations.install()
        out = result_row(call_with_timeout(fn, {**point, "seed": seed}, timeout))
        return "ok", out, "", "", time.perf_counter() - t0
    except Exception as exc:  # noqa: BLE001 - recorded in the table, the sweep goes on
        return ("error", {}, f"{type(exc).__name__}: {exc}", traceback.format_exc(),
                time.perf_counter() - t0)


@dataclass
class SweepResult:
    """The table of a sweep.

    Attributes
    ----------
    rows : list of dict
        Every row of the table (all rows of the journal, including those of earlier
        sweeps on the same ``out``), in table order.
    columns : list of str
        The CSV column order.
    path : str or None
        The CSV table (``None`` without ``out``).
    journal : str or None
        Its journal, ``<path>.journal.jsonl``.
    n_run : int
        Rows computed by this call.
    n_skipped : int
        Rows found finished in the journal.
    n_failed : int
        Rows computed by this call whose ``fn`` raised.
    times : dict
        Seconds of each row computed by this call, keyed by ``(point key, seed_index)``.
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

    def plot(self, x, y, path=None):
        """``y`` against the parameter ``x``: the mean over the seeds with their standard
        deviation as error bars, one line per value of the other parameters
        (:func:`stsim.util.figure.sweep_figure`); a matplotlib ``Figure``, also written to
        ``path`` if given."""
        from stsim.util.figure import save_figure, sweep_figure
        for name, value in (("x", x), ("y", y)):
            if value not in self.columns:
                raise ValueError(f"{name} must be a column of the table {self.columns}, got "
                                 f"{value!r}")
        end = self.columns.index(BOOKKEEPING[0]) if BOOKKEEPING[0] in self.columns else 0
        fig = sweep_figure(self.rows, self.columns[:end], x, y)
        if path is not None:
            save_figure(fig, path)
        return fig

    def to_pandas(self):
        """The table as a ``pandas.DataFrame``: one row per table row, the CSV's columns in
        order (pandas is the optional extra ``stsim[pandas]``).

        >>> SweepResult(rows=[{"lr": 1, "loss": 0.5}], columns=["lr", "loss"]).to_pandas()
           lr  loss
        0   1   0.5
        """
        from stsim.util.frames import pandas
        return pandas().DataFrame(self.rows, columns=self.columns)

    def _counts(self) -> str:
        bad = sum(r.get("status") not in (None, "ok") for r in self.rows)
        return f"{len(self.rows)} rows ({len(self.rows) - bad} ok, {bad} error)"

    def __repr__(self):
        extra = [f"path={self.path!r}"] if self.path else []
        extra.append(f"this call: {self.n_run} run, {self.n_skipped} resumed, "
                     f"{self.n_failed} failed")
        cols = ", ".join(self.columns[:8]) + (", ..." if len(self.columns) > 8 else "")
        return f"SweepResult({self._counts()}; columns {cols}; {'; '.join(extra)})"

    def _repr_html_(self):
        from stsim.util.frames import html_table
        return html_table(self.columns, self.rows,
                          caption=f"sweep: {self._counts()}"
                                  + (f", {self.path}" if self.path else ""))


def sweep(fn: Callable, grid: dict | Sequence[dict], *, seeds: int = 1, root_seed: int = 0,
          executor: cf.Executor | None = None, out: str | os.PathLike | None = None,
          max_workers: int = 2, validate: Callable | None = None, retry_failed: bool = True,
          progress: bool | Callable | None = None, keep: Callable | None = None,
          timeout: float | None = None) -> SweepResult:
    """Run ``fn(**point, seed=seed)`` for every grid point and replicate; collect a table.

    Parameters
    ----------
    fn : callable
        ``fn(**point, seed=seed)`` returns a dict of scalars (or one scalar, the column
        ``value``). Any function: the default pool sends it with cloudpickle, so functions
        of a script, of stdin, of a notebook cell and lambdas run there too.
    grid : dict or sequence of dict
        ``{name: values}`` (the Cartesian product, the last name varying fastest) or the
        explicit points.
    seeds : int
        Replicates per point, >= 1 (seeds from ``SeedSequence(root_seed).spawn``).
    root_seed : int
        Entropy of the root ``SeedSequence``, >= 0.
    executor : concurrent.futures.Executor, optional
        Any executor (:class:`OneThreadProcessPool`, ``distributed.Client.get_executor()``,
        :class:`InlineExecutor`, ...), left running. Default: ``make_executor(max_workers)``
        (:mod:`stsim.sweep.pool`: this process for ``max_workers=1``, else a loky pool
        of ``min(max_workers, os.cpu_count())`` workers, one BLAS thread each), created
        and shut down here.
    out : str or os.PathLike, optional
        The CSV table; its journal is ``<out>.journal.jsonl``. Without ``out`` nothing is
        written and nothing is resumed.
    max_workers : int
        Workers of the default executor, >= 1 (1: this process).
    validate : callable, optional
        ``validate(point)``, called on every point before any work; it raises
        ``ValueError`` for a bad point. Default: ``fn.validate`` if present.
    retry_failed : bool
        Rerun the rows recorded as errors (default) or keep them.
    progress : bool or callable, optional
        What :func:`stsim.run` takes: ``True`` a bar over the rows (tqdm, the extra
        ``stsim[progress]``; a line every 2 s without), ``False`` or ``None`` (default)
        nothing, or a callable ``progress(done, total, row)`` called after each finished
        row (``row``: its journal record). Anything else: ``ValueError`` before any work.
    keep : callable, optional
        ``keep(record) -> bool``, asked for every row the journal holds as finished
        (``record`` has ``point``, ``seed_index``, ``seed``, ``result``): ``False`` means
        it no longer stands (say, the file it wrote is gone) and it is computed again.
        Default: every finished row stands.
    timeout : float, optional
        Seconds one row may run, at most :data:`stsim.sweep.rows.MAX_TIMEOUT` (default
        ``None``: no limit). A row over it is recorded as an error (``TimeoutError``) and
        the sweep goes on; a rerun tries it again. How ``fn`` is stopped, and how it
        composes with a nested sweep's or the caller's own timer:
        :func:`stsim.sweep.rows.call_with_timeout`.

    Returns
    -------
    SweepResult
        The table, with the counts of this call.

    Raises
    ------
    ValueError
        Before any work, for the bad inputs listed under Notes.
    stsim.util.io.OutputLocked
        Another process is writing ``out``.
    ExecutorFailed
        The executor stopped running rows (a worker died); the finished rows are kept.
    KeyboardInterrupt
        Ctrl-C; the finished rows are kept.

    Notes
    -----
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
      loses no finished row (at most a torn last journal line, which is ignored). What is on
      disk is the truth: a rerun serves only rows of the journal it reads (deleting the
      journal and the table computes everything again, also in the same process), and a
      journal written with another ``root_seed`` is refused (every record carries its
      ``seed``, which must be the one this call's ``root_seed`` gives its replicate). Growing
      the grid or the number of replicates keeps the finished rows. Several
      sweeps may share one ``out`` from threads of one process (journal and table are written
      under a per-file lock, and the table is rebuilt from all rows); a second *process* on
      the same ``out`` is refused with :class:`stsim.util.io.OutputLocked` (a ``RuntimeError``)
      while the first runs (``<out>.lock``, released by the kernel if the holder dies, removed
      when the sweep ends).
    * **Executors** — the default is :func:`stsim.sweep.pool.make_executor` (this process for
      ``max_workers=1``, else the loky pool of :mod:`stsim.sweep.pool`, which runs ``fn``
      wherever it was defined). Before the first row, one task carrying ``fn`` is sent to the
      executor (:func:`check_runs`): an ``fn`` the executor cannot run raises ``ValueError``
      there, never a table of error rows. A pool that breaks later raises
      :class:`ExecutorFailed` after saving the finished rows; a rerun computes the lost ones.
    * **Registrations** — the encodings, optimisers and architectures registered in the
      calling process (``stsim.register_encoding`` ...) travel with every task to the workers
      and are registered there before the row runs (:mod:`stsim.sweep.carry`).
    * **Tables** — :meth:`SweepResult.to_pandas` (pandas, the extra ``stsim[pandas]``); a
      notebook shows a :class:`SweepResult` as an HTML table.
    * **Ctrl-C, SIGTERM, SIGHUP** — the finished rows are saved, the table written, the pool
      ended and the lock released (:func:`stsim.sweep.pool.stop_on_interrupt`; docs/model.md,
      the table of faults).
    * **Dask** — pass ``client.get_executor(pure=False)``: Dask names a task by its function
      and arguments, so with ``pure=True`` the rerun of a row whose task an interrupted sweep
      cancelled gets the cancelled task back (``CancelledError``: :class:`ExecutorFailed`).
    * **Column names** — a result key equal to a parameter or bookkeeping column (e.g. the
      ``status`` and ``seed`` of a :func:`stsim.run` result) is written as ``fn.<key>``.
    * **Bad input** — an empty grid, a point with a parameter ``fn`` does not take (unless
      it takes ``**kwargs``), a missing required parameter, a non-scalar value, duplicate
      points, a point rejected by ``validate(point)``, an ``out`` that is empty, a folder or
      not writable, an ``fn`` that does not pickle (default pool), or a journal line that is
      not a record (:func:`stsim.sweep.journal.load_journal`) raise ``ValueError`` before any
      work starts. An exception inside ``fn`` is recorded in the row and the sweep continues.

    Examples
    --------
    >>> from stsim.sweep import sweep, InlineExecutor
    >>> def f(a, b, seed):                       # any function, also for the pool
    ...     return {"s": a + b}
    >>> res = sweep(f, {"a": [1, 2], "b": [10]}, seeds=2, executor=InlineExecutor())
    >>> [(r["a"], r["seed_index"], r["s"]) for r in res.rows]
    [(1, 0, 11), (1, 1, 11), (2, 0, 12), (2, 1, 12)]
    """
    points = expand_grid(grid)
    seed_values = spawn_seeds(seeds, root_seed)
    root_seed = check_int("root_seed", root_seed, 0)
    progress = check_progress(progress)
    max_workers = check_int("max_workers", max_workers, 1)
    timeout = check_timeout(timeout)
    check_signature(fn, points)
    validate = validate if validate is not None else getattr(fn, "validate", None)
    if validate is not None:
        for p in points:
            try:
                validate(p)
            except ValueError as exc:
                raise ValueError(f"invalid grid point {p}: {exc}") from None
    out = check_out(out)
    own = executor is None
    if own:
        if max_workers > 1 and _pool.HAVE_POOL:   # the default executor: loky's pool
            try:
                pool_dumps(fn)               # as the pool will (cloudpickle)
            except Exception as exc:  # noqa: BLE001
                raise ValueError(f"fn cannot be sent to the default process pool (it does "
                                 f"not pickle: {type(exc).__name__}: {exc}); pass "
                                 f"max_workers=1 or executor=InlineExecutor() to run it in "
                                 f"this process") from None
    elif not isinstance(executor, cf.Executor):
        raise ValueError(f"executor must be a concurrent.futures.Executor, "
                         f"got {type(executor).__name__}")

    journal = journal_path(out) if out is not None else None
    # one process writes a table at a time (a second one is refused, see FileLock)
    held = FileLock(out, remove=True) if out is not None else contextlib.nullcontext()
    # SIGTERM/SIGHUP take the Ctrl-C path (rows saved, lock released), then end the process
    with end_like_interrupt(), held:
        lock = lock_for(journal) if journal is not None else threading.Lock()
        # the process-wide store of this journal, refreshed from the file once; what is
        # finished is read under the same lock: another sweep of this table in this
        # process empties the store while it reloads it
        todo, n_skipped = [], 0
        with lock:
            records = shared_records(journal) if journal is not None else {}
            if journal is not None:     # rows of another root_seed are never served
                check_seeds(journal, records, root_seed)
            for p in points:
                for r, s in enumerate(seed_values):
                    rec = records.get((point_key(p), r))
                    if rec is not None and rec["status"] == "ok" and keep is not None \
                            and not keep(rec):
                        rec = None                   # finished once, but no longer stands
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
            # what the caller registered goes with every task (a worker of a pool or a
            # cluster imports stsim afresh); nothing to carry within this process
            regs = None if isinstance(ex, InlineExecutor) else _registrations() or None
            reporter = make_counter(progress, total=len(todo))

            def finish(fut, done):
                nonlocal n_failed
                p, r, s = futures.pop(fut)
                try:
                    status, result, err, tb, secs = fut.result()
                except _EXECUTOR_FAULTS as exc:     # the executor failed, not the row
                    raise ExecutorFailed(
                        f"the executor stopped running the sweep's rows "
                        f"({type(exc).__name__}: {exc}); the rows it finished are kept"
                        + (f" in {journal!r}: rerun to compute the rest" if journal else "")
                    ) from exc
                except Exception as exc:  # noqa: BLE001 - e.g. fn's result did not unpickle
                    status, result, err, tb, secs = ("error", {}, f"{type(exc).__name__}: {exc}",
                                                     traceback.format_exc(), float("nan"))
                rec = {"point": p, "seed_index": r, "seed": s, "root_seed": root_seed,
                       "status": status, "error": err, "result": result, "traceback": tb,
                       "time_s": secs}
                with lock:      # the journal first: the table never holds a row it lacks
                    if journal is not None:
                        append_journal(journal, rec)
                    records[(point_key(p), r)] = rec
                times[(point_key(p), r)] = secs
                n_failed += status != "ok"
                if journal is not None:
                    if time.monotonic() - last_flush[0] >= FLUSH_SECONDS:
                        flush_table()
                if reporter is not None:
                    reporter(done, len(todo), rec)

            try:
                with stop_on_interrupt(ex if own else None):
                    if isinstance(ex, InlineExecutor):  # one at a time: each row saved at once
                        for done, (p, r, s) in enumerate(todo, 1):
                            fut = ex.submit(_call, fn, p, s, None, timeout)
                            futures[fut] = (p, r, s)
                            finish(fut, done)
                    else:
                        check_runs(ex, fn)
                        for p, r, s in todo:
                            futures[ex.submit(_call, fn, p, s, regs, timeout)] = (p, r, s)
                        for done, fut in enumerate(cf.as_completed(list(futures)), 1):
                            finish(fut, done)
            except BaseException:  # interrupted: finished rows are journaled already
                for f in futures:
                    f.cancel()
                if own:
                    with contextlib.suppress(Exception):
                        if isinstance(ex, OneThreadProcessPool):
                            ex.shutdown(wait=True, kill_workers=True)   # workers ended now
                        else:
                            ex.shutdown(wait=False, cancel_futures=True)
                if out is not None and times:     # rows finished now: the table shows them
                    # a table that cannot be written (the full disk that stopped the
                    # journal) must not hide the first error, which names the journal
                    with contextlib.suppress(OSError):
                        flush_table()
                raise
            finally:
                if hasattr(reporter, "close"):
                    reporter.close()
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
# what help(stsim.sweep), Jupyter's stsim.sweep? and inspect.signature show: the function's
__doc__ = sweep.__doc__
try:
    __signature__ = inspect.signature(sweep, eval_str=True)
except (TypeError, NameError):      # Python 3.9: no "X | Y" at run time
    __signature__ = inspect.signature(sweep)
