"""Speed of the reduced dynamics and of the exact population gradient (prints figures;
no assertions). Targets: 10⁶ reduced GD steps of one setting ≤ 5 s; 100
settings × 10⁵ steps ≤ 10 s; enumeration population gradient at T=12, q=3 ≤ 5 ms.

Run: ``OMP_NUM_THREADS=1 python benchmarks/bench_reduced.py``
"""
import time

import numpy as np

from stsim import make_encoding
from stsim.theory.population import make_population_objective
from stsim.theory.reduced import gradient_flow, reduced_gd, reduced_gd_scalar
from stsim.core.run import Config


def timed(f, repeat=1):
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t0)
    return best


def main():
    t = timed(lambda: reduced_gd_scalar(200, 3, 5, 0.5, 10 ** 6, record_every=1000), 2)
    print(f"10^6 reduced GD steps, one setting (scalar map):      {t:7.3f} s   (target <= 5 s)")
    t = timed(lambda: reduced_gd(50, 3, 5, 0.5, 10 ** 5, record_every=1000), 1)
    print(f"10^5 reduced GD steps, one setting (NumPy map, K=1):  {t:7.3f} s")
    rng = np.random.default_rng(0)
    T = rng.integers(20, 1000, 100)
    q = rng.integers(2, 5, 100)
    d = rng.integers(1, 10, 100)
    lr = rng.uniform(0.01, 0.5, 100)
    t = timed(lambda: reduced_gd(T, q, d, lr, 10 ** 5, record_every=1000), 1)
    print(f"100 settings x 10^5 reduced GD steps (one call):      {t:7.3f} s   (target <= 10 s)")
    t = timed(lambda: gradient_flow(T, q, d, np.linspace(0, 1e4, 101)), 1)
    print(f"gradient flow, 100 settings to tau=1e4 (solve_ivp):   {t:7.3f} s")
    cfg = Config.from_options(T=12, q=3, d=5, pe="onehot", objective="population",
                              optimizer="gd")
    pop = make_population_objective(cfg, make_encoding("onehot", T_max=12))
    D = 17
    W, V = np.zeros((D, D)), np.zeros((5, D))
    W[5:, 5:] = rng.standard_normal((12, 12))
    V[:, :5] = rng.standard_normal((5, 5))
    n = 200
    t = timed(lambda: [pop.loss_grad(W, V) for _ in range(n)], 3) / n
    print(f"exact population loss+gradient, T=12 q=3 (220 subsets): {t * 1e3:6.3f} ms "
          "(target <= 5 ms)")


if __name__ == "__main__":
    main()
