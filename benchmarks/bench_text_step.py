"""The step time of the tasks on real text beside the Gaussian task at the same T.

    PYTHONPATH=. python benchmarks/bench_text_step.py [--Ts 64,256,1024] [--steps 60]

For each T, three runs in one process, each timed over ``--steps`` steps after a warm-up
(median of ``--repeats`` timings; one BLAS thread): the Gaussian mean task (``d = 5``),
the same at ``d = 65`` (the text tasks' token width: what ``d`` alone costs), the
selection on Tiny Shakespeare with the one-hot embedding (``d = 65``) and the masked
character (one-hot, ``d = 65``, ``q = 1``, cross entropy over 65 logits), all with the
stochastic slots encoding (``d_e = 2T``), batch 256, ``lr = 0.1`` fixed and no
validation during the timed steps. Printed: milliseconds per step, and the ratio of each
text task to the Gaussian one measured in the same run (the figure that does not depend
on the machine's load). The load average is printed with them.
"""
import argparse
import os
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

import stsim  # noqa: E402
from stsim.util.threads import one_blas_thread  # noqa: E402

TASKS = [("gaussian mean", dict(target="mean", d=5, q=3)),
         ("gaussian mean d=65", dict(target="mean", d=65, q=3)),
         ("text selection", dict(target="text", d=65, q=3)),
         ("masked character", dict(target="masked", d=65, q=1))]


def step_ms(T, steps, repeats, kw) -> float:
    """Median milliseconds per step of ``repeats`` runs of ``steps`` steps."""
    base = dict(T=T, pe="stochastic", batch=256, lr=0.1, n_val=256, eval_every=10 ** 9,
                progress=False, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        stsim.run(steps=2, **base)                   # imports, caches
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            stsim.run(steps=steps, **base)
            t1 = time.perf_counter()
            stsim.run(steps=1, **base)               # the fixed cost of a run
            t2 = time.perf_counter()
            times.append(((t1 - t0) - (t2 - t1)) / (steps - 1))
    return 1e3 * float(np.median(times))


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--Ts", default="64,256,1024")
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--repeats", type=int, default=3)
    a = p.parse_args(argv)
    print(f"load average before: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with one_blas_thread():
        for T in (int(x) for x in a.Ts.split(",")):
            ms = {name: step_ms(T, a.steps, a.repeats, kw) for name, kw in TASKS}
            g = ms["gaussian mean"]
            print(f"T = {T:5d}: " + "; ".join(
                f"{name} {v:.2f} ms ({v / g:.2f}x)" for name, v in ms.items()))
    print(f"load average after: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
