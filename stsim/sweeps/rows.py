"""One row of a sweep, on the worker side: ``fn`` called under an optional time limit,
and its result checked before it enters the journal.

A result the table cannot store (a complex number, a set, bytes, any object; two keys
that are the same column, ``{1: "a", "1": "b"}``) and a row that runs over ``timeout``
become error rows (``status="error"``, the type named in ``error``): the sweep goes on,
and the journal and the table always hold the same rows."""
from __future__ import annotations

import json
import math
import numbers
import signal
import threading
import time

from stsim.util.io import to_jsonable

__all__ = ["MAX_TIMEOUT", "check_timeout", "call_with_timeout", "result_row"]


MAX_TIMEOUT = 1e8
"""The largest ``timeout`` (seconds, about 3 years): ``signal.setitimer`` overflows past
about 1e9 s here, and 2**31 - 1 s with a 32-bit ``time_t``."""


def check_timeout(timeout):
    """``timeout`` of :func:`stsim.sweeps.sweep`: ``None`` (no limit) or seconds in
    (0, :data:`MAX_TIMEOUT`]; ``ValueError`` naming the parameter otherwise (a larger
    value is refused, not read as no limit: ``None`` says that)."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, numbers.Real) \
            or not 0 < timeout <= MAX_TIMEOUT:
        raise ValueError(f"timeout must be None (no limit) or seconds in (0, {MAX_TIMEOUT:g}], "
                         f"got {timeout!r}")
    return float(timeout)


class _Expired(BaseException):
    """A deadline of :func:`call_with_timeout` came (a ``BaseException``: the rows of a
    sweep nested in ``fn`` do not catch the outer row's deadline as their own error)."""


def call_with_timeout(fn, kwargs: dict, timeout):
    """``fn(**kwargs)``, or ``TimeoutError`` once it has run ``timeout`` seconds.

    In the main thread of a process (a pool's worker, an inline sweep) the limit is a
    ``SIGALRM`` timer: the exception is raised inside ``fn`` at its next Python
    instruction (a long call into compiled code ends first). A timer already running (a
    caller's ``signal.alarm``/``setitimer``, or the row of an outer sweep that called
    this one) keeps its deadline: the timer is armed for the earlier of the two, and
    when that is the other's, its handler is called there (an outer row's deadline
    ends the outer row, through any nested sweep; a caller's handler runs and ``fn``
    goes on). Afterwards the previous handler is put back and its timer re-armed with
    the time it has left (at once if it came due and was not yet delivered). Elsewhere
    (a thread: Dask's workers, a sweep run from a thread) ``fn`` runs in a daemon thread
    that is abandoned at the limit: the row is recorded as an error and the thread
    finishes in the background."""
    if timeout is None:
        return fn(**kwargs)
    message = (f"fn ran longer than timeout={timeout:g} s; the row is recorded as an error "
               f"(rerun with a larger timeout to compute it)")
    if threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer"):
        left, interval = signal.setitimer(signal.ITIMER_REAL, 0)   # the other timer, stopped
        now = time.monotonic()
        due = now + timeout
        other = now + left if left > 0 else None                   # its deadline
        mine = _Expired()

        def arm():
            first = due if other is None else min(due, other)
            signal.setitimer(signal.ITIMER_REAL, max(first - time.monotonic(), 1e-6))

        def alarm(signum, frame):
            nonlocal other
            if other is None or due < other:
                raise mine
            other = other + interval if interval > 0 else None     # the other one is due
            arm()
            if callable(previous):
                previous(signum, frame)
            elif previous == signal.SIG_DFL:                       # ends the process
                signal.signal(signal.SIGALRM, signal.SIG_DFL)
                signal.raise_signal(signal.SIGALRM)

        previous = signal.signal(signal.SIGALRM, alarm)
        arm()
        try:
            return fn(**kwargs)
        except _Expired as exc:
            if exc is mine:
                raise TimeoutError(message) from None
            raise
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
            if other is not None:
                signal.setitimer(signal.ITIMER_REAL, max(other - time.monotonic(), 1e-6),
                                 interval)
    box = {}

    def target():
        try:
            box["out"] = fn(**kwargs)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller below
            box["exc"] = exc

    worker = threading.Thread(target=target, daemon=True, name="stsim-sweep-row")
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        raise TimeoutError(message + " (its thread was abandoned and runs on)")
    if "exc" in box:
        raise box["exc"]
    return box["out"]


def result_row(out) -> dict:
    """The row entries of ``fn``'s return value ``out``: a dict (a scalar is the entry
    ``value``) with text keys and JSON values (NumPy values converted).

    ``TypeError`` naming the entry and its type when a value is not one the journal and
    the table can store (numbers, text, ``True``/``False``, ``None``, lists and dicts of
    them), and when two keys are the same column (``1`` and ``"1"``).

    >>> result_row({"a": 1, 2: [0.5]})
    {'a': 1, '2': [0.5]}
    >>> result_row({"v": 1 + 2j})
    Traceback (most recent call last):
    ...
    TypeError: fn's result 'v' is a complex ((1+2j)), which a table cannot store: ...
    """
    if not isinstance(out, dict):
        out = {"value": out}
    row, original = {}, {}
    for k, v in out.items():
        name = str(k)
        if name in original:
            raise TypeError(f"fn's result has the keys {original[name]!r} and {k!r}, which "
                            f"are both the column {name!r}")
        original[name] = k
        value = to_jsonable(v)
        try:
            json.dumps(value)
        except (TypeError, ValueError):
            text = repr(v)
            text = text if len(text) <= 60 else text[:57] + "..."
            raise TypeError(f"fn's result {name!r} is a {type(v).__name__} ({text}), which a "
                            f"table cannot store: return numbers, text, True/False, None, or "
                            f"lists and dicts of them") from None
        row[name] = value
    return row
