r"""The text study's analysis: :func:`analyse`, every check and table from the raw tables
alone.

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
  paper's encodings (:data:`~stsim.studies.text.design.PAPER`: one-hot, near-orthogonal
  and its stochastic slots) holds (:func:`stsim.util.verdict.all_of`); the sphere's and
  the sinusoid's checks are reported per arm, not folded into the paper's claim. An arm
  that did not learn at ``T`` (its learns check not held) has its length checks
  inconclusive: there is nothing to generalise.
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

from stsim.baselines.text import neighbour_bits, unigram_bits
from stsim.studies.cells import lr_edge, made_with
from stsim.studies.contract import raw_path
from stsim.studies.text.design import FIXED, PAPER, arm_name, arms_of, made_by
from stsim.studies.text.runs import tuned
from stsim.studies.tuning import at_chosen, seed_stats
from stsim.util.verdict import all_of, inconclusive, judge

__all__ = ["analyse"]


def analyse(cfg, out) -> dict:
    """Every check and table from the raw tables alone (module docstring)."""
    arms = arms_of(cfg)
    tune = made_with(raw_path(out, "tune.csv"), made_by(cfg),
                     [dict(a, mult=m) for a in arms for m in cfg["mults"]])
    mults, tried, missing = tuned(tune, cfg)
    if missing:
        p = missing[0]
        raise ValueError(f"text/tune.csv has no row of task={p['task']!r}, encoding="
                         f"{p['encoding']!r}, mult={p['mult']!r} that the grid's extension "
                         f"needs ({len(missing)} missing): rerun without --analyse-only to "
                         f"compute them")
    every = made_with(raw_path(out, "runs.csv"), made_by(cfg),
                      [dict(a, mult=mults[arm_name(a)]) for a in arms if arm_name(a) in mults])
    runs = at_chosen([dict(r, arm=arm_name(r)) for r in every if r["status"] == "ok"], "arm",
                     mults)
    errors = [f"{arm_name(r)} seed {r['seed']}: {r.get('error')}" for t in (tune, every)
              for r in t if r["status"] != "ok"]
    uni = unigram_bits()
    nb = neighbour_bits(T=cfg["T"])
    ln2 = math.log(2.0)
    out_arms, checks, claims, diverged = [], [], {t: [] for t in cfg["tasks"]}, []
    for a in arms:
        name, task, enc = arm_name(a), a["task"], a["encoding"]
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
