"""Time one online-SGD step: draw a batch and its encodings, forward + analytic backward,
update W and V. T=200, q=3, d=5, batch 256, float64 (issue 2's speed targets).

Targets: stochastic/slots d_e=400 ≤ 10 ms; stochastic/sphere d_e=64 ≤ 60 ms. Reference
(SPEC §9, PyTorch CPU autograd, the same step written densely): 257 ms and 114 ms.
Also times the dense reference path on the slots encodings (``loss_and_grad`` with the
one-hot matrix built), to show what the gather path saves.

Usage: python benchmarks/bench_step.py [--steps N]
Prints one line per configuration: median and 10–90% range of ms/step over N steps.
"""
import argparse
import os
import time

import numpy as np

import stsim
from stsim.core.encodings import PEBatch, make_encoding
from stsim.core.model import forward_backward
from stsim.core.optim import SGD

TORCH_MS = {("stochastic", "slots", 400): 257.0, ("stochastic", "sphere", 64): 114.0}


def time_steps(pe, sampler, d_e, model, n, dense=False, T=200, q=3, d=5, B=256):
    rng = np.random.default_rng(0)
    enc = make_encoding(pe, T_max=T, d_e=d_e, sampler=sampler, rng=rng)
    D = d + d_e
    params = {"W": 1e-2 * rng.standard_normal((D, D)), "V": 1e-2 * rng.standard_normal((d, D))}
    opt = SGD(0.1)
    times = []
    for i in range(n + 3):
        t0 = time.perf_counter()
        b = stsim.sample_batch(rng, B, T, q, d)
        peb = enc.sample(rng, B, T)
        if dense:
            peb = PEBatch(d_e=d_e, P=peb.dense())
        _, dW, dV = forward_backward(params["W"], params["V"], b.X, b.y, peb, model=model,
                                     query="mean", target=b.target)
        opt.step(params, {"W": dW, "V": dV})
        if i >= 3:
            times.append(time.perf_counter() - t0)
    t = 1e3 * np.array(times)
    return np.median(t), np.percentile(t, 10), np.percentile(t, 90)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=100)
    args = ap.parse_args(argv)
    threads = os.environ.get("OMP_NUM_THREADS", "default")
    print(f"one online-SGD step, T=200 q=3 d=5 batch=256 float64; {os.cpu_count()} cores, "
          f"OMP_NUM_THREADS={threads}; {args.steps} steps each")
    rows = [("stochastic", "slots", 400, "theory", False),
            ("stochastic", "slots", 400, "practical", False),
            ("stochastic", "slots", 400, "practical", True),
            ("stochastic", "sphere", 64, "theory", False),
            ("stochastic", "sphere", 64, "practical", False)]
    for pe, sampler, d_e, model, dense in rows:
        n = max(10, args.steps // 5) if dense else args.steps
        med, lo, hi = time_steps(pe, sampler, d_e, model, n, dense=dense)
        ref = TORCH_MS.get((pe, sampler, d_e))
        path = "dense reference path" if dense else "production path"
        extra = (f"  (PyTorch dense autograd {ref:.0f} ms: ratio {ref / med:4.1f}x)"
                 if ref and not dense else "")
        print(f"  {pe}/{sampler:6s} d_e={d_e:3d} {model:9s} {path:21s} "
              f"{med:7.2f} ms/step [10-90%: {lo:.2f}-{hi:.2f}]{extra}")


if __name__ == "__main__":
    main()
