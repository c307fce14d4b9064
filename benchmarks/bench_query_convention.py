"""The practical model with ``query="sum"`` vs ``"mean"``: online SGD, T=50,
q=3, d=5, stochastic/slots (d_e=50), batch 256, 3000 steps, seed 0, lr ∈ {1, 5, 20}.
Prints final training loss, cos(W, W*), cos(V, V*) and status for each setting
(about 1–2 minutes on 2 cores). Quoted in docs/model.md.

Usage: python benchmarks/bench_query_convention.py [--steps N]
"""
import argparse

import stsim


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=3000)
    args = ap.parse_args(argv)
    print(f"practical model, T=50 q=3 d=5 stochastic/slots, SGD batch 256, {args.steps} steps")
    print(f"{'query':6s} {'lr':>5s} {'status':10s} {'loss':>10s} {'cos_W':>7s} {'cos_V':>7s}")
    for query in ("mean", "sum"):
        for lr in (1.0, 5.0, 20.0):
            r = stsim.run(T=50, q=3, pe="stochastic", model="practical", query=query,
                          steps=args.steps, lr=lr, seed=0)
            print(f"{query:6s} {lr:5.1f} {r.status:10s} {r.final('loss'):10.4g} "
                  f"{r.final('cos_W'):7.3f} {r.final('cos_V'):7.3f}", flush=True)


if __name__ == "__main__":
    main()
