"""The transformer and a fully-connected net on the same task at one T, side by side
=================================================================================

The FCN (stsim.run(arch="fcn", width=..., depth=...)) sees the T tokens and a one-hot
mask of the selected positions; the paper shows it needs a width growing with T, while
one attention head learns STS_q at any T.
"""
import os

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

import stsim

SMOKE = os.environ.get("STSIM_EXAMPLE_SMOKE") == "1"
OUT = os.environ.get("STSIM_EXAMPLE_OUT", "runs/examples")
os.makedirs(OUT, exist_ok=True)
T, q, steps = 16, 2, (40 if SMOKE else 2000)

runs = {
    "transformer (SGD)": stsim.run(T=T, q=q, pe="stochastic", steps=steps, batch=256),
    "FCN width 128 (Adam)": stsim.run(T=T, q=q, arch="fcn", width=128, optimizer="adam",
                                      steps=steps, batch=256),
}
fig, ax = plt.subplots(1, 2, figsize=(11, 3.8), sharey=True)
for a, (name, res) in zip(ax, runs.items()):
    h = res.history
    a.semilogy(h["step"], h["loss"], label="train")
    a.semilogy(h["step"], h["val"], label="validation")
    a.set(title=name, xlabel="step")
    a.legend()
    n_par = sum(p.size for p in res.params.values())
    print(f"{name:22s} {n_par:6d} parameters  final val loss {res.final('val'):.4f}  "
          f"({res.info['wall_time_s']:.1f} s)")
ax[0].set_ylabel("loss")
fig.suptitle(f"STS_q, T={T}, q={q}")
fig.tight_layout()
fig.savefig(os.path.join(OUT, "transformer_vs_fcn.png"))
with open(os.path.join(OUT, "transformer_vs_fcn.csv"), "w") as fh:       # the data beside it
    fh.write("model,step,loss,val\n")
    fh.writelines(f"{name},{int(s)},{lo:.10g},{v:.10g}\n" for name, res in runs.items()
                  for s, lo, v in zip(res.history["step"], res.history["loss"],
                                      res.history["val"]))
print("wrote", os.path.join(OUT, "transformer_vs_fcn.png"))
