r"""The computation of ``stsim targets``: the one-point functions (:func:`represents`, a
construction's row; :func:`train_one`, one run) and :func:`run`, which writes each part's
table under ``<out>/raw/`` by :func:`stsim.sweep` (its journal makes a rerun compute only
what is missing) and the run record ``raw/run.json``.

The runs' plan and encoding are decided in one place (:func:`_resolved`: the target's
default plan, :func:`_base`; the encoding's width, :func:`encoding_width`); the tuning's
choice of multiplier is :func:`choose`. The width parts' tables:
:func:`stsim.studies.targets.widths.run`.
"""
from __future__ import annotations

import math
import os
import time

import numpy as np

import stsim
from stsim.core.config import Config
from stsim.core.constructions import construction
from stsim.core.encodings import PEBatch
from stsim.core.model import forward_backward
from stsim.core.targets import Variance, make_target
from stsim.studies.cells import made_with, stamped
from stsim.studies.targets import widths
from stsim.studies.contract import RAW, raw_path
from stsim.studies.targets.design import TUNE_ROOT, made_by
from stsim.studies.tuning import choose as choose_by, run_measures
from stsim.sweeps import sweep
from stsim.util.io import write_json
from stsim.util.validate import Steps

__all__ = ["represents", "encoding_width", "train_one", "choose", "run"]


def represents(target, T, q, d, n_batches, n_fit, seed):
    """A row of ``raw/represents.csv`` (:mod:`~stsim.studies.targets.study`); ``fit``/``fit_se``
    NaN for a target other than the variance."""
    from stsim.theory.targets import variance_linear_fit
    t = make_target(target)
    rng = np.random.default_rng(seed)
    p = construction(t, d, T)
    head = {"b": p["b"], "Q": p["Q"]} if "Q" in p else None
    loss = 0.0
    for _ in range(n_batches):
        b = t.draw(rng, 256, T, q, d, features=True)
        loss = max(loss, float(forward_backward(
            p["W"], p["V"], b.X, b.y, PEBatch(d_e=T, idx=np.arange(T)), target=b.target,
            readout=head, need_grad=False)[0]))
    fit, se = (variance_linear_fit(T, q, d, n_fit, seed=seed) if isinstance(t, Variance)
               else (math.nan, math.nan))
    return {"construction_loss": loss, "fit": fit, "fit_se": se}


def _resolved(target, T, q, d, batch, T_test):
    """The resolved config of the study's run of ``target`` at its defaults (the one place
    its plan and its encoding are decided)."""
    return Config(T=T, q=q, d=d, batch=batch, T_test=tuple(T_test),
                  target=target).resolve().resolved


def _base(target, T, q, d, batch, T_test):
    """``(lr, freeze, steps)`` of the target's default plan at this config."""
    plan = _resolved(target, T, q, d, batch, T_test).plan
    return plan.lr.record(), plan.freeze, plan.steps


def encoding_width(cfg) -> int:
    """The width ``d_e`` of the runs' default encoding at this config (the same for every
    target)."""
    return int(_resolved("mean", *(cfg[k] for k in ("T", "q", "d", "batch", "T_test")))
               .encoding.d_e)


def train_one(target, T, q, d, batch, steps, T_test, mult, seed):
    """One run (a row of ``raw/tune.csv`` or ``raw/runs.csv``): the final val/L(0) at
    ``T`` and at each ``T_test`` (``inf`` when not completed), the status, the steps, CPU
    time and the validation curve (JSON). ``steps`` 0: the default plan's count at
    multiplier 1 (the same budget at every multiplier; a plan given a step of its own
    would scale its count with it)."""
    lr, freeze, default_steps = _base(target, T, q, d, batch, T_test)
    t0 = time.process_time()
    res = stsim.run(T=T, q=q, d=d, batch=batch, T_test=tuple(T_test), target=target,
                    seed=seed, progress=False, lr=Steps(lr).scaled(mult).record(),
                    steps=steps or default_steps,
                    **({"freeze": tuple(freeze)} if freeze else {}))
    return {"run_status": res.status, "steps": int(res.config["steps"]),
            **run_measures(res, make_target(target).zero_loss(d, q), T_test, t0)}


def choose(rows, mults=None) -> dict:
    """``{target: multiplier}`` from the tuning rows at ``mults``
    (:func:`stsim.studies.tuning.choose`)."""
    return choose_by(rows, "target", mults)


def run(cfg, out, executor, log=None):
    """The three tables under ``raw/`` (:mod:`~stsim.studies.targets.study`), each a
    resumable sweep."""
    os.makedirs(os.path.join(out, RAW), exist_ok=True)
    say, walls, t0 = log or (lambda msg: None), {}, time.time()
    c = {k: cfg[k] for k in ("T", "q", "d", "batch", "steps")}
    c["T_test"] = tuple(cfg["T_test"])

    def part(name, fn, points, **kw):
        t = time.time()
        fn, points = stamped(fn, points, made_by(cfg, name))
        sweep(fn, points, executor=executor, out=raw_path(out, f"{name}.csv"), **kw)
        walls[name] = time.time() - t
        say(f"{name}: {walls[name]:.1f}s")

    part("represents", lambda target, seed: represents(
        target, cfg["rep_T"], cfg["q"], cfg["d"], cfg["n_batches"], cfg["n_fit"], seed),
         {"target": list(cfg["targets"])})
    part("tune", lambda target, mult, seed: train_one(target, mult=mult, seed=seed, **c),
         {"target": list(cfg["targets"]), "mult": list(cfg["mults"])}, root_seed=TUNE_ROOT)
    mults = choose(made_with(raw_path(out, "tune.csv"), made_by(cfg, "tune")), cfg["mults"])
    # the chosen multiplier is part of each run's point: another choice reruns the runs
    part("runs", lambda target, mult, seed: train_one(target, mult=mult, seed=seed, **c),
         [{"target": t, "mult": mults[t]} for t in cfg["targets"]], seeds=cfg["seeds"])
    more = widths.run(cfg, out, executor, part, say)
    walls["fcn"] = more.pop("fcn")
    write_json(raw_path(out, "run.json"), {"wall_time_s": time.time() - t0,
                                       "wall_time_parts_s": walls, "mults": mults,
                                       "load_avg": list(os.getloadavg()), **more})
