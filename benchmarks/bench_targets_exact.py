"""The numbers of docs/targets.md, "The exact side", measured by the checks of
tests/test_targets_exact.py (the same helpers, the same seeds), and the variance trained
with a linear readout against its floor.

    python benchmarks/bench_targets_exact.py        # about 1 min on one core
"""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, ".."), os.path.join(HERE, "..", "tests")]
import stsim  # noqa: E402
from stsim.core.encodings import PEBatch  # noqa: E402
from stsim.core.model import forward_backward  # noqa: E402
from stsim.core.targets import Variance  # noqa: E402
from test_targets_exact import (Moment, Pair, WrongMoment, _full_gd, _mc_z,  # noqa: E402
                                _variance_fit, _w_xe, reduced_map, variance_linear_floor)


class LinearVariance(Variance):
    """The variance with the linear readout ``f = V h`` (features ``[h_1, h_2]``)."""

    name = "linear-variance"
    readout = "linear"
    measured = None


def main():
    print("exact loss vs Monte-Carlo of the model (T = 9, q = 3, d = 3, 1e5 samples): z")
    for t, model, query in [(Moment(2), "theory", "sum"), (Moment(3), "practical", "mean"),
                            (Pair(), "theory", "sum"), (Pair(), "practical", "sum")]:
        print(f"  {t.label:9s} {model:9s} {query:4s} z = {_mc_z(t, 9, 3, 3, model, query):+.2f}")
    print(f"  fault: h_3 features, h_2 value  z = {_mc_z(WrongMoment(3), 9, 3, 3, 'theory', 'sum'):+.1f}")
    print(f"  fault: pair's m/q left at d/q   z = "
          f"{_mc_z(Pair(), 9, 3, 3, 'theory', 'sum', fault=-0.5):+.1f}")
    print("full-matrix population GD by quadrature (T = 4, q = 2, d = 1, 8 steps, lr W 5, V 1)")
    for t, model, query in [(Moment(2), "theory", "sum"), (Moment(3), "practical", "mean"),
                            (Pair(), "theory", "sum"), (Pair(), "practical", "sum")]:
        m, out = _full_gd(t, 1, model, query, 8, 5.0, 1.0)
        ref = list(zip(range(9), reduced_map(4, 2, m, {"W": 5.0, "V": 1.0}, 4, practical=model
                                            == "practical", c=0.5 if query == "mean" else 1.0)))
        ref = [r for _, r in ref]
        dev = max(max(abs(o[0] - o[1]) / o[1], abs(o[0] - r[0]) / r[0])
                  for o, r in zip(out, ref))
        gam = max(abs(o[5]["gamma"] - r[3]) / max(abs(r[3]), 1e-300) for o, r in zip(out, ref))
        print(f"  {t.label:9s} {model:9s} {query:4s} loss {out[0][0]:.4f} -> {out[-1][0]:.4f}; "
              f"max rel dev: loss {dev:.1e}, grad W {max(o[2] for o in out[1:]):.1e}, "
              f"V {max(o[3] for o in out):.1e}, gamma {gam:.1e}; max |dV_e| "
              f"{max(o[4] for o in out):.1e}")
    m, out = _full_gd(Pair(), 1, "theory", "sum", 4, 5.0, 1.0)
    ref = reduced_map(4, 2, 1, {"W": 5.0, "V": 1.0}, 4)
    print(f"  fault: pair against the map at d, not dim phi: max rel dev "
          f"{max(abs(o[0] - r[0]) / r[0] for o, r in zip(out, ref)):.2f}")
    print("dL/dW_xe at W_xe = 0 (a = 1.5, gamma = 0.7, T = 4, q = 2): quadrature, closed form")
    for k in (1, 2, 3, 4):
        got, want = _w_xe(k)
        print(f"  k = {k}: {got[0, 0]:+.6g}  {want[0, 0]:+.6g}  |diff| {np.abs(got - want).max():.1e}")
    f = variance_linear_floor(2, 3)
    print(f"variance, linear readout, least squares (T = 8, q = 3, d = 2, 2e5 + 2e5): floor {f:.6f}")
    for K in (2, 4):
        mean, se, z = _variance_fit(f, K=K)
        print(f"  h_1..h_{K}: held-out loss {mean:.6f} +- {se:.6f}, z = {z:+.2f}")
    print("variance trained with the linear readout: stsim.run(T=50, q=3, d=5, pe='onehot'), "
          "W's token rows held;\n  its loss on 1e5 fresh samples (SE) against the floor")
    f5, t, pe = variance_linear_floor(5, 3), LinearVariance(), PEBatch(d_e=50, idx=np.arange(50))
    for steps in (600, 2400):
        for seed in (0, 1):
            r = stsim.run(T=50, q=3, d=5, pe="onehot", target=t, seed=seed, steps=steps)
            rng = np.random.default_rng(1000 + seed)
            L = [forward_backward(r.W, r.V, b.X, b.y, pe, target=b.target, need_grad=False)[0]
                 for b in (t.draw(rng, 1000, 50, 3, 5, features=True) for _ in range(100))]
            se = np.std(L, ddof=1) / 10.0
            print(f"  steps {steps} seed {seed}: loss {np.mean(L):.4f} +- {se:.4f}, floor "
                  f"{f5:.4f}, z = {(np.mean(L) - f5) / se:+.1f} (its validation set of 128: "
                  f"{r.history['val'][0]:.4f} -> {r.history['val'][-1]:.4f})")


if __name__ == "__main__":
    main()
