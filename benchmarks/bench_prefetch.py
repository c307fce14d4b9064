"""Time the end of a run's batch thread (:class:`stsim.util.prefetch.Prefetch`): ``close``
once the thread has drawn ahead and waits to put into a full queue, and short runs of
``stsim.run`` with the thread and without it (``STSIM_PREFETCH=0``).

    PYTHONPATH=. python benchmarks/bench_prefetch.py [--closes 200] [--runs 7]

Prints the median and the largest ``close`` in milliseconds, and the best and the median
wall time of a 40-step run (T = 20, q = 2) each way, with the load average. Compare two
checkouts by running it from each (``PYTHONPATH`` names the checkout).
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

import stsim  # noqa: E402
from stsim.util.prefetch import Prefetch  # noqa: E402


def close_times(n) -> list:
    out = []
    for i in range(n):
        p = Prefetch(lambda r: r.standard_normal(8), np.random.default_rng(i), depth=2)
        p.next()
        while not p._queue.full():                   # drawn ahead, waiting to put
            time.sleep(0.0005)
        t0 = time.perf_counter()
        p.close()
        out.append(time.perf_counter() - t0)
    return out


def run_times(n, prefetch) -> list:
    os.environ["STSIM_PREFETCH"] = "1" if prefetch else "0"
    out = []
    for k in range(n):
        t0 = time.perf_counter()
        stsim.run(T=20, q=2, steps=40, progress=False, seed=k)
        out.append(time.perf_counter() - t0)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--closes", type=int, default=200)
    ap.add_argument("--runs", type=int, default=7)
    a = ap.parse_args()
    print(f"stsim {stsim.__version__} from {os.path.dirname(stsim.__file__)}; load "
          f"{os.getloadavg()[0]:.2f}")
    c = np.array(close_times(a.closes)) * 1e3
    print(f"close: median {np.median(c):.2f} ms, largest {c.max():.2f} ms ({a.closes} closes)")
    run_times(1, True)                                   # imports and caches warm
    for prefetch in (True, False):
        t = run_times(a.runs, prefetch)
        print(f"40-step run, prefetch {'on ' if prefetch else 'off'}: best {min(t):.3f} s, "
              f"median {np.median(t):.3f} s ({a.runs} runs)")


if __name__ == "__main__":
    main()
