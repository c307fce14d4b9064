"""Parameter sweeps on any ``concurrent.futures.Executor``, resumable, into one CSV table.

:func:`sweep` (also ``stsim.sweep``) runs a function over a grid; its docstring holds the
design (under "Notes"). The parts: :mod:`~stsim.sweeps.grid` (points and seeds),
:mod:`~stsim.sweeps.journal` (the per-row journal and the table built from it),
:mod:`~stsim.sweeps.runner` (one call's steps: plan, submit, record, flush),
:mod:`~stsim.sweeps.pool` (the default process pool), :mod:`~stsim.sweeps.carry` (the
caller's registrations, sent to the workers) and :mod:`~stsim.sweeps.rows` (a row's
result and time limit).
"""
from __future__ import annotations

import concurrent.futures as cf
import contextlib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from stsim.sweeps.grid import BOOKKEEPING, check_signature, expand_grid, spawn_seeds
from stsim.sweeps.journal import journal_path
from stsim.sweeps import pool as _pool
from stsim.sweeps.rows import check_timeout
from stsim.sweeps.pool import InlineExecutor, OneThreadProcessPool, make_executor, pool_dumps
from stsim.sweeps.runner import FLUSH_SECONDS, ExecutorFailed, Runner, check_runs
from stsim.core.progress import check_progress
from stsim.util.signals import end_like_interrupt
from stsim.util.io import FileLock, check_writable_file, read_csv
from stsim.util.validate import check_int

__all__ = ["sweep", "SweepResult", "ExecutorFailed", "InlineExecutor", "OneThreadProcessPool",
           "make_executor", "check_runs", "expand_grid", "spawn_seeds", "read_table",
           "BOOKKEEPING", "FLUSH_SECONDS"]

read_table = read_csv  # a sweep table is a CSV written by stsim.util.io.write_csv


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
        (:mod:`stsim.sweeps.pool`: this process for ``max_workers=1``, else a loky pool
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
        Seconds one row may run, at most :data:`stsim.sweeps.rows.MAX_TIMEOUT` (default
        ``None``: no limit). A row over it is recorded as an error (``TimeoutError``) and
        the sweep goes on; a rerun tries it again. How ``fn`` is stopped, and how it
        composes with a nested sweep's or the caller's own timer:
        :func:`stsim.sweeps.rows.call_with_timeout`.

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
    * **Executors** — the default is :func:`stsim.sweeps.pool.make_executor` (this process for
      ``max_workers=1``, else the loky pool of :mod:`stsim.sweeps.pool`, which runs ``fn``
      wherever it was defined). Before the first row, one task carrying ``fn`` is sent to the
      executor (:func:`check_runs`): an ``fn`` the executor cannot run raises ``ValueError``
      there, never a table of error rows. A pool that breaks later raises
      :class:`ExecutorFailed` after saving the finished rows; a rerun computes the lost ones.
    * **Registrations** — the encodings, optimisers and architectures registered in the
      calling process (``stsim.register_encoding`` ...) travel with every task to the workers
      and are registered there before the row runs (:mod:`stsim.sweeps.carry`).
    * **Tables** — :meth:`SweepResult.to_pandas` (pandas, the extra ``stsim[pandas]``); a
      notebook shows a :class:`SweepResult` as an HTML table.
    * **Ctrl-C, SIGTERM, SIGHUP** — the finished rows are saved, the table written, the pool
      ended and the lock released (:func:`stsim.sweeps.pool.stop_on_interrupt`; docs/model.md,
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
      not a record (:func:`stsim.sweeps.journal.load_journal`) raise ``ValueError`` before any
      work starts. An exception inside ``fn`` is recorded in the row and the sweep continues.

    Examples
    --------
    >>> from stsim.sweeps import sweep, InlineExecutor
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

    # one process writes a table at a time (a second one is refused, see FileLock)
    held = FileLock(out, remove=True) if out is not None else contextlib.nullcontext()
    # SIGTERM/SIGHUP take the Ctrl-C path (rows saved, lock released), then end the process
    with end_like_interrupt(), held:
        runner = Runner(fn, points, seed_values, root_seed=root_seed, out=out, keep=keep,
                        retry_failed=retry_failed, timeout=timeout, progress=progress)
        runner.plan()
        rows, columns = runner.execute(executor, own, max_workers)
    return SweepResult(rows=rows, columns=columns, path=None if out is None else os.fspath(out),
                       journal=runner.journal, n_run=len(runner.todo),
                       n_skipped=runner.n_skipped, n_failed=runner.n_failed, times=runner.times)
