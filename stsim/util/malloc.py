"""Keep the memory a training step frees, instead of handing it back to the kernel.

A step of online SGD allocates and frees the same large arrays every step (the minibatch
and the forward/backward temporaries, 10–100 MB at T = 200, batch 256). With glibc's
defaults a freed block above ``M_MMAP_THRESHOLD`` is unmapped at once, and free memory at
the top of the heap beyond ``M_TRIM_THRESHOLD`` is returned to the kernel; the next step
then faults fresh, zero-filled pages back in, which cost more than the arithmetic
(docs/model.md, "What moved the slots step from 7.40 to 3.90 ms": 12.1 against 6.6 ms).

:func:`keep_freed_memory` raises both thresholds once per process, through glibc's
``mallopt``: blocks up to 32 MiB (the largest threshold glibc accepts on 64-bit) come from
the heap, and up to 256 MiB of freed heap is kept for reuse. The cost is resident memory:
a process may hold up to that much freed memory until it exits. Numbers are unchanged (the
arithmetic does not depend on where an array lives; tested bit for bit).

It acts only where glibc's ``mallopt`` exists (Linux with glibc; elsewhere it does
nothing) and ``STSIM_MALLOC`` is not ``0``. :func:`stsim.core.session.train_loop` calls it,
so every training run, pool worker and study trainer gets it.

**Scope.** The thresholds cannot be put back when the loop ends: glibc has no call that
reads them, and setting either one (even to its documented default) switches off glibc's
*dynamic* mmap threshold for the rest of the process, which is not the state before. So
they stay raised for the life of the process, and what :func:`train_loop` does at its end
is :func:`release_freed_memory` (glibc's ``malloc_trim(0)``): the freed heap it kept is
handed back, so a finished run does not leave up to 256 MiB of freed memory resident in
the caller's process (a notebook's kernel). Later large ``free`` calls of the process are
still kept up to the trim threshold until the next trim or exit (docs/model.md,
"Failure behaviour": side effects).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

__all__ = ["keep_freed_memory", "release_freed_memory", "MALLOC_VAR", "MMAP_THRESHOLD",
           "TRIM_THRESHOLD"]

MALLOC_VAR = "STSIM_MALLOC"
MMAP_THRESHOLD = 32 * 2 ** 20      # bytes; glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit
TRIM_THRESHOLD = 256 * 2 ** 20     # bytes of free heap kept before trimming
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3   # glibc's malloc.h parameter numbers

_state = {"done": False, "applied": False, "libc": None}


def keep_freed_memory() -> bool:
    """Raise glibc's mmap and trim thresholds for this process (module docstring); return
    whether they are in effect. Idempotent; a no-op without glibc or with
    ``STSIM_MALLOC=0``."""
    if _state["done"]:
        return _state["applied"]
    env = os.environ.get(MALLOC_VAR, "").strip()
    if env not in ("", "0", "1"):
        raise ValueError(f"{MALLOC_VAR} must be 0 or 1, got {env!r}")
    applied = False
    if env != "0" and sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            mallopt = libc.mallopt
        except (OSError, AttributeError):   # not glibc (e.g. musl has no mallopt)
            mallopt = None
        if mallopt is not None:
            mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
            applied = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and \
                bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
            _state["libc"] = libc
    _state.update(done=True, applied=applied)
    return applied


def release_freed_memory() -> bool:
    """Hand the freed heap kept under the raised thresholds back to the kernel (glibc's
    ``malloc_trim(0)``); return whether anything was released. A no-op (False) where
    :func:`keep_freed_memory` did not act."""
    trim = getattr(_state.get("libc"), "malloc_trim", None) if _state.get("applied") else None
    if trim is None:
        return False
    trim.argtypes, trim.restype = (ctypes.c_size_t,), ctypes.c_int
    return bool(trim(0))
