"""Quickstart: train one model, then look at what it learned
=========================================================

The trained attention puts its weight on the q selected positions of each sample, and the
training loss falls like 1/t.  Run:  python examples/quickstart.py  (figures in runs/examples)
"""
import os

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

# each figure with its data beside it (quickstart.csv, quickstart_history.csv)
res.plot_attention(os.path.join(OUT, "quickstart.png"), n=4, seed=1)   # the same samples
res.plot(os.path.join(OUT, "quickstart_history.png"))   # the `stsim run` figure
print("wrote", OUT + "/quickstart.png, quickstart_history.png and their CSVs")
