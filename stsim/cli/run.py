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
import time

from stsim.cli.common import int_tuple
from stsim.core.config import Config, field_help
from stsim.util.io import FileLock, check_writable_folder

__all__ = ["add_arguments", "main", "write_outputs", "config_flags"]

EPILOG = ("example: stsim run --T 50 --out runs/demo      # derived lr and steps\n"
          "         stsim run --arch fcn --width 128 --T 16 --optimizer adam --out runs/fcn")

_TYPES = {"int": int, "float": float, "str": str}


def _flag_type(f: dataclasses.Field):
    """argparse ``type`` of a Config field, from its annotation (``"int | None"`` → int)."""
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
        meta = "LIST" if typ is int_tuple else f.name.upper()
        g.add_argument(*flags, dest=f.name, type=typ, default=f.default, metavar=meta,
                       help=field_help(f))
    o = p.add_argument_group("output")
    o.add_argument("--out", default=os.path.join("runs", "stsim-run"),
                   help="output folder: result.npz, config.json, history.csv, loss.png "
                        "(default: runs/stsim-run)")
    o.add_argument("--checkpoint_every", "--checkpoint-every", dest="checkpoint_every",
                   type=int, default=None, metavar="K",
                   help="write OUT/checkpoint.npz every K steps; an existing checkpoint is "
                        "resumed (default: no checkpoint)")
    o.add_argument("--quiet", action="store_true", help="no progress lines on stderr")


def _progress_printer(quiet):
    last = [0.0]
    start = time.perf_counter()

    def show(step, steps, row):
        now = time.perf_counter()
        if quiet or (now - last[0] < 2.0 and step not in (0, steps)):
            return
        last[0] = now
        extra = "  ".join(f"{k}={v:.4g}" for k, v in row.items() if k not in ("step", "loss")
                          and k.startswith(("val", "cos")))
        print(f"[{now - start:6.1f}s] step {step:>7d}/{steps}  loss={row['loss']:.4g}  {extra}",
              file=sys.stderr, flush=True)
    return show


def write_outputs(res, out) -> dict:
    """Write ``result.npz``, ``config.json``, ``history.csv`` and ``loss.png`` into ``out``.

    The figure of an earlier run in ``out`` is removed first, so a failure can never leave
    an old figure beside new results."""
    from stsim.util.io import write_json
    from stsim.util.plotting import plot_history

    os.makedirs(out, exist_ok=True)
    paths = {"result": os.path.join(out, "result.npz"), "config": os.path.join(out, "config.json"),
             "history": os.path.join(out, "history.csv"), "figure": os.path.join(out, "loss.png")}
    if os.path.exists(paths["figure"]):
        os.unlink(paths["figure"])
    res.save(paths["result"])
    write_json(paths["config"], {"config": res.config, "status": res.status,
                                 "message": res.message, "info": res.info})
    res.history_csv(paths["history"])
    plot_history(res, paths["figure"])   # = res.plot(path): one figure for both
    return paths


def main(args) -> int:
    """Train with the options in ``args``; write the outputs; print a JSON summary."""
    from stsim.core.run import run

    opts = {f.name: getattr(args, f.name) for f in dataclasses.fields(Config)}
    Config.from_options(**opts)                 # bad options fail before the folder is touched
    out = check_writable_folder(args.out, "--out")
    ckpt = os.path.join(out, "checkpoint.npz") if args.checkpoint_every else None
    try:
        with FileLock(os.path.join(out, ".stsim-run")):  # one run writes a folder at a time
            res = run(checkpoint=ckpt, checkpoint_every=args.checkpoint_every,
                      progress=_progress_printer(args.quiet), **opts)
            paths = write_outputs(res, out)
    except RuntimeError as exc:                     # the folder is another run's
        raise ValueError(f"--out: {exc}") from None
    h = res.history
    last = {k: float(v[-1]) for k, v in h.items() if len(v)}
    summary = {"status": res.status, "assessment": res.assessment, "message": res.message,
               "initial_loss": float(h["loss"][0]) if len(h.get("loss", ())) else None,
               "final_loss": last.get("loss"),
               "final_val": {k: v for k, v in last.items() if k.startswith("val")},
               "cos_W": last.get("cos_W"), "cos_V": last.get("cos_V"),
               "wall_time_s": round(res.info["wall_time_s"], 2), "files": paths}
    print(json.dumps(summary, indent=2))
    return 0 if res.success else 1
