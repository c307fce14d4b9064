r"""``stsim attention``: which attention mechanisms learn sparse token selection, and at
what width (docs/attention.md, "The study: `stsim attention`").

Five parts, each check carrying its standard error, the critical value right for its
sample size and a verdict (:func:`stsim.util.verdict.judge`):

* **runs** (:mod:`.runs`) — every mechanism of ``mechanisms`` (names of
  :data:`stsim.core.attention.ATTENTIONS`, ``rank=r``, ``tau=τ`` or one's own
  :class:`~stsim.core.attention.Attention` object, named by its label), equally tuned
  (``tune_mults``, ``tune_steps``), ``steps`` steps, ``seeds`` seeds: **learns**
  (``level``) and **length generalisation** (``T_test``, ``ood_level``), on the task's
  ``target`` (``"mean"``, the paper's task, by default; any target of :func:`stsim.run`,
  its own L(0)).
* **rank** — ``rank=r`` over ``rank_T`` × ``rank_q`` × ``rank_r`` on ``target``: the
  smallest r held below ``level`` · L(0) (and below ``width_level`` · L(0)).
* **width** (:mod:`~stsim.studies.attention.widths`) — each of ``width_mechs``' sphere
  family: the smallest ``d_e`` reaching ``width_level`` · L(0) against ``width_T``, with
  its growth laws (the mean task's family, whatever ``target``).
* **trained widths** — ``train_mechs`` trained on the sphere at ``train_T`` and each
  ``d_e`` of ``train_widths``, against the family's width there (the mean task).
* **temperature** — the reduced softmax map at each of ``taus`` against τ = 1 with step
  ``η/τ²`` on W (deterministic, ``se = 0``; the mean task's reduction).
"""
from __future__ import annotations

import os
import time

from stsim.core.attention import ATTENTIONS, MECHANISMS
from stsim.core.config import MECHANISM_DEFAULTS
from stsim.core.reduced import LEARNED
from stsim.core.targets import make_target
from stsim.studies.attention.analysis import analyse
from stsim.studies.attention.sizes import check_sizes
from stsim.studies.attention.runs import (TAU_RANGE, TUNE_ROOT, choose, made_by,
                                          mechanism_label, named, parse_mechanism,
                                          rank_one, rank_points, raw_path, run_one,
                                          sphere_one)
from stsim.studies.cells import made_with, stamped
from stsim.studies.widths import QUICK as QUICK_PRECISION, Precision
from stsim.sweeps import sweep
from stsim.util.io import write_json
from stsim.util.validate import check_int, check_real

__all__ = ["NAME", "PRESETS", "check", "run", "analyse", "report", "parse_mechanism",
           "run_one"]

NAME = "attention"
MECHS = list(ATTENTIONS) + ["rank=4", "tau=0.5"]
#: a normalised element-wise mechanism has the family of its base one (a constant scale)
WIDTH_MECHS = [n for n, m in MECHANISMS.items() if not (m.elementwise and m.normalised)]
#: the precision rule of the family crossings (:class:`stsim.studies.widths.Precision`):
#: the library's default in full, a coarse one in quick
FAM_FULL = Precision().settings()
FAM_QUICK = QUICK_PRECISION.settings()
PRESETS = {
    "quick": {"mode": "quick", "T": 12, "q": 2, "d": 5, "seeds": 3, "mechanisms": MECHS,
              "steps": 300, "batch": 64, "T_test": [16, 20], "target": "mean",
              "level": LEARNED, "ood_level": 0.05, "tune_steps": 300,
              "tune_mults": [2.0, 1.0, 0.5],
              "tune_base": "own",
              "rank_T": [8], "rank_q": [2], "rank_r": [4, 16], "rank_steps": 300,
              "width_mechs": WIDTH_MECHS, "width_level": 0.25, "width_T": [8, 16, 32, 64, 128],
              **FAM_QUICK, "width_max": 1024,
              "taus": [0.5, 1.0, 2.0], "tau_T": 50,
              "train_mechs": ["linear"], "train_T": 8, "train_widths": [16, 23, 32],
              "train_steps": 300},
    "full": {"mode": "full", "T": 200, "q": 3, "d": 5, "seeds": 3, "mechanisms": MECHS,
             "steps": 1500, "batch": 256, "T_test": [250, 300, 350, 400], "target": "mean",
             "level": LEARNED, "ood_level": 0.05,
             "tune_steps": 1500,        # tuned at the full budget
             "tune_mults": [2.0 ** -k for k in range(-7, 10)],  # 128 ... 1/512, factor 2
             "tune_base": "paper",      # the grid spans every mechanism's own default
             "rank_T": [8, 16, 32], "rank_q": [2, 3], "rank_r": [4, 8, 16, 32, 64],
             "rank_steps": 0,
             "width_mechs": WIDTH_MECHS, "width_level": 0.25,
             "width_T": [8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096],
             **FAM_FULL, "width_max": 32768,
             "taus": [0.25, 0.5, 1.0, 2.0, 4.0], "tau_T": 200,
             "train_mechs": ["linear", "relu"], "train_T": 16,
             "train_widths": [23, 32, 45, 64, 91], "train_steps": 0},
}

EPILOG = ("writes raw/tune.csv, raw/runs.csv, raw/rank.csv, raw/width.csv (a rerun with the\n"
          "same --out resumes) and raw/run.json, then attention.json (every check with se,\n"
          "critical, verdict), report.md, width.csv, rank.csv, temperature.csv, curves.csv,\n"
          "curves.png, width.png (--analyse-only: from raw/)\n"
          "examples: stsim attention                       # quick, T = 12\n"
          "          stsim attention --full --out docs/figures/attention")

HELP = {"T": "training length", "q": "subset size", "d": "token dimension",
        "seeds": "seeds per mechanism", "mechanisms": "names, rank=r (r <= d + d_e), "
        "tau=t (1e-100 <= t <= 1e100: tau^2 and 1/tau^2 scale the steps, and stay 1e108 "
        "inside float64's range)",
        "steps": "the budget: steps of every reported run", "batch": "batch size",
        "T_test": "out-of-distribution lengths", "target": "the task's target of the tuned, "
        "reported and rank runs, as in stsim run (mean, moment:k, variance, text, masked; "
        "the width family, trained widths and temperature map are the mean task's)",
        "level": "learns: loss <= level L(0) (the target's L(0))",
        "ood_level": "generalises: loss <= ood_level L(0)",
        "width_level": "width law: loss <= width_level L(0)",
        "width_T": "lengths of the width law", "taus": "temperatures of the reduced "
        "map (1e-100 ... 1e100, as tau=t)",
        "tau_T": "length of the reduced map (q < "
        "tau_T; 20 tau_T steps, within memory)",
        "tune_steps": "steps of a tuning run", "tune_mults": "multipliers of the base "
        "step tried per mechanism", "tune_base": "the base step: own (each mechanism's "
        "default) or paper (the paper model's for every one)",
        "rank_T": "lengths of the rank grid",
        "rank_q": "subset sizes of the rank grid", "rank_r": "ranks of the rank grid (each "
        "<= 2 max(rank_T), one <= 2 min(rank_T): d_e = 2T)",
        "rank_steps": "steps of a rank run (0: its default)",
        "width_mechs": "mechanisms of the width law",
        **Precision.help(), "width_max": "largest d_e a family crossing is searched to (at most 8T)",
        "train_mechs": "mechanisms trained on the sphere against d_e",
        "train_T": "length of the trained width check",
        "train_widths": "d_e of the trained width check",
        "train_steps": "steps of a trained width run (0: its default)"}



def console(summary) -> list:
    """What ``stsim attention`` prints above the counts of its checks: nothing more (its
    tables are in report.md)."""
    return []


#: the step a mechanism's tuning multiplies: its own default, or the paper model's
TUNE_BASES = ("own", "paper")
LISTS = ("mechanisms", "tune_mults", "width_mechs", "rank_T", "rank_q", "rank_r", "width_T",
         "train_mechs", "train_widths")


def check(cfg: dict) -> dict:
    """Validate every setting of every part (``ValueError`` naming it and its range) before
    any work: each grid not empty and without repeats, the ranks usable at the rank grid's
    lengths, temperatures in :data:`~stsim.core.attention.TAU_RANGE`, and the largest run of each part
    within memory (:func:`~stsim.studies.attention.sizes.check_sizes`)."""
    cfg = dict(cfg)
    for name, lo in (("T", 2), ("d", 1), ("seeds", 2), ("steps", 1), ("batch", 1),
                     ("tune_steps", 1), ("rank_steps", 0), ("width_max", 2)):
        cfg[name] = check_int(name, cfg[name], lo)
    Precision.from_cfg(cfg)         # the family's precision settings, each checked
    task = _named_target(cfg["target"])
    cfg["target"], min_q = task.label, task.min_q
    cfg["q"] = check_int("q", cfg["q"], min_q, cfg["T"] - 1)
    for key in LISTS:
        if not cfg[key]:
            raise ValueError(f"{key} must hold at least one value, got []")
    runs = [{**MECHANISM_DEFAULTS, **parse_mechanism(m)} for m in cfg["mechanisms"]]
    if any(runs.count(r) > 1 for r in runs):       # e.g. tau=1 is softmax; labels: below
        raise ValueError(f"mechanisms must be distinct runs, got "
                         f"{[mechanism_label(m) for m in cfg['mechanisms']]}")
    for key in ("width_mechs", "train_mechs"):
        for m in cfg[key]:
            if m not in ATTENTIONS:
                raise ValueError(f"{key} must hold names of {ATTENTIONS}, got {m!r}")
    for name in ("level", "ood_level", "width_level"):
        cfg[name] = check_real(name, cfg[name], lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    q = cfg["q"]
    cfg["T_test"] = [check_int("T_test", t, cfg["T"] + 1) for t in cfg["T_test"]]
    cfg["width_T"] = [check_int("width_T", t, max(4, q + 1)) for t in cfg["width_T"]]
    cfg["tau_T"] = check_int("tau_T", cfg["tau_T"], max(3, q + 1))
    cfg["rank_T"] = [check_int("rank_T", t, 3) for t in cfg["rank_T"]]
    cfg["rank_q"] = [check_int("rank_q", t, min_q, min(cfg["rank_T"]) - 1)
                     for t in cfg["rank_q"]]
    lo_T, hi_T = min(cfg["rank_T"]), max(cfg["rank_T"])
    cfg["rank_r"] = [check_int("rank_r", t, 1) for t in cfg["rank_r"]]
    if max(cfg["rank_r"]) > 2 * hi_T or min(cfg["rank_r"]) > 2 * lo_T:
        raise ValueError(f"rank_r must hold ranks <= 2 max(rank_T) = {2 * hi_T}, one of them "
                         f"<= 2 min(rank_T) = {2 * lo_T} (the key/query pair's d_e = 2T: a "
                         f"rank above 2T is not run at T), got {cfg['rank_r']}")
    cfg["tune_mults"] = [check_real("tune_mults", m, lo=0.0, lo_open=True)
                         for m in cfg["tune_mults"]]
    if cfg["tune_base"] not in TUNE_BASES:
        raise ValueError(f"tune_base must be one of {TUNE_BASES}, got {cfg['tune_base']!r}")
    cfg["taus"] = [check_real("taus", t, lo=TAU_RANGE[0], hi=TAU_RANGE[1]) for t in cfg["taus"]]
    cfg["train_T"] = check_int("train_T", cfg["train_T"], max(4, q + 1))
    cfg["train_steps"] = check_int("train_steps", cfg["train_steps"], 0)
    cfg["train_widths"] = sorted(check_int("train_widths", w, 1) for w in cfg["train_widths"])
    for key in LISTS + ("T_test", "taus"):
        vals = [mechanism_label(v) for v in cfg[key]]
        if len(set(vals)) != len(vals):
            raise ValueError(f"{key} must hold distinct values, got {vals}")
    check_sizes(cfg)
    return cfg


def _named_target(target):
    """The task's :class:`~stsim.core.targets.Target`, made again from its label
    (:func:`stsim.core.targets.make_target`: the study's tables record it by name, so a
    target of one's own is refused), ``ValueError`` naming ``target``."""
    label = make_target(target).label
    try:
        return make_target(label)
    except ValueError:
        raise ValueError(f"target must be a target of stsim run given by its name (mean, "
                         f"moment:k, variance, text[...], masked[...]): the study's tables "
                         f"record it by name, got {label!r}") from None


def width_cap(T, cfg) -> int:
    """The largest ``d_e`` a family crossing is searched to at ``T``: ``8T`` (at least
    64), at most ``width_max``."""
    return min(cfg["width_max"], max(64, 8 * T))


def run(cfg, out, executor, log):
    """The tuning runs, the reported runs, the rank grid and the width replicates, each
    through :func:`stsim.sweep` into its table under ``raw/`` (resumable)."""
    from stsim.studies.attention.runs import base_schedule
    from stsim.studies.attention.widths import width_point
    os.makedirs(os.path.join(out, "raw"), exist_ok=True)
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


def report(cfg, out, results) -> dict:
    """Every output file (:func:`stsim.studies.attention.outputs.write_outputs`)."""
    from stsim.studies.attention.outputs import write_outputs
    return dict(write_outputs(named(cfg), out, results),
                **{k: results[k] for k in ("diverged", "unmeasured")})
