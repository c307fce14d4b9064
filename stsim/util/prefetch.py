"""Draw a training run's minibatches one step ahead, on a second core.

A step of online SGD first draws its minibatch (Gaussian tokens, a subset, the encodings)
and then runs the forward/backward pass on it. The two do not depend on each other across
steps, so :class:`Prefetch` draws batch ``t + 1`` on a background thread while the caller
computes step ``t``. NumPy's generators and most array kernels release the GIL, so on a
machine with two free cores the two overlap.

The numbers are exactly those of drawing in the foreground: one thread alone uses the
generator, in order, so batch ``t`` is the same array either way (tested bit for bit).
:meth:`Prefetch.state` is the generator state *before the next batch not yet taken* — what
a checkpoint must save so that a resumed run continues like an uninterrupted one, although
the thread has already drawn further.

:func:`prefetch_default` is the automatic choice: on when
:func:`stsim.util.threads.parallel_default` allows a second thread (two or more CPUs, BLAS
not pinned to one thread by the environment: a pool worker of
:class:`stsim.sweeps.pool.OneThreadProcessPool` is pinned, it owns one core and a second
thread per worker would oversubscribe the machine). ``STSIM_PREFETCH=0`` / ``=1`` overrides
it. While it draws, the training loop pins BLAS to one thread
(:func:`stsim.util.threads.one_blas_thread`).
"""
from __future__ import annotations

import os
import queue
import threading
import weakref

from stsim.util.threads import parallel_default

__all__ = ["Prefetch", "prefetch_default", "PREFETCH_VAR"]

PREFETCH_VAR = "STSIM_PREFETCH"     # the override


def prefetch_default() -> bool:
    """Whether to prefetch when the caller does not say (module docstring)."""
    env = os.environ.get(PREFETCH_VAR, "").strip()
    if env in ("0", "1"):
        return env == "1"
    if env:
        raise ValueError(f"STSIM_PREFETCH must be 0 or 1, got {env!r}")
    return parallel_default()


class Prefetch:
    """``draw(rng)`` called in order on a background thread, at most ``depth`` results
    ahead of the consumer; :meth:`next` returns them in order.

    An exception raised by ``draw`` is raised again by the :meth:`next` that would have
    returned its result. Use as a context manager, or call :meth:`close`; a prefetcher
    dropped unclosed stops its thread when it is garbage-collected.

    Parameters
    ----------
    draw : callable
        ``draw(rng)`` returns one step's data; the only user of ``rng`` while the
        prefetcher lives.
    rng : numpy.random.Generator
        The generator ``draw`` uses.
    depth : int
        Results drawn ahead (1 is enough to overlap one step; 2 absorbs jitter).

    Example
    -------
    >>> import numpy as np
    >>> with Prefetch(lambda r: r.standard_normal(3), np.random.default_rng(0)) as p:
    ...     a, b = p.next(), p.next()
    >>> r = np.random.default_rng(0)
    >>> bool(np.array_equal(a, r.standard_normal(3)) and np.array_equal(b, r.standard_normal(3)))
    True
    """

    def __init__(self, draw, rng, depth: int = 2):
        self._state = rng.bit_generator.state
        self._queue: queue.Queue = queue.Queue(maxsize=max(1, int(depth)))
        self._stop = threading.Event()
        # the thread holds no reference to self: a prefetcher dropped unclosed (its owner
        # garbage-collected) is finalized, and that stops the thread
        self._thread = threading.Thread(target=_work, name="stsim-prefetch", daemon=True,
                                        args=(draw, rng, self._queue, self._stop))
        self._thread.start()
        weakref.finalize(self, self._stop.set)

    def next(self):
        """The next result of ``draw``, in the order drawn."""
        if self._stop.is_set():
            raise RuntimeError("the prefetcher is closed")
        data, state, exc = self._queue.get()
        if exc is not None:
            self.close()
            raise exc
        self._state = state
        return data

    def state(self) -> dict:
        """The generator state before the next result not yet taken by :meth:`next`."""
        return self._state

    def close(self):
        """Stop the thread (results drawn ahead are dropped). The queue is emptied first, so
        that a thread waiting to put into it returns at once (not at its next poll)."""
        self._stop.set()
        try:
            while True:
                self._queue.get_nowait()
        except queue.Empty:
            pass
        self._thread.join()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def _put(q, stop, item) -> bool:
    while not stop.is_set():
        try:
            q.put(item, timeout=0.05)
            return True
        except queue.Full:
            continue
    return False


def _work(draw, rng, q, stop):
    """The thread of :class:`Prefetch`: ``draw(rng)`` in order into ``q`` until ``stop``."""
    try:
        while not stop.is_set():
            data = draw(rng)
            if not _put(q, stop, (data, rng.bit_generator.state, None)):
                return
    except BaseException as exc:  # noqa: BLE001 - delivered to the consumer
        _put(q, stop, (None, None, exc))
