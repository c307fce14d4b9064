"""The measured numbers behind docs/theory.md §5–6 (prints them; no assertions):

1. the slots length-generalisation law: over (setting, T_test) pairs, how much the
   deviation of OOD/ID from the law R*(ξ) shrinks from t_eps to t_eps/8 (the γ lag, O(1/t));
2. the slow convergence of OOD/ID to its limit ρ along one long run;
3. the fixed one-hot floor F against the minimum of the run's OOD loss;
4. the initial plateau (first step with L <= L(0)/2) against ``budget.plateau_steps``,
   up to T = 1000 (where the old budget stopped on the plateau; about a minute of the reduced map).

Run: ``python benchmarks/bench_theory_laws.py`` (about 2 min on one core).
"""
import math
import time

import numpy as np

from stsim.core.families import make_encoding
from stsim.theory.budget import plateau_steps
from stsim.theory.checks import check_theorem
from stsim.theory.ood import ood_min_onehot, ood_ratio_limit
from stsim.theory.reduced import reduced_gd_scalar, reduced_loss

# (T, q, d, lr, eps, d_e, T_test, query)
LAW = [(9, 2, 3, 1 / 180, 27 / 2800, 24, (12, 16, 24), "sum"),
       (9, 2, 3, 1 / 180, 0.018, 24, (16, 24), "sum"),
       (12, 2, 3, 1 / 180, 0.009, 16, (16,), "sum"),
       (20, 2, 3, 0.5, 0.01, 80, (30, 40, 80), "sum"),
       (20, 3, 5, 0.5, 0.01, 80, (40, 80), "sum"),
       (20, 3, 5, 2.5, 0.01, 80, (40, 80), "sum"),
       (20, 3, 5, 5.5, 0.01, 80, (40, 80), "sum"),
       (20, 3, 5, 0.5, 0.01, 80, (40, 80), "mean"),
       (20, 2, 5, 3.9, 0.01, 40, (40,), "sum"),
       (20, 2, 5, 3.9, 0.0005, 40, (40,), "sum"),
       (100, 3, 5, 2.5, 0.01, 400, (150, 400), "sum")]

FLOOR = [(12, 2, 3, 1 / 180, 0.009, (13, 16, 24)), (20, 3, 5, 0.5, 0.01, (30, 40, 80)),
         (50, 3, 5, 0.5, 0.01, (51, 52, 60, 100))]

PLATEAU = [(12, 2, 3, 1 / 180, 12), (50, 2, 3, 1 / 180, 50), (200, 2, 3, 1 / 180, 200),
           (200, 3, 5, 0.5, 200), (9, 2, 3, 1 / 180, 24), (100, 2, 3, 1 / 180, 200),
           (1000, 2, 3, 1 / 180, 1000)]


def law():
    print("1. slots: deviation of OOD/ID from the law R*(xi) at t_eps -> t_eps/8")
    shrinks = []
    for T, q, d, lr, eps, d_e, Tts, query in LAW:
        rep = check_theorem(T, q, d, lr, eps, pe="stochastic", d_e=d_e, T_test=Tts,
                            query=query, full_steps=0, grad_points=0, n_mc=2000)
        (chk,) = [c for c in rep.checks if c["name"] == "ood_to_zero"]
        for row in chk["data"]:
            dev = row["dev"]
            shrinks.append(dev[0] / dev[1])
            print(f"  T={T:3d} q={q} d={d} lr={lr:<7.4g} eps={eps:<7.3g} d_e={d_e:3d} {query:4s} "
                  f"T_test={row['T_test']:3d}: dev {dev[0]:+.2e} -> {dev[1]:+.2e} "
                  f"(/{dev[0] / dev[1]:.2f});  R/rho {row['ratio'][0] / row['ratio_limit']:.3f} "
                  f"-> {row['ratio'][1] / row['ratio_limit']:.3f};  passed {chk['passed']}")
    print(f"  {len(shrinks)} pairs: shrink {min(shrinks):.2f} .. {max(shrinks):.2f} (>= 4 required)")


def convergence(T=9, q=2, d=3, lr=1 / 180, d_e=24, T_test=24, steps=30_000_000):
    print(f"2. slots T={T}, d_e={d_e}, T_test={T_test}: OOD/ID along one run of {steps:.0e} steps")
    enc = make_encoding("stochastic", T_max=d_e, d_e=d_e)
    tr = reduced_gd_scalar(T, q, d, lr, steps, pe=enc, record_every=100_000)
    rho = ood_ratio_limit(T, T_test, q)
    D, rp = T_test - T, T_test - q
    kappa = 2 * D * D * (q + rp) / (q * (D * D + q * rp))
    for k in (1, 3, 10, 30, 100, 300):
        a, g, L = tr.a[0, k], tr.gamma[0, k], tr.loss[0, k]
        R = float(reduced_loss(a, g, T_test, q, d)) / L
        print(f"  step {tr.step[k]:9d}: ID {L:.3e}  R/rho {R / rho:.4f}  (1 - R/rho)/xi "
              f"{(1 - R / rho) / math.exp(-a):6.2f}  (kappa = {kappa:.2f})")


def floor():
    print("3. fixed one-hot: the infimum F against the run's minimum and the limit L_inf")
    for T, q, d, lr, eps, Tts in FLOOR:
        rep = check_theorem(T, q, d, lr, eps, T_test=Tts, full_steps=0, grad_points=0,
                            n_mc=2000)
        (chk,) = [c for c in rep.checks if c["name"] == "fixed_ood_floor"]
        for row in chk["data"]:
            print(f"  T={T:3d} q={q} d={d} T_test={row['T_test']:3d}: F {row['floor_inf']:.5f} "
                  f"<= min OOD {row['min_ood']:.5f};  OOD(eps/8) {row['ood_eps8']:.4f} < "
                  f"L_inf {row['floor']:.4f};  passed {chk['passed']}")
    F, theta = ood_min_onehot(200, 250, 3, 5)
    print(f"  T=200 q=3 d=5: F = {F:.4f} (T_test 250, at c a = {theta:.3f}), "
          f"{ood_min_onehot(200, 400, 3, 5)[0]:.4f} (400)")


def _first_below(T, q, d, lr, n, frac=0.5, chunk=2_000_000):
    pe = "onehot" if n == T else make_encoding("stochastic", T_max=n, d_e=n)
    a = g = 0.0
    t = 0
    while True:
        tr = reduced_gd_scalar(T, q, d, lr, chunk, pe=pe, a0=a, gamma0=g, record_every=100)
        hit = np.nonzero(tr.loss[0] <= frac * d / (2 * q))[0]
        if hit.size:
            return t + int(tr.step[hit[0]])
        a, g, t = float(tr.a[0, -1]), float(tr.gamma[0, -1]), t + chunk


def plateau():
    print("4. plateau: first step with L <= L(0)/2, against plateau_steps; and t_pred")
    for T, q, d, lr, n in PLATEAU:
        t0 = time.perf_counter()
        t_half = _first_below(T, q, d, lr, n)
        est = plateau_steps(T, q, d, lr, n, 1.0)
        eps = 0.5 * d * T / (100 * (T - q) * q)
        t_pred = (n - 1) / (4 * lr * eps)
        print(f"  T={T:4d} q={q} d={d} lr={lr:<7.4g} n={n:4d}: {t_half:9d} steps = "
              f"{t_half / est:.2f} x estimate, {t_half / t_pred:.2f} x t_pred (default eps); "
              f"{time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    law()
    convergence()
    floor()
    plateau()
