r"""The separation study's design: presets, one training run, the trained cells, checks.

A training run is one row of a sweep table (:func:`train_point`); the cells
(:func:`cells`) are the ``(arch, q, T, width, steps, budgets)`` trained, the transformer's
placed around the family's smallest ``d_e``; :func:`check` validates a config before any
work. Parameter counts: :func:`params_of`.
"""
from __future__ import annotations

import warnings

from stsim.core.config import Config
from stsim.core.cost import estimated_seconds
from stsim.studies.cells import (TUNE_ROOT, _options, budgets_of, cells, extend_rates,  # noqa: F401
                                 lr_edge, params_of, pick_lr, tf_params, train_point,
                                 validate_point)
from stsim.studies import widths as wl
from stsim.studies.widths import QUICK as QUICK_PRECISION, Precision, width_grid  # noqa: F401
from stsim.util.validate import check_int, check_memory

__all__ = ["QUICK", "FULL", "TUNE_ROOT", "FAMILY_ROOT", "width_grid", "tf_params",
           "params_of", "train_point", "validate_point", "cells", "priority", "check",
           "family_width", "family_widths", "pick_lr", "series", "n_mc", "budgets_of",
           "family_crossing_point", "extend_rates", "lr_edge", "family_memory"]

FAMILY_ROOT = 2      # root seed of the family's Monte-Carlo replicates

# documented configuration (estimated cost in docs/separation.md); overridable from the CLI
FULL = dict(qs=(2, 3), d=1, level=0.25, levels=(0.25, 0.1), steps=2000, long_steps=8000,
            batch=256, n_val=2048, seeds=3, lrs=(1e-3, 3e-3, 1e-2, 3e-2),
            lr_extra=(1e-4, 3e-4, 1e-1, 3e-1),
            fcn_Ts=(8, 16, 32, 64, 128), tf_Ts=(8, 16, 32, 64, 128), long_Ts=(8, 16, 32, 64, 128),
            family_qs=(2, 3, 4), family_Ts=(8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096),
            **Precision().settings(),
            family_max_width=1024,
            max_width_fcn=2048, long_max_width=512, fcn_span=4, n_boot=2000,
            extra_long=((3, 256, (512,)),))
QUICK = dict(qs=(2,), d=1, level=0.25, levels=(0.25,), steps=300, long_steps=600,
             batch=64, n_val=256, seeds=3, lrs=(3e-3, 1e-2), lr_extra=(1e-3, 3e-2),
             fcn_Ts=(4, 8), tf_Ts=(4, 8),
             long_Ts=(8,), family_qs=(2,), family_Ts=(4, 8, 16, 32, 64),
             **QUICK_PRECISION.settings(),
             family_max_width=256, max_width_fcn=64,
             long_max_width=32, fcn_span=2, n_boot=200, extra_long=())
#: the help of each setting (the options of ``stsim separation``), beside its preset
HELP = {"qs": "subset sizes q of the trained arms", "d": "token dimension",
        "level": "a width passes when its median val loss <= level * d/(2q)",
        "levels": "levels of the family's width search (the main level is added)",
        "steps": "Adam steps of the common budget", "long_steps": "the FCN's second budget",
        "batch": "fresh samples per step", "n_val": "validation points",
        "seeds": "reported seeds per cell", "lrs": "the learning-rate grid of both arms",
        "lr_extra": "rates tuned past an end of lrs, one at a time, while the chosen rate "
                    "sits on that end (both arms)",
        "fcn_Ts": "T of the trained FCN", "tf_Ts": "T of the trained transformer",
        "long_Ts": "T at which the FCN also gets long_steps",
        "family_qs": "q of the family", "family_Ts": "T of the family",
        **Precision.help(),
        "family_max_width": "largest d_e of the family search",
        "max_width_fcn": "largest FCN width", "long_max_width": "largest FCN width at long_steps",
        "fcn_span": "FCN widths up to fcn_span * T", "n_boot": "bootstrap resamples"}

EPILOG = ("writes points.csv (one row per training run and budget), fits.json, summary.json,\n"
          "report.md, separation.png, agreement.png; the raw sweep tables (resumable), their\n"
          "journals and the run record run.json in raw/\n"
          "examples: stsim separation                 # about 20 s of CPU\n"
          "          stsim separation --full --out runs/separation\n"
          "          stsim separation --full --out docs/figures/separation --analyse-only")


def family_crossing_point(q, T, level, cap, precision):
    """A row of ``raw/family.csv``: the softmax sphere family's located crossing of
    ``level`` at ``(q, T)`` (:func:`stsim.studies.widths.locate`, censored at ``cap``) —
    the number every study quotes for this family."""
    return wl.locate(wl.mechanism_loss("softmax", T, q), [level], T,
                     wl.family_key("softmax", T, q), precision, cap=cap, q=q)[float(level)]


# --------------------------------------------------------------------------------------
# the design
# --------------------------------------------------------------------------------------


def priority(c, cfg):
    """Order of the cells: by T, the FCN before the transformer from T = 32 on (the
    transformer's larger T are covered by the family; its small T check the agreement
    with it), cheaper first within a rank (the one cost model,
    :func:`stsim.core.cost.estimated_seconds`)."""
    rank = c["T"] if (c["arch"] == "fcn" or c["T"] <= 16) else 1000 + c["T"]
    opts = _options(c["arch"], c["T"], cfg["d"], c["width"], c["q"], c["steps"], cfg["batch"],
                    cfg["lrs"][0], cfg["n_val"], 0, c["steps"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # the long-default-run warning
        return (rank, estimated_seconds(Config.from_options(**opts)))


def family_settings(cfg) -> str:
    """The ``settings`` cell of a ``raw/family.csv`` row made with ``cfg``: its precision
    rule (:func:`stsim.studies.cells.settings_text`; the other settings are its point's)."""
    from stsim.studies.cells import settings_text
    return settings_text(**Precision.from_cfg(cfg).settings())


def n_mc(T, cfg):
    """Monte-Carlo samples of the family's loss at a trained cell (the agreement check):
    ``16 fam_n_start``, at most the precision rule's largest at ``T``."""
    p = Precision.from_cfg(cfg)
    return int(min(p.n_limit(T), 16 * p.n_start))


def family_width(row):
    """A family row's design width: the √2 grid width (of ``[2, cap]``) at or above its
    located crossing (None: censored)."""
    return None if int(row["censored"]) else wl.grid_width(
        float(row["d_e"]), width_grid(int(row["cap"]), 2))


def family_widths(rows, level):
    """The design's width per (q, T) at ``level`` (:func:`family_width`)."""
    return {(int(r["q"]), int(r["T"])): family_width(r) for r in rows
            if float(r["level"]) == float(level)}


def series(cfg):
    """(name, arch, budget) of every trained series."""
    out = [("transformer", "transformer", cfg["steps"]), ("fcn", "fcn", cfg["steps"])]
    if cfg["long_Ts"]:
        out.append((f"fcn@{cfg['long_steps']}", "fcn", cfg["long_steps"]))
    return out


# --------------------------------------------------------------------------------------
# the checks made before any work
# --------------------------------------------------------------------------------------
def check(cfg):
    """Validate a config (``ValueError`` naming the field) and return it with the main
    ``level`` added to ``levels`` if missing."""
    cfg = dict(cfg)
    for k in ("qs", "fcn_Ts", "tf_Ts", "family_qs", "family_Ts", "lrs", "levels"):
        if not cfg[k]:
            raise ValueError(f"{k} must hold at least one value")
    for lr in tuple(cfg["lrs"]) + tuple(cfg["lr_extra"]):
        if not 0 < lr < float("inf"):
            raise ValueError(f"lr must be a positive number (lrs, lr_extra), got {lr}")
    for k in ("qs", "family_qs"):
        for v in cfg[k]:
            check_int(k, v, 1)
    for k in ("fcn_Ts", "tf_Ts", "family_Ts", "long_Ts"):
        for v in cfg[k]:
            check_int("T", v, 2)
    Precision.from_cfg(cfg)         # the family's precision settings, each checked
    for k in ("d", "steps", "long_steps", "batch", "seeds", "n_val",
              "fcn_span", "family_max_width", "max_width_fcn", "long_max_width",
              "n_boot"):
        check_int(k, cfg[k], 1)
    for e in cfg.get("extra_long", ()):
        if len(e) != 3 or not e[2]:
            raise ValueError(f"extra_long entries must be (q, T, widths), got {e!r}")
        check_int("q", e[0], 1)
        check_int("T", e[1], 2)
        for w in e[2]:
            check_int("width", w, 1)
    if cfg["long_steps"] % cfg["steps"]:
        raise ValueError(f"long_steps must be a multiple of steps={cfg['steps']}")
    for lv in (cfg["level"],) + tuple(cfg["levels"]):
        if not 0 < lv < 1:
            raise ValueError(f"level must lie in (0, 1) (level, levels), got {lv}")
    if cfg["level"] not in cfg["levels"]:
        cfg["levels"] = (cfg["level"],) + tuple(cfg["levels"])
    # every cell the design can train (the transformer at any grid d_e) is a valid run
    fixed = dict(d=cfg["d"], batch=cfg["batch"], n_val=cfg["n_val"])
    for lr in tuple(cfg["lrs"]) + tuple(cfg["lr_extra"]):
        for c in cells(cfg)[:1]:
            validate_point(dict(c, lr=lr, **fixed))
    # sizes beyond the machine, before any work: every cell (its run's Config refuses a
    # run larger than memory), and the family's largest Monte-Carlo evaluation
    for c in cells(cfg):
        try:
            validate_point(dict(c, lr=cfg["lrs"][0], **fixed))
        except ValueError as exc:
            which = "fcn_Ts" if c["arch"] == "fcn" else "tf_Ts"
            raise ValueError(f"separation: the {c['arch']} cell at T={c['T']} ({which}), "
                             f"width {c['width']}: {exc}") from None
    T = max(cfg["family_Ts"])
    check_memory(family_memory(T, cfg), f"separation: the family at T={T} (family_Ts), "
                 f"up to {Precision.from_cfg(cfg).n_cells} numbers a family evaluation "
                 f"(fam_n_cells)")
    return cfg


def family_memory(T, cfg) -> dict:
    """Bytes of the largest arrays of one family evaluation at ``T``
    (:func:`stsim.theory.family.best_family_loss`: the scores and the softmax temporaries,
    5 arrays of ``n_mc × T`` float64), for :func:`check`."""
    return {"scores and softmax temporaries (5 x max(fam_n_cells, fam_n_start T))":
            Precision.from_cfg(cfg).memory(T)}
