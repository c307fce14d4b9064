"""Command line: ``stsim run …``, ``stsim theory …``, ``stsim figures …``, ``stsim separation …``.

Each sub-command lives in the module that owns its logic and exposes
``add_arguments(parser)`` and ``main(args) -> int``; this file only dispatches, importing
modules lazily so that ``stsim run`` does not load experiment code. Bad input
(``ValueError``) is printed as one line ``stsim: error: …`` with exit status 2.
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time

__all__ = ["main"]

# name -> (module, one-line help)
COMMANDS = {
    "run": ("stsim.cli", "train one model and write result, config, history CSV and loss figure"),
    "theory": ("stsim.theory.checks", "check Theorems 1-2 numerically on the reduced population dynamics"),
    "figures": ("stsim.studies.figures", "reproduce the paper's figures (--quick or --full)"),
    "separation": ("stsim.studies.separation.study",
                   "transformer vs fully-connected width-scaling experiment"),
    "expressivity": ("stsim.studies.expressivity.study",
                     "explicit attention constructions (qSA, sparse patterns) and width laws"),
    "sparse": ("stsim.studies.sparse.study",
               "sparse Boolean functions: sample complexity against T, attention head vs FCN"),
}


def _int_list(text):
    return [int(v) for v in text.split(",") if v.strip()] if text else []


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``stsim run`` (the same names as :func:`stsim.run`)."""
    p.add_argument("--T", type=int, default=50, help="sequence length (default 50)")
    p.add_argument("--q", type=int, default=3, help="subset size (default 3)")
    p.add_argument("--pe", default="stochastic", help="onehot | near-orthogonal | stochastic")
    p.add_argument("--sampler", default="slots", help="stochastic law: slots | sphere")
    p.add_argument("--d", type=int, default=5)
    p.add_argument("--d_e", "--d-e", dest="d_e", type=int, default=None)
    p.add_argument("--model", default="theory", help="theory | practical")
    p.add_argument("--query", default="sum", help="sum | mean")
    p.add_argument("--objective", default="online", help="online | population")
    p.add_argument("--optimizer", default="sgd", help="sgd | gd | adam")
    p.add_argument("--lr", type=float, default=None)
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--init", default="zero", help="zero | random")
    p.add_argument("--init_scale", "--init-scale", dest="init_scale", type=float, default=0.02,
                   help="std of the random initialisation (default 0.02)")
    p.add_argument("--n_train", "--n-train", dest="n_train", type=int, default=None,
                   help="size of the fixed sample for --optimizer gd (default: batch)")
    p.add_argument("--n_val", "--n-val", dest="n_val", type=int, default=128,
                   help="points per validation set (default 128)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--T_test", "--T-test", dest="T_test", type=_int_list, default=[],
                   help="comma-separated OOD lengths, e.g. 60,80")
    p.add_argument("--q_test", "--q-test", dest="q_test", type=_int_list, default=[],
                   help="comma-separated OOD subset sizes")
    p.add_argument("--eval_every", "--eval-every", dest="eval_every", type=int, default=None)
    p.add_argument("--checkpoint_every", "--checkpoint-every", dest="checkpoint_every",
                   type=int, default=None, help="write out/checkpoint.npz every k steps; "
                   "an existing checkpoint is resumed")
    p.add_argument("--out", default="runs/stsim-run", help="output folder")
    p.add_argument("--quiet", action="store_true")


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
    """Write ``result.npz``, ``config.json``, ``history.csv`` and ``loss.png`` into ``out``."""
    from stsim.util.io import write_csv, write_json
    from stsim.util.plotting import plot_history

    os.makedirs(out, exist_ok=True)
    paths = {"result": os.path.join(out, "result.npz"), "config": os.path.join(out, "config.json"),
             "history": os.path.join(out, "history.csv"), "figure": os.path.join(out, "loss.png")}
    res.save(paths["result"])
    write_json(paths["config"], {"config": res.config, "status": res.status,
                                 "message": res.message, "info": res.info})
    keys = list(res.history)
    write_csv(paths["history"], keys, zip(*(res.history[k] for k in keys)))
    plot_history(res, paths["figure"])
    return paths


def main_run(args) -> int:
    from stsim.core.run import run

    opts = {k: getattr(args, k) for k in ("d", "d_e", "sampler", "model", "query", "objective",
                                          "optimizer", "lr", "steps", "batch", "init",
                                          "init_scale", "n_train", "n_val", "seed",
                                          "T_test", "q_test", "eval_every")}
    ckpt = os.path.join(args.out, "checkpoint.npz") if args.checkpoint_every else None
    res = run(args.T, args.q, args.pe, checkpoint=ckpt, checkpoint_every=args.checkpoint_every,
              progress=_progress_printer(args.quiet), **opts)
    paths = write_outputs(res, args.out)
    h = res.history
    last = {k: float(v[-1]) for k, v in h.items() if len(v)}
    summary = {"status": res.status, "message": res.message,
               "initial_loss": float(h["loss"][0]) if len(h.get("loss", ())) else None,
               "final_loss": last.get("loss"),
               "final_val": {k: v for k, v in last.items() if k.startswith("val")},
               "cos_W": last.get("cos_W"), "cos_V": last.get("cos_V"),
               "wall_time_s": round(res.info["wall_time_s"], 2), "files": paths}
    print(json.dumps(summary, indent=2))
    return 0 if res.success else 1


main = None  # replaced below; keeps the name documented in __all__


def _build_parser():
    parser = argparse.ArgumentParser(prog="stsim", description=__doc__.splitlines()[0])
    from stsim import __version__
    parser.add_argument("--version", action="version", version=f"stsim {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (modname, helptext) in COMMANDS.items():
        sp = sub.add_parser(name, help=helptext, description=helptext)
        if modname == __name__:
            add_arguments(sp)
            sp.set_defaults(_main=main_run)
        else:
            sp.set_defaults(_module=modname)
    return parser


def _main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = _build_parser()
    # sub-commands in other modules add their own options: parse the command name first
    if argv and argv[0] in COMMANDS and COMMANDS[argv[0]][0] != __name__:
        name = argv[0]
        mod = importlib.import_module(COMMANDS[name][0])
        sp = argparse.ArgumentParser(prog=f"stsim {name}", description=COMMANDS[name][1])
        mod.add_arguments(sp)
        args = sp.parse_args(argv[1:])
        runner = mod.main
    else:
        args = parser.parse_args(argv)
        runner = args._main
    try:
        return int(runner(args) or 0)
    except ValueError as exc:
        print(f"stsim: error: {exc}", file=sys.stderr)
        return 2


main = _main

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
