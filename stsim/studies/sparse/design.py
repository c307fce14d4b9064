"""The sparse-Boolean study's design: presets, the m grid, the series and the trial
settings, and :func:`check` (every setting validated before any work)."""
from __future__ import annotations

import math
import os

from stsim.studies.sparse.boolean import SparseFunction, validate_trial
from stsim.sweeps import spawn_seeds
from stsim.util.validate import check_int, check_memory

__all__ = ["FULL", "QUICK", "OPTIONAL", "TRIAL_KEYS", "TOPUP_RANGE", "FIT_ACC", "MEDIAN",
           "m_grid", "parse_fns", "parse_models", "check", "plan", "published_config",
           "trials_path", "run_record_path", "memory_estimate"]

# documented configurations; every value can be overridden from the command line
FULL = dict(Ts=(16, 32, 64, 128, 256, 512), m_min=16, m_max=2048, ratio=math.sqrt(2),
            fns="and:3,majority:3,parity:2", models="attention,fcn", seeds=10,
            threshold=0.95, level=0.9, stop_after=2, max_steps=500, lr=0.05,
            weight_decay=3e-4, max_norm=20.0, d_v=4, hidden=16, n_test=2000, pos="onehot",
            topup=30)
QUICK = dict(Ts=(8, 16, 32), m_min=8, m_max=256, ratio=2.0, fns="and:3,majority:3",
             models="attention,fcn", seeds=4, threshold=0.95, level=0.9, stop_after=2,
             max_steps=200, lr=0.05, weight_decay=3e-4, max_norm=20.0, d_v=4, hidden=16,
             n_test=500, pos="onehot", topup=0)
# settings with a default that leaves the trials (and the published config) as without
# them: restarts per trial, the truth table of fns "table:s", the rates that get topped up
OPTIONAL = {"restarts": 1, "table": "", "topup_range": (0.2, 0.95)}

EPILOG = ("writes trials.csv (a rerun with the same --out resumes) and the run record\n"
          "run.json, then mstar.csv, fits.json, report.md, summary.json, sparse_heatmap.png\n"
          "and sparse_mstar.png (--analyse-only: from trials.csv alone)\n"
          "examples: stsim sparse                                   # seconds\n"
          "          stsim sparse --full --out runs/sparse\n"
          "          stsim sparse --fns table:3 --table 01101001      # any truth table")

HELP = {"Ts": "sequence lengths T", "m_min": "smallest training-set size",
        "m_max": "largest training-set size", "ratio": "ratio of the m grid",
        "fns": "functions with s, e.g. and:3,majority:3,parity:2 (table:3 with --table)",
        "models": "comma list of attention, fcn", "seeds": "trials per cell",
        "threshold": "success = test accuracy >= threshold",
        "level": "m* = smallest m with success probability >= level",
        "stop_after": "retire a series after this many grid sizes in a row at or above level "
                      "(0: run every cell)",
        "max_steps": "full-batch Adam steps per trial", "lr": "learning rate",
        "weight_decay": "weight decay", "max_norm": "norm bound of a block",
        "d_v": "value width of the head", "hidden": "FCN hidden width",
        "n_test": "fresh test samples per trial",
        "topup": "trials per cell where the rate on the first --seeds trials is in "
                 "--topup_range (0: no top-up)", "pos": "position code: onehot | learned",
        "restarts": "initialisations per trial; keep the fit of smallest norm",
        "table": "truth table for fns table:s, first bit most significant, e.g. 01101001",
        "topup_range": "ladder success rates whose cells are topped up"}
TRIAL_KEYS = ("max_steps", "lr", "weight_decay", "max_norm", "d_v", "hidden", "n_test",
              "threshold", "pos")
TOPUP_RANGE = OPTIONAL["topup_range"]   # success rates (on the ladder's trials) topped up
FIT_ACC = 0.99
MEDIAN = 0.5  # m* is also reported at success probability 1/2 (the typical trial)


def m_grid(m_min: int, m_max: int, ratio: float = math.sqrt(2)) -> list:
    """Geometric grid ``round(m_min · ratio^j) ≤ m_max`` (duplicates dropped)."""
    m_min = check_int("m_min", m_min, 1)
    m_max = check_int("m_max", m_max, m_min)
    ratio = float(ratio)
    if not (math.isfinite(ratio) and ratio > 1):
        raise ValueError(f"ratio must be a finite number > 1, got {ratio}")
    n = int(math.floor(math.log(m_max / m_min) / math.log(ratio) + 1e-9))
    return sorted({int(round(m_min * ratio ** j)) for j in range(n + 1)})


def parse_fns(text) -> list:
    """``"and:3,majority:3"`` → ``[("and", 3), ("majority", 3)]`` (s defaults to 3)."""
    out = []
    for item in (text.split(",") if isinstance(text, str) else text):
        if isinstance(item, (tuple, list)):
            out.append((str(item[0]), int(item[1])))
            continue
        item = item.strip()
        if not item:
            continue
        name, _, s = item.partition(":")
        try:
            out.append((name.strip(), int(s) if s else 3))
        except ValueError:
            raise ValueError(f"fns entries look like 'and:3', got {item!r}") from None
    if not out:
        raise ValueError("fns must name at least one function, e.g. 'and:3,majority:3'")
    return out


def parse_models(text) -> list:
    """``"attention,fcn"`` → ``["attention", "fcn"]``."""
    models = [m.strip() for m in text.split(",") if m.strip()] if isinstance(text, str) \
        else list(text)
    if not models:
        raise ValueError("models must name at least one of ('attention', 'fcn')")
    return models


def made_with(rows, p) -> list:
    """The rows of ``rows`` made with the trial settings of the plan ``p`` (:func:`plan`):
    a row carries every setting of its trial, and serves only those (``restarts``, absent
    at 1, and a ``table`` function's truth table included)."""
    def same(a, b):
        num = (int, float)
        return float(a) == float(b) if isinstance(a, num) and isinstance(b, num) else a == b
    made = dict(p["fixed"])
    made.setdefault("restarts", None)
    return [r for r in rows
            if all(same(r.get(k), v) or (k == "restarts" and r.get(k) in (None, 1))
                   for k, v in made.items())
            and all(same(r.get(k), v)
                    for k, v in p["extra"].get((r.get("fn"), r.get("s")), {}).items())]


def plan(cfg) -> dict:
    """What a config runs: ``series`` (fn, s, model, T), the m ``grid``, the trial
    settings ``fixed`` (with ``restarts`` only when > 1), ``extra`` (per (fn, s): the
    truth table of ``table`` functions, as a +/- string), the ladder's replicate seeds
    ``ladder_seeds`` and every replicate seed ``seeds`` (``spawn_seeds(max(seeds,
    topup))``)."""
    fns, models = parse_fns(cfg["fns"]), parse_models(cfg["models"])
    fixed = {k: cfg[k] for k in TRIAL_KEYS}
    if cfg.get("restarts", 1) != 1:
        fixed["restarts"] = cfg["restarts"]
    extra = {(fn, s): {"table": SparseFunction("table", s, cfg["table"] or None).table_string()}
             for fn, s in fns if fn == "table"}
    seeds = int(cfg["seeds"])
    return {"fns": fns, "models": models, "Ts": [int(T) for T in cfg["Ts"]],
            "series": [(fn, s, model, int(T)) for fn, s in fns for model in models
                       for T in cfg["Ts"]],
            "grid": m_grid(cfg["m_min"], cfg["m_max"], cfg["ratio"]), "fixed": fixed,
            "extra": extra, "ladder_seeds": set(spawn_seeds(seeds)),
            "seeds": spawn_seeds(max(seeds, cfg.get("topup") or 0))}


def check(cfg) -> dict:
    """Validate every setting (``ValueError`` naming it) before any work; return the
    config with the :data:`OPTIONAL` settings filled in."""
    cfg = dict(cfg)
    for k, v in OPTIONAL.items():
        if cfg.get(k) is None:
            cfg[k] = v
    Ts = [check_int("T", T, 1) for T in cfg["Ts"]]
    if not Ts:
        raise ValueError("Ts must hold at least one sequence length")
    fns, models = parse_fns(cfg["fns"]), parse_models(cfg["models"])
    ms = m_grid(cfg["m_min"], cfg["m_max"], cfg["ratio"])
    check_int("seeds", cfg["seeds"], 1)
    level = float(cfg["level"])
    if not 0 < level <= 1:
        raise ValueError(f"level (success probability) must lie in (0, 1], got {level}")
    check_int("stop_after", cfg["stop_after"], 0)
    check_int("topup", cfg.get("topup") or 0, 0)
    check_int("restarts", cfg["restarts"], 1)
    lo, hi = (float(v) for v in cfg["topup_range"])
    if not 0 <= lo <= hi <= 1:
        raise ValueError(f"topup_range must be 0 <= lo <= hi <= 1, got ({lo}, {hi})")
    if cfg["table"] and not any(f == "table" for f, _ in fns):
        raise ValueError("table is only used with fns entries 'table:s'")
    p = plan(cfg)
    for fn, s, model, T in p["series"]:  # every bad setting fails here, before any work
        validate_trial(T=T, m=ms[0], s=s, fn=fn, model=model, **p["fixed"],
                       **p["extra"].get((fn, s), {}))
    T, m = max(Ts), ms[-1]
    check_memory(memory_estimate(cfg), f"sparse: a trial at T={T} (Ts), m={m} (m_max), "
                 f"hidden={cfg['hidden']}, n_test={cfg['n_test']}")
    return cfg


def memory_estimate(cfg) -> dict:
    """Bytes of the largest arrays of the config's largest trial (largest ``T``, ``m =
    m_max``; float64), by name (the keys say which) — an estimate made before anything is
    allocated, for :func:`check` (:func:`stsim.util.validate.check_memory`)."""
    T, m = max(int(t) for t in cfg["Ts"]), m_grid(cfg["m_min"], cfg["m_max"], cfg["ratio"])[-1]
    hidden, n_test, f8 = int(cfg["hidden"]), int(cfg["n_test"]), 8
    models = parse_models(cfg["models"])
    out = {"training sample and temporaries (m x T, x8)": 8 * m * T * f8,
           "test sample and its forward pass (n_test x T, x5)": 5 * n_test * T * f8}
    if "fcn" in models:
        out["FCN first layer, gradient, Adam state (hidden x T, x4 per restart)"] = \
            4 * hidden * T * f8 * int(cfg.get("restarts") or 1)
    out["hidden activations ((m + n_test) x hidden, x3)"] = 3 * (m + n_test) * hidden * f8
    if cfg.get("pos") == "learned":
        out["learned positions (T x 16, x4)"] = 4 * T * 16 * f8
    return out


def published_config(cfg) -> dict:
    """The settings as written to ``summary.json``: tuples as lists, without ``mode`` and
    without the :data:`OPTIONAL` settings left at their defaults."""
    def at_default(k, v):
        return k in OPTIONAL and (tuple(v) if isinstance(v, list) else v) == OPTIONAL[k]
    return {k: list(v) if isinstance(v, tuple) else v for k, v in cfg.items()
            if k != "mode" and not at_default(k, v)}


def trials_path(out) -> str:
    """The raw table of a study folder: ``<out>/trials.csv`` (its journal beside it)."""
    return os.path.join(out, "trials.csv")


def run_record_path(out) -> str:
    """The run record of a study folder (``workers``, ``wall_time_s``, ``n_run``,
    ``levels``): ``<out>/run.json``."""
    return os.path.join(out, "run.json")
