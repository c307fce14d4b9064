"""The FCN's cost model (``stsim.baselines.fcn.fcn_seconds_per_step``, what
``stsim.core.cost.estimated_seconds`` uses for ``arch="fcn"``): measured seconds of
one FCN training step over a range of sizes, divided by ``3 × points × parameters`` (one
forward product and the two of the backward pass), against ``SECONDS_PER_MAC``. Prints
figures; no assertions.

Run: ``OMP_NUM_THREADS=1 python benchmarks/bench_fcn_cost.py``
"""
import time

import numpy as np

import stsim
from stsim.baselines.fcn import SECONDS_PER_MAC, fcn_param_count, fcn_seconds_per_step
from stsim.core.config import Config
from stsim.core.problem import make_problem


def per_step(cfg, n=20):
    problem = make_problem(cfg)
    params = problem.init_params(np.random.default_rng(0))
    rng = np.random.default_rng(1)
    problem.loss_grad(params, rng)
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(n):
            problem.loss_grad(params, rng)
        best = min(best, (time.perf_counter() - t0) / n)
    return best


def main():
    assert stsim.FCNProblem       # registers arch="fcn"
    print(f"{'T':>5} {'width':>6} {'batch':>6} {'params':>9} {'s/step':>10} {'s/MAC':>10} "
          f"{'model/measured':>15}")
    ratios = []
    for T, width, batch in [(16, 64, 256), (64, 64, 256), (64, 256, 256), (256, 128, 256),
                            (256, 512, 128), (1024, 256, 64)]:
        cfg = Config.from_options(T=T, q=3, arch="fcn", width=width, batch=batch, steps=1)
        t = per_step(cfg)
        n_par = fcn_param_count(T, cfg.d, width)
        ratio = fcn_seconds_per_step(cfg) / t
        ratios.append(ratio)
        print(f"{T:5d} {width:6d} {batch:6d} {n_par:9d} {t:10.3e} {t / (3 * batch * n_par):10.2e} "
              f"{ratio:15.2f}")
    print(f"SECONDS_PER_MAC = {SECONDS_PER_MAC:.2e}: model/measured from {min(ratios):.2f} to "
          f"{max(ratios):.2f}")


if __name__ == "__main__":
    main()
