"""Executors of the sweep and of every parallel command — the one process pool.

* :class:`InlineExecutor` runs each task in the calling thread at ``submit``.
* :class:`OneThreadProcessPool` is a spawned process pool whose workers run
  single-threaded BLAS (set by the pool itself): 2 workers × 2 BLAS threads would
  oversubscribe a 2-core machine (measured: the full figures took 33.5 min instead of
  13.7 min), and a result's last bits depend on the BLAS thread count, so a table must
  not depend on which worker ran a row.
* :func:`make_executor` picks one from a worker count (0 or 1: inline) — the one place
  where a pool is built: :func:`stsim.sweep.sweep` without an executor and the study
  commands (:func:`stsim.cli.common.run_contract`) call it.

Both carry ``workers``, the number of tasks they run at once (recorded by the studies).
"""
from __future__ import annotations

import concurrent.futures as cf
import multiprocessing as mp
import os
import threading
import time

from stsim.util.prefetch import PREFETCH_VAR
from stsim.util.threads import THREAD_VARS
from stsim.util.validate import check_int

__all__ = ["InlineExecutor", "OneThreadProcessPool", "make_executor", "THREAD_VARS"]


class InlineExecutor(cf.Executor):
    """Run every task in the calling thread at ``submit`` (debugging, tests, lambdas)."""

    workers = 1

    def submit(self, fn, /, *args, **kwargs):
        """Call ``fn(*args, **kwargs)`` now; return a finished ``Future`` holding its result
        or its exception."""
        fut = cf.Future()
        try:
            fut.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # noqa: BLE001 - delivered through the future
            fut.set_exception(exc)
        return fut


def _die_with_parent(parent_pid: int, period: float = 0.5) -> None:
    """Worker initializer: exit as soon as the driver process is gone.

    A driver killed with SIGKILL cannot shut its pool down, and its workers would live
    on, re-parented, holding memory (seen: ~40 MB each, minutes later). A daemon thread
    in each worker polls its parent pid and ends the worker when it changes."""
    def watch():
        while os.getppid() == parent_pid:
            time.sleep(period)
        os._exit(1)

    threading.Thread(target=watch, name="stsim-parent-watch", daemon=True).start()


class OneThreadProcessPool(cf.ProcessPoolExecutor):
    """A spawned process pool whose workers all run single-threaded BLAS.

    Two workers × default BLAS threads oversubscribe 2 cores, and a trial's last bits
    depend on the BLAS thread count, so the table would depend on which worker ran it.
    Its workers also draw their minibatches in the foreground (``STSIM_PREFETCH=0``, see
    :mod:`stsim.util.prefetch`): each worker owns one core. A spawned worker reads the
    variables when it imports numpy, and workers start on
    demand, so the variables stay set in this process until :meth:`shutdown` (numpy is
    already loaded here: they do not change this process). Workers end by themselves
    within about a second if the driver dies (:func:`_die_with_parent`)."""

    def __init__(self, workers):
        self.workers = int(workers)
        self._saved = {k: os.environ.get(k) for k in THREAD_VARS + (PREFETCH_VAR,)}
        for k, v in self._saved.items():
            if v is None:
                os.environ[k] = "0" if k == PREFETCH_VAR else "1"
        super().__init__(workers, mp_context=mp.get_context("spawn"),
                         initializer=_die_with_parent, initargs=(os.getpid(),))

    def shutdown(self, *args, **kwargs):
        try:
            super().shutdown(*args, **kwargs)
        finally:
            for k, v in self._saved.items():
                if v is None:
                    os.environ.pop(k, None)


def make_executor(workers: int) -> cf.Executor:
    """The executor of ``workers`` (an int >= 0): 0 or 1 an :class:`InlineExecutor` (this
    process); 2 or more a :class:`OneThreadProcessPool` with ``min(workers,
    os.cpu_count())`` workers. The caller shuts it down.

    >>> make_executor(1).submit(pow, 2, 10).result()
    1024
    """
    workers = check_int("workers", workers, 0)
    if workers <= 1:
        return InlineExecutor()
    return OneThreadProcessPool(min(workers, os.cpu_count() or 1))
