"""Progress of a run: the ``progress`` option of :func:`stsim.run`.

``progress`` is

* ``True`` — a `tqdm <https://tqdm.github.io>`_ bar on stderr (in a notebook, its widget,
  which needs ipywidgets) where tqdm is installed (the optional extra
  ``pip install "stsim[progress]"`` brings both), else
  :class:`LinePrinter`, the line ``stsim run`` prints (at most one every 2 s);
* ``False`` — nothing;
* a callable ``progress(step, steps, row)`` — called at every record (``row``: the
  record's ``step``, ``loss`` and metrics);
* ``None`` (default) — ``True`` for a long run (estimated above :data:`PROGRESS_AFTER_S`
  on one core, :func:`stsim.core.cost.estimated_seconds`) in an interactive session
  (:func:`interactive_session`), else ``False``.

Anything else is refused (``ValueError``) before the run starts.
"""
from __future__ import annotations

import importlib.util
import sys
import time
import warnings

import numpy as np

__all__ = ["check_progress", "make_progress", "make_counter", "interactive_session",
           "LinePrinter", "CountPrinter", "tqdm_class", "PROGRESS_AFTER_S"]

#: a run estimated longer than this (s, one core) shows progress by default when
#: interactive
PROGRESS_AFTER_S = 10.0


def check_progress(progress):
    """``progress`` validated (module docstring): ``None``, a bool or a callable;
    ``ValueError`` naming ``progress`` otherwise."""
    if progress is None or callable(progress):
        return progress
    if isinstance(progress, (bool, np.bool_)):
        return bool(progress)
    raise ValueError(f"progress must be True, False, None (on for long interactive runs) or a "
                     f"callable progress(step, steps, row), got {progress!r}")


def interactive_session() -> bool:
    """Whether this process is a session a person watches: the interactive prompt
    (``sys.ps1``, ``python -i``), IPython or a Jupyter kernel, or code read from stdin or
    ``-c`` (``__main__`` without a file) writing to a terminal (stderr a tty: ``python - <
    script > log 2>&1`` is not watched) — and not a ``multiprocessing`` worker."""
    import multiprocessing
    if multiprocessing.parent_process() is not None:
        return False
    if hasattr(sys, "ps1") or sys.flags.interactive:
        return True
    ipy = sys.modules.get("IPython")
    if ipy is not None and getattr(ipy, "get_ipython", lambda: None)() is not None:
        return True
    main = sys.modules.get("__main__")
    if getattr(main, "__file__", None) not in (None, "<stdin>", "-"):
        return False
    try:
        return sys.stderr is not None and sys.stderr.isatty()
    except (AttributeError, ValueError):        # replaced or closed
        return False


def _extra(row) -> str:
    return "  ".join(f"{k}={v:.4g}" for k, v in row.items()
                     if k not in ("step", "loss") and k.startswith(("val", "cos")))


class LinePrinter:
    """``[  12.3s] step    400/10900  loss=0.8333  val=0.83  cos_W=…`` on ``file``
    (default stderr), at most one line every ``every`` seconds, always at the first and
    the last step. It stops printing, silently, when the stream is closed (``stsim run
    2>&1 | head``)."""

    def __init__(self, every: float = 2.0, file=None):
        self.every, self.file = float(every), file
        self.start = time.perf_counter()
        self.last = -float("inf")
        self.dead = False

    def __call__(self, step, steps, row):
        self.line(step in (0, steps), lambda: f"step {step:>7d}/{steps}  "
                                              f"loss={row['loss']:.4g}  {_extra(row)}")

    def line(self, always: bool, text) -> None:
        """Print ``[elapsed] text()`` unless a line was printed within ``every`` seconds
        (printed ``always`` then) or the stream is closed."""
        now = time.perf_counter()
        if self.dead or (now - self.last < self.every and not always):
            return
        self.last = now
        try:
            print(f"[{now - self.start:6.1f}s] {text()}", file=self.file or sys.stderr,
                  flush=True)
        except (OSError, ValueError):   # a closed pipe or stream: the run goes on
            self.dead = True

    def close(self):
        """Nothing to release."""


def tqdm_class():
    """The tqdm bar to use, or None without tqdm: ``tqdm.auto``'s (a widget in a Jupyter
    kernel) where ipywidgets is installed (the extra ``stsim[progress]`` brings both),
    else the text bar — never ``tqdm.auto``'s "IProgress not found" warning."""
    try:
        with warnings.catch_warnings():     # without ipywidgets, importing tqdm.auto alone
            warnings.simplefilter("ignore")  # warns "IProgress not found"
            from tqdm.auto import tqdm as auto
        from tqdm.std import tqdm as text
    except ImportError:
        return None
    return auto if importlib.util.find_spec("ipywidgets") is not None else text


class _Bar:
    """A tqdm bar over the steps, advanced at every record."""

    def __init__(self, tqdm, start, steps):
        self.bar = tqdm(total=steps, initial=start, unit="step", desc="stsim", file=sys.stderr,
                        dynamic_ncols=True, mininterval=0.5)

    def __call__(self, step, steps, row):
        self.bar.set_postfix_str(f"loss={row['loss']:.4g} {_extra(row)}", refresh=False)
        self.bar.update(step - self.bar.n)

    def close(self):
        self.bar.close()


def make_progress(progress, *, start: int, steps: int, estimated_s: float):
    """The reporter of a run from ``progress`` (module docstring): an object called as
    ``reporter(step, steps, row)`` with a ``close()``, or None. ``start``/``steps``: the
    run's first and last step; ``estimated_s``: its estimated wall time on one core."""
    progress = check_progress(progress)
    if progress is None:
        progress = estimated_s > PROGRESS_AFTER_S and interactive_session()
    if progress is False:
        return None
    if progress is True:
        tqdm = tqdm_class()
        return LinePrinter() if tqdm is None else _Bar(tqdm, start, steps)
    return progress


class CountPrinter:
    """``[  12.3s] sweep 4/12 rows (1 error)`` on stderr, at most one line every ``every``
    seconds, always at the first and the last row (the text form of :func:`make_counter`)."""

    def __init__(self, desc="sweep", every: float = 2.0, file=None):
        self.desc, self.lines = desc, LinePrinter(every, file)
        self.failed = 0

    def __call__(self, done, total, row):
        self.failed += row.get("status", "ok") != "ok"
        bad = f" ({self.failed} error{'s' if self.failed != 1 else ''})" if self.failed else ""
        self.lines.line(done in (1, total), lambda: f"{self.desc} {done}/{total} rows{bad}")

    def close(self):
        """Nothing to release."""


class _CountBar:
    """A tqdm bar over finished items, with the count of failed ones."""

    def __init__(self, tqdm, total, desc):
        self.failed = 0
        self.bar = tqdm(total=total, unit="row", desc=desc, file=sys.stderr,
                        dynamic_ncols=True, mininterval=0.5)

    def __call__(self, done, total, row):
        if row.get("status", "ok") != "ok":
            self.failed += 1
            self.bar.set_postfix_str(f"{self.failed} failed", refresh=False)
        self.bar.update(done - self.bar.n)

    def close(self):
        self.bar.close()


def make_counter(progress, *, total: int, desc: str = "sweep"):
    """The reporter of ``total`` items (a sweep's rows) from ``progress``, the values
    :func:`stsim.run` takes (module docstring): ``True`` a tqdm bar (:func:`tqdm_class`) or
    :class:`CountPrinter`; a callable is called as ``progress(done, total, row)``;
    ``None`` and ``False`` nothing. Returns None or an object with ``close()``."""
    progress = check_progress(progress)
    if progress is None or progress is False:
        return None
    if progress is True:
        tqdm = tqdm_class()
        return CountPrinter(desc) if tqdm is None else _CountBar(tqdm, total, desc)
    return progress
