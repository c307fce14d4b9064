"""Theory beside simulation: online SGD and the exact reduced population dynamics
==============================================================================

From zero initialisation, population GD with one-hot encodings stays on the two-scalar
family W_ee = a (I − J/T), V_x = γ I (stsim.theory.reduced). Its loss is the expected loss
of SGD; gradient flow at time τ = η·step is its η → 0 limit; both decay like O(1/t).
(Stochastic slots with d_e > T work too, pe="stochastic", d_e=...; slots with d_e = T are
exactly one-hot.)
"""
import os

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

import stsim

SMOKE = os.environ.get("STSIM_EXAMPLE_SMOKE") == "1"
OUT = os.environ.get("STSIM_EXAMPLE_OUT", "runs/examples")
os.makedirs(OUT, exist_ok=True)
T, q, d, lr, steps = 20, 3, 5, 1.0, (100 if SMOKE else 3000)

sim = stsim.run(T=T, q=q, d=d, pe="onehot", lr=lr, steps=steps, batch=256, seed=0)
gd = stsim.reduced_gd(T, q, d, lr, steps, pe="onehot", record_every=max(1, steps // 200))
tau = lr * np.geomspace(1, steps, 60)
flow = stsim.gradient_flow(T, q, d, tau, pe="onehot")

h = sim.history
fig, ax = plt.subplots(figsize=(6.5, 4.2))
ax.loglog(h["step"][1:], h["loss"][1:], ".", ms=4, alpha=0.6, label="SGD, batch 256 (train)")
ax.loglog(h["step"][1:], h["val"][1:], "-", lw=1, label="SGD (validation)")
ax.loglog(gd.step[1:], gd.loss[0, 1:], "k-", lw=2, label="reduced population GD (exact)")
ax.loglog(tau / lr, flow.loss[0], "r--", label="gradient flow at τ = η·step")
t_ref = gd.step[len(gd.step) // 2]
C = gd.loss[0, len(gd.step) // 2] * t_ref                 # O(1/t) through the mid point
ax.loglog(gd.step[1:], C / gd.step[1:], ":", color="gray", label="C / t")
ax.set(xlabel="step", ylabel="loss", title=f"T={T}, q={q}, d={d}, one-hot, η={lr}")
ax.legend(fontsize=8)
fig.tight_layout()
fig.savefig(os.path.join(OUT, "theory_vs_simulation.png"))
with open(os.path.join(OUT, "theory_vs_simulation.csv"), "w") as fh:     # the data beside it
    fh.write("curve,step,loss\n")
    rows = ([("sgd_train", s, v) for s, v in zip(h["step"], h["loss"])]
            + [("sgd_val", s, v) for s, v in zip(h["step"], h["val"])]
            + [("reduced_gd", s, v) for s, v in zip(gd.step, gd.loss[0])]
            + [("gradient_flow", t / lr, v) for t, v in zip(tau, flow.loss[0])])
    fh.writelines(f"{c},{float(s):g},{float(v):.10g}\n" for c, s, v in rows)

for k in (steps // 10, steps // 2, steps):
    i = np.searchsorted(h["step"], k)
    j = np.searchsorted(gd.step, k)
    print(f"step {k:5d}: SGD validation {h['val'][i]:.4g}  reduced GD {gd.loss[0, j]:.4g}  "
          f"t·loss {k * gd.loss[0, j]:.3g}")
print(f"reduced state at the end: a = {gd.a[0, -1]:.3g}, γ = {gd.gamma[0, -1]:.4f}")
print("wrote", os.path.join(OUT, "theory_vs_simulation.png"))
