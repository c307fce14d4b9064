"""How much later online SGD leaves the initial plateau than the reduced map predicts.

The reduced map (:mod:`stsim.core.reduced`) is population gradient descent, exact for the
population loss of one-hot and stochastic/slots encodings from zero. A default run's
warning quotes its escape step (loss <= 50% of L(0)); this script measures the step at
which online SGD at the same lr reaches it (and 2% of L(0)), for several T and batch
sizes, and prints the ratio (measured / predicted) with its standard error over seeds.

    python benchmarks/bench_sgd_lag.py            # T 25, 50, 100 x batch 64, 256, 1024; T 200 x 256
    python benchmarks/bench_sgd_lag.py --quick    # T 25, 50 only
    python benchmarks/bench_sgd_lag.py --mechanism --T 50 --batch 64
        # the same runs with the gradient of W's token rows (W_xe, W_xx) dropped, and with
        # that of V's encoding columns dropped: which minibatch noise makes the lag

Writes ``runs/bench/sgd_lag.csv`` (one row per run) beside the printed table. The escape
step of a run is its first record with ``val <= 0.5 val[0]`` (records every 10 steps;
``n_val = 512``), so it is resolved to 10 steps; each run goes on to
``max(3 x predicted escape, 2 x predicted 2% step)``.
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

#: the single step these measurements were made at (the population bound's eta_max/2 = q
#: at q = 3): plain SGD, W's token rows free
SINGLE_LR = 3.0


#: the mechanism runs: a block held at its zero init (run's ``freeze``)
FROZEN_BLOCKS = {"transformer": (), "frozen-W_x": ("W_xx", "W_xe"), "frozen-V_e": ("V_e",)}


def _first(history, level):
    val = history["val"]
    hit = np.nonzero(val <= level * val[0])[0]
    return int(history["step"][hit[0]]) if len(hit) else None


def measure(T, batch, seed, q=3, arch="transformer"):
    cfg = stsim.Config.from_options(T=T, q=q, pe="stochastic", batch=batch, seed=seed,
                                    lr=SINGLE_LR)
    pred = predict(cfg, lr=cfg.lr, steps=None)
    steps = int(math.ceil(max(3.0 * pred.escape_step, 2.0 * pred.target_step) / 10.0)) * 10
    t0 = time.perf_counter()
    res = stsim.run(T=T, q=q, pe="stochastic", batch=batch, seed=seed, lr=cfg.lr, steps=steps,
                    eval_every=10, n_val=512, prefetch=False, progress=False,
                    freeze=FROZEN_BLOCKS[arch])
    esc, tgt = _first(res.history, 0.5), _first(res.history, 0.02)
    return {"arch": arch, "T": T, "q": q, "batch": batch, "seed": seed, "lr": cfg.lr,
            "d_e": cfg.d_e, "steps_run": steps,
            "predicted_escape": pred.escape_step, "measured_escape": esc,
            "ratio": (esc / pred.escape_step) if esc else None,
            "predicted_2pct": pred.target_step, "measured_2pct": tgt,
            "ratio_2pct": (tgt / pred.target_step) if tgt else None,
            "seconds": round(time.perf_counter() - t0, 1)}


def _cells(rows):
    out = []
    for key, pk, mk in (("ratio", "predicted_escape", "measured_escape"),
                        ("ratio_2pct", "predicted_2pct", "measured_2pct")):
        got = [x for x in rows if x[key]]
        if len(got) < len(rows):
            out.append(f"{rows[0][pk]:>10} {'not reached by ' + str(len(rows) - len(got)):>18}"
                       f" {'':>15}")
            continue
        ratio = np.array([x[key] for x in got])
        se = ratio.std(ddof=1) / np.sqrt(len(ratio)) if len(ratio) > 1 else float("nan")
        out.append(f"{rows[0][pk]:>10} {np.mean([x[mk] for x in got]):>18.0f} "
                   f"{ratio.mean():>7.3f} ± {se:.3f}")
    return " ".join(out)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--out", default=os.path.join("runs", "bench", "sgd_lag.csv"))
    p.add_argument("--mechanism", action="store_true",
                   help="compare the full model with W_x or V_e frozen at --T, --batch")
    p.add_argument("--T", type=int, default=50)
    p.add_argument("--batch", type=int, default=64)
    args = p.parse_args(argv)
    print(f"load average at start: {os.getloadavg()[0]:.1f}", flush=True)
    if args.mechanism:
        groups = [(args.T, args.batch, arch) for arch in ("transformer", "frozen-W_x",
                                                          "frozen-V_e")]
        out = args.out.replace(".csv", f"_mechanism_T{args.T}_B{args.batch}.csv")
    else:
        groups = [(T, b, "transformer") for T in (25, 50) for b in (64, 256, 1024)]
        if not args.quick:
            groups += [(100, b, "transformer") for b in (64, 256, 1024)]
            groups += [(200, 256, "transformer")]
        out = args.out
    rows = []
    for T, batch, arch in groups:
        for seed in range(args.seeds if T < 200 else 1):
            rows.append(measure(T, batch, seed, arch=arch))
            print(rows[-1], flush=True)
            write_csv(out, list(rows[0]), rows)
    print(f"\n{'arch':>12} {'T':>4} {'batch':>6} | escape (50%): {'predicted':>10} "
          f"{'SGD (mean)':>18} {'ratio ± SE':>15} | 2%: {'predicted':>10} {'SGD (mean)':>18} "
          f"{'ratio ± SE':>15}")
    for T, batch, arch in groups:
        r = [x for x in rows if (x["T"], x["batch"], x["arch"]) == (T, batch, arch)]
        print(f"{arch:>12} {T:>4} {batch:>6} | " + _cells(r))
    print(f"load average at end: {os.getloadavg()[0]:.1f}; rows in {out}")


if __name__ == "__main__":
    main()
