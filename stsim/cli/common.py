"""What the study commands share: ``--quick`` | ``--full``, ``--out``, ``--workers`` or
``--scheduler`` (a Dask cluster), ``--quiet`` (:func:`add_study_arguments`, whose help
texts state the convention); per-study options generated from the study's ``QUICK`` /
``FULL`` presets; ``--set key=value`` parsing; printing claim checks.
"""
from __future__ import annotations

import argparse
import ast
import os
import re
import sys

from stsim.sweeps.pool import OneThreadProcessPool, make_executor, stop_on_interrupt
from stsim.util.io import FileLock, OutputLocked, check_writable_folder
from stsim.util.validate import check_int


__all__ = ["DEFAULT_WORKERS", "add_study_arguments",
           "add_contract_options", "set_example", "contract_overrides", "run_contract",
           "out_dir", "workers", "scheduler_executor", "logger", "int_tuple", "parse_set",
           "report_divergence"]

DEFAULT_WORKERS = 2

def int_tuple(text):
    """``"8,16,32"`` → ``(8, 16, 32)``."""
    return tuple(int(v) for v in text.split(",") if v.strip())


def add_study_arguments(p: argparse.ArgumentParser, name: str, *,
                        workers_help: str | None = None) -> None:
    """``--quick`` | ``--full`` (default quick), ``--out``, ``--workers``, ``--quiet``."""
    g = p.add_argument_group("common options of the study commands")
    mode = g.add_mutually_exclusive_group()
    mode.add_argument("--quick", dest="mode", action="store_const", const="quick",
                      help="the seconds-long smoke version (default)")
    mode.add_argument("--full", dest="mode", action="store_const", const="full",
                      help="the documented experiment (minutes)")
    p.set_defaults(mode="quick", _study=name)
    g.add_argument("--out", default=None, metavar="DIR",
                   help=f"output folder (default: runs/{name}-quick with --quick, "
                        f"runs/{name} with --full)")
    g.add_argument("--workers", type=int, default=DEFAULT_WORKERS, metavar="N",
                   help=workers_help or f"worker processes, one BLAS thread each "
                                        f"(default: {DEFAULT_WORKERS}); 1 runs in this process")
    g.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="run on a Dask cluster: the address of its scheduler, e.g. "
                        "tcp://HOST:8786 (needs the extra stsim[dask]; --workers is then not "
                        "used: the cluster's workers run the tasks, and --out must be a "
                        "folder they reach at the same path)")
    g.add_argument("--quiet", action="store_true", help="no progress lines on stderr")


def out_dir(args) -> str:
    """``--out`` (as given: an empty one is refused by :func:`run_contract`), else
    ``runs/<study>-quick`` (quick) or ``runs/<study>`` (full)."""
    if args.out is not None:
        return args.out
    return os.path.join("runs", args._study + ("-quick" if args.mode == "quick" else ""))


def workers(args) -> int:
    """``--workers`` checked (an int >= 0; 0 is taken as 1: this process)."""
    return max(1, check_int("--workers", args.workers, 0))


#: seconds to wait for a Dask scheduler to answer (``--scheduler``)
SCHEDULER_TIMEOUT_S = 20.0


def scheduler_executor(address: str, timeout: float | None = None):
    """``(executor, client)`` for the Dask scheduler at ``address``: the client's executor
    (``pure=False``, see :mod:`stsim.sweeps`), whose ``workers`` is the cluster's worker
    count; the caller closes the client. ``ValueError`` naming ``--scheduler`` for an
    address that is not ``[tcp://]host:port``, without Dask (naming the extra), or when
    no scheduler answers within ``timeout`` seconds (default
    :data:`SCHEDULER_TIMEOUT_S`) — before any work."""
    timeout = SCHEDULER_TIMEOUT_S if timeout is None else timeout
    address = str(address).strip()
    if not re.fullmatch(r"(tcp|tls|inproc|ws|wss)://\S+|[\w.\-\[\]:]+:\d+", address):
        raise ValueError(f"--scheduler must be a Dask scheduler address such as "
                         f"tcp://host:8786, got {address!r}")
    try:
        from distributed import Client
    except ImportError:
        raise ValueError('--scheduler needs Dask, the optional extra "dask": '
                         'pip install "stsim[dask]"') from None
    try:
        client = Client(address, timeout=timeout, set_as_default=False)
    except (OSError, TimeoutError) as exc:
        raise ValueError(f"--scheduler {address}: no Dask scheduler answered "
                         f"({type(exc).__name__}: {exc})") from None
    ex = client.get_executor(pure=False)
    try:
        ex.workers = sum(w.get("nthreads", 1) for w in
                         client.scheduler_info()["workers"].values()) or None
    except Exception:  # noqa: BLE001 - only a number for the summary
        ex.workers = None
    return ex, client


def logger(args, prefix: str = ""):
    """A progress printer on stderr, or ``None`` with ``--quiet``."""
    if args.quiet:
        return None
    return lambda msg: print(f"{prefix}{msg}", file=sys.stderr, flush=True)


def _show(value):
    if isinstance(value, (tuple, list)):
        return ",".join(map(str, value))
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def parse_set(items) -> dict:
    """``["lr=2", "seeds=[0,1]"]`` -> ``{"lr": 2, "seeds": [0, 1]}`` (Python literals,
    bare words as strings)."""
    out = {}
    for item in items or ():
        if "=" not in item:
            raise ValueError(f"--set expects key=value, got {item!r}")
        k, v = item.split("=", 1)
        try:
            out[k.strip()] = ast.literal_eval(v)
        except (ValueError, SyntaxError):
            out[k.strip()] = v
    return out


# --------------------------------------------------------------------------------------
# the study contract on the command line (stsim.studies.contract)
# --------------------------------------------------------------------------------------
def add_contract_options(p: argparse.ArgumentParser, study, *, help: dict | None = None,
                         workers_help: str | None = None) -> None:
    """The options of a study command that follows :mod:`stsim.studies.contract`: the
    common ones (:func:`add_study_arguments`), ``--set KEY=VALUE`` (repeatable; dotted keys
    for nested settings), ``--analyse-only``, and one ``--key VALUE`` flag per top-level
    preset key whose value is a scalar or a flat list (comma lists accepted; not ``mode``,
    which ``--quick`` / ``--full`` choose). Both kinds of override go through
    :func:`stsim.studies.contract.apply_overrides`."""
    help = help or {}
    add_study_arguments(p, study.NAME, workers_help=workers_help)
    quick, full = study.PRESETS["quick"], study.PRESETS["full"]
    g = p.add_argument_group(f"{study.NAME} settings",
                             "each defaults to the --quick / --full preset; every setting, "
                             "nested ones included, can also be given as --set KEY=VALUE")
    g.add_argument("--set", dest="set", action="append", default=[], metavar="KEY=VALUE",
                   help=f"override a setting (repeatable), e.g. {set_example(study)}")
    g.add_argument("--analyse-only", "--analyse_only", dest="analyse_only",
                   action="store_true", help="compute nothing: analyse the raw tables "
                   "already in --out and write the outputs")
    for name in list(dict.fromkeys([*full, *quick])):
        ref = full.get(name, quick.get(name))
        if name == "mode" or isinstance(ref, dict) or (
                isinstance(ref, (list, tuple)) and ref
                and isinstance(ref[0], (list, tuple, dict))):
            continue          # the preset's name, or nested: --set only
        text = help.get(name, "")
        shown = (f"quick {_show(quick[name])}, full {_show(full[name])}"
                 if name in quick and name in full and quick[name] != full[name]
                 else _show(ref))
        flags = dict.fromkeys((f"--{name}", f"--{name.replace('_', '-')}"))
        # text, parsed by apply_overrides against the preset's type (one parser for
        # --key VALUE and --set key=VALUE)
        g.add_argument(*flags, dest=f"preset_{name}", type=str, default=None,
                       metavar="LIST" if isinstance(ref, (list, tuple)) else name.upper(),
                       help=f"{text}{' ' if text else ''}(default: {shown})")
    if "level" in full and "target" not in full:    # --target is the task's (stsim run)
        g.add_argument("--target", dest="misnamed_target", default=None,
                       help=argparse.SUPPRESS)


def set_example(study) -> str:
    """An example ``--set KEY=VALUE`` of the study's own, from its full preset: a nested
    group's ``seeds`` (or its first list), else the top-level ``seeds``, else the first
    number (``--set fig1.seeds=[0,1,2]`` for the figures, ``--set seeds=3`` elsewhere)."""
    full = {k: v for k, v in study.PRESETS["full"].items() if k != "mode"}
    groups = [(k, v) for k, v in full.items() if isinstance(v, dict)]
    for key in ("seeds", None):
        for g, sub in groups:
            for k, v in sub.items():
                if (k == key or key is None) and isinstance(v, (list, tuple)) and v \
                        and all(isinstance(x, (int, float)) for x in v):
                    return f"--set {g}.{k}=[{','.join(map(str, v))}]"
    if "seeds" in full:
        return "--set seeds=" + repr(full["seeds"]).replace(" ", "")
    name, value = next((k, v) for k, v in full.items()
                       if isinstance(v, (int, float)) and not isinstance(v, bool))
    return f"--set {name}={value!r}"


def contract_overrides(args, study) -> dict:
    """The overrides given on the command line: the generated ``--key`` flags (comma lists
    become lists) and every ``--set``."""
    if getattr(args, "misnamed_target", None) is not None:
        raise ValueError(f"--target {args.misnamed_target}: --target is the task's target of "
                         f"stsim run; the loss level of stsim {study.NAME} is --level")
    out = {}
    for k, v in vars(args).items():
        if k.startswith("preset_") and v is not None:
            name = k[len("preset_"):]
            ref = study.PRESETS["full"].get(name, study.PRESETS["quick"].get(name))
            if isinstance(ref, (list, tuple)) and not v.lstrip().startswith(("[", "(")):
                v = [x.strip() for x in v.split(",") if x.strip()]
                if ref and not isinstance(ref[0], str):
                    v = "[" + ",".join(v) + "]"
            out[name] = v
    out.update(parse_set(getattr(args, "set", ())))
    return out


def run_contract(args, study) -> dict:
    """The whole command for a contract study (docs/architecture.md, "The study contract"),
    every check before any work: the overrides, ``--out`` (with ``--analyse-only`` an
    existing folder), one study at a time per folder (``<out>/.stsim-study.lock``); the
    executor built once from ``--workers`` or ``--scheduler`` (:func:`scheduler_executor`)
    for :func:`stsim.studies.contract.run_study`; Ctrl-C ends the pool's workers and says
    that the finished runs are kept; the diverged runs printed on stderr
    (:func:`report_divergence`). Returns the summary, with ``exit_status`` 1 when something
    is unmeasured, else 0."""
    from stsim.studies.contract import resolve_config, run_study
    overrides = contract_overrides(args, study)
    resolve_config(study, args.mode, overrides)      # bad input: refused before any work
    n_workers = workers(args)                        # ... and before --out is created
    out = out_dir(args)
    if args.analyse_only and not os.path.isdir(out):
        raise ValueError(f"--out {out!r} is not a folder: --analyse-only reads the raw tables "
                         f"a run of stsim {study.NAME} wrote there (run it without "
                         f"--analyse-only first)")
    scheduler = getattr(args, "scheduler", None)
    # a cluster that does not answer is refused before the folder is made
    ex, client = (scheduler_executor(scheduler)
                  if scheduler is not None and not args.analyse_only else (None, None))
    try:
        out = check_writable_folder(out, "--out")
        if client is not None:        # the cluster's workers write there: one absolute path
            out = os.path.abspath(out)
        with FileLock(os.path.join(out, ".stsim-study"), remove=True):
            if ex is None:
                ex = make_executor(n_workers)
            try:
                with stop_on_interrupt(ex):
                    res = run_study(study, out, mode=args.mode, overrides=overrides,
                                    executor=ex, analyse_only=args.analyse_only,
                                    log=logger(args, f"[{study.NAME}] "))
            except KeyboardInterrupt:
                if isinstance(ex, OneThreadProcessPool):     # whatever the route: the
                    ex.kill()      # workers ignore SIGINT and would finish their runs first
                raise KeyboardInterrupt(f"the finished runs are kept in {out}; rerun the "
                                        f"same command to resume") from None
            finally:
                ex.shutdown(wait=True)
    except OutputLocked as exc:
        raise ValueError(f"--out: {exc}") from None
    finally:
        if client is not None:
            client.close()
    res["exit_status"] = report_divergence(res)
    return res


def report_divergence(summary, file=None) -> int:
    """Print a study summary's ``diverged`` and ``unmeasured`` entries
    (:mod:`stsim.studies.contract`) on stderr, one line each: ``stsim: warning: N of M runs
    diverged (e.g. …)`` and ``stsim: error: not measured: …`` (each entry names its cause).
    Returns the exit status: 1 when something is unmeasured, else 0."""
    file = file or sys.stderr
    d, un = summary.get("diverged") or {}, summary.get("unmeasured") or []
    if d.get("runs"):
        eg = f" (e.g. {'; '.join(d['where'][:3])})" if d.get("where") else ""
        print(f"stsim: warning: {d['runs']} of {d.get('of')} runs diverged{eg}", file=file)
    if un:
        print(f"stsim: error: not measured: {'; '.join(un)}",
              file=file)
    return 1 if un else 0
