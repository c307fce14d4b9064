"""Executors of the sweep and of every parallel command — the one process pool.

* :class:`InlineExecutor` runs each task in the calling thread at ``submit``.
* :class:`OneThreadProcessPool` is a process pool on `loky <https://github.com/joblib/loky>`_
  (joblib's executor; the optional extra ``pool``, also in ``fast`` and ``test``) whose
  workers run single-threaded BLAS: 2 workers × 2 BLAS threads
  would oversubscribe a 2-core machine (measured: the full figures took 33.5 min instead
  of 13.7 min), and a result's last bits depend on the BLAS thread count, so a table must
  not depend on which worker ran a row.
* :func:`make_executor` picks one from a worker count (0 or 1: inline) — the one place
  where a pool is built: :func:`stsim.sweeps.sweep` without an executor and the study
  commands (:func:`stsim.cli.common.run_contract`) call it.
* :func:`stop_on_interrupt`: Ctrl-C while a pool works stops its workers at once.

Why loky rather than ``concurrent.futures.ProcessPoolExecutor``: a spawned stdlib pool
re-runs the caller's main script in every worker and pickles functions by reference, so
an unguarded script, stdin or a notebook cell cannot use it; loky's fresh interpreters do
not import ``__main__``, and cloudpickle sends functions of ``__main__`` and lambdas by
value. Both executors carry ``workers``, the number of tasks they run at once (recorded
by the studies).
"""
from __future__ import annotations

import concurrent.futures as cf
import contextlib
import os
import signal
import threading
import time
import warnings

try:                        # the optional extra "pool" (pip install "stsim[pool]")
    import loky
    from loky.backend.reduction import dumps as _cloudpickle_dumps
    from loky.process_executor import ShutdownExecutorError
except ImportError:         # no process pool: make_executor runs the tasks in this process
    loky = None
    _cloudpickle_dumps = None
    ShutdownExecutorError = cf.CancelledError   # never raised; keeps the fault tuples simple

from stsim.util.prefetch import PREFETCH_VAR
from stsim.util.signals import route_termination
from stsim.util.threads import THREAD_VARS
from stsim.util.validate import check_int

__all__ = ["InlineExecutor", "OneThreadProcessPool", "make_executor", "stop_on_interrupt",
           "worker_env", "THREAD_VARS", "HAVE_POOL", "POOL_HINT", "pool_dumps",
           "ShutdownExecutorError"]

#: whether loky, hence :class:`OneThreadProcessPool`, is installed
HAVE_POOL = loky is not None
POOL_HINT = 'a process pool needs loky, the optional extra "pool": pip install "stsim[pool]"'


def pool_dumps(obj) -> bytes:
    """``obj`` pickled as the pool sends a task (cloudpickle, through loky): raises what
    pickling raises. Only with :data:`HAVE_POOL`."""
    if _cloudpickle_dumps is None:
        raise ImportError(POOL_HINT)
    return _cloudpickle_dumps(obj)


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


def _init_worker(parent_pid: int, period: float = 0.5) -> None:
    """Worker initializer: leave Ctrl-C to the driver, and exit as soon as it is gone.

    * SIGINT is ignored: a terminal's Ctrl-C reaches the whole process group, and a worker
      interrupted mid-row would hand back a half-done row (``stsim.run`` returns its run so
      far with ``status="interrupted"``); the driver stops the workers instead
      (:func:`stop_on_interrupt`).
    * A driver killed with SIGKILL cannot shut its pool down, and its workers would live
      on, re-parented, holding memory (seen: ~40 MB each, minutes later). A daemon thread
      polls the parent pid and ends the worker when it changes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "SIGHUP"):    # a closed terminal: the driver decides, as for Ctrl-C
        signal.signal(signal.SIGHUP, signal.SIG_IGN)

    def watch():
        while os.getppid() == parent_pid:
            time.sleep(period)
        os._exit(1)

    threading.Thread(target=watch, name="stsim-parent-watch", daemon=True).start()


def worker_env(environ=None) -> dict:
    """The variables a pool worker starts with, beyond the driver's own: ``1`` for each
    BLAS thread count (``OMP_NUM_THREADS``, ``OPENBLAS_NUM_THREADS``, ``MKL_NUM_THREADS``)
    and ``0`` for ``STSIM_PREFETCH`` (each worker owns one core and draws its minibatches
    in the foreground, :mod:`stsim.util.prefetch`) — each only where the driver's
    environment ``environ`` (default ``os.environ``) does not set it.

    >>> worker_env({"OMP_NUM_THREADS": "4"})["OPENBLAS_NUM_THREADS"], \\
    ...     "OMP_NUM_THREADS" in worker_env({"OMP_NUM_THREADS": "4"})
    ('1', False)
    """
    environ = os.environ if environ is None else environ
    want = {**{k: "1" for k in THREAD_VARS}, PREFETCH_VAR: "0"}
    return {k: v for k, v in want.items() if k not in environ}


_PoolBase = (cf.Executor if loky is None else loky.ProcessPoolExecutor)   # the one process pool


class _KillableFuture(cf.Future if loky is None else type(loky.Future())):
    """loky's future, whose ``set_exception`` leaves a cancelled future alone: killing the
    pool fails every pending future from loky's manager thread, and one the caller
    cancelled meanwhile (an interrupted sweep cancels what it submitted) would otherwise
    raise ``InvalidStateError`` there (a traceback on stderr)."""

    def set_exception(self, exception):
        with self._condition:                 # re-entrant: the state cannot change between
            if self.cancelled():
                return
            super().set_exception(exception)


class OneThreadProcessPool(_PoolBase):
    """A loky process pool whose workers all run single-threaded BLAS.

    Parameters
    ----------
    workers : int
        The number of worker processes (started on demand).

    Notes
    -----
    Why one BLAS thread, and why loky: the module docstring. The variables of
    :func:`worker_env` are set in each worker before it imports anything (loky's ``env``),
    never in this process. Workers ignore SIGINT (the driver stops them,
    :func:`stop_on_interrupt`) and end by themselves within about a second if the driver
    dies (:func:`_init_worker`).
    """

    def __init__(self, workers):
        if not HAVE_POOL:
            raise ImportError(f"OneThreadProcessPool: {POOL_HINT} (or run the tasks in this "
                              f"process: InlineExecutor, workers=1)")
        self.workers = check_int("workers", workers, 1)
        self._killed, self._manager = False, None     # see shutdown
        super().__init__(self.workers, context=loky.backend.get_context("loky"),
                         initializer=_init_worker, initargs=(os.getpid(),),
                         env=worker_env())

    def submit(self, fn, /, *args, **kwargs):
        """loky's ``submit``; the future tolerates a kill after its cancellation."""
        fut = super().submit(fn, *args, **kwargs)
        fut.__class__ = _KillableFuture
        return fut

    def shutdown(self, wait=True, *, cancel_futures=False, kill_workers=False):
        """Stop the pool: ``wait`` for the running tasks (and, unless ``cancel_futures``,
        the queued ones); ``kill_workers`` ends the workers at once (their running and
        queued tasks fail with loky's ``ShutdownExecutorError``).

        A kill once asked for stays (loky's ``shutdown`` would set ``kill_workers`` back
        to False), and ``wait`` also waits for a kill asked for by :meth:`kill` (loky
        forgets its manager thread there): the workers are gone, and each one's exit
        semaphore unlinked and unregistered, when this returns (docs/model.md, "SIGTERM
        or SIGHUP on a study")."""
        if cancel_futures and not kill_workers:
            with contextlib.suppress(Exception):     # queued, not started: dropped
                for item in list(self._pending_work_items.values()):
                    item.future.cancel()
        self._killed = self._killed or kill_workers
        self._manager = self._executor_manager_thread or self._manager
        super().shutdown(wait=wait, kill_workers=self._killed)
        if wait and self._manager is not None:
            self._manager.join()

    def kill(self) -> None:
        """End the workers now, without waiting (Ctrl-C): :meth:`shutdown` with
        ``kill_workers``."""
        self.shutdown(wait=False, kill_workers=True)


def make_executor(workers: int) -> cf.Executor:
    """The executor of ``workers`` workers.

    Parameters
    ----------
    workers : int
        An int >= 0: 0 or 1 gives an :class:`InlineExecutor` (this process); 2 or more a
        :class:`OneThreadProcessPool` with ``min(workers, os.cpu_count())`` workers —
        without loky (:data:`HAVE_POOL`) an :class:`InlineExecutor` and a warning naming
        the extra to install.

    Returns
    -------
    concurrent.futures.Executor
        The caller shuts it down.

    >>> make_executor(1).submit(pow, 2, 10).result()
    1024
    """
    workers = check_int("workers", workers, 0)
    if workers <= 1:
        return InlineExecutor()
    if not HAVE_POOL:
        warnings.warn(f"stsim: {workers} workers asked for, but {POOL_HINT}; the tasks run "
                      f"one after another in this process", stacklevel=2)
        return InlineExecutor()
    return OneThreadProcessPool(min(workers, os.cpu_count() or 1))


@contextlib.contextmanager
def stop_on_interrupt(executor=None):
    """While inside: Ctrl-C raises ``KeyboardInterrupt`` here at once, after killing the
    workers of ``executor`` if it is a :class:`OneThreadProcessPool` (they ignore SIGINT).

    It acts in the main thread under Python's default SIGINT handler (elsewhere it changes
    nothing). Its handler is not the default one, so a :func:`stsim.run` called inline by a
    sweep's row raises at once rather than return its run so far as a finished row
    (``status="interrupted"``, which the sweep would journal as done). The previous
    handler is put back on leaving. Yields whether it acts.

    Where SIGINT is ignored (a background job of a script) Ctrl-C cannot come, but a
    SIGTERM or SIGHUP that :class:`stsim.util.signals.TerminateAsInterrupt` turns into an
    interrupt (the ``stsim`` command, :func:`stsim.sweep`) is routed to the same handler
    for any ``executor`` given, a pool or in this process (a final route,
    :func:`stsim.util.signals.route_termination`): without it the workers would go on with
    their runs, a study driving its sweeps from threads would wait for them to finish, and
    a study's inline row would stop only its own run and go on with the next.
    """
    def kill():
        if isinstance(executor, OneThreadProcessPool):
            with contextlib.suppress(Exception):
                executor.kill()

    main = threading.current_thread() is threading.main_thread()
    if main and signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        if executor is None:
            yield False      # nothing to end here: a route of an outer caller stays
            return

        def on_termination(signum, frame):
            kill()
            raise KeyboardInterrupt

        # final: a run inside (an inline row) would otherwise take the signal for itself,
        # stop only that run and let the sweep go on with the next
        with route_termination(on_termination, final=True):
            yield False
        return
    if not (main and signal.getsignal(signal.SIGINT) is signal.default_int_handler):
        yield False
        return
    previous = signal.getsignal(signal.SIGINT)

    def handler(signum, frame):
        signal.signal(signal.SIGINT, previous)
        kill()
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, handler)
    try:
        yield True
    finally:
        signal.signal(signal.SIGINT, previous)
