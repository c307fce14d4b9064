"""``python -m stsim.studies.figures.recheck <out>``: the block means of a finished
``stsim figures`` run (:func:`stsim.studies.figures.blocks.write_blocks`) written from its
runs, and every committed number rechecked against them
(:func:`~stsim.studies.figures.blocks.recheck`)."""
from __future__ import annotations

import os

from stsim.studies.figures.blocks import recheck, write_blocks
from stsim.studies.figures.common import load_runs, runs_dir, unique_jobs
from stsim.util.io import read_json

__all__ = ["main"]


def main(argv=None) -> int:
    """``python -m stsim.studies.figures.blocks OUT``: write ``OUT/blocks.csv`` from the
    runs in ``OUT/runs`` and recheck ``OUT`` (exit 1 if a number does not reproduce)."""
    import argparse
    p = argparse.ArgumentParser(prog="python -m stsim.studies.figures.recheck",
                                description=main.__doc__)
    p.add_argument("out", help="the output folder of a finished `stsim figures` run")
    p.add_argument("--mode", default=None, help="the preset (default: figures.json's mode)")
    a = p.parse_args(argv)
    if not os.path.isdir(runs_dir(a.out)):
        raise SystemExit(f"out: no runs folder {runs_dir(a.out)!r}")
    overview = read_json(os.path.join(a.out, "figures.json"))
    mode = a.mode or overview["mode"]
    from stsim.studies.contract import resolve_config
    from stsim.studies import figures as study
    cfg = resolve_config(study, mode, {})
    results = load_runs(a.out, unique_jobs(cfg))
    print(write_blocks(a.out, results), f"({len(results)} runs)")
    bad = recheck(a.out)
    for where, x, y in bad[:50]:
        print(f"differs: {where}: committed {x!r}, recomputed {y!r}")
    print(f"{len(bad)} numbers differ" if bad else "every number reproduces")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
