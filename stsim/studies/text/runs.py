r"""The text study's runs: one run of an arm (:func:`train_one`), the equal tuning
(:func:`tuned`) and :func:`run`, which writes the raw tables under ``<out>/raw/``.

:func:`run` writes ``raw/tune.csv`` and ``raw/runs.csv`` (each a resumable sweep) and
``raw/run.json`` (the wall times, the multipliers chosen and tried, the load average).
Every arm is tuned on one tuning seed (root seed
:data:`~stsim.studies.text.design.TUNE_ROOT`); the lowest final in-distribution validation
loss chooses the multiplier; while an arm's choice sits on an end of the multipliers it
tried, the nearest one of ``mults_extra`` beyond that end is tried too
(:func:`stsim.studies.cells.extend_rates`, the separation study's rule, the same for every
arm: :func:`tuned`); then ``seeds`` seeds (root 0) run at the choice. Each run is
evaluated on fresh held-out windows at ``T`` and at every ``T_test`` (the validation sets;
the text's come from its held-out 10%); a masked run also records its attention around the
masked position (mean weight by offset).
"""
from __future__ import annotations

import json
import math
import os
import time

import numpy as np

import stsim
from stsim.core.targets import make_target
from stsim.studies.cells import extend_rates, made_with, stamped
from stsim.studies.contract import RAW, raw_path
from stsim.studies.text.design import TUNE_ROOT, VOCAB, arm_name, arms_of, made_by, run_options
from stsim.studies.tuning import choose
from stsim.sweeps import sweep
from stsim.util.io import write_json

__all__ = ["train_one", "run", "tuned"]


def train_one(task, encoding, mult, seed, cfg):
    """One run of an arm (a row of ``raw/tune.csv`` or ``raw/runs.csv``): its status,
    the final and initial validation loss at ``T`` and at each ``T_test`` (``val``,
    ``val0``, ``val_T<T>``, ``val0_T<T>``), the CPU time, the curve (JSON) and, for the
    masked task, the mean attention weight by offset from the masked position on
    ``n_val`` held-out windows (``attn``, JSON)."""
    kw = run_options(task, encoding, cfg)
    t0 = time.process_time()
    res = stsim.run(seed=seed, progress=False, lr=cfg["lr"] * mult, **kw)
    h = res.history
    ok = res.status == "completed"
    row = {"run_status": res.status, "cpu_time_s": time.process_time() - t0,
           "val": float(h["val"][-1]) if ok else math.inf, "val0": float(h["val"][0]),
           "curve": json.dumps({"step": [int(s) for s in h["step"]],
                                "val": [float(v) for v in h["val"]]})}
    for Tt in cfg["T_test"]:
        k = f"val/T={Tt}"
        row[f"val_T{Tt}"] = float(h[k][-1]) if ok else math.inf
        row[f"val0_T{Tt}"] = float(h[k][0])
    attn = {}
    if task == "masked" and ok:
        t = make_target(kw["target"])
        b = t.draw(np.random.default_rng([7, seed]), cfg["n_val"], cfg["T"], 1, VOCAB,
                   part="held")
        s = res.attention(b.X, b.y)[:, :cfg["T"]]
        off = np.arange(cfg["T"])[None, :] - b.y
        for k in range(-cfg["attn_offsets"], cfg["attn_offsets"] + 1):
            w = s[off == k]
            attn[str(k)] = float(w.mean()) if w.size else math.nan
    row["attn"] = json.dumps(attn)
    return row


def run(cfg, out, executor, log=None):
    """The tuning and the reported runs under ``raw/``, each a resumable sweep."""
    os.makedirs(os.path.join(out, RAW), exist_ok=True)
    say, walls, t0 = log or (lambda msg: None), {}, time.time()

    def part(name, fn, points, **kw):
        t = time.time()
        fn, points = stamped(fn, points, made_by(cfg))
        sweep(fn, points, executor=executor, out=raw_path(out, f"{name}.csv"), **kw)
        walls[name] = time.time() - t
        say(f"{name}: {walls[name]:.1f}s")

    def tune(points):
        part("tune", lambda task, encoding, mult, seed: train_one(task, encoding, mult, seed,
                                                                  cfg),
             points, root_seed=TUNE_ROOT)
        return tuned(made_with(raw_path(out, "tune.csv"), made_by(cfg)), cfg)
    t = time.time()
    mults, tried, missing = tune([dict(a, mult=m) for a in arms_of(cfg) for m in cfg["mults"]])
    for _ in cfg["mults_extra"]:        # past an end, one multiplier a round
        if not missing:
            break
        say(f"tune: extending {len(missing)} arm(s) past an end of their grid")
        mults, tried, missing = tune(missing)
    walls["tune"] = time.time() - t
    part("runs", lambda task, encoding, mult, seed: train_one(task, encoding, mult, seed, cfg),
         [dict(a, mult=mults[arm_name(a)]) for a in arms_of(cfg)], seeds=cfg["seeds"])
    write_json(raw_path(out, "run.json"), {"wall_time_s": time.time() - t0,
                                       "wall_time_parts_s": walls, "mults": mults,
                                       "tried": tried, "load_avg": list(os.getloadavg())})


def tuned(rows, cfg) -> tuple:
    """Every arm's equal tuning from the tuning rows made with ``cfg``: it starts at
    ``mults``; while its choice (the lowest final in-distribution loss,
    :func:`stsim.studies.tuning.choose`) sits on an end of the multipliers it tried, the
    nearest one of ``mults_extra`` beyond that end is added
    (:func:`stsim.studies.cells.extend_rates`). Returns ``({arm: chosen}, {arm: the
    multipliers tried, sorted}, [the tuning points still to run])``: the run computes the
    missing points until there are none; the analysis refuses a table that lacks one."""
    by = {}
    for r in rows:
        by.setdefault(arm_name(r), []).append(dict(r, arm=arm_name(r), rel=r.get("val")))
    chosen, tried, missing = {}, {}, []
    for a in arms_of(cfg):
        name, grid = arm_name(a), sorted(float(m) for m in cfg["mults"])
        mine = by.get(name, [])
        while True:
            have = {float(r["mult"]) for r in mine}
            need = [m for m in grid if m not in have]
            if need:
                missing += [dict(a, mult=m) for m in need]
                break
            ok = [r for r in mine if r["status"] == "ok"]
            c = choose(ok, "arm", grid).get(name) if ok else None
            more = [] if c is None else extend_rates(grid, [c], cfg["mults_extra"])
            if not more:
                if c is not None:
                    chosen[name] = c
                break
            grid = sorted(grid + more)
        tried[name] = grid
    return chosen, tried, missing
