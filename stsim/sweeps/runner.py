"""One call of :func:`stsim.sweep`, as the steps of :class:`Runner`: **plan** (which rows
the journal holds as finished, which to compute), **submit** (the rows to the executor),
**record** (a finished row into the journal and the shared rows) and **flush** (the CSV
table, from the shared rows). The worker side is ``_call`` (Dask names its tasks ``call``)."""
from __future__ import annotations

import concurrent.futures as cf
import contextlib
import threading
import time
import traceback

from stsim.core.progress import make_counter
from stsim.sweeps.carry import snapshot as _registrations
from stsim.sweeps.grid import point_key
from stsim.sweeps.journal import (append_journal, build_table, check_seeds, journal_path,
                                  lock_for, shared_records)
from stsim.sweeps.pool import (InlineExecutor, OneThreadProcessPool, ShutdownExecutorError,
                               make_executor, stop_on_interrupt)
from stsim.sweeps.rows import call_with_timeout, result_row
from stsim.util.io import write_csv

__all__ = ["Runner", "ExecutorFailed", "check_runs", "FLUSH_SECONDS"]

FLUSH_SECONDS = 2.0     # the CSV is rewritten at most this often while a sweep runs


class ExecutorFailed(RuntimeError):
    """The executor stopped running a sweep's rows (a worker died, the pool was shut down
    or broke): no row is recorded for the tasks it lost; the finished ones are in the
    journal, and a rerun computes the rest."""


# a future's exception that is the executor's failure, not the row's
_EXECUTOR_FAULTS = (cf.BrokenExecutor, cf.CancelledError, ShutdownExecutorError)


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
    after installing the caller's ``registrations`` (:mod:`stsim.sweeps.carry`). A result
    the table cannot store, or a row over ``timeout``, is an error row
    (:mod:`stsim.sweeps.rows`)."""
    t0 = time.perf_counter()
    try:
        if registrations:
            registrations.install()
        out = result_row(call_with_timeout(fn, {**point, "seed": seed}, timeout))
        return "ok", out, "", "", time.perf_counter() - t0
    except Exception as exc:  # noqa: BLE001 - recorded in the table, the sweep goes on
        return ("error", {}, f"{type(exc).__name__}: {exc}", traceback.format_exc(),
                time.perf_counter() - t0)


class Runner:
    """The rows of one sweep of checked inputs, and where they go.

    ``plan()`` reads the journal (under its lock: another sweep of the same table in this
    process empties the shared rows while it reloads them) and sets ``todo`` and
    ``n_skipped``; ``execute(executor, own)`` submits ``todo``, records each finished row,
    and flushes the table at most every :data:`FLUSH_SECONDS` and at the end (also when
    interrupted); it returns ``(rows, columns)``. ``n_failed`` and ``times`` count the rows
    computed here.
    """

    def __init__(self, fn, points, seed_values, *, root_seed, out=None, keep=None,
                 retry_failed=True, timeout=None, progress=None):
        self.fn, self.points, self.seed_values = fn, points, seed_values
        self.root_seed, self.out, self.keep = root_seed, out, keep
        self.retry_failed, self.timeout, self.progress = retry_failed, timeout, progress
        self.journal = journal_path(out) if out is not None else None
        self.lock = lock_for(self.journal) if self.journal is not None else threading.Lock()
        self.param_order = list(dict.fromkeys(k for p in points for k in p))
        self.records: dict = {}
        self.todo: list = []
        self.n_skipped = self.n_failed = 0
        self.times: dict = {}
        self._last_flush = time.monotonic()
        self._reporter = None

    # -- plan ---------------------------------------------------------------------------
    def plan(self) -> None:
        """``todo``: the (point, replicate, seed) not finished in the journal (or rejected
        by ``keep``, or an error row while ``retry_failed``); the rest are ``n_skipped``."""
        with self.lock:
            # the process-wide store of this journal, refreshed from the file once
            self.records = shared_records(self.journal) if self.journal is not None else {}
            if self.journal is not None:     # rows of another root_seed are never served
                check_seeds(self.journal, self.records, self.root_seed)
            for p in self.points:
                for r, s in enumerate(self.seed_values):
                    rec = self.records.get((point_key(p), r))
                    if rec is not None and rec["status"] == "ok" and self.keep is not None \
                            and not self.keep(rec):
                        rec = None                   # finished once, but no longer stands
                    if rec is not None and (rec["status"] == "ok" or not self.retry_failed):
                        self.n_skipped += 1
                    else:
                        self.todo.append((p, r, s))

    # -- flush --------------------------------------------------------------------------
    def flush(self):
        """The table from the shared rows (rows of concurrent sweeps in this process are
        kept), written to ``out`` if given; returns ``(rows, columns)``. The journal is the
        per-row record; the CSV is rewritten at most every FLUSH_SECONDS during the sweep
        and once at its end, so the cost stays linear in the rows."""
        with self.lock:
            rows, columns = build_table(list(self.records.values()), self.param_order)
            if self.out is not None:
                write_csv(self.out, columns, rows)
        self._last_flush = time.monotonic()
        return rows, columns

    # -- record -------------------------------------------------------------------------
    def record(self, fut, point, r, seed, done) -> None:
        """The finished future ``fut`` of row ``(point, r)``: appended to the journal, then
        to the shared rows (so the table never holds a row the journal lacks)."""
        try:
            status, result, err, tb, secs = fut.result()
        except _EXECUTOR_FAULTS as exc:     # the executor failed, not the row
            raise ExecutorFailed(
                f"the executor stopped running the sweep's rows "
                f"({type(exc).__name__}: {exc}); the rows it finished are kept"
                + (f" in {self.journal!r}: rerun to compute the rest" if self.journal else "")
            ) from exc
        except Exception as exc:  # noqa: BLE001 - e.g. fn's result did not unpickle
            status, result, err, tb, secs = ("error", {}, f"{type(exc).__name__}: {exc}",
                                             traceback.format_exc(), float("nan"))
        rec = {"point": point, "seed_index": r, "seed": seed, "root_seed": self.root_seed,
               "status": status, "error": err, "result": result, "traceback": tb,
               "time_s": secs}
        with self.lock:
            if self.journal is not None:
                append_journal(self.journal, rec)
            self.records[(point_key(point), r)] = rec
        self.times[(point_key(point), r)] = secs
        self.n_failed += status != "ok"
        if self.journal is not None and time.monotonic() - self._last_flush >= FLUSH_SECONDS:
            self.flush()
        if self._reporter is not None:
            self._reporter(done, len(self.todo), rec)

    # -- submit -------------------------------------------------------------------------
    def submit(self, ex, futures: dict) -> None:
        """Every row of ``todo`` to the executor ``ex``, each recorded as it finishes
        (``futures`` maps the pending ones to their row). The inline executor runs one at
        a time, each row saved at once; any other is probed first (:func:`check_runs`)."""
        if isinstance(ex, InlineExecutor):
            for done, (p, r, s) in enumerate(self.todo, 1):
                fut = ex.submit(_call, self.fn, p, s, None, self.timeout)
                futures[fut] = (p, r, s)
                self.record(fut, *futures.pop(fut), done)
            return
        # what the caller registered goes with every task (a worker of a pool or a
        # cluster imports stsim afresh); nothing to carry within this process
        regs = _registrations() or None
        check_runs(ex, self.fn)
        for p, r, s in self.todo:
            futures[ex.submit(_call, self.fn, p, s, regs, self.timeout)] = (p, r, s)
        for done, fut in enumerate(cf.as_completed(list(futures)), 1):
            self.record(fut, *futures.pop(fut), done)

    def execute(self, executor, own: bool, max_workers: int):
        """Compute ``todo`` on ``executor`` (``own``: build ``make_executor(max_workers)``
        here, and shut it down), then the final table ``(rows, columns)``."""
        if not self.todo:
            return self.flush()
        ex = make_executor(max_workers) if own else executor
        futures: dict = {}
        self._reporter = make_counter(self.progress, total=len(self.todo))
        try:
            with stop_on_interrupt(ex if own else None):
                self.submit(ex, futures)
        except BaseException:  # interrupted: finished rows are journaled already
            for f in futures:
                f.cancel()
            if own:
                with contextlib.suppress(Exception):
                    if isinstance(ex, OneThreadProcessPool):
                        ex.shutdown(wait=True, kill_workers=True)   # workers ended now
                    else:
                        ex.shutdown(wait=False, cancel_futures=True)
            if self.out is not None and self.times:   # rows finished now: shown in the table
                # a table that cannot be written (the full disk that stopped the journal)
                # must not hide the first error, which names the journal
                with contextlib.suppress(OSError):
                    self.flush()
            raise
        finally:
            if hasattr(self._reporter, "close"):
                self._reporter.close()
        if own:
            ex.shutdown(wait=True)
        return self.flush()

