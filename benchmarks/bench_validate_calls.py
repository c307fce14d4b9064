"""Count the calls into :mod:`stsim.util.validate` per training step of a run: the checks
belong to resolving a run (its config, its optimiser's steps), not to every step.

    PYTHONPATH=. python benchmarks/bench_validate_calls.py [--steps 400]

Each configuration is run once for a few steps (so that lazily imported modules are
loaded), then once under ``cProfile``; the figure printed is the number of calls of
functions defined in ``stsim/util/validate.py`` (methods of its ``Steps`` included)
divided by the steps of the run. Setup calls (a run's resolution: about 50) are included,
so the figure falls as ``--steps`` grows when nothing is called per step.
"""
import argparse
import cProfile
import os
import pstats
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import stsim  # noqa: E402

CONFIGS = [
    ("sgd", dict(T=50, q=3)),
    ("adam lr=0.01", dict(T=50, q=3, optimizer="adam", lr=0.01)),
    ("adam, linear decay", dict(T=50, q=3, optimizer="adam")),
    ("stochastic pe", dict(T=20, q=2, pe="stochastic", batch=32)),
    ("target variance", dict(T=20, q=2, target="variance")),
]


def validate_calls(kw) -> tuple:
    """``(calls, {function: calls})`` into validate.py during ``stsim.run(**kw)``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        stsim.run(progress=False, **dict(kw, steps=2))
        prof = cProfile.Profile()
        prof.enable()
        stsim.run(progress=False, **kw)
        prof.disable()
    by_name = {}
    for (path, _, name), (_, calls, *_) in pstats.Stats(prof).stats.items():
        if path.replace(os.sep, "/").endswith("stsim/util/validate.py"):
            by_name[name] = by_name.get(name, 0) + calls
    return sum(by_name.values()), by_name


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=400)
    args = ap.parse_args(argv)
    print(f"calls into stsim/util/validate.py per step (runs of {args.steps} steps)")
    print(f"{'configuration':<22} {'calls':>7} {'per step':>9}  most called")
    for label, kw in CONFIGS:
        total, by_name = validate_calls(dict(kw, steps=args.steps))
        top = ", ".join(f"{n} {c}" for n, c in sorted(by_name.items(), key=lambda x: -x[1])[:3])
        print(f"{label:<22} {total:>7d} {total / args.steps:>9.3f}  {top}")


if __name__ == "__main__":
    main()
