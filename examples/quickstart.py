"""Quickstart: train one model, then look at what it learned.

The trained attention puts its weight on the q selected positions of each sample, and the
training loss falls like 1/t.  Run:  python examples/quickstart.py  (figures in runs/examples)
"""
import os

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

import stsim

SMOKE = os.environ.get("STSIM_EXAMPLE_SMOKE") == "1"     # a few seconds, for the tests
OUT = os.environ.get("STSIM_EXAMPLE_OUT", "runs/examples")
os.makedirs(OUT, exist_ok=True)

res = stsim.run(T=20, q=3, pe="stochastic", steps=100 if SMOKE else 3000, batch=256, seed=0)
print(res)
print(f"final loss {res.final('loss'):.3g}, cos(W, W*) {res.final('cos_W'):.3f}")

# the trained model's attention on 4 fresh samples: (4, T) weights, rows summing to 1
s, X, y = res.attention(n=4, seed=1, return_inputs=True)
for b in range(len(s)):
    top = np.sort(np.argsort(s[b])[::-1][:3])
    print(f"sample {b}: selected {sorted(y[b].tolist())}  most attended {top.tolist()}  "
          f"weight on the selected {s[b, y[b]].sum():.2f}")

fig, ax = plt.subplots(1, 2, figsize=(11, 3.5))
im = ax[0].imshow(s, aspect="auto", cmap="magma")
ax[0].plot(y.ravel(), np.repeat(np.arange(len(s)), y.shape[1]), "c+", ms=10, label="selected")
ax[0].set(xlabel="position", ylabel="sample", title="attention weights of the trained model",
          yticks=range(len(s)), xticks=range(0, s.shape[1], 2))      # whole samples, positions
ax[0].legend(loc="upper right", fontsize=8)
fig.colorbar(im, ax=ax[0])
h = res.history_array()                                   # structured array: one row per record
ax[1].loglog(h["step"][1:], h["loss"][1:], label="train")
ax[1].loglog(h["step"][1:], h["val"][1:], label="validation")
ax[1].set(xlabel="step", ylabel="loss", title="loss")
ax[1].legend()
fig.tight_layout()
fig.savefig(os.path.join(OUT, "quickstart.png"))
res.plot(os.path.join(OUT, "quickstart_history.png"))   # the `stsim run` figure
res.history_csv(os.path.join(OUT, "quickstart_history.csv"))
print("wrote", OUT + "/quickstart.png, quickstart_history.png, quickstart_history.csv")
