"""Why the sparse-function trials use the protocol they use (docs/sparse-functions.md).

Prints, for a few (function, T, m) cells and 8 seeds each, the number of successful trials
(test accuracy >= 0.95 on 1000 fresh samples) and the mean attention mass on the hidden
positions under protocol variants of :func:`stsim.studies.sparse.boolean.train_trial`:

* ``default``        — 500 full-batch Adam steps, weight decay 3e-4, block norms <= 20,
                        token-only values (the documented protocol);
* ``first-fit stop`` — stop at the first step where every training margin is >= 1, no
                        weight decay, up to 1000 steps;
* ``pos. values``    — values carry the position too (``values="token+position"``);
* ``R = 10``         — block norms projected onto the ball of radius 10 instead of 20;
* ``3 restarts``     — the smallest-norm fit of 3 initialisations;
* ``λ = 3e-3``       — ten times the weight decay.

``--model fcn`` runs the same variants less positional values (which the FCN does not
have) on cells near the FCN's own m* (the protocol was first chosen on attention cells only).

Usage: OMP_NUM_THREADS=1 python benchmarks/bench_sparse_protocol.py [--seeds 8]
[--model attention|fcn] (about 3 minutes on one core for each model).
"""
import argparse
import time

import numpy as np

from stsim.studies.sparse.boolean import train_trial
from stsim.sweeps import spawn_seeds

VARIANTS = {
    "default": {},
    "first-fit stop": dict(margin=1.0, weight_decay=0.0, max_steps=1000),
    "pos. values": dict(values="token+position"),
    "R = 10": dict(max_norm=10.0),
    "3 restarts": dict(restarts=3),
    "λ = 3e-3": dict(weight_decay=3e-3),
}
CELLS = [("majority", 256, 128), ("and", 256, 128), ("and", 512, 256)]
FCN_VARIANTS = {k: VARIANTS[k] for k in ("default", "first-fit stop", "R = 10", "3 restarts",
                                         "λ = 3e-3")}
FCN_CELLS = [("majority", 64, 128), ("and", 64, 128), ("parity", 64, 181)]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=8)
    p.add_argument("--model", choices=("attention", "fcn"), default="attention")
    args = p.parse_args(argv)
    seeds = spawn_seeds(args.seeds)
    variants, cells = (VARIANTS, CELLS) if args.model == "attention" else (FCN_VARIANTS, FCN_CELLS)
    print(f"model {args.model}")
    print(f"{'variant':>15s} | " + " | ".join(f"{fn} T={T} m={m}" for fn, T, m in cells))
    for name, kw in variants.items():
        t0 = time.perf_counter()
        cols = []
        for fn, T, m in cells:
            s_ = 2 if fn == "parity" else 3
            rows = [train_trial(T, m, s_, fn, args.model, seed=s, n_test=1000, **kw)
                    for s in seeds]
            ok = sum(r["success"] for r in rows)
            fit = sum(r["train_acc"] >= 0.99 for r in rows)
            if args.model == "attention":
                attn = np.mean([r["attn_on_support"] for r in rows])
                cols.append(f"{ok}/{len(rows)} ok, {fit} fit, attn {attn:.2f}")
            else:
                acc = np.mean([r["test_acc"] for r in rows])
                cols.append(f"{ok}/{len(rows)} ok, {fit} fit, test acc {acc:.3f}")
        print(f"{name:>15s} | " + " | ".join(cols) + f"   ({time.perf_counter() - t0:.0f}s)")


if __name__ == "__main__":
    main()
