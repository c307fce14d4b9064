"""The second core: when this process may use it, a shared thread pool, and BLAS pinning.

A training step on the 2-core machine this tool is built for has three parts that can
overlap: drawing the next minibatch (:mod:`stsim.util.prefetch`, a background thread),
filling a large dense encoding draw from several child streams
(:func:`stsim.core.encodings._unit_rows`, this module's :func:`map_threads`), and the
forward/backward pass, whose matrix products call BLAS. OpenBLAS starts its own threads
(two here), which then compete with the drawing threads for the two cores: the sphere
step of ``benchmarks/bench_step.py`` took 51.6 ms with two BLAS threads and 43.6 ms with
one while prefetching (docs/model.md). :func:`one_blas_thread` pins BLAS to one thread for
the duration of a ``with`` block, through ``threadpoolctl`` (the optional extra
``stsim[fast]``); without it the block runs unpinned.

:func:`parallel_default` is the one rule: threads are used when this process may run on two
or more CPUs and BLAS is not pinned to one thread by the environment (a worker of
:class:`stsim.sweeps.pool.OneThreadProcessPool` is pinned: it owns one core). Splitting
work over threads changes no number: every stream is split the same way whether its
pieces run on one thread or two (tested bit for bit). Pinning BLAS can change the last
bits of a long BLAS reduction (:func:`one_blas_thread`).
"""
from __future__ import annotations

import contextlib
import importlib.util
import os
import threading
from concurrent.futures import ThreadPoolExecutor

__all__ = ["THREAD_VARS", "n_cpus", "parallel_default", "map_threads", "one_blas_thread"]

# the BLAS thread-count variables (set to 1 by stsim.sweeps.pool's workers)
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")

_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def n_cpus() -> int:
    """CPUs this process may run on (its affinity mask on Linux)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):   # not on Linux
        return os.cpu_count() or 1


def parallel_default() -> bool:
    """Whether to use a second thread: two or more CPUs free to this process and no
    ``OMP_NUM_THREADS`` / ``OPENBLAS_NUM_THREADS`` / ``MKL_NUM_THREADS`` set to 1."""
    if any(os.environ.get(k, "").strip() == "1" for k in THREAD_VARS):
        return False
    return n_cpus() >= 2


def _forget_pool():        # a forked child must not reuse the parent's (dead) threads
    global _POOL
    _POOL = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


def map_threads(fn, items) -> list:
    """``[fn(x) for x in items]``, on a shared pool of ``min(2, n_cpus())`` threads when
    :func:`parallel_default` allows, else in this thread. ``fn`` should release the GIL
    (NumPy's generators and array kernels do) for the threads to overlap."""
    items = list(items)
    if len(items) < 2 or not parallel_default():
        return [fn(x) for x in items]
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=min(2, n_cpus()),
                                       thread_name_prefix="stsim-fill")
        pool = _POOL
    return list(pool.map(fn, items))


@contextlib.contextmanager
def one_blas_thread(enabled: bool = True):
    """Run the block with every loaded BLAS library limited to one thread (restored after).

    Yields whether BLAS is pinned: ``False`` when ``enabled`` is false or ``threadpoolctl``
    is not installed (``pip install "stsim[fast]"``). In the tests (``D = 405``) a run
    pinned and one unpinned end with the same parameters and losses bit for bit, and the
    cosines with ``W*``, ``V*`` (a long BLAS dot product) differ in the last bits;
    OpenBLAS promises neither, so a checkpointed run is best resumed in the same mode."""
    if not enabled or importlib.util.find_spec("threadpoolctl") is None:
        yield False
        return
    from threadpoolctl import threadpool_limits
    with threadpool_limits(limits=1, user_api="blas"):
        yield True
