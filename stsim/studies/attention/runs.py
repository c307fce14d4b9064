r"""The training runs of ``stsim attention``: one run, the equal tuning of every mechanism,
the rank grid and the trained widths.

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
from stsim.core.attention import (ATTENTIONS, MECHANISMS, TAU_RANGE, Attention,
                                  check_temperature)
from stsim.core.config import Config
from stsim.studies.cells import settings_text
from stsim.studies.tuning import choose as choose_by, run_measures
from stsim.studies.widths import Precision
from stsim.util.validate import Steps, check_int

__all__ = ["TAU_RANGE", "parse_mechanism", "mechanism_label", "base_schedule", "mechanism_options",
           "run_one", "choose", "rank_one", "sphere_one", "MADE_BY", "made_by"]

TUNE_ROOT = 1        # root seed of the tuning replicate (the reported seeds use root 0)
#: the settings that make a row of each of the study's tables (its ``settings`` cell,
#: :func:`stsim.studies.cells.settings_text`): a rerun with others computes other rows, an
#: analysis refuses settings no row was made with
MADE_BY = {"tune": ("T", "q", "d", "batch", "T_test", "tune_steps", "tune_base", "target"),
           "runs": ("T", "q", "d", "batch", "T_test", "steps", "tune_base", "target"),
           "rank": ("d", "batch", "rank_steps", "target"),
           "width": ("q", "width_level", "width_max", *Precision().settings()),
           "trained": ("train_T", "q", "d", "train_steps")}


def made_by(cfg, name) -> str:
    """The ``settings`` cell of the rows of table ``name`` made with ``cfg``."""
    return settings_text(**{k: cfg[k] for k in MADE_BY[name]})


def parse_mechanism(label) -> dict:
    """``"linear"`` -> ``{"attention": "linear"}``, ``"rank=4"`` -> ``{"rank": 4}``,
    ``"tau=0.5"`` -> ``{"temperature": 0.5}``, an :class:`~stsim.core.attention.Attention`
    object (one's own mechanism) -> ``{"attention": obj}``; ``ValueError`` naming
    ``mechanisms``."""
    if label in ATTENTIONS or isinstance(label, Attention):
        return {"attention": label}
    key, _, val = str(label).partition("=")
    try:
        if key == "rank":
            return {"rank": check_int("rank", int(val), 1)}
        if key == "tau":
            return {"temperature": check_temperature(float(val), "tau")}
    except ValueError:
        pass
    raise ValueError(f"mechanisms must hold names of {ATTENTIONS}, rank=r (r >= 1), tau=t "
                     f"({TAU_RANGE[0]:g} <= t <= {TAU_RANGE[1]:g}) or Attention objects, got "
                     f"{label!r}")


def mechanism_label(mechanism) -> str:
    """The name a mechanism of ``mechanisms`` has in the tables: its own, or an object's
    :attr:`~stsim.core.attention.Attention.label`."""
    return mechanism.label if isinstance(mechanism, Attention) else mechanism


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


#: the words for each tuning base in a check's note
BASE_TEXT = {"own": "its own default", "paper": "the paper model's"}


def rank_points(cfg) -> list:
    """The rank grid's points ``{T, q, rank}`` (q < T, rank <= 2T)."""
    return [{"T": T, "q": q, "rank": r} for T in cfg["rank_T"] for q in cfg["rank_q"]
            for r in cfg["rank_r"] if q < T and r <= 2 * T]


def raw_path(out, name):
    """The raw table ``name`` of the folder ``out``."""
    return os.path.join(out, "raw", name)


def named(cfg):
    """``cfg`` with each mechanism by its label (the tables', JSON-ready)."""
    return dict(cfg, mechanisms=[mechanism_label(m) for m in cfg["mechanisms"]])
