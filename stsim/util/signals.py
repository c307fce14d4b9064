"""SIGTERM and SIGHUP end a command as Ctrl-C does; Ctrl-C while the command is still
importing is one line too.

``timeout``, a batch scheduler's preemption, ``docker stop`` (SIGTERM) and a closed
terminal (SIGHUP) would otherwise kill ``stsim <command>`` at once: nothing said, the
run so far lost, a lock file left. Inside :class:`TerminateAsInterrupt` such a signal
takes the path Ctrl-C takes — it calls whatever handles SIGINT at that moment: a run's
loop stops at its next step boundary and returns its result so far
(:meth:`stsim.core.state.RunState.catch_interrupt`), a sweep or a study raises
``KeyboardInterrupt`` after ending its pool (:func:`stsim.sweeps.pool.stop_on_interrupt`),
elsewhere ``KeyboardInterrupt`` is raised — and records which signal came, so that the
command exits ``128 + signal number`` (143 for SIGTERM, 129 for SIGHUP) after one line.
Locks are released on the way out, the files of the run so far written.

>>> import signal
>>> with TerminateAsInterrupt() as term:
...     try:
...         signal.raise_signal(signal.SIGTERM)
...     except KeyboardInterrupt:
...         pass
>>> term.received == signal.SIGTERM, term.exit_status
(True, 143)
"""
from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading

__all__ = ["TerminateAsInterrupt", "SIGNALS", "signal_name", "guard_cli_imports", "release_cli_imports",
           "route_termination", "end_like_interrupt", "deferred_signals"]

#: the signals turned into the Ctrl-C path (those this platform has)
SIGNALS = tuple(getattr(signal, n) for n in ("SIGTERM", "SIGHUP") if hasattr(signal, n))


def signal_name(signum) -> str:
    """``"SIGTERM"`` for 15, ``"Ctrl-C"`` for SIGINT (what the user pressed)."""
    if signum is None or signum == signal.SIGINT:
        return "Ctrl-C"
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


class TerminateAsInterrupt:
    """While inside (in the main thread), SIGTERM and SIGHUP call the current SIGINT
    handler with their own number, as if Ctrl-C had been pressed (a SIGINT handler that
    is not callable — ignored, default — is replaced by raising ``KeyboardInterrupt``).
    :attr:`received` is the first such signal (``None`` if none came). The previous
    handlers are put back on leaving. Signals whose handler is not the default one (set
    by the caller) are left alone; outside the main thread nothing changes."""

    def __init__(self):
        self.received = None
        self._saved = {}
        self._direct = None
        self._final = False       # a route that an inner one may not replace

    def route_to(self, handler):
        """Send the next SIGTERM or SIGHUP to ``handler(signum, frame)`` instead of the
        SIGINT handler (``None``: back to it). For a run's loop when Ctrl-C does not
        reach it (SIGINT ignored, as in a background job ``stsim run … &`` of a script):
        the termination still stops it at a step boundary with its result kept."""
        self._direct = handler

    @property
    def exit_status(self):
        """``128 + signal number`` of :attr:`received` (``None`` if none came)."""
        return None if self.received is None else 128 + int(self.received)

    def _handler(self, signum, frame):
        if self.received is None:
            self.received = signum
        if self._direct is not None:
            handler, self._direct = self._direct, None    # once: the next one is direct
            handler(signum, frame)
            return
        handler = signal.getsignal(signal.SIGINT)
        if callable(handler):
            handler(signum, frame)
        else:
            raise KeyboardInterrupt

    def __enter__(self):
        if threading.current_thread() is not threading.main_thread():
            return self
        for s in SIGNALS:
            if signal.getsignal(s) in (signal.SIG_DFL, None):
                self._saved[s] = signal.signal(s, self._handler)
        return self

    def __exit__(self, *exc):
        for s, previous in self._saved.items():
            signal.signal(s, previous)
        self._saved.clear()
        return False


@contextlib.contextmanager
def route_termination(handler, final=False):
    """While inside, a SIGTERM or SIGHUP that a :class:`TerminateAsInterrupt` handles goes
    to ``handler`` (:meth:`TerminateAsInterrupt.route_to`); nothing changes when none
    handles them. A ``final`` route is not replaced by a route taken inside it: a study
    that ends its whole sweep on the signal is not overruled by one run's loop inside it,
    which would stop only that run and let the sweep go on to the next."""
    routers = {getattr(signal.getsignal(s), "__self__", None) for s in SIGNALS}
    routers = [r for r in routers if isinstance(r, TerminateAsInterrupt) and not r._final]
    previous = [r._direct for r in routers]      # nested: the outer route comes back
    for r in routers:
        r.route_to(handler)
        r._final = final
    try:
        yield
    finally:
        for r, p in zip(routers, previous):
            r.route_to(p)
            r._final = False


@contextlib.contextmanager
def end_like_interrupt():
    """For a library call that cleans up on Ctrl-C (a sweep: rows saved, table written,
    pool ended, lock released): while inside, SIGTERM and SIGHUP at their default take
    that Ctrl-C path (:class:`TerminateAsInterrupt`), and once the call has cleaned up the
    process ends by the signal, as it would have at once. Under the stsim command (whose
    handlers are already installed) it changes nothing."""
    term = TerminateAsInterrupt()
    try:
        with term:
            yield term
    except KeyboardInterrupt:
        if term.received is None:
            raise
    if term.received is not None:      # handlers restored: the default action ends us
        _release_semaphores()
        signal.raise_signal(term.received)


def _release_semaphores():
    """Run what a normal exit runs for multiprocessing objects (their finalizers of
    priority >= 0: a process pool's queues unlink their named semaphores), since a process
    ended by a signal's default action runs no exit handler: the resource tracker would
    then clean them up and warn of 'leaked semlock objects'. A private hook of
    ``multiprocessing.util`` (there since Python 2.6); skipped where it is missing."""
    run = getattr(sys.modules.get("multiprocessing.util"), "_run_finalizers", None)
    if run is not None:
        with contextlib.suppress(Exception):
            run(0)


@contextlib.contextmanager
def deferred_signals():
    """While inside (in the main thread), Ctrl-C, SIGTERM and SIGHUP wait: the first one is
    noted and delivered again on leaving, once the work inside is done — for writing a
    run's files, which a signal must not leave half written (the folder would hold the new
    result beside the old figure; :mod:`stsim.util.manifest` would refuse it). The
    previous handlers are put back first, so the signal then acts as it would have. An
    ignored signal (SIGINT and SIGHUP of ``nohup stsim run … &``) stays ignored: noted, it
    would take the place of a SIGTERM that came after it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending = []

    def note(signum, frame):
        if not pending:
            pending.append(signum)

    saved = {s: signal.signal(s, note) for s in (signal.SIGINT,) + SIGNALS
             if signal.getsignal(s) is not signal.SIG_IGN}
    try:
        yield
    finally:
        for s, previous in saved.items():
            signal.signal(s, previous)
        if pending:
            signal.raise_signal(pending[0])


def _is_cli_process() -> bool:
    """Whether this process is the ``stsim`` command (``stsim …`` or ``python -m stsim
    …``), judged from how Python was started."""
    argv = getattr(sys, "orig_argv", None) or []
    if "-m" in argv:
        i = argv.index("-m")
        if i + 1 < len(argv) and argv[i + 1] == "stsim":
            return True
    return bool(sys.argv) and os.path.basename(sys.argv[0] or "") == "stsim"


_HELD = []


def _hold_sigint(signum, frame):
    _HELD.append(signum)


def release_cli_imports() -> bool:
    """Put Python's Ctrl-C handler back once the ``stsim`` command has imported what it
    needs (:func:`guard_cli_imports` held Ctrl-C meanwhile); True when Ctrl-C came during
    the imports (the command then ends with one line, exit status 130)."""
    if signal.getsignal(signal.SIGINT) is _hold_sigint:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    return bool(_HELD)


def guard_cli_imports() -> None:
    """In the ``stsim`` command only: Ctrl-C before the command's own handling starts
    (during its 1-3 s of imports) ends it with one line and exit status 130, not a
    traceback. It sets ``sys.excepthook`` for ``KeyboardInterrupt``; nothing changes
    when stsim is imported as a library."""
    if not _is_cli_process():
        return
    # Ctrl-C is held, not raised, until the command has imported what it needs
    # (release_cli_imports): a KeyboardInterrupt inside an import can leave a module half
    # initialised, and the next import then fails with an ImportError traceback
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _hold_sigint)
    previous = sys.excepthook

    def hook(kind, value, tb):
        if issubclass(kind, KeyboardInterrupt):
            try:
                print("stsim: interrupted (Ctrl-C)", file=sys.stderr, flush=True)
            except (OSError, ValueError):
                pass
            os._exit(130)       # the command's status for Ctrl-C (nothing else to flush)
        previous(kind, value, tb)

    sys.excepthook = hook
