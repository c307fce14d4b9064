"""Cost per training step of the separation experiment's models (``stsim separation``).

Times ``--steps`` Adam steps (batch 256, evaluation only at the ends) of the FCN at widths
``c · T d`` and of the transformer (sphere PE) at several ``d_e``, for each T; prints
milliseconds per step as CPU time of this process (``time.process_time``, insensitive to
other jobs on a shared machine) and wall time. Use it to size a step budget: the cost of
one run is ``steps ×`` the per-step time. No timed asserts.

Usage: OMP_NUM_THREADS=1 python benchmarks/bench_separation.py [--steps 50] [--Ts 16,128]
"""
import argparse
import sys
import time

import stsim


def bench(steps, **options):
    c0, t0 = time.process_time(), time.perf_counter()
    res = stsim.run(steps=steps, eval_every=10 * steps, n_val=16, optimizer="adam",
                    batch=256, **options)
    assert res.success, res.message
    return 1e3 * (time.process_time() - c0) / steps, 1e3 * (time.perf_counter() - t0) / steps


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--Ts", default="8,32,128")
    p.add_argument("--d", type=int, default=2)
    args = p.parse_args(argv)
    print(f"{'model':>12s} {'T':>4s} {'width':>6s} {'cpu ms/step':>12s} {'wall ms/step':>13s}")
    for T in (int(t) for t in args.Ts.split(",")):
        for c in (1, 4):
            w = c * T * args.d
            cpu, wall = bench(args.steps, T=T, q=2, d=args.d, arch="fcn", width=w, lr=3e-3)
            print(f"{'fcn':>12s} {T:>4d} {w:>6d} {cpu:>12.2f} {wall:>13.2f}", flush=True)
        for d_e in (16, 64):
            cpu, wall = bench(args.steps, T=T, q=2, d=args.d, pe="stochastic",
                              sampler="sphere", d_e=d_e, lr=0.03)
            print(f"{'transformer':>12s} {T:>4d} {d_e:>6d} {cpu:>12.2f} {wall:>13.2f}",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
