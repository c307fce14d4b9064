"""The runs the measured default steps of the unnormalised element-wise mechanisms
(``measured_lr`` of ``Linear``, ``ReLU``, ``Sigmoid`` in stsim/core/attention.py;
docs/attention.md, "Defaults of a run") are calibrated on: ``stsim.run(T, q, attention,
seed)`` with every other option at its default (SGD, one-hot slots, batch 256,
``max(2000, 30 T)`` steps), at T = 8, 20, 50, q = 2, 3, seeds 0, 1, 2, at the default lr
times each ``--factors`` value. Prints one row per run: the lr, the status (with the step
of a divergence) and the final validation loss over L(0); then, per mechanism and factor,
how many runs diverged. The default is safe when factor 1 diverges nowhere and there is a
margin (a larger factor that also holds, or the smallest diverging factor well above 1).

    PYTHONPATH=. nice -n 5 python benchmarks/calibrate_attention_lr.py [--factors 1,1.5]
        [--mechanisms linear,relu,sigmoid] [--T 8,20,50] [--q 2,3] [--seeds 0,1,2]
"""
from __future__ import annotations

import argparse
import time
import warnings

import stsim
from stsim.core.attention import MECHANISMS


def one(mech, T, q, seed, factor):
    lr, _ = MECHANISMS[mech].default_lr(T, q, None, None, None, None)
    lr *= factor
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        res = stsim.run(T=T, q=q, attention=mech, seed=seed, lr=lr)
    val = res.history.get("val", ())
    ratio = float(val[-1] / val[0]) if len(val) > 1 else float("nan")
    status = res.status
    if status == "diverged":
        status += f"@{res.message.split(' at step ')[1].split(';')[0]}"
    return lr, status, ratio, time.perf_counter() - t0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ints = lambda s: [int(v) for v in s.split(",")]     # noqa: E731
    ap.add_argument("--mechanisms", default="linear,relu,sigmoid")
    ap.add_argument("--T", type=ints, default=[8, 20, 50])
    ap.add_argument("--q", type=ints, default=[2, 3])
    ap.add_argument("--seeds", type=ints, default=[0, 1, 2])
    ap.add_argument("--factors", type=lambda s: [float(v) for v in s.split(",")],
                    default=[1.0, 1.5])
    a = ap.parse_args(argv)
    print(f"{'mechanism':10s} {'T':>3s} {'q':>2s} {'seed':>4s} {'factor':>6s} {'lr':>8s} "
          f"{'status':>16s} {'val/L(0)':>9s} {'s':>5s}", flush=True)
    bad = {}
    for mech in a.mechanisms.split(","):
        for factor in a.factors:
            for T in a.T:
                for q in a.q:
                    for seed in a.seeds:
                        lr, status, ratio, sec = one(mech, T, q, seed, factor)
                        key = (mech, factor)
                        bad.setdefault(key, [0, 0])
                        bad[key][0] += status.startswith("diverged")
                        bad[key][1] += 1
                        print(f"{mech:10s} {T:3d} {q:2d} {seed:4d} {factor:6g} {lr:8.4g} "
                              f"{status:>16s} {ratio:9.2e} {sec:5.1f}", flush=True)
    print("\ndiverged runs per mechanism and factor of the default lr:")
    for (mech, factor), (n_bad, n) in bad.items():
        print(f"  {mech:10s} x{factor:<5g} {n_bad}/{n}")


if __name__ == "__main__":
    main()
