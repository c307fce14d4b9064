"""Command line: ``stsim <command> …`` (``python -m stsim`` is the same).

Every command is a module of this package exposing ``add_arguments(parser)`` and
``main(args) -> int``; :func:`main` only dispatches, importing the command's module
lazily so that ``stsim run`` does not load experiment code. Bad input (``ValueError``) is
one line ``stsim: error: …``, exit status 2; a warning one line ``stsim: warning: …``;
Ctrl-C, SIGTERM and SIGHUP one line, exit 130, 143 and 129
(:class:`stsim.util.signals.TerminateAsInterrupt`); another writer, a broken pool or a
file that cannot be written one line, exit 2; a reader that closes the output early exit
141, quietly — every case: docs/model.md, "Failure behaviour".

The study commands (``figures``, ``separation``, ``expressivity``, ``sparse``,
``attention``, ``targets``) share one convention (:mod:`stsim.cli.common`): ``--quick`` (the default,
seconds) | ``--full`` (the documented experiment), ``--out``, ``--workers`` or
``--scheduler`` (a Dask cluster), ``--quiet``.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
import warnings

from stsim import __version__
from stsim.sweeps import ExecutorFailed
from stsim.util.io import OutputLocked
from stsim.util.signals import TerminateAsInterrupt, release_cli_imports, signal_name

__all__ = ["main", "COMMANDS", "build_parser"]

# name -> (module, one-line help)
COMMANDS = {
    "run": ("stsim.cli.run", "train one model (any option of stsim.run); write its result, "
            "history and loss plot"),
    "theory": ("stsim.cli.theory", "check Theorems 1-3 (convergence with one-hot and "
               "stochastic encodings; length generalisation with --T_test) numerically on the "
               "reduced population dynamics; draw the theory figures"),
    "figures": ("stsim.cli.figures", "reproduce the paper's Figures 1-5 (and one beyond)"),
    "separation": ("stsim.cli.study",
                   "transformer vs fully-connected net: width needed against T"),
    "expressivity": ("stsim.cli.study",
                     "explicit attention constructions (qSA, sparse patterns) and width laws"),
    "sparse": ("stsim.cli.study",
               "sparse Boolean functions: sample complexity against T, attention head vs FCN"),
    "attention": ("stsim.cli.study",
                  "other attention mechanisms (linear, ReLU, sigmoid, temperature, rank): "
                  "do they learn, generalise in length, and at what width"),
    "text": ("stsim.cli.study", "real text (Tiny Shakespeare): do stochastic encodings "
             "generalise in length on selection and on the masked character"),
    "targets": ("stsim.cli.study", "other targets (Hermite moments, the variance): "
                "represented, learned, generalised in length"),
}


def build_parser(name: str) -> argparse.ArgumentParser:
    """The parser of ``stsim <name>``: a study command is built from its study
    (:mod:`stsim.cli.study`), any other from its module's ``add_arguments`` and ``main``."""
    mod = importlib.import_module(COMMANDS[name][0])
    study = mod.study_of(name) if mod.__name__ == "stsim.cli.study" else None
    p = argparse.ArgumentParser(prog=f"stsim {name}", description=COMMANDS[name][1],
                                epilog=getattr(study or mod, "EPILOG", None),
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    if study is None:
        mod.add_arguments(p)
        p.set_defaults(_main=mod.main)
    else:
        mod.add_arguments(p, study)
        p.set_defaults(_main=lambda args: mod.main(args, study))
    return p


def _top_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="stsim", description="stsim: simulate a one-layer "
                                "softmax-attention transformer learning sparse token "
                                "selection (Wang, Wei, Hsu & Lee, ICML 2024).",
                                epilog="`stsim <command> --help` lists the options of a "
                                       "command.")
    p.add_argument("--version", action="version", version=f"stsim {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="<command>")
    for name, (_, helptext) in COMMANDS.items():
        sub.add_parser(name, help=helptext, add_help=False)
    return p


def main(argv=None) -> int:
    """``stsim`` with ``sys.argv``-style arguments; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in COMMANDS:
        args = build_parser(argv[0]).parse_args(argv[1:])
    else:
        _top_parser().parse_args(argv)   # --help, --version or a usage error: exits
        return 2                         # pragma: no cover
    if release_cli_imports():       # Ctrl-C came while the command was imported
        print("stsim: interrupted (Ctrl-C)", file=sys.stderr)
        return 130
    term = TerminateAsInterrupt()   # SIGTERM, SIGHUP: as Ctrl-C, exit 128 + the signal
    try:
        with term, _one_line_warnings():
            status = int(args._main(args) or 0)
        return term.exit_status if status == 130 and term.received else status
    except ValueError as exc:
        print(f"stsim: error: {exc}", file=sys.stderr)
        return 2
    except _one_line_errors() as exc:    # another writer; a pool that broke
        print(f"stsim: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        print(f"stsim: interrupted ({signal_name(term.received)})" +
              (f"; {exc}" if str(exc) else ""), file=sys.stderr)
        return term.exit_status or 130
    except BrokenPipeError:
        # the reader went away (| head): no traceback, and no second error when Python
        # flushes stdout at exit
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except OSError as exc:      # a file that could not be written or read (a full disk)
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"stsim: error: {where}{exc.strerror or exc} (files are written whole or not "
              f"at all: the previous version of each is kept; a sweep's journal keeps its "
              f"finished rows)", file=sys.stderr)
        return 2


def _one_line_errors() -> tuple:
    """The exceptions besides ``ValueError`` that a user's situation causes and that are
    said in one line: another process writing the output (``OutputLocked``), a sweep whose
    executor stopped (``ExecutorFailed``: a worker died; the finished rows are kept)."""
    return (OutputLocked, ExecutorFailed)


@contextlib.contextmanager
def _one_line_warnings():
    """Show each warning as one line ``stsim: warning: <message>`` on stderr."""
    def show(message, category, filename, lineno, file=None, line=None):
        text = str(message)
        text = text[len("stsim: "):] if text.startswith("stsim: ") else text
        with contextlib.suppress(OSError, ValueError):
            print(f"stsim: warning: {text}", file=file or sys.stderr, flush=True)

    saved = warnings.showwarning
    warnings.showwarning = show
    try:
        yield
    finally:
        warnings.showwarning = saved


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
