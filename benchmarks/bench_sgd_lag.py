"""How much later online SGD leaves the initial plateau than the reduced map predicts.

The reduced map (:mod:`stsim.core.reduced`) is population gradient descent, exact for the
population loss of one-hot and stochastic/slots encodings from zero. A default run's
warning quotes its escape step (loss <= 50% of L(0)); this script measures the step at
which online SGD at the same lr reaches it, for several T and batch sizes, and prints the
ratio (measured / predicted) with its spread over seeds.

    python benchmarks/bench_sgd_lag.py            # T 25, 50, 100 x batch 64, 256, 1024; T 200 x 256
    python benchmarks/bench_sgd_lag.py --quick    # T 25, 50 only

Writes ``runs/bench/sgd_lag.csv`` (one row per run) beside the printed table. The escape
step of a run is its first record with ``val <= 0.5 val[0]`` (records every 10 steps;
``n_val = 512``), so it is resolved to 10 steps.
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402

import stsim  # noqa: E402
from stsim.core.schedule import predict  # noqa: E402
from stsim.util.io import write_csv  # noqa: E402


def measure(T, batch, seed, q=3):
    cfg = stsim.Config.from_options(T=T, q=q, pe="stochastic", batch=batch, seed=seed)
    pred = predict(cfg, lr=cfg.lr, steps=None)
    steps = int(math.ceil(3.0 * pred.escape_step / 10.0)) * 10
    t0 = time.perf_counter()
    res = stsim.run(T=T, q=q, pe="stochastic", batch=batch, seed=seed, lr=cfg.lr, steps=steps,
                    eval_every=10, n_val=512, prefetch=False)
    val = res.history["val"]
    hit = np.nonzero(val <= 0.5 * val[0])[0]
    esc = int(res.history["step"][hit[0]]) if len(hit) else None
    return {"T": T, "q": q, "batch": batch, "seed": seed, "lr": cfg.lr, "d_e": cfg.d_e,
            "predicted_escape": pred.escape_step, "measured_escape": esc,
            "ratio": (esc / pred.escape_step) if esc else None,
            "seconds": round(time.perf_counter() - t0, 1)}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--out", default=os.path.join("runs", "bench", "sgd_lag.csv"))
    args = p.parse_args(argv)
    grid = [(25, b) for b in (64, 256, 1024)] + [(50, b) for b in (64, 256, 1024)]
    if not args.quick:
        grid += [(100, b) for b in (64, 256, 1024)] + [(200, 256)]
    rows = []
    print(f"load average at start: {os.getloadavg()[0]:.1f}", flush=True)
    for T, batch in grid:
        seeds = range(args.seeds if T < 200 else 1)
        for seed in seeds:
            rows.append(measure(T, batch, seed))
            print(rows[-1], flush=True)
            write_csv(args.out, list(rows[0]), rows)
    print(f"\n{'T':>4} {'batch':>6} {'predicted':>10} {'measured (mean over seeds)':>28} "
          f"{'ratio':>14}")
    for T, batch in grid:
        r = [x for x in rows if x["T"] == T and x["batch"] == batch and x["ratio"]]
        if not r:
            continue
        ratio = np.array([x["ratio"] for x in r])
        se = ratio.std(ddof=1) / np.sqrt(len(ratio)) if len(ratio) > 1 else float("nan")
        print(f"{T:>4} {batch:>6} {r[0]['predicted_escape']:>10} "
              f"{np.mean([x['measured_escape'] for x in r]):>28.0f} "
              f"{ratio.mean():>8.3f} ± {se:.3f}")
    print(f"load average at end: {os.getloadavg()[0]:.1f}; rows in {args.out}")


if __name__ == "__main__":
    main()
