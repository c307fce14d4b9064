"""``stsim run``: train one model and write its outputs.

The options are generated from the fields of :class:`stsim.core.config.Config` — the same
names, defaults and help text as :func:`stsim.run` — so Python and command-line defaults
cannot drift apart. List-valued fields (``T_test``, ``q_test``) take comma lists.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import warnings

from stsim.cli.common import int_tuple
from stsim.core.config import Config, field_help
from stsim.core.progress import LinePrinter
from stsim.core.run import RunInterrupted, run
from stsim.core.schedule import LongRunWarning
from stsim.util.io import FileLock, OutputLocked, check_writable_folder
from stsim.util.manifest import MANIFEST, begin_manifest, finish_manifest
from stsim.util.signals import deferred_signals
from stsim.util.validate import check_int

__all__ = ["add_arguments", "main", "write_outputs", "config_flags", "OutputsNotWritten",
           "INTERRUPTED"]

#: exit status of a run stopped by Ctrl-C (128 + SIGINT, the shell's convention)
INTERRUPTED = 130

EPILOG = ("example: stsim run --T 50 --out runs/demo      # derived lr and steps\n"
          "         stsim run --arch fcn --width 128 --T 16 --optimizer adam --out runs/fcn\n"
          "         stsim run --T 200 --lr W=200,V=5.5 --freeze W_xx,W_xe --steps 3000  "
          "# a step per parameter, W's token rows held at 0")

_TYPES = {"int": int, "float": float, "str": str}


def step_arg(text):
    """``--lr``: one number (``"2.5"``) or one step per parameter (``"W=200,V=5.5"`` →
    ``{"W": 200.0, "V": 5.5}``, each parameter once); the values are checked by
    :class:`Config`."""
    if "=" not in text:
        try:
            return float(text)
        except ValueError:      # argparse would name this function, not the flag's value
            raise argparse.ArgumentTypeError(f"give one number or NAME=STEP pairs such as "
                                             f"W=200,V=5.5, got {text!r}") from None
    out = {}
    for item in text.split(","):
        name, sep, value = item.partition("=")
        if not sep or not name.strip() or name.strip() in out:
            raise argparse.ArgumentTypeError(f"give one number or NAME=STEP pairs such as "
                                             f"W=200,V=5.5, each name once, got {text!r}")
        try:
            out[name.strip()] = float(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"the step of {name.strip()} must be a number, "
                                             f"got {value!r}") from None
    return out


def name_tuple(text):
    """``"W_xx,W_xe"`` → ``("W_xx", "W_xe")`` (``""``: nothing)."""
    return tuple(v.strip() for v in text.split(",") if v.strip())


#: fields whose command-line form is not their annotation's first type
_SPECIAL = {"lr": step_arg, "freeze": name_tuple}


def _flag_type(f: dataclasses.Field):
    """argparse ``type`` of a Config field, from its annotation (``"int | None"`` → int)."""
    if f.name in _SPECIAL:
        return _SPECIAL[f.name]
    base = str(f.type).split("|")[0].strip()
    if base == "tuple":
        return int_tuple
    return _TYPES[base]


def config_flags():
    """``[(field, flags, type)]`` for every field of :class:`Config`: ``--name`` and, for
    names with ``_``, the ``--name-with-dashes`` spelling."""
    out = []
    for f in dataclasses.fields(Config):
        flags = [f"--{f.name}"] + ([f"--{f.name.replace('_', '-')}"] if "_" in f.name else [])
        out.append((f, flags, _flag_type(f)))
    return out


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``stsim run``: one per :class:`Config` field, plus the run's outputs."""
    g = p.add_argument_group("run options (the fields of stsim.Config; Python defaults)")
    for f, flags, typ in config_flags():
        meta = {int_tuple: "LIST", name_tuple: "BLOCKS", step_arg: "LR"}.get(typ, f.name.upper())
        g.add_argument(*flags, dest=f.name, type=typ, default=f.default, metavar=meta,
                       help=field_help(f))
    o = p.add_argument_group("output")
    o.add_argument("--out", default=os.path.join("runs", "stsim-run"),
                   help="output folder: result.npz, config.json, history.csv, loss.png, "
                        "and manifest.json written last (default: runs/stsim-run)")
    o.add_argument("--checkpoint_every", "--checkpoint-every", dest="checkpoint_every",
                   type=int, default=None, metavar="K",
                   help="write OUT/checkpoint.npz every K steps; an existing checkpoint is "
                        "resumed (default: no checkpoint)")
    o.add_argument("--quiet", action="store_true",
                   help="no progress lines and no long-run warning on stderr")


class OutputsNotWritten(OSError):
    """Some of a run's files could not be written (a full disk, a quota): the message says
    which, why, and what was kept; ``paths`` holds the files that were written."""

    def __init__(self, message, paths):
        super().__init__(message)
        self.paths = paths


def write_outputs(res, out) -> dict:
    """Write ``result.npz``, ``history.csv``, ``config.json`` and ``loss.png`` into ``out``
    (in that order: the most valuable first) and return their paths.

    ``manifest.json`` (:mod:`stsim.util.manifest`) is marked incomplete before any file is
    replaced and records the files written, with their digests, last: a folder whose
    writer is killed in between, or whose files another run replaced, is refused by
    :func:`stsim.load` instead of passing for one run.

    The figure of an earlier run in ``out`` is removed first, so a failure can never leave
    an old figure beside new results. A file that cannot be written (a full disk) does not
    stop the others; an earlier run's file of that name is removed (never an old file
    beside new ones), and :class:`OutputsNotWritten` then names what failed and what was
    kept."""
    from stsim.util.io import write_json
    from stsim.util.plotting import plot_history

    os.makedirs(out, exist_ok=True)
    paths = {"result": os.path.join(out, "result.npz"), "history": os.path.join(out, "history.csv"),
             "config": os.path.join(out, "config.json"), "figure": os.path.join(out, "loss.png")}
    try:
        run_id = begin_manifest(out)    # the folder says it is being written, until the end
    except OSError as exc:              # nothing replaced: the folder is as it was
        raise OutputsNotWritten(f"could not write {', '.join(map(os.path.basename, paths.values()))}"
                                f" in {out!r}: {exc.strerror or exc} (not even {MANIFEST}, "
                                f"written first); the folder is unchanged", {}) from None
    if os.path.exists(paths["figure"]):
        os.unlink(paths["figure"])
    writers = {
        "result": res.save,
        "history": res.history_csv,
        "config": lambda p: write_json(p, {"config": res.config, "status": res.status,
                                           "message": res.message, "info": res.info}),
        "figure": lambda p: plot_history(res, p),   # = res.plot(path): one figure for both
    }
    written, failed = {}, []
    for name, write in writers.items():
        try:
            write(paths[name])
            written[name] = paths[name]
        except Exception as exc:  # noqa: BLE001 - each file on its own; reported below
            if name != "figure" and not isinstance(exc, OSError):
                raise
            failed.append((os.path.basename(paths[name]), exc))
            if os.path.exists(paths[name]):         # an earlier run's: not beside new files
                os.unlink(paths[name])
    try:
        finish_manifest(out, run_id, written)   # last: the folder is now one run's, whole
    except OSError as exc:      # it stays marked incomplete: stsim.load refuses the folder
        failed.append((MANIFEST, exc))
    if failed:
        what = ", ".join(f"{f} ({getattr(e, 'strerror', None) or e})" for f, e in failed)
        kept = [os.path.basename(p) for p in written.values()]
        if os.path.exists(os.path.join(out, "checkpoint.npz")):
            kept.append("checkpoint.npz")
        raise OutputsNotWritten(f"could not write {what} in {out!r}; kept: "
                                f"{', '.join(kept) or 'nothing'}", written)
    return paths


def _summary(res, paths) -> dict:
    h = res.history
    last = {k: float(v[-1]) for k, v in h.items() if len(v)}
    return {"status": res.status, "assessment": res.assessment, "message": res.message,
            "initial_loss": float(h["loss"][0]) if len(h.get("loss", ())) else None,
            "final_loss": last.get("loss"),
            "final_val": {k: v for k, v in last.items() if k.startswith("val")},
            "cos_W": last.get("cos_W"), "cos_V": last.get("cos_V"),
            "wall_time_s": round(res.info["wall_time_s"], 2), "files": paths}


def main(args) -> int:
    """Train with the options in ``args``; write the outputs; print a JSON summary.

    Exit status: 0 completed, 1 diverged, 2 a bad option or a file that could not be
    written (one line ``stsim: error: …``), 130 interrupted by Ctrl-C (the files of the
    run so far are written; one line says so; :func:`stsim.cli.main` makes it 143 for
    SIGTERM and 129 for SIGHUP, which take the same path)."""
    opts = {f.name: getattr(args, f.name) for f in dataclasses.fields(Config)}
    if args.checkpoint_every is not None:
        check_int("--checkpoint_every", args.checkpoint_every, 1)
    with warnings.catch_warnings():     # run() below says it once
        warnings.simplefilter("ignore", LongRunWarning)
        Config.from_options(**opts)             # bad options fail before the folder is touched
    out = check_writable_folder(args.out, "--out")
    ckpt = os.path.join(out, "checkpoint.npz") if args.checkpoint_every else None
    error = None
    try:
        # one run writes a folder at a time; the lock file goes when the run ends
        with FileLock(os.path.join(out, ".stsim-run"), remove=True):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RunInterrupted)     # said below, one line
                if args.quiet:
                    warnings.simplefilter("ignore", LongRunWarning)
                res = run(checkpoint=ckpt, checkpoint_every=args.checkpoint_every,
                          progress=False if args.quiet else LinePrinter(), **opts)
            try:
                with deferred_signals():      # a signal waits until the files are whole
                    paths = write_outputs(res, out)
            except OutputsNotWritten as exc:
                paths, error = exc.paths, f"--out: {exc}"
    except OutputLocked as exc:                     # the folder is another run's
        raise ValueError(f"--out: {exc}") from None
    print(json.dumps(_summary(res, paths), indent=2), flush=True)
    if error:
        print(f"stsim: error: {error}", file=sys.stderr)
        return 2
    if res.status == "interrupted":
        kept = ", ".join([os.path.basename(p) for p in paths.values()] +
                         (["checkpoint.npz"] if ckpt and os.path.exists(ckpt) else []))
        print(f"stsim: interrupted ({res.info.get('interrupted_by', 'Ctrl-C')}) at step "
              f"{res.info.get('interrupted_at_step')} of "
              f"{res.config['steps']}; kept {kept} in {out}", file=sys.stderr)
        return INTERRUPTED
    return 0 if res.success else 1
