"""A sweep on a Dask LocalCluster (learning rate × seed), interrupted and resumed
==============================================================================

Needs Dask, the optional extra: ``pip install ".[dask]"``.

``stsim.sweep`` runs ``fn(**point, seed=seed)`` on any concurrent.futures executor — here
Client.get_executor() of a LocalCluster (its workers run one BLAS thread each). Every
finished row goes to a journal at once, so a rerun after an interruption (Ctrl-C, a killed
job) computes only the missing rows; the table is the same either way.
"""
import os
import sys

import numpy as np

import stsim

SMOKE = os.environ.get("STSIM_EXAMPLE_SMOKE") == "1"
OUT = os.environ.get("STSIM_EXAMPLE_OUT", "runs/examples")
LRS = [0.3, 3.0] if SMOKE else [0.1, 0.3, 1.0, 3.0]
SEEDS, STEPS = (2, 20) if SMOKE else (3, 400)


def train(lr, seed):
    res = stsim.run(T=16, q=2, pe="stochastic", lr=lr, steps=STEPS, batch=128, seed=seed)
    return {"val": res.final("val"), "cos_W": res.final("cos_W"), "run": res.status}


def stop_after(k):                      # stands in for Ctrl-C after k finished rows
    def progress(done, total, row):
        if done == k:
            raise KeyboardInterrupt
    return progress


if __name__ == "__main__":
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError:     # not in `pip install ".[fast]"`: one line saying what to install
        sys.exit('examples/dask_sweep.py needs Dask: pip install ".[dask]" (the extra stsim[dask])')

    table = os.path.join(OUT, "dask_sweep.csv")
    for f in (table, table + ".journal.jsonl"):      # start afresh for the demonstration
        if os.path.exists(f):
            os.remove(f)
    # worker processes (threads in the smoke test: no start-up and shut-down of processes)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=not SMOKE,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        ex = client.get_executor(pure=False)   # unique task keys: see stsim.sweep on Dask
        try:
            stsim.sweep(train, {"lr": LRS}, seeds=SEEDS, executor=ex, out=table,
                        progress=stop_after(3))
        except KeyboardInterrupt:
            print(f"interrupted: {len(stsim.sweeps.read_table(table))} rows kept in {table}")
        res = stsim.sweep(train, {"lr": LRS}, seeds=SEEDS, executor=ex, out=table)
    print(f"resumed: {res.n_skipped} rows found finished, {res.n_run} computed now")
    for lr in LRS:
        print(f"lr {lr:5g}: val loss {np.round(res.column('val', lr=lr), 4)}")

    res.plot("lr", "val", os.path.join(OUT, "dask_sweep.png"))    # mean ± std over seeds
    print("wrote", table, "and", os.path.join(OUT, "dask_sweep.png"))
