"""The manifest of a run's output folder: which files one run wrote, written last.

``stsim run --out OUT`` writes ``OUT/manifest.json`` twice: first as ``{"complete":
false}`` before it replaces any file, last as ``{"complete": true, "run": <id>, "files":
{name: {"bytes", "sha256"}}}`` after every file is written. A folder whose writer was
killed in between therefore says so, and a file replaced by another run no longer
matches its record: :func:`check_manifest` (called by :func:`stsim.load`) refuses both,
so a folder can never pass for one run while it holds files of two. A folder without a
manifest (written by :meth:`stsim.Result.save` alone, or by earlier versions) is read as
it is.
"""
from __future__ import annotations

import hashlib
import json
import os
import uuid

from stsim.util.io import write_json

__all__ = ["MANIFEST", "OUTPUTS", "begin_manifest", "finish_manifest", "check_manifest"]

MANIFEST = "manifest.json"
#: the files of a run's folder that the manifest vouches for (a checkpoint stands alone)
OUTPUTS = ("result.npz", "history.csv", "config.json", "loss.png")


def _digest(path) -> dict:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return {"bytes": os.path.getsize(path), "sha256": h.hexdigest()}


def begin_manifest(out) -> str:
    """Mark folder ``out`` as being written (before any of its files is replaced); returns
    the new run's id."""
    run = uuid.uuid4().hex
    write_json(os.path.join(out, MANIFEST), {"complete": False, "run": run, "files": {}})
    return run


def finish_manifest(out, run: str, paths: dict) -> None:
    """Record the files ``paths`` (``{name: path}``) of run ``run`` as the folder's
    complete contents (written last)."""
    files = {os.path.basename(p): _digest(p) for p in paths.values()}
    write_json(os.path.join(out, MANIFEST), {"complete": True, "run": run, "files": files})


def check_manifest(path) -> None:
    """``ValueError`` naming ``path`` when the manifest of its folder says it cannot be
    trusted: the run writing the folder stopped before it finished (killed while
    writing: the files may belong to two runs), or ``path`` is not the file the manifest
    records (another run replaced it, or it was edited); a ``manifest.json`` that exists
    in any form but a readable manifest (a folder, a dangling symlink, an unreadable file)
    is refused too, never read as absent. Nothing when the folder has no
    manifest, or ``path`` is neither listed nor one of :data:`OUTPUTS` (a checkpoint, a
    file of the user's)."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    name = os.path.basename(path)
    mpath = os.path.join(folder, MANIFEST)
    if not os.path.lexists(mpath):   # a folder, a symlink (dangling too) is a manifest to verify
        return
    try:
        with open(mpath, encoding="utf-8") as fh:
            man = json.load(fh)
        complete, files = man["complete"], man["files"]
        if not isinstance(files, dict) or not isinstance(complete, bool):
            raise TypeError
    except (OSError, ValueError, KeyError, TypeError) as e:
        why = (f"unreadable: {e.strerror}" if isinstance(e, OSError) and e.strerror
               else "garbled or edited")
        raise ValueError(f"cannot trust {path!r}: its folder's {mpath!r} is not a manifest "
                         f"stsim wrote ({why}); rerun the command that wrote the "
                         f"folder") from None
    if name not in files and name not in OUTPUTS:
        return                    # a checkpoint, a file of the user's: not the run's outputs
    if not complete:
        raise ValueError(f"cannot trust {path!r}: its folder's {MANIFEST} says the run writing "
                         f"it stopped before it finished (killed while writing its files, or "
                         f"a file could not be written), so they may belong to two runs; "
                         f"rerun the command (a checkpoint resumes it)")
    if name not in files:
        raise ValueError(f"cannot trust {path!r}: the run its folder's {MANIFEST} records "
                         f"wrote no {name}, so it is another run's")
    if _digest(path) != files[name]:
        raise ValueError(f"cannot trust {path!r}: it is not the file its folder's {MANIFEST} "
                         f"records (another run replaced it, or it was edited), so the folder "
                         f"mixes two runs; rerun the command that wrote the folder")
