r"""The computation of ``stsim attention``: the training runs (one run, the equal tuning of
every mechanism, the rank grid and the trained widths) and :func:`run`, which writes every
raw table under ``raw/``.

**Equal tuning.** Every mechanism gets the same procedure: a base step (``tune_base``:
``"own"``, each mechanism's own default at this config, or ``"paper"``, the full preset's,
the step of the paper's softmax model for every one, :func:`base_schedule`) times one
multiplier of ``tune_mults``. The paper's step is its derived default — at the paper's
scale a step per block ``{"W": η_W, "V": η_V}`` with W's token rows ``W_xx, W_xe`` held at
their initial value) times one multiplier ``m`` of ``tune_mults`` (full preset: 128 … 1/512,
neighbours a factor 2 apart), the same ``freeze``; ``m`` is chosen per mechanism on a
tuning replicate (root seed 1, not a reported seed) as the lowest final validation loss
after ``tune_steps`` steps (full preset: the budget itself) (a diverged run counts as
infinite; ties go to the larger m), then every reported run trains ``steps`` steps (the
stated budget, the same for all). **One initialisation rule** (:func:`mechanism_options`):
every arm with the merged W starts with W's token rows ``W_xx, W_xe`` at 0, softmax's
value — ``init="zero"``, or ``"random_rows0"`` (the other blocks N(0, 0.02²)) where zero is
stationary — so the rows held are 0 for every mechanism (held at a random value they add
a leak of order ``T(T + 1)‖V_x W_xe p_q‖²`` to the unnormalised mechanisms, docs/attention.md
§4). A key/query pair (``rank=r``) has no token rows to hold (``W_K``, ``W_Q`` mix them):
it gets ``{"W_K": mη_W, "W_Q": mη_W, "V": mη_V}``, its default random initialisation and no
``freeze`` (a single base step is used for all three when the base is one step).
"""
from __future__ import annotations

import math
import os
import time

import stsim
from stsim.core.attention import MECHANISMS
from stsim.core.config import Config
from stsim.studies.attention.design import (TUNE_ROOT, made_by, mechanism_label,
                                            parse_mechanism, rank_points, width_cap)
from stsim.studies.attention.widths import width_point
from stsim.studies.cells import made_with, stamped
from stsim.studies.contract import RAW, raw_path
from stsim.studies.tuning import choose as choose_by, run_measures
from stsim.studies.widths import Precision
from stsim.sweeps import sweep
from stsim.util.io import write_json
from stsim.util.validate import Steps

__all__ = ["base_schedule", "mechanism_options", "run_one", "choose", "rank_one", "sphere_one",
           "run"]


def base_schedule(T, q, d, batch, T_test, mechanism=None, target="mean") -> tuple:
    """``(lr, freeze)`` of the default at this config and ``target`` (lr a number or a step
    per block, e.g. ``{"W": η_W, "V": η_V}``, with the head's ``b``, ``Q`` for a target
    with one): the paper's softmax model's, or with ``mechanism`` that mechanism's own
    (``tune_base="own"``: its tuning multiplies its own default step; a mechanism of one's
    own that declares no default step gets the paper model's)."""
    own = parse_mechanism(mechanism) if mechanism is not None else {}
    try:
        plan = Config(T=T, q=q, d=d, batch=batch, T_test=tuple(T_test), target=target,
                      **own).resolve().resolved.plan
    except ValueError:      # one's own mechanism with no default step: the paper model's
        if not own:
            raise
        return base_schedule(T, q, d, batch, T_test, target=target)
    return plan.lr.record(), plan.freeze


def mechanism_options(mechanism, base_lr, freeze, mult) -> dict:
    """The run options of ``mechanism`` at multiplier ``mult`` of the base step (module
    docstring)."""
    opts = parse_mechanism(mechanism)
    step = Steps(base_lr).scaled(mult)
    if "rank" in opts:      # W's step for the pair (unless the base is the pair's own);
        rec = step.record()     # a target's head (b, Q) keeps its own
        rec = rec if isinstance(rec, dict) else {"W": rec, "V": rec}
        w = rec.get("W")
        opts["lr"] = rec if w is None else {"W_K": w, "W_Q": w,
                                            **{k: v for k, v in rec.items() if k != "W"}}
    else:
        att = opts.get("attention", "softmax")
        saddle = (MECHANISMS[att] if isinstance(att, str) else att).zero_saddle
        opts["init"] = "random_rows0" if saddle else "zero"     # W's token rows at 0
        opts["lr"] = step.record()
        if freeze:
            opts["freeze"] = tuple(freeze)
    return opts


def run_one(mechanism, T, q, d, steps, batch, T_test, seed, mult=1.0, base=None,
            target="mean"):
    """One training run on ``target`` (a row of ``raw/tune.csv`` or ``raw/runs.csv``): the
    final validation losses over the target's L(0) (``inf`` when diverged), the status, the
    steps of W and V, CPU time and the validation curve (JSON). ``base``: ``(lr, freeze)``
    of :func:`base_schedule` (computed when None)."""
    base_lr, freeze = base if base is not None else base_schedule(T, q, d, batch, T_test,
                                                                  target=target)
    opts = dict(T=T, q=q, d=d, batch=batch, T_test=tuple(T_test), seed=seed, steps=steps,
                target=target, progress=False,
                **mechanism_options(mechanism, base_lr, freeze, mult))
    t0 = time.process_time()
    res = stsim.run(**opts)
    lr = Steps(res.config["lr"])
    return {"run_status": res.status, "mult": float(mult),
            "lr_W": float(lr.block("W_K" if "W_K" in (lr.names or ()) else "W")),
            "lr_V": float(lr.block("V")),
            "freeze": "+".join(res.config.get("freeze", [])) or "none",
            "steps": int(res.config["steps"]), "init": res.config["init"],
            **run_measures(res, res.target.zero_loss(d, q), T_test, t0)}


def choose(rows, mults=None) -> dict:
    """``{mechanism: multiplier}`` from the tuning rows at ``mults``
    (:func:`stsim.studies.tuning.choose`)."""
    return choose_by(rows, "mechanism", mults)


def rank_one(T, q, rank, d, batch, steps, seed, target="mean"):
    """One key/query pair of rank ``rank`` trained on ``target`` by :func:`stsim.run` with
    its default step and initialisation (slots encodings, ``d_e = 2T``), ``steps`` steps
    (0: its default count): the final validation loss over the target's L(0) and the
    status."""
    res = stsim.run(T=T, q=q, d=d, rank=rank, batch=batch, seed=seed, target=target,
                    progress=False,
                    **({"steps": steps} if steps else {}))
    ok = res.status == "completed"
    return {"run_status": res.status, "steps": int(res.config["steps"]),
            "lr": float(Steps(res.config["lr"]).uniform or math.nan),
            "d_e": int(res.config["d_e"]),
            "rel": res.final("val") / res.target.zero_loss(d, q) if ok else math.inf}


def sphere_one(mechanism, T, q, d_e, d, steps, seed):
    """One run of ``mechanism`` on stochastic sphere encodings of width ``d_e`` (theory
    model, sum query: the family's setting, docs/attention.md §8) with its default step and
    initialisation, ``steps`` steps (0: its default count): the final validation loss over
    L(0) and the status."""
    res = stsim.run(T=T, q=q, d=d, d_e=d_e, pe="stochastic", sampler="sphere",
                    model="theory", query="sum", attention=mechanism, seed=seed,
                    progress=False, **({"steps": steps} if steps else {}))
    ok = res.status == "completed"
    return {"run_status": res.status, "steps": int(res.config["steps"]),
            "lr": float(Steps(res.config["lr"]).uniform or math.nan),
            "rel": res.final("val") / res.target.zero_loss(d, q) if ok else math.inf}


def run(cfg, out, executor, log):
    """The tuning runs, the reported runs, the rank grid and the width replicates, each
    through :func:`stsim.sweep` into its table under ``raw/`` (resumable)."""
    os.makedirs(os.path.join(out, RAW), exist_ok=True)
    t0 = time.time()
    c = {k: cfg[k] for k in ("T", "q", "d", "batch", "target")}
    walls = {}
    mechs = {mechanism_label(m): m for m in cfg["mechanisms"]}
    own = cfg["tune_base"] == "own"
    bases = {k: base_schedule(T_test=cfg["T_test"], mechanism=m if own else None, **c)
             for k, m in mechs.items()}

    def part(name, fn, points, **kw):       # one sweep into raw/<name>.csv, timed
        t = time.time()
        fn, points = stamped(fn, points, made_by(cfg, name))
        sweep(fn, points, executor=executor, out=raw_path(out, f"{name}.csv"), **kw)
        walls[name] = time.time() - t

    def tune(mechanism, mult, seed):
        return run_one(mechs[mechanism], steps=cfg["tune_steps"], T_test=cfg["T_test"], seed=seed,
                       mult=mult, base=bases[mechanism], **c)

    part("tune", tune, {"mechanism": list(mechs), "mult": cfg["tune_mults"]}, seeds=1,
         root_seed=TUNE_ROOT)
    mults = choose(made_with(raw_path(out, "tune.csv"), made_by(cfg, "tune")), cfg["tune_mults"])

    def main(mechanism, mult, seed):
        return run_one(mechs[mechanism], steps=cfg["steps"], T_test=cfg["T_test"], seed=seed,
                       mult=mult, base=bases[mechanism], **c)

    # the chosen multiplier is part of each run's point: a tuning that chooses another
    # (more multipliers, a rerun) runs the reported runs again instead of reusing them
    part("runs", main, [{"mechanism": m, "mult": mults[m]} for m in mechs], seeds=cfg["seeds"])
    part("rank", lambda T, q, rank, seed: rank_one(T, q, rank, cfg["d"], cfg["batch"],
                                                   cfg["rank_steps"], seed, cfg["target"]),
         rank_points(cfg),
         seeds=cfg["seeds"])
    wpts = [{"mechanism": m, "T": T} for m in cfg["width_mechs"] for T in cfg["width_T"]]
    prec = Precision.from_cfg(cfg)
    # one row per (mechanism, T): the replicates are the library's (their seeds come from
    # the family, not from the sweep's seed)
    part("width", lambda mechanism, T, seed: width_point(
        mechanism, T, cfg["q"], cfg["width_level"], prec, width_cap(T, cfg)), wpts, seeds=1)
    tpts = [{"mechanism": m, "d_e": w} for m in cfg["train_mechs"] for w in cfg["train_widths"]]
    part("trained", lambda mechanism, d_e, seed: sphere_one(mechanism, cfg["train_T"], cfg["q"],
                                                            d_e, cfg["d"], cfg["train_steps"],
                                                            seed), tpts, seeds=cfg["seeds"])
    write_json(raw_path(out, "run.json"), {"wall_time_s": time.time() - t0,
                                       "wall_time_parts_s": walls, "mults": mults})

