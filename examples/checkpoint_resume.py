"""A long run with checkpoints, interrupted and resumed
====================================================

stsim.run(checkpoint=path, checkpoint_every=k) writes its state every k steps; called
again with the same path it resumes from that file and continues bit-for-bit like a run
that was never interrupted (same batches, same parameters).
"""
import os

import numpy as np

import stsim

SMOKE = os.environ.get("STSIM_EXAMPLE_SMOKE") == "1"
OUT = os.environ.get("STSIM_EXAMPLE_OUT", "runs/examples")
os.makedirs(OUT, exist_ok=True)
STEPS = 40 if SMOKE else 4000
opts = dict(T=40, q=3, pe="stochastic", steps=STEPS, batch=128, seed=7, T_test=[50])
ck = os.path.join(OUT, "long_run.ck.npz")
if os.path.exists(ck):
    os.remove(ck)                                 # start afresh for the demonstration


def interrupt_at(stop):                           # stands in for a killed job
    def progress(step, steps, row):
        if step >= stop:
            raise KeyboardInterrupt
    return progress


try:
    stsim.run(**opts, checkpoint=ck, checkpoint_every=STEPS // 8,
              progress=interrupt_at(STEPS * 6 // 10))
except KeyboardInterrupt:
    print(f"interrupted near step {STEPS * 6 // 10}; checkpoint {ck} kept")

resumed = stsim.run(**opts, checkpoint=ck, checkpoint_every=STEPS // 8)
print("resumed:", resumed)
print(f"val loss {resumed.final('val'):.4g}, at T=50 {resumed.final('val/T=50'):.4g}")

straight = stsim.run(**opts)                      # the same run without interruption
same = np.array_equal(straight.W, resumed.W) and np.array_equal(straight.V, resumed.V)
print("resumed run equals the uninterrupted run bit for bit:", same)
resumed.save(os.path.join(OUT, "long_run.npz"))
