"""Hostile tries of the failure behaviour (docs/model.md, "Failure behaviour"): bad run
options, bad extension outputs, unstorable sweep values, journals of another root seed,
records no run writes, bad commands, symlinked locks, kill -9 while a run writes its
folder, kill -9 of a sweep and its resume, SIGTERM / SIGHUP at random moments of
``stsim run`` and of a Python sweep; the newer surfaces (group K: objects with state,
sessions, steps per block, freeze, callbacks, the diagnoses, a full disk, the attention
study's settings, a dead pool worker; group L: the targets and attention studies' folders,
analysed with settings no row was made with, with damaged tables, impossible sizes, reruns
with other settings). Prints, per group and in all, the cases tried,
handled (the documented behaviour seen) and failed, with each failure.

    PYTHONPATH=. python benchmarks/hostile_reliability.py [--kills 10] [--terms 8]
"""
from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np

import stsim
from stsim.cli import main as cli
from stsim.core.encodings import Encoding, PEBatch
from stsim.core.session import Session
from stsim.sweeps import InlineExecutor, read_table, sweep
from stsim.util.io import load_npz, save_npz

RESULTS: dict = {}


def record(group, name, ok, detail=""):
    RESULTS.setdefault(group, []).append((name, bool(ok), detail))


def empty(folder):
    return not os.listdir(folder)


# ---- A. bad run options: refused before any work or file ------------------------------
BAD_OPTIONS = [
    dict(lr=[0.1]), dict(lr=(0.1,)), dict(lr=np.array([0.1])), dict(lr=-1), dict(lr=0),
    dict(lr=float("nan")), dict(lr=float("inf")), dict(lr="0.1"), dict(lr=True),
    dict(lr={"a": 1}), dict(T=0), dict(T=-5), dict(T=2.5), dict(T="10"), dict(T=True),
    dict(T=None, q=None, pe=None, steps=None, config=42), dict(q=0), dict(q=99),
    dict(d=0), dict(d_e=0), dict(d_e=-3), dict(d_e=3), dict(batch=0), dict(batch=1.5),
    dict(steps=-1), dict(eval_every=0), dict(seed=-1), dict(seed="3"), dict(seed=1.5),
    dict(seed={"entropy": [1.5]}), dict(seed={"entropy": True}), dict(seed={"x": 1}),
    dict(seed={"entropy": 1, "spawn_key": [0.5]}), dict(seed={"entropy": 1, "pool_size": -1}),
    dict(q_test={1: 2}), dict(q_test="2"), dict(q_test=[0]), dict(q_test=[99]),
    dict(T_test={30, 40}), dict(T_test=[1]), dict(T_test="30"), dict(pe="nope"),
    dict(sampler="cube"), dict(model="big"), dict(query="max"), dict(objective="x"),
    dict(optimizer="lbfgs"), dict(init="ones"), dict(init_scale=-1), dict(init_scale="x"),
    dict(lr_decay="cosine"), dict(arch="cnn"), dict(width=8), dict(depth=2),
    dict(arch="fcn", pe="onehot"), dict(arch="fcn", d_e=10), dict(arch="fcn", model="practical"),
    dict(arch="fcn", query="mean"), dict(arch="fcn", sampler="sphere"),
    dict(arch="fcn", T_test=[12]), dict(arch="fcn", width=0), dict(arch="fcn", depth=0),
    dict(objective="population", arch="fcn"), dict(objective="population", T=200, q=3),
    dict(objective="population", T=10, q=2), dict(n_val=0), dict(n_train=0),
    dict(progress="yes"), dict(prefetch="yes"), dict(checkpoint_every=5),
    dict(arch="fcn", width=10 ** 4, depth=10 ** 4), dict(T_test=[10 ** 7]), dict(batch=10 ** 9),
    dict(bogus=1),
]


def bad_options():
    for opts in BAD_OPTIONS:
        with tempfile.TemporaryDirectory() as tmp:
            kw = dict(T=8, q=2, steps=30, batch=8, checkpoint=os.path.join(tmp, "c", "c.npz"))
            if opts.get("checkpoint_every"):
                kw.pop("checkpoint")
            kw.update(opts)
            t0 = time.perf_counter()
            try:
                stsim.run(**kw)
                record("A bad run options", repr(opts), False, "accepted")
            except ValueError as exc:
                fast = time.perf_counter() - t0 < 10
                record("A bad run options", repr(opts), fast and empty(tmp),
                       "" if fast else f"slow {time.perf_counter() - t0:.1f}s: {exc}")
            except Exception as exc:  # noqa: BLE001
                record("A bad run options", repr(opts), False, f"{type(exc).__name__}: {exc}")


# ---- B. an extension's encoding that returns bad batches --------------------------------
class Bad(Encoding):
    name = "bad-hostile"

    def __init__(self, d_e, mode):
        super().__init__(d_e)
        self.mode = mode

    def sample(self, rng, B, T):
        m, d_e = self.mode, self.d_e
        idx = np.tile(np.arange(T), (B, 1))
        return {
            "neg": PEBatch(d_e, idx=np.where(idx == 0, -1, idx)),
            "neg shared": PEBatch(d_e, idx=np.arange(T) - 1),
            "big": PEBatch(d_e, idx=idx + d_e), "T+1": PEBatch(d_e, idx=np.arange(T + 1)),
            "B+1": PEBatch(d_e, idx=np.tile(np.arange(T), (B + 1, 1))),
            "d_e+1": PEBatch(d_e + 1, idx=np.arange(T)), "d_e str": PEBatch("8", idx=np.arange(T)),
            "complex P": PEBatch(d_e, P=np.ones((B, T, d_e), complex)),
            "int P": PEBatch(d_e, P=np.ones((B, T, d_e), int)),
            "P shape": PEBatch(d_e, P=np.ones((T, d_e + 1))),
            "list": [0], "None": None, "tuple": (d_e, np.arange(T)),
            "float idx": PEBatch(d_e, idx=np.arange(T, dtype=float)),
            "bool idx": PEBatch(d_e, idx=np.ones(T, bool)),
            "list idx": PEBatch(d_e, idx=list(range(T))),
            "both": PEBatch(d_e, idx=np.arange(T), P=np.ones((T, d_e))),
            "neither": PEBatch(d_e), "3-d idx": PEBatch(d_e, idx=idx[None]),
            "object idx": PEBatch(d_e, idx=np.array([object()] * T)),
            "NaN P": PEBatch(d_e, P=np.full((T, d_e), np.nan)),
            "inf P": PEBatch(d_e, P=np.full((B, T, d_e), np.inf)),
            "slot twice": PEBatch(d_e, idx=np.r_[0, np.arange(T - 1)]),
            "slot twice in one sample": PEBatch(d_e, idx=np.where(
                (np.arange(B)[:, None] == B - 1) & (np.arange(T) == 1), 0, idx)),
        }[m]


BAD_MODES = ["neg", "neg shared", "big", "T+1", "B+1", "d_e+1", "d_e str", "complex P",
             "int P", "P shape", "list", "None", "tuple", "float idx", "bool idx",
             "list idx", "both", "neither", "3-d idx", "object idx", "NaN P", "inf P",
             "slot twice", "slot twice in one sample"]


def bad_encodings():
    for mode in BAD_MODES:
        try:
            stsim.run(T=8, q=2, pe=Bad(20, mode), steps=5, batch=8)
            record("B bad encoding batches", mode, False, "accepted")
        except ValueError as exc:
            record("B bad encoding batches", mode, "encoding Bad" in str(exc), str(exc))
        except Exception as exc:  # noqa: BLE001
            record("B bad encoding batches", mode, False, f"{type(exc).__name__}: {exc}")


# ---- C. sweep values a table cannot store; D. journals that are not this sweep's --------
class Obj:
    pass


UNSTORABLE = {"complex": 1 + 2j, "set": {1}, "frozenset": frozenset([1]), "bytes": b"x",
              "object": Obj(), "list with object": [1, Obj()], "dict with set": {"a": {1}},
              "numpy complex": np.complex128(1j), "colliding keys": "collide",
              "generator": (i for i in range(2)), "function": len}


def unstorable():
    for name, value in UNSTORABLE.items():
        def fn(a, seed, value=value):
            if a == 1:
                return {1: "a", "1": "b"} if value == "collide" else {"v": value}
            return {"v": a}
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "t.csv")
            try:
                res = sweep(fn, {"a": [1, 2]}, executor=InlineExecutor(), out=out)
                rows = {r["a"]: r for r in res.rows}
                lines = open(out + ".journal.jsonl").read().splitlines()
                ok = (rows[1]["status"] == "error" and rows[1]["error"].startswith("TypeError")
                      and rows[2]["status"] == "ok" and len(lines) == len(read_table(out)) == 2)
                record("C unstorable sweep values", name, ok, rows[1]["error"])
            except Exception as exc:  # noqa: BLE001
                record("C unstorable sweep values", name, False, f"{type(exc).__name__}: {exc}")


def _v(a, seed):
    return {"v": a}


def journals():
    g = "D journals of another sweep"
    for root in (1, 2, 99):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "t.csv")
            sweep(_v, {"a": [1, 2]}, seeds=2, executor=InlineExecutor(), out=out)
            try:
                sweep(_v, {"a": [1, 2]}, seeds=2, root_seed=root, executor=InlineExecutor(),
                      out=out)
                record(g, f"root_seed 0 -> {root}", False, "served the old rows")
            except ValueError as exc:
                record(g, f"root_seed 0 -> {root}", "root_seed=0" in str(exc), str(exc))
    for drop in ("journal and table", "journal only"):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "t.csv")
            sweep(_v, {"a": [1, 2]}, executor=InlineExecutor(), out=out)
            os.unlink(out + ".journal.jsonl")
            if drop == "journal and table":
                os.unlink(out)
            res = sweep(lambda a, seed: {"v": 10 * a}, {"a": [1, 2]},
                        executor=InlineExecutor(), out=out)
            record(g, f"deleted {drop}", res.n_run == 2 and
                   [r["v"] for r in read_table(out)] == [10, 20], f"n_run={res.n_run}")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "t.csv")
        sweep(_v, {"a": [1, 2]}, seeds=2, executor=InlineExecutor(), out=out)
        res = sweep(_v, {"a": [1, 2, 3]}, seeds=3, executor=InlineExecutor(), out=out)
        record(g, "grown grid and replicates keep rows", (res.n_skipped, res.n_run) == (4, 5))


# ---- E. result files with records no run writes -----------------------------------------
def bad_records():
    g = "E load of bad records"
    with tempfile.TemporaryDirectory() as tmp:
        good = os.path.join(tmp, "r.npz")
        stsim.run(T=8, q=2, steps=4, batch=8).save(good)
        edits = {
            "status bogus": lambda m: m.update(status="bogus"),
            "status 42": lambda m: m.update(status=42), "status None": lambda m: m.update(status=None),
            "message None": lambda m: m.update(message=None),
            "message 3": lambda m: m.update(message=3), "info list": lambda m: m.update(info=[]),
            "config {}": lambda m: m.update(config={}), "config list": lambda m: m.update(config=[1]),
            "config None": lambda m: m.update(config=None),
            "T x": lambda m: m["config"].update(T="x"), "T 0": lambda m: m["config"].update(T=0),
            "T 2.5": lambda m: m["config"].update(T=2.5), "q > T": lambda m: m["config"].update(q=99),
            "lr -1": lambda m: m["config"].update(lr=-1), "lr nan": lambda m: m["config"].update(lr=float("nan")),
            "lr str": lambda m: m["config"].update(lr="0.1"),
            "steps -1": lambda m: m["config"].update(steps=-1),
            "arch unknown": lambda m: m["config"].update(arch="mystery"),
            "d_e None": lambda m: m["config"].update(d_e=None),
            "no history_keys": lambda m: m.pop("history_keys"),
            "history_keys short": lambda m: m["history_keys"].pop(),
            "history_keys extra": lambda m: m["history_keys"].append("ghost"),
            "history_keys str": lambda m: m.update(history_keys="loss"),
            "no status": lambda m: m.pop("status"),
        }
        for name, edit in edits.items():
            arrays, meta = load_npz(good)
            edit(meta)
            bad = os.path.join(tmp, "bad.npz")
            save_npz(bad, arrays, meta)
            try:
                stsim.load(bad)
                record(g, name, False, "loaded")
            except ValueError as exc:
                record(g, name, "bad.npz" in str(exc), str(exc))
            except Exception as exc:  # noqa: BLE001
                record(g, name, False, f"{type(exc).__name__}: {exc}")


# ---- F. bad commands: one line, exit 2, no folder ----------------------------------------
BAD_COMMANDS = [
    ["run", "--objective", "population"], ["run", "--objective", "population", "--arch", "fcn"],
    ["run", "--arch", "fcn", "--pe", "onehot"], ["run", "--arch", "fcn", "--d_e", "8"],
    ["run", "--lr", "-1"], ["run", "--T", "0"], ["run", "--checkpoint_every", "0"],
    ["run", "--q_test", "0"], ["figures", "--quick", "--set", "fig1.seeds=[]"],
    ["figures", "--quick", "--set", "fig1.seeds=[0.5]"], ["figures", "--quick", "--set", "fig1.seeds=-1"],
    ["figures", "--quick", "--workers", "-1"], ["separation", "--workers", "-1"],
    ["sparse", "--workers", "-1"], ["expressivity", "--workers", "-1"],
    ["separation", "--workers", "-5", "--quick"],
]


def bad_commands():
    import contextlib
    import io
    for argv in BAD_COMMANDS:
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "o")
            err = io.StringIO()
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                try:
                    rc = cli(argv + ["--out", out])
                except SystemExit as exc:      # argparse: a usage error
                    rc = exc.code
            lines = err.getvalue().strip().splitlines()
            record("F bad commands", " ".join(argv),
                   rc == 2 and len(lines) == 1 and not os.path.exists(out),
                   f"rc={rc} {lines[-1] if lines else ''}")


# ---- G. lock files that are not regular files --------------------------------------------
def locks():
    import contextlib
    import io
    for kind in ("link to a file", "dangling link", "folder", "fifo", "link to /dev/null"):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "o")
            os.makedirs(out)
            lock = os.path.join(out, ".stsim-run.lock")
            victim = os.path.join(tmp, "victim")
            if kind == "link to a file":
                open(victim, "w").write("keep")
                os.symlink(victim, lock)
            elif kind == "dangling link":
                os.symlink(victim, lock)
            elif kind == "folder":
                os.mkdir(lock)
            elif kind == "fifo":
                os.mkfifo(lock)
            else:
                os.symlink("/dev/null", lock)
            with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
                rc = cli(["run", "--T", "8", "--q", "2", "--steps", "3", "--batch", "8",
                          "--quiet", "--out", out])
            intact = (not os.path.exists(victim) or open(victim).read() == "keep")
            record("G lock files", kind, rc == 2 and intact and
                   not os.path.exists(os.path.join(out, "result.npz")), f"rc={rc}")


# ---- H. kill -9 while stsim run writes; SIGTERM/SIGHUP at random moments -----------------
RUN = [sys.executable, "-m", "stsim", "run", "--T", "10", "--q", "2", "--batch", "8",
       "--quiet"]


def _consistent(out):
    """``(ok, what)``: load refuses the folder, or every file is the loaded run's."""
    try:
        res = stsim.load(os.path.join(out, "result.npz"))
    except ValueError:
        return True, "refused"                # never passes for one run
    cfg = json.load(open(os.path.join(out, "config.json")))["config"]
    hist = stsim.util.io.read_csv(os.path.join(out, "history.csv"))
    same = cfg["seed"] == res.config["seed"] and \
        [r["loss"] for r in hist] == list(res.history["loss"])
    return same, f"loaded seed {res.config['seed']}, config.json seed {cfg['seed']}"


def kill9_writes(n, rng):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "o")
        subprocess.run(RUN + ["--steps", "5", "--seed", "0", "--out", out], check=True,
                       capture_output=True)
        for i in range(n):
            p = subprocess.Popen(RUN + ["--steps", "30", "--seed", str(i + 1), "--out", out],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            res = os.path.join(out, "result.npz")
            before = os.stat(res).st_mtime_ns
            delay = rng.uniform(0, 0.05)
            t0 = time.monotonic()
            while p.poll() is None and time.monotonic() - t0 < 120:
                if os.stat(res).st_mtime_ns != before:
                    time.sleep(delay)          # somewhere in the writing of the other files
                    break
                time.sleep(0.001)
            p.kill()
            p.wait(30)
            record("H kill -9 while writing", f"try {i} (+{delay * 1000:.0f} ms)",
                   *_consistent(out))


def terms(n, rng, signum):
    g = f"I {signal.Signals(signum).name} on stsim run"
    for i in range(n):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "o")
            p = subprocess.Popen(RUN + ["--steps", "1000000", "--eval_every", "100", "--lr", "0.1",
                                        "--seed", str(i), "--out", out]
                                 + (["--checkpoint_every", "500"] if i % 2 else []),
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            delay = rng.uniform(0.2, 6.0)           # during imports, set-up or training
            time.sleep(delay)
            p.send_signal(signum)
            try:
                _, err = p.communicate(timeout=120)
            except subprocess.TimeoutExpired:
                p.kill()
                record(g, f"try {i} at {delay:.1f}s", False, "did not end")
                continue
            lines = err.strip().splitlines()
            ok = (p.returncode == 128 + signum or (p.returncode == -signum and not lines)) \
                and len(lines) <= 1 and not os.path.exists(os.path.join(out, ".stsim-run.lock"))
            if ok and os.path.exists(os.path.join(out, "result.npz")):
                try:
                    ok = stsim.load(out).status in ("interrupted", "completed", "diverged")
                except ValueError as exc:        # a folder left half written
                    ok, lines = False, [str(exc)]
            record(g, f"try {i} at {delay:.1f}s", ok,
                   f"rc={p.returncode} {lines[-1] if lines else ''}")


SWEEP = """
import sys, time
import stsim
def row(a, seed):
    time.sleep(0.3)
    return {"v": a}
stsim.sweep(row, {"a": list(range(40))}, out=sys.argv[1], max_workers=int(sys.argv[2]))
"""


def kill_sweeps(n, rng, signum):
    g = f"J {'kill -9' if signum == signal.SIGKILL else signal.Signals(signum).name} on a sweep"
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "s.py")
        open(script, "w").write(SWEEP)
        for i in range(n):
            out = os.path.join(tmp, f"t{i}.csv")
            workers = 1 + i % 2
            p = subprocess.Popen([sys.executable, script, out, str(workers)],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            time.sleep(rng.uniform(3.0, 7.0))
            p.send_signal(signum)
            _, err = p.communicate(timeout=120)
            journal = stsim.sweeps.journal.load_journal(out + ".journal.jsonl")
            ok = p.returncode == -signum and "Traceback" not in err
            if signum != signal.SIGKILL:
                ok = ok and not os.path.exists(out + ".lock")
            res = sweep(lambda a, seed: {"v": a}, {"a": list(range(40))},
                        executor=InlineExecutor(), out=out)
            ok = ok and res.n_skipped == len(journal) and [r["v"] for r in res.rows] == \
                list(range(40))
            record(g, f"try {i} ({workers} worker(s))", ok,
                   f"rc={p.returncode}, {len(journal)} rows kept")


# ---- K. the newer surfaces -------------------------------------------------------------
def _raises(exc_type, words, fn):
    try:
        fn()
    except exc_type as exc:
        return all(w in str(exc) for w in words), str(exc)
    except Exception as exc:  # noqa: BLE001
        return False, f"{type(exc).__name__}: {exc}"
    return False, "accepted"


def _message(words, **opts):
    res = stsim.run(progress=False, **opts)
    return all(w in res.message for w in words), res.message[-200:]


def _stale_adam():
    o = stsim.Adam(0.02)
    o.step({"W": np.zeros(3)}, {"W": np.ones(3)})      # state of another shape
    res = stsim.run(T=8, q=2, steps=20, optimizer=o, progress=False)
    return res.status == "completed" and o.t == 1, f"{res.status}, o.t={o.t}"


def _finished_session():
    s = Session(stsim.Config(T=8, q=2, steps=20).resolve())
    s.advance(5)
    r = s.finish()
    W = r.params["W"].copy()
    ok, detail = _raises(RuntimeError, ["finish"], lambda: s.advance(5))
    return ok and np.array_equal(W, r.params["W"]), detail


def _callback_interrupt():
    def cb(row):
        raise KeyboardInterrupt
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = stsim.run(T=8, q=2, steps=20, callback=cb, progress=False)
    return res.status == "interrupted", res.message


def _full_disk_lock():
    import contextlib
    import errno
    import io
    import stsim.util.io as sio
    real = sio._open_no_follow

    class Full:
        def __init__(self, fh):
            self.fh = fh

        def __getattr__(self, name):
            return getattr(self.fh, name)

        def flush(self):
            raise OSError(errno.ENOSPC, "No space left on device", self.fh.name)

    with tempfile.TemporaryDirectory() as tmp:
        out, err = os.path.join(tmp, "o"), io.StringIO()
        sio._open_no_follow = lambda path: Full(real(path))
        try:
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                rc = cli(["run", "--T", "6", "--q", "2", "--steps", "3", "--quiet", "--out", out])
        finally:
            sio._open_no_follow = real
        return (rc == 2 and ".stsim-run.lock" in err.getvalue()
                and not os.path.exists(os.path.join(out, ".stsim-run.lock"))), err.getvalue()


def _attention_setting(bad):
    from stsim.studies import attention
    from stsim.studies.contract import run_study
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "x")
        ok, detail = _raises(ValueError, [next(iter(bad))],
                             lambda: run_study(attention, out, mode="quick", overrides=bad))
        return ok and not os.path.exists(out), detail


def _manifest_folder():
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "o")
        import contextlib
        import io
        with contextlib.redirect_stdout(io.StringIO()):
            cli(["run", "--T", "6", "--q", "2", "--steps", "3", "--quiet", "--out", out])
        os.unlink(os.path.join(out, "manifest.json"))
        os.mkdir(os.path.join(out, "manifest.json"))
        return _raises(ValueError, ["manifest"], lambda: stsim.load(out))


DEAD_WORKER = """
import os, signal, sys
import stsim
from stsim.sweeps import ExecutorFailed
def row(a, seed):
    if a == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    return {"v": a}
if __name__ == "__main__":
    try:
        stsim.sweep(row, {"a": [0, 1, 2, 3]}, out=sys.argv[1], max_workers=2)
    except ExecutorFailed:
        print("executor failed")
"""


def _dead_worker():
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "d.py")
        open(script, "w").write(DEAD_WORKER)
        p = subprocess.run([sys.executable, script, os.path.join(tmp, "t.csv")],
                           capture_output=True, text=True, timeout=120)
        return (p.stdout.strip() == "executor failed" and "leaked" not in p.stderr
                and "Traceback" not in p.stderr), p.stderr[-200:]


def new_surfaces():
    g = "K newer surfaces"
    F = dict(T=8, q=2, steps=20, progress=False)
    cases = {
        "Adam betas recorded": lambda: (
            stsim.run(optimizer=stsim.Adam(0.02), **F).config
            != stsim.run(optimizer=stsim.Adam(0.02, betas=(0.5, 0.9)), **F).config, ""),
        "stale Adam state": _stale_adam,
        "finished session": _finished_session,
        "Session(dict)": lambda: (Session({"T": 8, "q": 2, "steps": 5}).advance(), ""),
        "Session(8)": lambda: _raises(ValueError, ["cfg"], lambda: Session(8)),
        "callback array": lambda: _raises(ValueError, ["callback"], lambda: stsim.run(
            callback=lambda row: np.array([1, 2]), **F)),
        "callback KeyboardInterrupt": _callback_interrupt,
        "freeze all": lambda: _raises(ValueError, ["freeze"], lambda: stsim.run(
            freeze=("W_xx", "W_xe", "W_ex", "W_ee", "V_x", "V_e"), **F)),
        "lr W list": lambda: _raises(ValueError, ["lr['W']"], lambda: stsim.run(
            **dict(F, lr={"W": [0.5], "V": 1}))),
        "lr W text": lambda: _raises(ValueError, ["lr"], lambda: stsim.run(
            **dict(F, lr={"W": "1", "V": 1.0}))),
        "eval_every str": lambda: _raises(ValueError, ["eval_every"], lambda: stsim.run(
            eval_every="5", **F)),
        "temperature 1e-300": lambda: _raises(ValueError, ["temperature"], lambda: stsim.run(
            temperature=1e-300, **F)),
        "Attention() base": lambda: _raises(ValueError, ["attention"], lambda: stsim.run(
            attention=stsim.core.attention.Attention(), **F)),
        "steps=0 with decay": lambda: (stsim.run(T=8, q=2, steps=0, lr=1, lr_decay="linear",
                                                 progress=False).status == "completed", ""),
        "sweep timeout 1e308": lambda: _raises(ValueError, ["timeout"], lambda: sweep(
            _v, {"a": [1]}, executor=InlineExecutor(), timeout=1e308)),
        "small batch named": lambda: _message(["small-batch SGD", "larger batch"], T=8, batch=2),
        "narrow d_e named": lambda: _message(["too narrow", "d_e >= 6"], T=8, sampler="sphere",
                                             d_e=2),
        "init_scale named": lambda: _message(["init_scale=1 is above"], T=10, init="random",
                                             init_scale=1),
        "linear q=3 default": lambda: (stsim.run(T=20, q=3, attention="linear", steps=400,
                                                 progress=False).status == "completed", ""),
        "relu q=3 default": lambda: (stsim.run(T=20, q=3, attention="relu", seed=2, steps=400,
                                               progress=False).status == "completed", ""),
        "full disk at the lock": _full_disk_lock,
        "manifest a folder": _manifest_folder,
        "attention rank_r 100": lambda: _attention_setting({"rank_r": [100]}),
        "attention empty width_T": lambda: _attention_setting({"width_T": []}),
        "attention taus 1e-300": lambda: _attention_setting({"taus": [1e-300]}),
        "attention tau_T 1e9": lambda: _attention_setting({"tau_T": 10 ** 9}),
        "attention train_T 1e9": lambda: _attention_setting({"train_T": 10 ** 9}),
        "dead pool worker": _dead_worker,
    }
    for name, case in cases.items():
        try:
            ok, detail = case()
        except Exception as exc:  # noqa: BLE001
            ok, detail = False, f"{type(exc).__name__}: {exc}"
        record(g, name, ok, str(detail))


# ---- L. the targets and attention studies' folders -------------------------------------
# tiny presets of both studies (seconds); every case works on a copy of one folder
TARGETS_TINY = {"targets": ["mean", "variance"], "T": 8, "steps": 40, "seeds": 3,
                "mults": [1.0], "T_test": [10], "n_fit": 2000, "rep_T": 5, "batch": 32,
                "fam_Ts": [8, 16, 32], "fam_n_start": 128, "fam_n_max": 512,
                "fam_replicates": 2, "fam_se_rel": 0.1, "fam_rtol": 0.1, "eq_Ts": [8],
                "fcn_Ts": [4, 8], "fcn_steps": 40, "fcn_batch": 32, "fcn_n_val": 64,
                "fcn_max_width": 8, "fcn_span": 2, "n_boot": 50}
ATTENTION_TINY = {"mechanisms": ["softmax", "linear", "rank=2"], "seeds": 2, "steps": 40,
                  "T": 8, "T_test": [10], "tune_steps": 10, "tune_mults": [1.0, 0.1],
                  "rank_T": [6], "rank_r": [2, 12], "rank_steps": 30,
                  "width_T": [8, 16, 32, 64, 128], "width_mechs": ["softmax", "linear"],
                  "fam_n_start": 128, "fam_n_max": 128, "fam_replicates": 2,
                  "width_max": 256, "taus": [0.5, 1.0], "tau_T": 20, "train_T": 8,
                  "train_widths": [16, 23], "train_steps": 20}
# settings a folder's rows were not made with: an analysis must refuse them
TARGETS_OTHER = {"T": [9, 10, 12], "steps": [30, 50], "q": [2], "d": [2, 4], "batch": [16, 64],
                 "T_test": [[12], [9, 10]], "rep_T": [6, 7], "n_batches": [2], "n_fit": [3000],
                 "fam_Ts": [[8, 16, 64], [8, 64]], "fam_n_start": [256, 64], "fam_n_max": [1024],
                 "fam_replicates": [3], "fam_rtol": [0.05], "fam_se_rel": [0.2],
                 "width_d": [2], "reach": [0.3], "mults": [[1.0, 2.0]],
                 "targets": [["moment:2"], ["mean", "moment:3"]], "fcn_Ts": [[4, 8, 12]],
                 "fcn_steps": [50], "fcn_batch": [16], "fcn_n_val": [128]}
ATTENTION_OTHER = {"steps": [30, 50], "T": [9, 10], "tune_steps": [12], "batch": [32],
                   "d": [3], "q": [3], "T_test": [[12]], "tune_mults": [[1.0, 0.1, 2.0]],
                   "tune_base": ["paper"], "rank_steps": [20], "rank_r": [[2, 4]],
                   "rank_T": [[7]], "width_T": [[8, 16, 256]], "fam_n_start": [64],
                   "fam_replicates": [3], "width_max": [512], "width_level": [0.3],
                   "target": ["variance"],
                   "train_steps": [10], "train_widths": [[16, 32]], "train_T": [10],
                   "mechanisms": [["softmax", "relu"]]}
TARGETS_TABLES = ("represents", "tune", "runs", "family_width", "fcn_tune",
                  "fcn_runs")
ATTENTION_TABLES = ("tune", "runs", "rank", "width", "trained")


def _damage(path, how):
    """Damage the CSV ``path``: a duplicated row, an edited cell, garbage, empty, truncated."""
    text = open(path).read()
    lines = text.splitlines()
    if how == "duplicate row":
        text = "\n".join(lines + lines[1:2]) + "\n"
    elif how == "edited steps":
        text = text.replace(",40,", ",999,").replace(",0.5,", ",0.25,")
    elif how == "garbage":
        text = "garbage\x00,,\n\x01\n"
    elif how == "empty":
        text = ""
    elif how == "truncated":
        text = text[:len(text) // 2]
    open(path, "w").write(text)


def study_folders():
    """The targets and attention studies' folders: analyses with settings no row was made
    with (refused, naming them); damaged tables (read from their journals: the results
    unchanged; without a journal, a damaged table refused, naming it); impossible sizes
    and duplicate spellings (refused before any folder); reruns with other settings (their
    runs computed, the claims naming the new settings)."""
    import contextlib
    import io
    import shutil
    from stsim.studies import attention, targets
    from stsim.studies.contract import run_study
    g = "L study folders"
    quiet = contextlib.redirect_stdout(io.StringIO())
    tmp = tempfile.mkdtemp()
    base = {}
    with quiet:
        for name, study, tiny in (("targets", targets, TARGETS_TINY),
                                  ("attention", attention, ATTENTION_TINY)):
            out = os.path.join(tmp, name)
            base[name] = (study, tiny, out, run_study(study, out, overrides=tiny))

    def key(name, res):
        if name == "targets":
            return json.dumps({k: res[k] for k in ("represents", "learns", "length", "fcn",
                                                   "family")}, sort_keys=True, default=str)
        return json.dumps(res["checks"], sort_keys=True, default=str)

    def copy_of(name):
        dst = tempfile.mkdtemp(dir=tmp)
        shutil.copytree(base[name][2], os.path.join(dst, "o"))
        return os.path.join(dst, "o")

    def analyse(name, out, over=None):
        study, tiny, _, _ = base[name]
        with quiet:
            return run_study(study, out, overrides=dict(tiny, **(over or {})),
                             analyse_only=True)
    # 1. settings no row was made with: refused (ValueError), never analysed silently
    for name, other in (("targets", TARGETS_OTHER), ("attention", ATTENTION_OTHER)):
        for k, values in other.items():
            for v in values:
                try:
                    res = analyse(name, base[name][2], {k: v})
                    ok, detail = False, f"analysed: {key(name, res)[:80]}"
                except ValueError as exc:
                    ok, detail = True, str(exc)
                except Exception as exc:  # noqa: BLE001
                    ok, detail = False, f"{type(exc).__name__}: {exc}"
                record(g, f"{name} --analyse-only {k}={v}", ok, detail)
    # 2. damaged tables: the journal is the truth; without it, refused naming the table
    for name, tables in (("targets", TARGETS_TABLES), ("attention", ATTENTION_TABLES)):
        want = key(name, base[name][3])
        for t in tables:
            for how in ("duplicate row", "edited steps", "garbage", "empty", "truncated"):
                out = copy_of(name)
                path = os.path.join(out, "raw", f"{t}.csv")
                _damage(path, how)
                try:
                    got = key(name, analyse(name, out))
                    ok, detail = got == want, "" if got == want else "results changed"
                except Exception as exc:  # noqa: BLE001
                    ok, detail = False, f"{type(exc).__name__}: {exc}"
                record(g, f"{name} {t}.csv {how}, journal kept", ok, detail)
                if how in ("duplicate row", "garbage", "empty"):
                    os.remove(path + ".journal.jsonl")
                    try:
                        analyse(name, out)
                        ok, detail = False, "analysed"
                    except ValueError as exc:
                        ok, detail = t in str(exc) or "no row" in str(exc), str(exc)
                    except Exception as exc:  # noqa: BLE001
                        ok, detail = False, f"{type(exc).__name__}: {exc}"
                    record(g, f"{name} {t}.csv {how}, no journal", ok, detail)
    # 3. refused before any folder: impossible sizes, one target twice, the variance at q=1
    bad = [("targets", {"T": 10 ** 9}), ("targets", {"d": 10 ** 9}),
           ("targets", {"batch": 10 ** 9}), ("targets", {"eq_n": 10 ** 12}),
           ("targets", {"fcn_Ts": [4, 10 ** 9]}), ("targets", {"mults": [1.0, 1.0]}),
           ("targets", {"targets": ["moment:3", "MOMENT:3"]}), ("targets", {"q": 1}),
           ("targets", {"targets": ["moment:³"]}), ("targets", {"fam_Ts": [8, 10 ** 9]}),
           ("attention", {"T": 10 ** 9}), ("attention", {"batch": 10 ** 9}),
           ("attention", {"tune_base": "mine"}), ("attention", {"tune_mults": [1.0, 1.0]})]
    for name, over in bad:
        study, tiny = base[name][0], base[name][1]
        out = os.path.join(tempfile.mkdtemp(dir=tmp), "x")
        t0 = time.perf_counter()
        try:
            with quiet:
                run_study(study, out, overrides=dict(tiny, **over))
            ok, detail = False, "accepted"
        except ValueError as exc:
            ok, detail = not os.path.exists(out) and time.perf_counter() - t0 < 30, str(exc)
        except Exception as exc:  # noqa: BLE001
            ok, detail = False, f"{type(exc).__name__}: {exc}"
        record(g, f"{name} {over}", ok, detail)
    # 4. reruns with other settings: their runs are computed, the claims name them
    for name, over, words in (("targets", {"T": 10}, "trained at T = 10"),
                              ("targets", {"T_test": [12]}, "at T = 12 <="),
                              ("attention", {"steps": 30}, "in 30 steps"),
                              ("attention", {"T": 9}, "T=9")):
        study, tiny = base[name][0], base[name][1]
        out = copy_of(name)
        try:
            with quiet:
                res = run_study(study, out, overrides=dict(tiny, **over))
            text = json.dumps(res, default=str) + open(os.path.join(out, f"{name}.json")).read()
            again = key(name, analyse(name, out))     # the first settings' rows still serve
            ok = words in text and again == key(name, base[name][3])
            detail = "" if ok else "claims or first settings' results wrong"
        except Exception as exc:  # noqa: BLE001
            ok, detail = False, f"{type(exc).__name__}: {exc}"
        record(g, f"{name} rerun with {over}", ok, detail)
    shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kills", type=int, default=10)
    ap.add_argument("--terms", type=int, default=8)
    ap.add_argument("--sweeps", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", default="", help="comma-separated group letters (e.g. B,K): "
                                                "run those groups only")
    a = ap.parse_args()
    only = set(a.only.upper().split(",")) - {""}
    rng = random.Random(a.seed)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    import warnings
    warnings.simplefilter("ignore")
    t0 = time.time()
    steps = {"A": bad_options, "B": bad_encodings, "C": unstorable, "D": journals,
             "E": bad_records, "F": bad_commands, "G": locks,
             "H": lambda: kill9_writes(a.kills, rng),
             "I": lambda: (terms(a.terms, rng, signal.SIGTERM),
                           terms(max(1, a.terms // 2), rng, signal.SIGHUP)),
             "J": lambda: (kill_sweeps(a.sweeps, rng, signal.SIGKILL),
                           kill_sweeps(a.sweeps, rng, signal.SIGTERM)),
             "K": new_surfaces, "L": study_folders}
    for letter, step in steps.items():
        if not only or letter in only:
            step()
    tried = handled = 0
    for g, rows in RESULTS.items():
        ok = sum(r[1] for r in rows)
        tried, handled = tried + len(rows), handled + ok
        print(f"{g}: tried {len(rows)}, handled {ok}, failed {len(rows) - ok}")
        for name, good, detail in rows:
            if not good or g[0] in "HIJ":
                print(f"    {'ok' if good else 'FAILED'} {name}: {detail[:200]}")
    print(f"all: tried {tried}, handled {handled}, failed {tried - handled} "
          f"({time.time() - t0:.0f} s, load {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
