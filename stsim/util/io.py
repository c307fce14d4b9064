"""Files: atomic writes, npz+JSON results, JSON and CSV tables — the one writer of each.

Every file stsim writes goes through :func:`atomic_write` (a temporary file in the
target folder, then ``os.replace``), so a reader sees the old file or the whole new one."""
from __future__ import annotations

import contextlib
import csv
import errno
import json
import os
import stat
import tempfile
import threading

import numpy as np

__all__ = ["atomic_write", "save_npz", "load_npz", "write_json", "to_jsonable",
           "write_csv", "read_csv", "read_json", "FileLock", "OutputLocked",
           "check_writable_folder", "check_writable_file"]


@contextlib.contextmanager
def atomic_write(path, mode="wb"):
    """Write to a temporary file in the target's folder, then ``os.replace`` it into place:
    readers see the old file or the whole new one, never a partial file. A failed write
    (a full disk, a quota) removes the temporary and raises the ``OSError`` with
    ``filename`` the target ``path``."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    _remove_stale_temporaries(folder, os.path.basename(path))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".tmp-{os.getpid()}-",
                               suffix=os.path.basename(path))
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; give the file the usual mode
    try:
        with os.fdopen(fd, mode) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        # an OSError names the file being written, not the temporary
        if isinstance(exc, OSError) and exc.filename in (None, tmp):
            raise type(exc)(exc.errno, exc.strerror or str(exc), path) from None
        raise


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove_stale_temporaries(folder, name):
    """Remove ``.tmp-<pid>-…<name>`` files left by writers that were killed mid-write
    (their pid is gone); files of live writers are left alone."""
    try:
        entries = os.listdir(folder)
    except OSError:
        return
    for entry in entries:
        if not (entry.startswith(".tmp-") and entry.endswith(name)):
            continue
        pid = entry[5:].split("-", 1)[0]
        if pid.isdigit() and not _pid_alive(int(pid)):
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(folder, entry))


def to_jsonable(obj):
    """Convert numpy scalars/arrays and tuples into plain JSON types."""
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    return obj


def write_json(path, obj):
    """Write ``obj`` (numpy values converted) as indented JSON to ``path``, atomically."""
    with atomic_write(path, "w") as fh:
        json.dump(to_jsonable(obj), fh, indent=2, sort_keys=True)
        fh.write("\n")


def save_npz(path, arrays: dict, meta: dict):
    """Save arrays and a JSON metadata string (key ``__meta__``) in one npz, atomically."""
    payload = dict(arrays)
    payload["__meta__"] = np.array(json.dumps(to_jsonable(meta)))
    with atomic_write(path, "wb") as fh:
        np.savez(fh, **payload)


def _what_file(path) -> str:
    """What a file that is not an npz archive looks like, from its first bytes: ``""`` for
    a zip archive (an npz), else a phrase such as ``"a text file (CSV: 'step,loss,...')"``."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(512)
    except OSError:
        return ""
    if head.startswith(b"PK"):
        return ""
    if not head:
        return "an empty file"
    if head.startswith(b"\x93NUMPY"):
        return "a bare NumPy array (.npy), not an npz archive"
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:
        return "not an npz archive (binary data of another kind)"
    first = text.splitlines()[0][:60] if text.strip() else ""
    if text.lstrip().startswith(("{", "[")):
        return f"a text file (JSON: {first!r}), not an npz archive"
    if "," in first:
        return (f"a text file (CSV, header {first!r}: a table such as a run's history.csv; "
                f"read it with stsim.util.io.read_csv or pandas), not an npz archive")
    return f"a text file ({first!r}), not an npz archive"


def load_npz(path, what="stsim file"):
    """Inverse of :func:`save_npz`: returns ``(arrays, meta)``.

    A file that is not a complete npz written by :func:`save_npz` (truncated, garbled, no
    metadata, a folder, a text file such as a CSV table, an array of Python objects)
    raises ``ValueError`` naming the file and what is wrong; a missing file raises
    ``FileNotFoundError``.
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        raise ValueError(f"{path!r} is a folder, not a {what} (.npz)")
    if not os.path.exists(path):
        raise FileNotFoundError(errno.ENOENT, f"no {what} file", path)
    kind = _what_file(path)
    if kind:
        raise ValueError(f"cannot read {what} {path!r}: it is {kind}")
    key = None
    try:
        with np.load(path, allow_pickle=False) as z:
            if not hasattr(z, "files"):
                raise ValueError("it holds a bare array, not an npz archive")
            if "__meta__" not in z.files:
                raise ValueError("it has no __meta__ record (not written by stsim)")
            arrays = {}
            for key in z.files:
                if key != "__meta__":
                    arrays[key] = np.array(z[key])
            key = "__meta__"
            meta = json.loads(str(z["__meta__"]))
    except FileNotFoundError:
        raise
    except Exception as exc:  # noqa: BLE001 - zipfile, EOF, pickle refusals, JSON, ...
        detail = str(exc)
        if "allow_pickle" in detail or "pickle" in detail:
            raise ValueError(f"cannot read {what} {path!r}: its array {key!r} holds Python "
                             f"objects (stsim writes numbers only; refused, as loading "
                             f"objects could run code): not a file stsim wrote") from None
        raise ValueError(f"cannot read {what} {path!r}: {detail} "
                         f"({type(exc).__name__}); the file is corrupt or truncated") from None
    if not isinstance(meta, dict):
        raise ValueError(f"cannot read {what} {path!r}: its __meta__ record is not a JSON "
                         f"object (not written by stsim)")
    return arrays, meta


def _cell(v, float_format=None):
    if v is None:
        return ""
    if isinstance(v, (float, np.floating)):
        return repr(float(v)) if float_format is None else format(float(v), float_format)
    if isinstance(v, (list, dict)):
        return json.dumps(to_jsonable(v))
    if isinstance(v, np.generic):
        return str(v.item())
    return str(v)


def write_csv(path, columns, rows, *, float_format=None):
    """Write a table atomically: a header of ``columns``, then one line per row.

    ``rows`` are dicts (missing keys give empty cells) or sequences in column order.
    Floats are written with ``repr`` (round-trip exact) unless ``float_format`` (e.g.
    ``".6g"``) is given; ``None`` is an empty cell; lists and dicts are JSON.
    """
    columns = list(columns)
    with atomic_write(path, "w") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(columns)
        for row in rows:
            vals = [row.get(c) for c in columns] if isinstance(row, dict) else list(row)
            w.writerow([_cell(v, float_format) for v in vals])
    return path


def _parse_cell(text):
    if text == "":
        return None
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    if text in ("True", "False"):
        return text == "True"
    return text


def read_csv(path) -> list:
    """Read a table written by :func:`write_csv`: a list of dicts, numbers parsed, empty
    cells ``None``."""
    with open(path, newline="", encoding="utf-8") as fh:
        return [{k: _parse_cell(v) for k, v in row.items()} for row in csv.DictReader(fh)]


def read_json(path, what="JSON file"):
    """The JSON value in ``path``; a file that is not JSON text (garbled, truncated,
    binary) raises ``ValueError`` naming the file, the line and what is wrong (a missing
    file raises ``FileNotFoundError``)."""
    path = os.fspath(path)
    if os.path.isdir(path):
        raise ValueError(f"{what} {path!r} is a folder, not a file")
    with open(path, "rb") as fh:
        data = fh.read()
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise ValueError(f"cannot read {what} {path!r}: it holds binary data, not JSON "
                         f"text") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"cannot read {what} {path!r}: not valid JSON ({exc.msg} at line "
                         f"{exc.lineno} column {exc.colno}); the file is corrupt or "
                         f"truncated") from None


class OutputLocked(RuntimeError):
    """Another process holds the :class:`FileLock` of an output (it is writing it)."""


_LOCK_GUARD = threading.Lock()


def _open_no_follow(path):
    """``path`` opened for reading and writing (created if missing), never through a
    symbolic link (``O_NOFOLLOW``) and only if it is a regular file: a lock file that is a
    link to another file would otherwise have that file truncated and overwritten with
    the holder's pid. ``ValueError`` naming the file otherwise."""
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags | getattr(os, "O_NONBLOCK", 0), 0o666)
    except OSError as exc:
        if exc.errno == errno.ELOOP or os.path.islink(path):
            raise ValueError(f"lock file {path!r} is a symbolic link: refused (stsim never "
                             f"writes through a link); remove it") from None
        if exc.errno == errno.EISDIR:
            raise ValueError(f"lock file {path!r} is a folder: remove it") from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ValueError(f"lock file {path!r} is not a regular file: remove it")
    return os.fdopen(fd, "r+", encoding="utf-8")


class FileLock:
    """An exclusive, non-blocking lock on ``<path>.lock``, held while a process writes the
    outputs at ``path`` (a sweep table, a run's folder), so that two processes never write
    them at once (the last writer would win). ``flock`` locks are released by the kernel
    when the holder dies, so a killed process leaves no stale lock. Threads of one process
    share the lock. Raises :class:`OutputLocked` (a ``RuntimeError``) naming the path and
    the holder's pid if another process holds it. The lock file is never opened through
    a symbolic link, nor unless it is a regular file (``ValueError`` naming it).

    With ``remove=True`` the lock file is deleted when the last holder leaves (a run's
    ``.stsim-run.lock``): it is unlinked while still locked, and a process that locked a
    file that was meanwhile unlinked (or replaced) retries on the new one, so two holders
    never coexist."""

    _held: dict = {}   # path -> [file, count]: sweeps in threads of one process share it

    def __init__(self, path, remove: bool = False):
        self.path = os.path.abspath(os.fspath(path)) + ".lock"
        self.remove = bool(remove)

    def _open_locked(self):
        """The lock file, opened and locked (``flock``); retried while the file locked is
        no longer the one at :attr:`path` (a holder with ``remove`` unlinked it)."""
        import fcntl
        while True:
            fh = _open_no_follow(self.path)
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                fh.seek(0)
                holder = fh.read().strip() or "unknown"
                fh.close()
                if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                    raise OutputLocked(
                        f"another process (pid {holder}) is writing {self.path[:-5]!r}; "
                        f"wait for it to finish or use another output path") from None
                raise
            try:
                same = os.path.samestat(os.fstat(fh.fileno()), os.stat(self.path))
            except FileNotFoundError:
                same = False
            if same:
                return fh
            fh.close()     # locked an unlinked file: its holder removed it; try the new one

    def __enter__(self):
        with _LOCK_GUARD:
            if self.path in self._held:
                self._held[self.path][1] += 1
                return self
            fh = self._open_locked()
            try:
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
            except OSError as exc:      # a full disk: no lock file left without its pid
                self._release(fh, unlink=True)
                raise OSError(exc.errno, f"{exc.strerror or exc} (writing the process id "
                                         f"into the lock file)", self.path) from None
            self._held[self.path] = [fh, 1]
        return self

    def __exit__(self, *exc):
        # unlock and close under the guard: a thread entering between the table's update
        # and the unlock would open a second descriptor, which flock refuses — the
        # process would refuse itself ("another process (pid <own pid>)")
        with _LOCK_GUARD:
            entry = self._held[self.path]
            entry[1] -= 1
            if entry[1] > 0:
                return False
            del self._held[self.path]
            self._release(entry[0], self.remove)
        return False

    def _release(self, fh, unlink):
        """Unlock and close ``fh``; ``unlink``: delete the lock file first, while still
        locked (a waiting opener retries on a new one, :meth:`_open_locked`)."""
        import fcntl
        if unlink:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)
        fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
        with contextlib.suppress(OSError):  # a close that flushes onto a full disk
            fh.close()


def check_writable_folder(path, name="out") -> str:
    """Create folder ``path`` if needed and check that a file can be written in it, before
    any work starts; ``ValueError`` naming the parameter otherwise (an empty path, a file,
    ``/dev/null``, a read-only folder, a parent that is a file)."""
    path = os.fspath(path)
    if not path:
        raise ValueError(f"{name} must be a folder path, got an empty string")
    if os.path.exists(path) and not os.path.isdir(path):
        raise ValueError(f"{name}={path!r} exists and is not a folder")
    try:
        os.makedirs(path, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=path, prefix=".tmp-probe-")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise ValueError(f"{name}={path!r} is not a writable folder: {exc.strerror or exc}") \
            from None
    return path


def check_writable_file(path, name="out") -> str:
    """Check, before any work, that a file can be written at ``path`` (its folder created if
    needed); ``ValueError`` naming the parameter otherwise (an empty path, a folder, a
    parent that is a file or read-only). Returns ``os.fspath(path)``."""
    path = os.fspath(path)
    if not path:
        raise ValueError(f"{name} must be a file path, got an empty string")
    if os.path.isdir(path):
        raise ValueError(f"{name}={path!r} is a folder; give the path of a file in it")
    try:
        check_writable_folder(os.path.dirname(os.path.abspath(path)), "folder")
    except ValueError as exc:
        raise ValueError(f"{name}={path!r} cannot be written: {exc}") from None
    return path
