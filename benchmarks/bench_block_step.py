"""How large W's step may be when its token rows are held: SGD against the reduced map.

With W's token rows ``W_xx, W_xe`` held at 0 (``freeze``) and a step per block
(``lr={"W": η_W, "V": η_V}``), online SGD follows the reduced population map
(:func:`stsim.core.reduced.reduced_map`, the same two steps) until the minibatch noise in
``W_ee`` shows: its logit noise grows like ``η_W/(B n)`` (``stsim.core.schedule``, *A step
per block*) and keeps SGD above 2% of L(0). This script measures, for each
``(T, η_W/n)``, the step at which the validation loss first reaches 50% and 2% of its value
at step 0 (records every ``max(1, t/40)`` steps, ``t`` the map's 2% step; stopped there by
a callback, or at 2.5 t: "not reached"), and its ratio to the map's step — the data that
fix ``stability.NOISE_W`` (``η_W = NOISE_W · B n/(c² q d)``, n/5 at q = 3, d = 5, B = 256).

    nice -n 5 python benchmarks/bench_block_step.py            # T 50 and 200, η_W/n 0.1-0.8
    python benchmarks/bench_block_step.py --T 1000 --ratios 0.2
    python benchmarks/bench_block_step.py --T 2000 --n 4000 --lr-W 256,384 --lr-V 2.898 \
        --seeds 0,1,2 --out docs/figures/long/step_cap_T2000.csv   # the cap's margin

Stochastic/slots, ``d_e = n = 2T``, q = 3, d = 5, batch 256, η_V = 5.5, seed 0 (``--seeds``), theory
model, ``query="sum"``; ``--free`` adds the run with the token rows free at η_W = n/5.
Writes ``docs/figures/long/block_step.csv`` (``--out``) and prints the table.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import stsim  # noqa: E402
from stsim.core.reduced import reduced_map_steps  # noqa: E402
from stsim.core.schedule import FROZEN  # noqa: E402
from stsim.util.io import write_csv  # noqa: E402

COLUMNS = ["T", "n", "seed", "batch", "lr_W", "lr_V", "held", "map_50", "map_2", "sgd_50",
           "sgd_2", "ratio_2", "every", "status", "seconds", "load"]


def measure(T, ratio, held=True, lr_V=5.5, batch=256, q=3, d=5, seed=0, n=None, lr_W=None):
    n = 2 * T if n is None else n
    lr = {"W": ratio * n if lr_W is None else lr_W, "V": lr_V}
    m50, m2 = reduced_map_steps(T, q, d, lr, n)
    steps = int(2.5 * m2) + 1
    every = max(1, m2 // 40)
    hit = {}

    def callback(row):
        hit.setdefault("v0", row["val"])
        for lev, key in ((0.5, "sgd_50"), (0.02, "sgd_2")):
            if key not in hit and row["val"] <= lev * hit["v0"]:
                hit[key] = int(row["step"])
        return "sgd_2" in hit

    t0 = time.perf_counter()
    res = stsim.run(T=T, q=q, d=d, d_e=n, batch=batch, seed=seed, lr=lr, steps=steps,
                    freeze=FROZEN if held else (), eval_every=every, n_val=256,
                    progress=False, callback=callback)
    return {"T": T, "n": n, "seed": seed, "batch": batch, "lr_W": lr["W"], "lr_V": lr_V,
            "held": int(held),
            "map_50": m50, "map_2": m2, "sgd_50": hit.get("sgd_50"), "sgd_2": hit.get("sgd_2"),
            "ratio_2": round(hit["sgd_2"] / m2, 3) if "sgd_2" in hit else None,
            "every": every, "status": res.status, "seconds": round(time.perf_counter() - t0, 1),
            "load": round(os.getloadavg()[0], 1)}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--T", default="50,200")
    p.add_argument("--ratios", default="0.1,0.2,0.4,0.8", help="η_W / n")
    p.add_argument("--free", action="store_true", help="also W's token rows free, η_W = n/5")
    p.add_argument("--n", type=int, default=None, help="d_e = n (default 2T)")
    p.add_argument("--lr-W", dest="lr_W", default=None,
                   help="comma list of η_W (instead of --ratios)")
    p.add_argument("--lr-V", dest="lr_V", type=float, default=5.5)
    p.add_argument("--seeds", default="0", help="comma list of seeds, each run at every step")
    p.add_argument("--out", default=os.path.join("docs", "figures", "long", "block_step.csv"))
    args = p.parse_args(argv)
    rows = []
    for T in (int(t) for t in args.T.split(",")):
        runs = [(float(r), True, None) for r in args.ratios.split(",")] if not args.lr_W else \
            [(None, True, float(w)) for w in args.lr_W.split(",")]
        runs += [(0.2, False, None)] if args.free else []
        for (ratio, held, lr_W), seed in ((r, int(s)) for r in runs
                                          for s in args.seeds.split(",")):
            rows.append(measure(T, ratio, held, lr_V=args.lr_V, n=args.n, lr_W=lr_W,
                                seed=seed))
            print(rows[-1], flush=True)
            write_csv(args.out, COLUMNS, rows)
    print(f"\n{'T':>5} {'n':>5} {'seed':>4} {'eta_W':>7} {'eta_W/n':>8} {'held':>5} | "
          f"{'map 2%':>7} "
          f"{'SGD 2%':>12} {'ratio':>6}")
    for r in rows:
        print(f"{r['T']:>5} {r['n']:>5} {r['seed']:>4} {r['lr_W']:>7.4g} "
              f"{r['lr_W'] / r['n']:>8.3f} "
              f"{r['held']:>5} | {r['map_2']:>7} "
              f"{r['sgd_2'] or 'not reached':>12} {r['ratio_2'] or '-':>6}")


if __name__ == "__main__":
    main()
