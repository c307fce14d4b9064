"""stsim.sweep: executor independence (process pool, threads, inline, dask), seeds,
resumability after interruption, recorded failures, and refusals before any work."""
import concurrent.futures as cf
import json
import multiprocessing as mp
import os
import subprocess
import sys
import textwrap
import threading
import types

import numpy as np
import pytest

from stsim.studies.separation.study import train_point
from stsim.sweeps import InlineExecutor, expand_grid, read_table, spawn_seeds, sweep

CALLS = []


def noisy(a, b, seed, scale=1.0):
    """A point function whose value depends on the seed (module level: picklable)."""
    CALLS.append((a, b, seed))
    z = np.random.default_rng(seed).standard_normal(4)
    return {"y": float(scale * a * z.sum() + b), "z0": float(z[0])}


def fails_on_two(a, seed):
    if a == 2:
        raise ZeroDivisionError("a = 2 is bad")
    return a * 10


class Stop(BaseException):
    """Stands for Ctrl-C / a killed driver."""


def stops_on_three(a, seed):
    if a == 3:
        raise Stop()
    CALLS.append(a)
    return {"v": a}


GRID = {"a": [1, 2, 3], "b": [0.5, -1.0]}


def _csv(path):
    with open(path) as fh:
        return fh.read()


@pytest.mark.pool
def test_table_independent_of_executor(tmp_path):
    outs = []
    for i, ex in enumerate([InlineExecutor(), cf.ThreadPoolExecutor(3), None]):
        path = tmp_path / f"t{i}.csv"
        res = sweep(noisy, GRID, seeds=3, root_seed=7, executor=ex, out=path, max_workers=2)
        assert res.n_run == 18 and res.n_failed == 0
        outs.append(_csv(path))
    assert outs[0] == outs[1] == outs[2]
    rows = read_table(tmp_path / "t0.csv")
    assert [(r["a"], r["b"], r["seed_index"]) for r in rows][:4] == [
        (1, -1.0, 0), (1, -1.0, 1), (1, -1.0, 2), (1, 0.5, 0)]
    # replicate r has the same seed at every point (paired), seeds differ across r
    seeds = spawn_seeds(3, root_seed=7)
    assert len(set(seeds)) == 3
    assert all(r["seed"] == seeds[r["seed_index"]] for r in rows)
    # the values really depend on the seed and reproduce
    r0 = rows[0]
    z = np.random.default_rng(r0["seed"]).standard_normal(4)
    assert r0["y"] == pytest.approx(1 * z.sum() - 1.0, rel=1e-15)
    assert len({r["z0"] for r in rows}) == 3
    # a different root seed changes the seeds
    assert spawn_seeds(3, root_seed=8) != seeds


@pytest.mark.pool
def test_dask_localcluster_table_equals_process_pool(tmp_path):
    distributed = pytest.importorskip("distributed")
    ref = tmp_path / "pool.csv"
    sweep(noisy, GRID, seeds=2, out=ref, max_workers=2)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        path = tmp_path / "dask.csv"
        res = sweep(noisy, GRID, seeds=2, executor=client.get_executor(), out=path)
    assert res.n_run == 12 and res.n_failed == 0
    assert _csv(path) == _csv(ref)


def test_resume_skips_finished_points(tmp_path):
    path = tmp_path / "r.csv"
    CALLS.clear()
    first = sweep(noisy, GRID, seeds=2, executor=InlineExecutor(), out=path)
    assert len(CALLS) == 12 and first.n_run == 12
    CALLS.clear()
    again = sweep(noisy, GRID, seeds=2, executor=InlineExecutor(), out=path)
    assert CALLS == [] and again.n_run == 0 and again.n_skipped == 12
    assert again.rows == first.rows
    # extending the grid computes only the new points; the table holds all of them
    CALLS.clear()
    more = sweep(noisy, {"a": [1, 2, 3, 4], "b": [0.5, -1.0]}, seeds=2,
                 executor=InlineExecutor(), out=path)
    assert sorted({c[0] for c in CALLS}) == [4] and more.n_run == 4
    assert len(read_table(path)) == 16


def test_keep_rejects_finished_rows_that_no_longer_stand(tmp_path):
    path = tmp_path / "k.csv"
    CALLS.clear()
    sweep(noisy, GRID, seeds=1, executor=InlineExecutor(), out=path)
    asked = []

    def keep(rec):                    # say the output of the points with a = 2 is gone
        asked.append(rec["point"]["a"])
        return rec["point"]["a"] != 2
    CALLS.clear()
    res = sweep(noisy, GRID, seeds=1, executor=InlineExecutor(), out=path, keep=keep)
    assert sorted(asked) == [1, 1, 2, 2, 3, 3]           # asked once per finished row
    assert sorted(c[0] for c in CALLS) == [2, 2] and res.n_run == 2 and res.n_skipped == 4
    assert len(read_table(path)) == 6


@pytest.mark.pool
def test_make_executor_is_the_one_pool():
    from stsim.sweeps import OneThreadProcessPool, make_executor
    for n in (0, 1):
        ex = make_executor(n)
        assert isinstance(ex, InlineExecutor) and ex.workers == 1
    ex = make_executor(2)
    try:
        assert isinstance(ex, OneThreadProcessPool) and ex.workers == min(2, os.cpu_count())
    finally:
        ex.shutdown()
    with pytest.raises(ValueError, match="workers must be an integer >= 0"):
        make_executor(-1)
    # the sweep's own executor is make_executor's: one worker runs in this process (no
    # pickling needed), two need a picklable function
    assert sweep(lambda a, seed: a, {"a": [1]}, max_workers=1).rows[0]["value"] == 1


def test_interrupted_sweep_loses_no_finished_point(tmp_path):
    path = tmp_path / "i.csv"
    CALLS.clear()
    with pytest.raises(Stop):
        sweep(stops_on_three, {"a": [1, 2, 3, 4]}, seeds=1, executor=InlineExecutor(),
              out=path)
    assert CALLS == [1, 2]
    assert [r["a"] for r in read_table(path)] == [1, 2]
    # a crash in the middle of a journal write leaves a torn line: it is ignored
    with open(str(path) + ".journal.jsonl", "a") as fh:
        fh.write('{"point": {"a": 9')
    CALLS.clear()
    res = sweep(_finish, {"a": [1, 2, 3, 4]}, seeds=1, executor=InlineExecutor(), out=path)
    assert res.n_skipped == 2 and res.n_run == 2 and CALLS == [3, 4]
    assert [r["v"] for r in read_table(path)] == [1, 2, 3, 4]


def _finish(a, seed):
    CALLS.append(a)
    return {"v": a}


@pytest.mark.pool
def test_failing_point_is_recorded_and_sweep_continues(tmp_path):
    path = tmp_path / "f.csv"
    res = sweep(fails_on_two, {"a": [1, 2, 3]}, seeds=2, out=path, max_workers=2)
    assert res.n_failed == 2 and res.n_run == 6
    rows = read_table(path)
    bad = [r for r in rows if r["status"] == "error"]
    assert [r["a"] for r in bad] == [2, 2]
    assert all(r["error"] == "ZeroDivisionError: a = 2 is bad" for r in bad)
    assert [r["value"] for r in rows if r["status"] == "ok"] == [10, 10, 30, 30]
    # rerun: finished rows are skipped, failed rows are tried again (or kept)
    kept = sweep(fails_on_two, {"a": [1, 2, 3]}, seeds=2, executor=InlineExecutor(), out=path,
                 retry_failed=False)
    assert kept.n_run == 0
    retry = sweep(fails_on_two, {"a": [1, 2, 3]}, seeds=2, executor=InlineExecutor(), out=path)
    assert retry.n_run == 2 and retry.n_failed == 2


@pytest.mark.parametrize("grid, match", [
    ({}, "grid is empty"),
    ([], "grid is empty"),
    ({"a": []}, "parameter 'a' has no values"),
    ({"a": [1], "c": [2]}, r"unknown parameter\(s\) \['c'\]"),
    ({"b": [1]}, r"lacks required parameter\(s\) \['a'\]"),
    ({"a": [1], "b": [1], "seed": [3]}, "reserved"),
    ({"a": [[1, 2]], "b": [1]}, "finite scalar"),
    ([{"a": 1, "b": 2}, {"b": 2, "a": 1}], "appears twice"),
])
def test_bad_grids_raise_before_any_work(tmp_path, grid, match):
    CALLS.clear()
    path = tmp_path / "bad.csv"
    with pytest.raises(ValueError, match=match):
        sweep(noisy, grid, seeds=1, executor=InlineExecutor(), out=path)
    assert CALLS == [] and not os.path.exists(path)


@pytest.mark.pool
def test_other_refusals(tmp_path):
    with pytest.raises(ValueError, match="seeds must be an integer >= 1"):
        sweep(noisy, GRID, seeds=0, executor=InlineExecutor())
    # the default pool sends fn with cloudpickle: a lambda runs there; an fn that does not
    # pickle (it holds a lock) is refused before any work
    assert [r["value"] for r in sweep(lambda a, seed: 2 * a, {"a": [1, 2]}).rows] == [2, 4]
    lock = threading.Lock()

    def holds_lock(a, seed):
        with lock:
            return a
    with pytest.raises(ValueError, match="does not pickle.*lock"):
        sweep(holds_lock, {"a": [1]}, out=tmp_path / "lock.csv")
    assert os.listdir(tmp_path) == []
    with pytest.raises(ValueError, match="executor must be"):
        sweep(noisy, GRID, executor="pool")
    with pytest.raises(ValueError, match="seed"):
        sweep(lambda a: a, {"a": [1]}, executor=InlineExecutor())
    # widths < 1 are refused by the point validator of the experiment, before any run
    grid = {"arch": ["fcn"], "T": [8], "d": [1], "width": [4, 0], "steps": [5]}
    with pytest.raises(ValueError, match="width must be an integer >= 1"):
        sweep(train_point, grid, executor=InlineExecutor(), out=tmp_path / "w.csv")
    assert not os.path.exists(tmp_path / "w.csv")
    assert len(expand_grid({"a": 1, "b": [1, 2]})) == 2


def test_concurrent_sweeps_share_one_table(tmp_path):
    """Threads of one process may sweep into the same out: no row is lost, and the table
    equals that of one sweep over the whole grid."""
    whole = tmp_path / "whole.csv"
    sweep(noisy, GRID, seeds=2, executor=InlineExecutor(), out=whole)
    shared = tmp_path / "shared.csv"
    with cf.ThreadPoolExecutor(2) as work, cf.ThreadPoolExecutor(6) as drivers:
        futs = [drivers.submit(sweep, noisy, {"a": [a], "b": [b]}, seeds=2, executor=work,
                               out=shared) for a in GRID["a"] for b in GRID["b"]]
        assert all(f.result().n_run == 2 for f in futs)
    assert _csv(shared) == _csv(whole)


# --------------------------------------------------------------------------------------
# the default pool from scripts, stdin and notebooks
# --------------------------------------------------------------------------------------
UNGUARDED = textwrap.dedent("""
    import numpy as np
    import stsim

    SCALE = 3.0                      # a global of __main__, read in the workers

    def train(lr, seed):
        res = stsim.run(T=8, q=2, lr=lr, steps=20, batch=16, seed=seed, progress=False)
        return {"val": res.final("val"), "run": res.status, "x": SCALE * lr}

    res = stsim.sweep(train, {"lr": [0.5, 1.0]}, seeds=2)
    print("STATUS", sorted({r["status"] for r in res.rows}), len(res.rows),
          [r["error"] for r in res.rows if r["error"]][:1])
    print("X", [r["x"] for r in res.rows])
""")


@pytest.mark.pool
@pytest.mark.parametrize("how", ["script", "stdin"])
def test_default_pool_runs_unguarded_scripts_and_stdin(tmp_path, how):
    """A script without ``if __name__ == "__main__"`` (before: every row BrokenProcessPool)
    and the same code on stdin, as a notebook runs it (before: FileNotFoundError '<stdin>'
    in the workers), both sweep to all-ok rows on the default executor."""
    script = tmp_path / "unguarded.py"
    script.write_text(UNGUARDED)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
         os.environ.get("PYTHONPATH", "")]), MPLBACKEND="Agg")
    cmd = [sys.executable, str(script)] if how == "script" else [sys.executable, "-"]
    proc = subprocess.run(cmd, input=None if how == "script" else UNGUARDED, cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "STATUS ['ok'] 4 []" in proc.stdout, proc.stdout + proc.stderr
    assert "X [1.5, 1.5, 3.0, 3.0]" in proc.stdout


def _ghost_module():
    """A function whose module exists in this process only (made at run time)."""
    mod = types.ModuleType("stsim_ghost_module")
    exec("def f(a, seed):\n    return a\n", mod.__dict__)
    sys.modules[mod.__name__] = mod
    return mod.f


@pytest.mark.pool
def test_an_executor_that_cannot_run_fn_is_refused_before_any_row(tmp_path):
    """A spawned stdlib pool finds fn by name in a worker that lacks its module: the
    probe task fails and the sweep raises before any row, never a table of error rows."""
    f = _ghost_module()
    out = tmp_path / "t.csv"
    with cf.ProcessPoolExecutor(1, mp_context=mp.get_context("spawn")) as ex:
        with pytest.raises(ValueError, match="cannot run fn 'f'.*if __name__"):
            sweep(f, {"a": [1, 2]}, executor=ex, out=out)
    # the default pool too (cloudpickle sends a function of an importable-looking module
    # by reference)
    with pytest.raises(ValueError, match="cannot run fn 'f'"):
        sweep(f, {"a": [1, 2]}, out=out)
    assert os.listdir(tmp_path) == []
    # in this process it runs
    assert [r["value"] for r in sweep(f, {"a": [1, 2]}, out=out, max_workers=1).rows] == [1, 2]


def _dies_on_three(a, seed, flag):
    if a == 3 and os.path.exists(flag):
        os._exit(3)                      # a worker killed mid-row (the OOM killer, say)
    return {"v": a}


@pytest.mark.pool
def test_a_worker_that_dies_stops_the_sweep_and_keeps_the_finished_rows(tmp_path):
    from stsim.sweeps import ExecutorFailed
    out, flag = tmp_path / "t.csv", tmp_path / "die"
    flag.write_text("")
    grid = {"a": [1, 2, 3], "flag": [str(flag)]}
    with pytest.raises(ExecutorFailed, match="rerun to compute the rest"):
        sweep(_dies_on_three, grid, out=out)
    journal = (tmp_path / "t.csv.journal.jsonl")
    recs = [json.loads(x) for x in journal.read_text().splitlines()] if journal.exists() else []
    assert all(r["status"] == "ok" and r["point"]["a"] != 3 for r in recs)   # no error rows
    flag.unlink()           # the rerun in this process: a pool of its own would be a new one
    res = sweep(_dies_on_three, grid, out=out, executor=InlineExecutor())
    assert res.n_skipped == len(recs) and [r["v"] for r in res.rows] == [1, 2, 3]


KILLED_WORKER = """
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


@pytest.mark.pool
def test_a_killed_pool_worker_leaves_no_leaked_semaphore_warning(tmp_path):
    pytest.importorskip("loky")
    (tmp_path / "drv.py").write_text(KILLED_WORKER)
    proc = subprocess.run([sys.executable, str(tmp_path / "drv.py"), str(tmp_path / "t.csv")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "executor failed", proc.stderr
    assert "leaked" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


@pytest.mark.pool
def test_pool_workers_get_one_blas_thread_and_the_driver_keeps_its_environment(monkeypatch):
    from stsim.sweeps.pool import PREFETCH_VAR, THREAD_VARS, OneThreadProcessPool
    for k in THREAD_VARS + (PREFETCH_VAR,):
        monkeypatch.delenv(k, raising=False)
    before = dict(os.environ)
    ex = OneThreadProcessPool(2)
    try:
        futs = [ex.submit(_worker_env) for _ in range(6)]
        assert os.environ == before                       # nothing set here, ever
        assert {f.result() for f in futs} == {("1", "1", "1", "0", 1)}
    finally:
        ex.shutdown()
    assert os.environ == before


def _worker_env():
    from threadpoolctl import threadpool_info
    blas = {i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"}
    return (os.getenv("OMP_NUM_THREADS"), os.getenv("OPENBLAS_NUM_THREADS"),
            os.getenv("MKL_NUM_THREADS"), os.getenv("STSIM_PREFETCH"), max(blas))


@pytest.mark.pool
def test_three_threads_sharing_one_pool_on_one_out_never_refuse_themselves(tmp_path):
    """Own-process refusals: threads of one process sharing a pool and one ``out``, many calls
    each (before the FileLock fix: 13-27 refusals of its own pid in 1600 calls)."""
    from stsim.sweeps import make_executor
    out = tmp_path / "shared.csv"
    ex = make_executor(2)
    errors = []

    def driver(i):
        for k in range(25):
            try:
                sweep(noisy, {"a": [i], "b": [float(k % 5)]}, seeds=1, executor=ex, out=out)
            except Exception as exc:  # noqa: BLE001
                errors.append(f"{type(exc).__name__}: {exc}")
    try:
        threads = [threading.Thread(target=driver, args=(i,)) for i in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        ex.shutdown()
    assert errors == []
    assert len(read_table(out)) == 15


def test_without_loky_a_pool_request_runs_in_this_process_with_a_warning(monkeypatch):
    """loky is the optional extra "pool": without it ``import stsim`` works, a pool of two
    or more workers becomes the inline executor with a warning naming the extra, and a
    sweep asking for workers still returns every row."""
    from stsim.sweeps import pool
    monkeypatch.setattr(pool, "HAVE_POOL", False)
    with pytest.warns(UserWarning, match=r'stsim\[pool\]'):
        ex = pool.make_executor(2)
    assert isinstance(ex, pool.InlineExecutor)
    with pytest.raises(ImportError, match=r'stsim\[pool\]'):
        pool.OneThreadProcessPool(2)
    with pytest.warns(UserWarning, match="in this process"):
        res = sweep(lambda x, seed: {"y": x + 1}, grid={"x": [1, 2]}, max_workers=2)
    assert [r["y"] for r in res.rows] == [2, 3] and res.n_failed == 0


def test_concurrent_resumes_of_one_table_recompute_nothing(tmp_path, monkeypatch):
    """Sweeps of one table in threads of one process (the studies' cell drivers) share its
    rows: a resume that reads them while another sweep reloads the journal must not see an
    empty store and run finished points again (seeded: a slow journal reload and a slow
    key lookup widen the window between one sweep's reload and the other's look-up)."""
    import time as _time

    import stsim.sweeps as sw
    from stsim.sweeps import journal as jr
    out = str(tmp_path / "t.csv")
    calls = []

    def fn(a, seed):
        calls.append(a)
        return {"v": a}
    grids = [{"a": [0, 1, 2, 3]}, {"a": [4, 5, 6, 7]}]
    for g in grids:
        sweep(fn, g, executor=InlineExecutor(), out=out)
    calls.clear()
    real_load, real_key = jr.load_journal, sw.runner.point_key

    def slow_load(path):
        _time.sleep(0.05)
        return real_load(path)

    def slow_key(p):
        _time.sleep(0.02)
        return real_key(p)
    monkeypatch.setattr(jr, "load_journal", slow_load)
    monkeypatch.setattr(sw.runner, "point_key", slow_key)
    with cf.ThreadPoolExecutor(2) as ex:
        res = list(ex.map(lambda g: sweep(fn, g, executor=InlineExecutor(), out=out), grids * 2))
    assert calls == [] and [r.n_skipped for r in res] == [4, 4, 4, 4]
