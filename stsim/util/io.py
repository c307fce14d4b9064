"""Atomic file writing and npz+JSON (de)serialisation helpers."""
from __future__ import annotations

import contextlib
import json
import os
import tempfile

import numpy as np

__all__ = ["atomic_write", "save_npz", "load_npz", "write_json", "to_jsonable"]


@contextlib.contextmanager
def atomic_write(path, mode="wb"):
    """Write to a temporary file in the target's folder, then ``os.replace`` it into place:
    readers see the old file or the whole new one, never a partial file."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=os.path.basename(path))
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; give the file the usual mode
    try:
        with os.fdopen(fd, mode) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


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
    with atomic_write(path, "w") as fh:
        json.dump(to_jsonable(obj), fh, indent=2, sort_keys=True)
        fh.write("\n")


def save_npz(path, arrays: dict, meta: dict):
    """Save arrays and a JSON metadata string (key ``__meta__``) in one npz, atomically."""
    payload = dict(arrays)
    payload["__meta__"] = np.array(json.dumps(to_jsonable(meta)))
    with atomic_write(path, "wb") as fh:
        np.savez(fh, **payload)


def load_npz(path):
    """Inverse of :func:`save_npz`: returns ``(arrays, meta)``."""
    with np.load(path, allow_pickle=False) as z:
        arrays = {k: np.array(z[k]) for k in z.files if k != "__meta__"}
        meta = json.loads(str(z["__meta__"])) if "__meta__" in z.files else {}
    return arrays, meta
