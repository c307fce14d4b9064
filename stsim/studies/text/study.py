r"""``stsim text``: do the paper's stochastic positional encodings generalise in length on
real text (docs/text.md, "The study")?

Arms: each task of ``tasks`` — ``"mean"`` (the Gaussian task, the reference, at the same
``T, q, d``), ``"text"`` (selection on Tiny Shakespeare) and ``"masked"`` (the masked
character, ``q = 1``) — with each encoding of ``encodings`` (:data:`ENCODINGS`: the
paper's fixed one-hot and near-orthogonal encodings, its stochastic slots, the
stochastic sphere and the smooth randomised ordered encoding). Every arm is trained at
``T`` with SGD at ``lr`` × a multiplier of ``mults`` for ``steps`` steps (the same grid
and budget for every arm), on one tuning seed (root seed :data:`TUNE_ROOT`); the lowest
final in-distribution validation loss chooses the multiplier; while an arm's choice sits
on an end of the multipliers it tried, the nearest one of ``mults_extra`` beyond that end
is tried too (:func:`stsim.studies.cells.extend_rates`, the separation study's rule, the
same for every arm: :func:`tuned`); then ``seeds`` seeds (root 0) run at the choice.
Each run is evaluated on fresh held-out windows at ``T`` and at every ``T_test`` (the
validation sets; the text's come from its held-out 10%).

Measures per run: for ``mean`` and ``text`` the final validation loss over the initial one
at the same length (the run starts at zero, where the loss is ``½ E|target|²`` of that
validation set); for ``masked`` the cross entropy in bits per character. Checks (the one
check record, :mod:`stsim.util.verdict`; seed means, SE ``s/√S`` on ``S − 1`` degrees of
freedom):

- **learns**: ``mean``/``text`` at ``T``: loss ≤ ``ratio`` of the initial; ``masked``: at
  least ``margin`` bits below the unigram entropy (:func:`stsim.baselines.text.unigram_bits`);
  the neighbour baseline printed beside.
- **generalises** at each ``T_test``, per encoding, in the words the paper's Fig. 2 is
  judged in docs/reproduction.md: a stochastic encoding's loss at ``T_test`` ≤ ``ratio`` of
  the initial (``masked``: within ``gen_bits`` bits of its loss at ``T``); a fixed one's ≥
  ``fail`` of the initial (``masked``: at least ``fail_bits`` above its loss at ``T``).
- **the paper's claim on real tokens**, per task: every one of those checks of the
  paper's encodings (:data:`PAPER`: one-hot, near-orthogonal and its stochastic slots)
  holds (:func:`stsim.util.verdict.all_of`); the sphere's and the sinusoid's checks are
  reported per arm, not folded into the paper's claim. An arm that did not learn at
  ``T`` (its learns check not held) has its length checks inconclusive: there is nothing
  to generalise.
- **the choice is interior**: the chosen multiplier is not an end of the multipliers the
  arm tried (exact); where it is (the extension reached the end of ``mults_extra``), the
  arm's other checks are made inconclusive (its best step may lie outside the grid), with
  that reason.

The attention of each trained masked model (seed 0) around the masked position is
recorded per encoding (mean weight by offset).
"""
from __future__ import annotations

import json
import math
import os
import time

import numpy as np

import stsim
from stsim.core.corpus import load_corpus
from stsim.core.reduced import LEARNED
from stsim.core.targets import make_target
from stsim.studies.cells import extend_rates, lr_edge, made_with, settings_text, stamped
from stsim.studies.tuning import at_chosen, choose, seed_stats
from stsim.sweeps import sweep
from stsim.util.io import write_json
from stsim.util.validate import check_int, check_real
from stsim.util.verdict import all_of, inconclusive, judge

__all__ = ["NAME", "PRESETS", "HELP", "EPILOG", "check", "run", "analyse", "report",
           "console", "ENCODINGS", "TASKS", "train_one"]

NAME = "text"
TUNE_ROOT = 1
#: the encodings compared: name -> the run's options
ENCODINGS = {"onehot": {"pe": "onehot"}, "near-orthogonal": {"pe": "near-orthogonal"},
             "slots": {"pe": "stochastic", "sampler": "slots"},
             "sphere": {"pe": "stochastic", "sampler": "sphere"},
             "sinusoid": {"pe": "stochastic", "sampler": "sinusoid"}}
FIXED = ("onehot", "near-orthogonal")       # the paper's fixed encodings
#: the encodings the paper's claim names: its fixed ones and its stochastic one (slots);
#: the sphere and the smooth sinusoid are stsim's, judged per arm but not part of the claim
PAPER = FIXED + ("slots",)
TASKS = ("mean", "text", "masked")
VOCAB = 65                                  # Tiny Shakespeare's symbols: the one-hot d

_COMMON = dict(tasks=TASKS, q=3, batch=256, lr=8.0, ratio=LEARNED, fail=0.15, margin=0.5,
               gen_bits=0.1, fail_bits=0.5, attn_offsets=8)
PRESETS = {"quick": dict(_COMMON, mode="quick", encodings=("onehot", "slots"), T=12,
                         T_test=(24,), steps=150, seeds=2, n_val=128, mults=(0.125, 0.5, 2.0),
                         mults_extra=(0.03125, 8.0)),
           "full": dict(_COMMON, mode="full", encodings=tuple(ENCODINGS), T=64,
                        T_test=(128, 256, 512), steps=2000, seeds=3, n_val=512,
                        # 1/128 ... 64: every arm's choice of the extended grid is inside it
                        mults=tuple(2.0 ** k for k in range(-7, 7)),
                        mults_extra=tuple(2.0 ** k for k in (-10, -9, -8, 7, 8)))}
#: the help of each setting (the options of ``stsim text``), beside its preset
HELP = {"tasks": "mean (Gaussian tokens), text (selection on Tiny Shakespeare), masked",
        "encodings": f"of {', '.join(ENCODINGS)}", "q": "subset size of mean and text",
        "batch": "batch size", "lr": "the SGD step the multipliers scale (every arm; the "
        "text tasks' tokens are unit vectors, so their steps are larger than the Gaussian's)",
        "ratio": "learns / generalises: loss <= ratio of the initial",
        "fail": "a fixed encoding fails to generalise: loss >= fail of the initial",
        "margin": "masked learns: this many bits below the unigram entropy",
        "gen_bits": "masked generalises: within gen_bits of its loss at T",
        "fail_bits": "masked fails to generalise: at least fail_bits above its loss at T",
        "n_val": "held-out windows of each validation set",
        "attn_offsets": "offsets from the masked position in the attention maps",
        "T": "training length", "T_test": "lengths of evaluation (> T)",
        "steps": "SGD steps of every run", "seeds": "seeds per arm (>= 2: the SE)",
        "mults": "multipliers of lr tried on the tuning seed (the same for every arm)",
        "mults_extra": "multipliers beyond the grid's ends, tried one at a time past the end "
        "an arm's choice sits on (the same rule for every arm)"}
#: the command's epilog
EPILOG = ("writes raw/tune.csv, raw/runs.csv (a rerun with the same --out resumes) and\n"
          "raw/run.json, then text.json (every check with se, critical, verdict),\n"
          "report.md, length.png/.csv, attention.png/.csv (--analyse-only: from raw/)\n"
          "examples: stsim text                       # quick, T = 12 (about 30 s)\n"
          "          stsim text --full --out docs/figures/text")


#: the settings that make a row of either table (its ``settings`` cell; the arm and the
#: multiplier are in its point): a rerun with others computes other rows, an analysis uses
#: only the rows its settings made
MADE_BY = ("T", "q", "T_test", "steps", "batch", "lr", "n_val", "attn_offsets")


def made_by(cfg) -> str:
    """The ``settings`` cell of the rows made with ``cfg``."""
    return settings_text(**{k: cfg[k] for k in MADE_BY})


def _raw(out, name):
    return os.path.join(out, "raw", name)


def check(cfg):
    """Every setting validated (``ValueError`` naming it), before any work."""
    bad = [t for t in cfg["tasks"] if t not in TASKS]
    if bad or not cfg["tasks"]:
        raise ValueError(f"tasks must be a non-empty list of {TASKS}, got {list(cfg['tasks'])}")
    bad = [e for e in cfg["encodings"] if e not in ENCODINGS]
    if bad or not cfg["encodings"]:
        raise ValueError(f"encodings must be a non-empty list of {tuple(ENCODINGS)}, got "
                         f"{list(cfg['encodings'])}")
    T = check_int("T", cfg["T"], cfg["q"] + 1, 4096)
    check_int("q", cfg["q"], 1, 64)
    for Tt in cfg["T_test"]:
        check_int("T_test", Tt, T + 1, 8192)
    for key, lo in (("batch", 1), ("steps", 1), ("seeds", 2), ("n_val", 16),
                    ("attn_offsets", 1)):
        check_int(key, cfg[key], lo)
    for key in ("lr", "margin", "gen_bits", "fail_bits"):
        check_real(key, cfg[key], lo=0.0, lo_open=True)
    for key in ("ratio", "fail"):
        check_real(key, cfg[key], lo=0.0, hi=1.0, lo_open=True)
    if not cfg["mults"]:
        raise ValueError("mults must hold at least one multiplier")
    for key in ("mults", "mults_extra"):        # positive and distinct
        for m in cfg[key]:
            check_real(key, m, lo=0.0, lo_open=True)
        if len(set(cfg[key])) != len(cfg[key]):
            raise ValueError(f"{key} must be distinct, got {list(cfg[key])}")
    load_corpus().check_window(max(cfg["T_test"]), "T_test")
    return cfg


def _options(task, encoding, cfg):
    """The options of one run of an arm (the Gaussian task at the text's ``d``)."""
    target = {"mean": "mean", "text": "text", "masked": "masked"}[task]
    return dict(T=cfg["T"], q=1 if task == "masked" else cfg["q"], d=VOCAB, target=target,
                batch=cfg["batch"], steps=cfg["steps"], T_test=tuple(cfg["T_test"]),
                n_val=cfg["n_val"], eval_every=max(1, cfg["steps"] // 20),
                **ENCODINGS[encoding])


def train_one(task, encoding, mult, seed, cfg):
    """One run of an arm (a row of ``raw/tune.csv`` or ``raw/runs.csv``): its status,
    the final and initial validation loss at ``T`` and at each ``T_test`` (``val``,
    ``val0``, ``val_T<T>``, ``val0_T<T>``), the CPU time, the curve (JSON) and, for the
    masked task, the mean attention weight by offset from the masked position on
    ``n_val`` held-out windows (``attn``, JSON)."""
    kw = _options(task, encoding, cfg)
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


def _arms(cfg):
    return [{"task": t, "encoding": e} for t in cfg["tasks"] for e in cfg["encodings"]]


def _arm(r) -> str:
    return f"{r['task']}/{r['encoding']}"


def run(cfg, out, executor, log=None):
    """The tuning and the reported runs under ``raw/``, each a resumable sweep."""
    os.makedirs(os.path.join(out, "raw"), exist_ok=True)
    say, walls, t0 = log or (lambda msg: None), {}, time.time()

    def part(name, fn, points, **kw):
        t = time.time()
        fn, points = stamped(fn, points, made_by(cfg))
        sweep(fn, points, executor=executor, out=_raw(out, f"{name}.csv"), **kw)
        walls[name] = time.time() - t
        say(f"{name}: {walls[name]:.1f}s")

    def tune(points):
        part("tune", lambda task, encoding, mult, seed: train_one(task, encoding, mult, seed,
                                                                  cfg),
             points, root_seed=TUNE_ROOT)
        return tuned(made_with(_raw(out, "tune.csv"), made_by(cfg)), cfg)
    t = time.time()
    mults, tried, missing = tune([dict(a, mult=m) for a in _arms(cfg) for m in cfg["mults"]])
    for _ in cfg["mults_extra"]:        # past an end, one multiplier a round
        if not missing:
            break
        say(f"tune: extending {len(missing)} arm(s) past an end of their grid")
        mults, tried, missing = tune(missing)
    walls["tune"] = time.time() - t
    part("runs", lambda task, encoding, mult, seed: train_one(task, encoding, mult, seed, cfg),
         [dict(a, mult=mults[_arm(a)]) for a in _arms(cfg)], seeds=cfg["seeds"])
    write_json(_raw(out, "run.json"), {"wall_time_s": time.time() - t0,
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
        by.setdefault(_arm(r), []).append(dict(r, arm=_arm(r), rel=r.get("val")))
    chosen, tried, missing = {}, {}, []
    for a in _arms(cfg):
        name, grid = _arm(a), sorted(float(m) for m in cfg["mults"])
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


def analyse(cfg, out) -> dict:
    """Every check and table from the raw tables alone (module docstring)."""
    from stsim.baselines.text import neighbour_bits, unigram_bits
    arms = _arms(cfg)
    tune = made_with(_raw(out, "tune.csv"), made_by(cfg),
                     [dict(a, mult=m) for a in arms for m in cfg["mults"]])
    mults, tried, missing = tuned(tune, cfg)
    if missing:
        p = missing[0]
        raise ValueError(f"text/tune.csv has no row of task={p['task']!r}, encoding="
                         f"{p['encoding']!r}, mult={p['mult']!r} that the grid's extension "
                         f"needs ({len(missing)} missing): rerun without --analyse-only to "
                         f"compute them")
    every = made_with(_raw(out, "runs.csv"), made_by(cfg),
                      [dict(a, mult=mults[_arm(a)]) for a in arms if _arm(a) in mults])
    runs = at_chosen([dict(r, arm=_arm(r)) for r in every if r["status"] == "ok"], "arm",
                     mults)
    errors = [f"{_arm(r)} seed {r['seed']}: {r.get('error')}" for t in (tune, every)
              for r in t if r["status"] != "ok"]
    uni = unigram_bits()
    nb = neighbour_bits(T=cfg["T"])
    ln2 = math.log(2.0)
    out_arms, checks, claims, diverged = [], [], {t: [] for t in cfg["tasks"]}, []
    for a in arms:
        name, task, enc = _arm(a), a["task"], a["encoding"]
        rows = sorted((r for r in runs if r["arm"] == name), key=lambda r: r["seed_index"])
        diverged += [f"{name} seed {r['seed']}" for r in rows if r["run_status"] != "completed"]
        if task == "masked":
            ind = [r["val"] / ln2 for r in rows]
            per_T = {Tt: [r[f"val_T{Tt}"] / ln2 for r in rows] for Tt in cfg["T_test"]}
        else:
            ind = [r["val"] / r["val0"] for r in rows]
            per_T = {Tt: [r[f"val_T{Tt}"] / r[f"val0_T{Tt}"] for r in rows]
                     for Tt in cfg["T_test"]}
        m, se, df = seed_stats(ind)
        unit = "bits" if task == "masked" else "of the initial loss"
        ctx = dict(task=task, encoding=enc, T=cfg["T"], n=len(rows), part="learns")
        if task == "masked":
            learn = judge(f"{name}: learns at T = {cfg['T']}: at least {cfg['margin']:g} bits "
                          f"below the unigram's {uni:.3f}", m, "<=", uni - cfg["margin"], se,
                          df, note=f"neighbour baseline {nb['bits']:.3f} bits", **ctx)
        else:
            learn = judge(f"{name}: learns at T = {cfg['T']}: loss <= {cfg['ratio']:g} of the "
                          f"initial", m, "<=", cfg["ratio"], se, df, **ctx)
        checks.append(learn)
        length = {}
        ctx["part"] = "length"
        for Tt, vals in per_T.items():
            fixed = enc in FIXED
            if task == "masked":
                gap = [v - i for v, i in zip(vals, ind)]
                gm, gse, gdf = seed_stats(gap)
                c = (judge(f"{name}: fails to generalise to T = {Tt}: at least "
                           f"{cfg['fail_bits']:g} bits above its loss at T", gm, ">=",
                           cfg["fail_bits"], gse, gdf, **dict(ctx, T=Tt)) if fixed else
                     judge(f"{name}: generalises to T = {Tt}: within {cfg['gen_bits']:g} bits "
                           f"of its loss at T", gm, "<=", cfg["gen_bits"], gse, gdf,
                           **dict(ctx, T=Tt)))
            else:
                vm, vse, vdf = seed_stats(vals)
                c = (judge(f"{name}: fails to generalise to T = {Tt}: loss >= {cfg['fail']:g} "
                           f"of the initial", vm, ">=", cfg["fail"], vse, vdf,
                           **dict(ctx, T=Tt)) if fixed else
                     judge(f"{name}: generalises to T = {Tt}: loss <= {cfg['ratio']:g} of the "
                           f"initial", vm, "<=", cfg["ratio"], vse, vdf, **dict(ctx, T=Tt)))
            if learn["verdict"] != "held":       # no learning at T: nothing to generalise
                c = inconclusive(c, f"it did not learn at T = {cfg['T']} (its learns check "
                                    f"{learn['verdict']}): length generalisation is not judged")
            checks.append(c)
            if enc in PAPER:
                claims[task].append(c)
            length[Tt] = seed_stats(vals)[:2]
        chosen, grid = mults.get(name), tried.get(name, sorted(cfg["mults"]))
        inside = chosen is not None and lr_edge(grid, chosen, cfg["mults_extra"]) == ""
        if not inside:          # the arm's best step may lie outside the grid: not judged
            why = (f"the chosen multiplier {chosen} is at an end of the grid it tried, "
                   f"{grid}, with nothing of mults_extra beyond: the arm's best step may lie "
                   f"outside it")
            mine = [i for i, c in enumerate(checks) if c.get("task") == task
                    and c.get("encoding") == enc]
            for i in mine:
                checks[i] = inconclusive(checks[i], why)
            claims[task] = [inconclusive(c, why) if c.get("encoding") == enc else c
                            for c in claims[task]]
        checks.append(judge(f"{name}: the chosen multiplier {chosen} is inside the grid",
                            float(inside), ">=", 1.0, note=f"grid tried {grid}",
                            **dict(ctx, part="tuning")))
        attn = {}
        if task == "masked" and rows:
            attn = json.loads(rows[0]["attn"])
        out_arms.append({"arm": name, "task": task, "encoding": enc, "mult": chosen,
                     "tried": grid,
                     "unit": unit, "in_distribution": [m, se], "length":
                     {str(k): v for k, v in length.items()}, "attention": attn})
    claim = [all_of(f"{t}: the paper's claim on real tokens — its stochastic encoding "
                    f"(slots) generalises in length and its fixed ones do not", cs, task=t)
             for t, cs in claims.items() if cs]
    return {"arms": out_arms, "checks": checks + claim, "claims": claim, "mults": mults,
            "baselines": {"unigram_bits": uni, "neighbour": nb}, "errors": errors,
            "diverged": diverged}


def report(cfg, out, results) -> dict:
    """``text.json``, ``report.md``, ``length.png``/``.csv``, ``attention.png``/``.csv``;
    returns the summary (its ``checks``, the divergence entries)."""
    from stsim.studies.contract import divergence
    from stsim.studies.text.outputs import write_outputs
    n_runs = len(_arms(cfg)) * cfg["seeds"]
    div = divergence(results["diverged"], n_runs,
                     [f"{a['arm']}: in distribution" for a in results["arms"]
                      if not np.isfinite(a["in_distribution"][0])])
    summary = dict(results, **div, config=dict(cfg))
    write_outputs(cfg, out, summary)
    return summary


def console(summary) -> list:
    """What ``stsim text`` prints: a row per arm (in distribution, then at each T_test)."""
    out = []
    for a in summary["arms"]:
        m, se = a["in_distribution"]
        cells = ", ".join(f"T={T} {v[0]:.4g}" for T, v in a["length"].items())
        out.append(f"{a['arm']:>24s} x{a['mult']}: {m:.4g} ± {se:.2g} ({a['unit']}); {cells}")
    return out
