"""The journal of a sweep (one JSON line per finished row, fsync'ed) and the table
built from it."""
from __future__ import annotations

import json
import numbers
import os
import threading

from stsim.sweeps.grid import BOOKKEEPING, point_key, spawn_seeds

__all__ = ["journal_path", "load_journal", "append_journal", "build_table", "lock_for",
           "shared_records", "result_column", "check_record"]


_LOCKS: dict = {}
_LOCKS_GUARD = threading.Lock()


def lock_for(path):
    """One lock per journal file, shared by the threads of this process."""
    with _LOCKS_GUARD:
        return _LOCKS.setdefault(os.path.abspath(path), threading.Lock())


_STORES: dict = {}


def shared_records(path) -> dict:
    """The records of journal ``path`` shared by the sweeps of this process: read from
    the file and returned as one dict per path, so concurrent sweeps on one ``out`` see
    each other's rows without re-reading the file. The store holds exactly the file's
    rows: it is replaced by what the file holds (a journal deleted since, with its
    table, leaves no row to serve), and a sweep adds a row to it only after appending
    it to the file. Call it holding :func:`lock_for` ``(path)``."""
    store = _STORES.setdefault(os.path.abspath(path), {})
    store.clear()
    store.update(load_journal(path))
    return store


def check_seeds(path, records: dict, root_seed: int) -> None:
    """``ValueError`` naming the journal ``path`` when one of its ``records`` was written
    with another ``root_seed``: its ``seed`` is not the seed this ``root_seed`` gives its
    replicate (:func:`stsim.sweeps.grid.spawn_seeds`). Serving it would mix two seed
    streams in one table; the message names the recorded root seed when the record has
    it (journals of earlier versions do not)."""
    if not records:
        return
    n = 1 + max(r["seed_index"] for r in records.values())
    want = spawn_seeds(n, root_seed)
    for rec in records.values():
        if rec["seed"] != want[rec["seed_index"]]:
            old = rec.get("root_seed")
            was = f"root_seed={old}" if isinstance(old, int) else "another root_seed"
            raise ValueError(
                f"sweep journal {os.fspath(path)!r} was written with {was}: replicate "
                f"{rec['seed_index']} of point {rec['point']} has seed {rec['seed']}, "
                f"root_seed={root_seed} gives {want[rec['seed_index']]}; pass the journal's "
                f"root_seed to resume it, or another out (or remove the journal and its "
                f"table) to compute with this one")


def journal_path(out):
    """The journal of a table: ``<out>.journal.jsonl``."""
    return os.fspath(out) + ".journal.jsonl"


def load_journal(path) -> dict:
    """``{(point_key, seed_index): record}``, the last record of a pair winning.

    A torn (unparsable) line, as left by a crash during a write, is skipped. A line that is
    valid JSON but not a record of :func:`append_journal` (see :func:`check_record`), or
    that is not text, raises ``ValueError`` naming the file and the line: the file is not
    a journal, or was edited, and resuming from it would be guessing."""
    recs = {}
    if path is None or not os.path.exists(path):
        return recs
    if os.path.isdir(path):
        raise ValueError(f"sweep journal {os.fspath(path)!r} is a folder, not a file")
    with open(path, "rb") as fh:
        for n, raw in enumerate(fh, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise ValueError(f"sweep journal {os.fspath(path)!r} line {n} holds binary "
                                 f"data, not JSON text: not a journal stsim wrote (remove "
                                 f"the file to compute its rows again)") from None
            try:
                rec = json.loads(line)
            except ValueError:
                continue                          # torn by a crash mid-write: not finished
            problem = check_record(rec)
            if problem:
                raise ValueError(f"sweep journal {os.fspath(path)!r} line {n} is not a sweep "
                                 f"record ({problem}): remove the line, or the file to "
                                 f"compute its rows again")
            recs[(point_key(rec["point"]), rec["seed_index"])] = rec
    return recs


def check_record(rec) -> str:
    """What is wrong with a journal record ``rec`` (``""`` if nothing): a JSON object with
    ``point`` (an object), ``seed_index`` (an int >= 0), ``seed`` (an int), ``status``
    (``"ok"`` or ``"error"``), ``result`` (an object) and ``error`` (text).

    >>> check_record({"point": {"a": 1}, "seed_index": 0, "seed": 5, "status": "ok",
    ...               "result": {}, "error": ""})
    ''
    >>> check_record([1, 2])
    'a JSON list, not an object'
    """
    if not isinstance(rec, dict):
        return f"a JSON {type(rec).__name__.replace('str', 'string')}, not an object"
    want = {"point": dict, "seed_index": int, "seed": int, "status": str, "result": dict,
            "error": str}
    for key, typ in want.items():
        if key not in rec:
            return f"no {key!r}"
        v = rec[key]
        if not isinstance(v, typ) or isinstance(v, bool):
            return f"{key!r} is {v!r}, not {'an' if typ is int else 'a'} {typ.__name__}"
    if rec["seed_index"] < 0:
        return f"'seed_index' is {rec['seed_index']}, not >= 0"
    if rec["status"] not in ("ok", "error"):
        return f"'status' is {rec['status']!r}, not 'ok' or 'error'"
    return ""


def append_journal(path, rec):
    """Append one finished row ``rec`` to the journal as a JSON line, flushed and fsync'ed.
    A failed write (a full disk) raises the ``OSError`` with ``filename`` the journal; at
    most a torn last line is left, which :func:`load_journal` skips."""
    try:
        with open(path, "a+", encoding="utf-8") as fh:
            fh.seek(0, os.SEEK_END)
            if fh.tell() > 0:
                fh.seek(fh.tell() - 1)
                if fh.read(1) != "\n":  # a torn line from a crash: end it, it will be skipped
                    fh.write("\n")
            fh.write(json.dumps(rec, sort_keys=True) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
    except OSError as exc:
        if exc.filename is None:
            raise type(exc)(exc.errno, exc.strerror or str(exc), os.fspath(path)) from None
        raise


def _sort_value(v):
    if v is None:
        return (0, 0.0, "")
    if isinstance(v, (bool, numbers.Real)):
        return (1, float(v), "")
    return (2, 0.0, str(v))


def build_table(records, param_order):
    """``(rows, columns)`` of the CSV table from journal ``records``: the parameters (in
    ``param_order``), the bookkeeping columns, then the result columns sorted; rows sorted
    by parameter values and ``seed_index``."""
    names = list(param_order)
    extra = sorted({k for r in records for k in r["point"]} - set(names))
    names += extra
    results = sorted({k for r in records for k in r["result"]})
    taken = set(names) | set(BOOKKEEPING)
    column = {k: result_column(k, taken) for k in results}
    rows = []
    for r in records:
        row = {k: r["point"].get(k) for k in names}
        row.update(seed_index=r["seed_index"], seed=r["seed"], status=r["status"],
                   error=r["error"])
        for k in results:
            row[column[k]] = r["result"].get(k)
        rows.append(row)
    rows.sort(key=lambda row: tuple(_sort_value(row[k]) for k in names) + (row["seed_index"],))
    return rows, names + list(BOOKKEEPING) + [column[k] for k in results]


def result_column(key: str, taken) -> str:
    """The table column of a result entry ``key``: the key itself, or ``fn.<key>`` when it
    would overwrite a parameter or bookkeeping column (``stsim.run``-like results carry
    their own ``status`` and ``seed``)."""
    return f"fn.{key}" if key in taken else key
