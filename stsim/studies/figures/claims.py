"""Claims map — for each statement the paper makes about Figs. 1–5, the region of settings
where it holds and where it fails: PE family (fixed one-hot, fixed near-orthogonal at
several ``d_e``, stochastic/slots) × optimiser × learning rate × step budget, at the
paper's ``T = 200`` and at ``T = 20``.

Two sources, each used where it is exact or where nothing exact exists:

* **Reduced dynamics** (:mod:`stsim.theory.reduced`, dense and cheap): population GD of
  the theory model with ``query="sum"`` is exactly the two-scalar map ``(a, γ)`` for the
  one-hot (``n = T``) and slots (``n = d_e``) encodings. One call runs a grid of learning
  rates; every step budget is read off the same trajectories. The fixed one-hot OOD loss
  is :func:`~stsim.theory.reduced.ood_loss_onehot`, the slots OOD loss
  :func:`~stsim.theory.reduced.reduced_loss` at ``T_test``, and the loss on an unseen
  ``q_test`` is ``reduced_loss(a, γ, T, q_test, d)`` for both. Online SGD at batch 256
  follows it with a delay of a few thousand steps at T = 200 (``docs/reproduction.md``).
* **Simulation** (:func:`stsim.run`) where no reduction applies: near-orthogonal PE, Adam,
  the practical model (``query="sum"`` and ``"mean"``), random initialisation (heat maps).
  A grid at ``T = 20`` (``T_test`` and ``q_test`` scaled as in the paper), plus the
  ``T = 200`` runs of Figs. 1, 2/4, 3 and 5 (linked, trained once).

Every cell is a check (:mod:`.verdicts`) with a stability label
(:mod:`stsim.studies.figures.stability`); the
reduced map's cells are exact (``se = 0``) and labelled the same way. The statements
S1–S9 and their thresholds (the figure checks'): ``STATEMENTS`` of
:mod:`.claims_statements`.

``stsim figures`` includes it as the figure ``claims`` (``stsim figures --only claims``
runs it alone; from Python :func:`run_claims`; its files: :func:`draw`). The statements'
values are in :mod:`.claims_statements`, the reduced-dynamics map in
:mod:`.claims_reduced`, the table and picture in :mod:`.claims_draw`.
"""
from __future__ import annotations

import os

import numpy as np

from stsim.sweeps.pool import make_executor
from stsim.util.io import atomic_write, write_csv
from stsim.studies.figures.common import Job
from stsim.studies.figures.evaluate import EVALUATE, QUICK_EVALUATE
from stsim.studies.figures.ood import (group_names, long_jobs, names_by_pe, ood_jobs, pe_label,
                                       run_setting)
from stsim.studies.figures import fig1, fig2, fig3, fig5
from stsim.studies.figures.claims_draw import (MAP_COLUMNS, claims_table, draw_map,
                                               fits_markdown, map_rows)
from stsim.studies.figures.claims_reduced import (fits_reduced, interference_table,
                                                  reduced_map, region_text)
from stsim.studies.figures.claims_statements import (STATEMENTS, fig1_statements,
                                                     ood_statements)
from stsim.studies.figures.verdicts import Boot, make_check

__all__ = ["NAME", "LINKS", "SETTINGS", "STATEMENTS", "jobs", "measure", "draw", "run_claims"]

NAME = "claims"
LINKS = {"fig1": "fig1", "fig2": "fig2", "fig3": "fig3", "fig5": "fig5"}

_SIM_QUICK = dict(T=20, q=3, d=5, d_e=40, batch=128, n_val=128, init="zero",
                  T_test=[25, 30, 35, 40], q_test=[1, 2, 4, 6], eval_every=None, seeds=[0],
                  model="theory", query="sum", near_d_e=[16],
                  opt_lrs=[["sgd", 2.0], ["adam", 0.01]], steps=300,
                  practical=[["mean", "sgd", 5.0], ["sum", "sgd", 2.0]], practical_steps=300,
                  init_scale=0.05, evaluate=QUICK_EVALUATE)
_SIM_FULL = dict(_SIM_QUICK, seeds=[0, 1, 2], near_d_e=[16, 32, 64],
                 opt_lrs=[["sgd", 2.0], ["sgd", 5.0], ["adam", 0.003], ["adam", 0.01],
                          ["adam", 0.03]], steps=2000,
                 practical=[[qy, "sgd", lr] for qy in ("mean", "sum") for lr in (2.0, 5.0, 10.0)]
                 + [[qy, "adam", 0.01] for qy in ("mean", "sum")], practical_steps=2000,
                 evaluate=EVALUATE)

SETTINGS = {
    "quick": dict(sim=_SIM_QUICK,
                  reduced=dict(T=20, q=3, d=5, d_e=40, T_test=[25, 30, 35, 40],
                               q_test=[1, 2, 4, 6], lrs=[0.5, 1.0, 2.0, 3.0, 4.0, 5.0, 6.5],
                               max_steps=3000, record_every=10),
                  interference=dict(T=20, q=3, d=5, d_e=[16, 32], q_test=[1, 2, 3, 4, 6],
                                    n_mc=1000),
                  fig1=fig1.SETTINGS["quick"], fig2=fig2.SETTINGS["quick"],
                  fig3=fig3.SETTINGS["quick"], fig5=fig5.SETTINGS["quick"]),
    "full": dict(sim=_SIM_FULL,
                 reduced=dict(T=200, q=3, d=5, d_e=400, T_test=[250, 300, 350, 400],
                              q_test=[1, 2, 4, 6], lrs=list(np.round(np.arange(0.5, 7.51, 0.25),
                                                                     2)),
                              max_steps=100000, record_every=100),
                 interference=dict(T=200, q=3, d=5, d_e=[32, 64, 128, 256, 512, 1024, 2048,
                                                         4096], q_test=[1, 2, 3, 4, 6],
                                   n_mc=3000),
                 fig1=fig1.SETTINGS["full"], fig2=fig2.SETTINGS["full"],
                 fig3=fig3.SETTINGS["full"], fig5=fig5.SETTINGS["full"]),
}


# --------------------------------------------------------------------------------------
# simulated settings
# --------------------------------------------------------------------------------------
def _ood_settings(sim, opt, lr):
    keys = ("T", "q", "d", "d_e", "batch", "n_val", "init", "T_test", "q_test", "eval_every",
            "seeds", "model", "query", "near_d_e", "steps", "evaluate")
    s = {k: sim[k] for k in keys}
    s.update(optimizer=opt, lr=float(lr), sampler="slots", pe="stochastic", long=None)
    return s


def _renamed(s, name):
    return f"claims/{name}-lr{s['lr']:g}"


def _ood_jobs_named(s):
    """The OOD jobs of a T = 20 grid point, renamed under ``claims/``."""
    return [Job(_renamed(s, j.name), j.options, j.evaluate) for j in ood_jobs(s)]


def _practical_jobs(sim):
    return [Job(f"claims/practical-{query}-{opt}-lr{float(lr):g}-s{seed}",
                dict(T=sim["T"], q=sim["q"], d=sim["d"], d_e=sim["d_e"], pe="stochastic",
                     sampler="slots", model="practical", query=query, optimizer=opt,
                     lr=float(lr), steps=sim["practical_steps"], batch=sim["batch"],
                     init="random", init_scale=sim["init_scale"], n_val=sim["n_val"],
                     seed=seed), sim.get("evaluate"))
            for query, opt, lr in sim["practical"] for seed in sim["seeds"]]


def jobs(s):
    """Every run of the claims map: the ``T = 20`` OOD group of each ``s["sim"]["opt_lrs"]``
    entry (renamed under ``claims/``), the practical-model runs of ``s["sim"]["practical"]``,
    and the runs of Figs. 1, 2 (with its long run), 3 and 5 at their linked settings (shared
    with those figures, so trained once)."""
    sim = s["sim"]
    grid = [j for opt, lr in sim["opt_lrs"] for j in _ood_jobs_named(_ood_settings(sim, opt, lr))]
    return (grid + _practical_jobs(sim) + fig1.jobs(s["fig1"]) + fig2.jobs(s["fig2"])
            + fig3.jobs(s["fig3"]) + fig5.jobs(s["fig5"]))


# --------------------------------------------------------------------------------------
# analysis
# --------------------------------------------------------------------------------------
def _columns(s, results, boot):
    """The simulated columns: ``[{"label", "scale", "setting", "cells": {S: check}}]``
    and the blocks whose runs are missing (named)."""
    sim = s["sim"]
    cols, missing = [], []

    def add(label, scale, cells, setting):
        cols.append({"label": label, "scale": scale, "cells": cells, "setting": setting})

    def need(names):                # a block whose runs are missing is named, not drawn
        for n in names:
            if n not in results:
                raise KeyError(n)

    def ood_block(g, names, label, tail=""):
        need(x for v in names.values() for x in v)
        per, s4 = ood_statements(g, names, results, boot)
        add(f"{label} slots{tail}", f"T={g['T']}", {"S4": s4},
            f"theory/sum, slots d_e={g['d_e']}, {run_setting(g)}")
        for k, v in per.items():
            add(f"{label} {_short(k)}{tail}", f"T={g['T']}", v,
                f"theory/sum, {pe_label(k)} vs slots d_e={g['d_e']}, {run_setting(g)}")

    def sim_ood(opt, lr):
        g = _ood_settings(sim, opt, lr)
        names = {k: [_renamed(g, n) for n in v] for k, v in names_by_pe(g).items()}
        ood_block(g, names, f"T{g['T']} {opt} {lr:g}")

    def practical_block(label, names, d, heat, setting):
        need(names)
        add(label, label.split()[0].replace("T", "T="), fig1_statements(
            names, results, d, boot, heat=heat), setting)

    def sim_practical(query, opt, lr):
        names = [j.name for j in _practical_jobs(sim) if j.options["query"] == query
                 and j.options["optimizer"] == opt and j.options["lr"] == float(lr)]
        practical_block(f"T{sim['T']} prac-{query} {opt} {float(lr):g}", names, sim["d"], True,
                        f"practical/{query}, slots d_e={sim['d_e']}, {opt} lr {float(lr):g}, "
                        f"random init {sim['init_scale']}, {sim['practical_steps']} steps")

    def paper_fig(key, mod, heat):
        f = s[key]
        practical_block(f"T{f['T']} prac-{f['query']} {f['optimizer']} {f['lr']:g} "
                        f"(Fig {key[-1]})", [j.name for j in mod.jobs(f)], f["d"], heat,
                        f"practical/{f['query']}, slots d_e={f['d_e']}, {run_setting(f)}, "
                        f"{f['init']} init")

    def paper_ood(key):
        g = s[key]
        ood_block(g, group_names(g),
                  f"T{g['T']} {g['optimizer']} {g['lr']:g}", f" (Fig {key[-1]})")

    def paper_long(key):
        g = s[key]
        long = long_jobs(g)
        if long:
            names = [j.name for j in long]
            need(names)
            c = long[0].options
            _, s4 = ood_statements(g, {"stochastic": names}, results, boot)
            add(f"T{g['T']} {c['optimizer']} {c['lr']:g} slots {c['steps']} (Fig 2 long)",
                f"T={g['T']}", {"S4": s4}, f"theory/sum, slots d_e={g['d_e']}, {run_setting(c)}")

    blocks = ([(sim_ood, a) for a in sim["opt_lrs"]] + [(sim_practical, a) for a in
                                                        sim["practical"]]
              + [(paper_fig, ("fig1", fig1, False)), (paper_fig, ("fig3", fig3, True)),
                 (paper_ood, ("fig2",)), (paper_ood, ("fig5",)), (paper_long, ("fig2",))])
    for fn, args in blocks:
        try:
            fn(*args)
        except KeyError as e:
            missing.append(str(e))
    return cols, missing


def measure(s, results):
    """Build the claims map; returns ``(measured, checks)``.

    One column per simulated setting (the ``T = 20`` grid, the practical runs, the linked
    figure runs) with a check of each of its statements (``measured["cells"]``: every
    cell as a check with its column and statement, in the order of the columns); a block
    whose runs are missing from ``results`` is left out and named in
    ``measured["missing"]``. Beside them the (lr × step budget) maps of
    :func:`.claims_reduced.reduced_map` and the near-orthogonal
    :func:`.claims_reduced.interference_table`. Its checks are on the interference floor
    (falls with ``d_e``, grows with ``q_test``, first-order law vs Monte-Carlo) and on S6
    in the stable part of the reduced dynamics."""
    boot = Boot()
    cols, missing = _columns(s, results, boot)
    cells = [dict(c, statement=S, column=col["label"], setting=col["setting"])
             for col in cols for S, c in col["cells"].items()]
    for col in cols:
        del col["cells"]
    lrs, budgets, rok, rval, uns, why = reduced_map(s["reduced"])
    measured = {"columns": cols, "cells": cells, "reduced": {
        "lrs": lrs.tolist(), "budgets": budgets.tolist(),
        "held": {S: v.tolist() for S, v in rok.items()},
        "unstable": {S: v.tolist() for S, v in uns.items()}, "unstable_why": why,
        "value": {S: v.tolist() for S, v in rval.items()},
        "region": {S: region_text(lrs, budgets, v, uns[S]) for S, v in rok.items()}},
        "missing": missing}
    inter = interference_table(s["interference"])
    measured["interference"] = inter
    measured["fits_reduced"] = fits_reduced(s["reduced"])
    checks = _interference_checks(s["interference"], inter)
    red_q = s["reduced"]["q"]
    stable = (lrs <= 2 * red_q)[:, None] & ~uns["S6"]
    checks.append(make_check(
        f"reduced dynamics: S6 (stochastic quicker on q_test) in the one-hot reading, share "
        f"of the stable (lr, budget) cells (lr <= 2q = {2 * red_q}) where it holds",
        float(rok["S6"][stable].mean()) if stable.any() else float("nan"), "<=", 0.0, 0.0,
        note="exact (population GD): slots step lr/(d_e-1) < one-hot lr/(T-1) when d_e > T"))
    return measured, checks


def _interference_checks(r, inter):
    """The interference floor's checks, with Monte-Carlo standard errors (delta method)."""
    def ratio_se(a, sa, b, sb):          # se of b / a
        return abs(b / a) * np.hypot(sa / a, sb / b)

    out = []
    if len(inter) > 1:
        rat = [(x["floor_mc"], x["floor_mc_se"], y["floor_mc"], y["floor_mc_se"])
               for x, y in zip(inter[:-1], inter[1:])]
        k = int(np.argmax([b / a for a, _, b, _ in rat]))
        a, sa, b, sb = rat[k]
        out.append(make_check("interference floor (Monte-Carlo, fixed table, q=3) falls as d_e "
                              "grows: largest ratio of consecutive floors", b / a, "<", 1.0,
                              ratio_se(a, sa, b, sb)))
    worst, wse = np.inf, np.nan
    for x in inter:
        ks = [k for k in x["loss_at_q_test"] if int(k) >= r["q"]]
        for k0, k1 in zip(ks[:-1], ks[1:]):
            a, b = x["loss_at_q_test"][k0], x["loss_at_q_test"][k1]
            if b / a < worst:
                worst = b / a
                wse = ratio_se(a, x["loss_at_q_test_se"][k0], b, x["loss_at_q_test_se"][k1])
    out.append(make_check(f"interference at the q={r['q']} optimum grows with q_test (q_test >= "
                          f"{r['q']}): smallest ratio of consecutive losses, worst d_e", worst,
                          ">", 1.0, wse, note="below the trained q the loss also rises (γ, c "
                          "tuned for q), so q_test = q is the minimum"))
    k = int(np.argmin([x["floor_first_order"] / x["floor_mc"] for x in inter]))
    x = inter[k]
    v = x["floor_first_order"] / x["floor_mc"]
    out.append(make_check("first-order law / Monte-Carlo floor (worst d_e; the law drops higher "
                          "orders in c·ε)", v, ">=", 0.5, v * x["floor_mc_se"] / x["floor_mc"]))
    return out


def _short(k):
    return "1hot" if k == "onehot" else ("NO" + k[4:] if k.startswith("near") else k)


def draw(s, results, measured, out):
    """Write ``claims.png`` (:func:`.claims_draw.draw_map`), ``claims_map.csv``
    (:func:`.claims_draw.map_rows`) and ``claims.md`` (:func:`.claims_draw.claims_table`)
    from ``measured`` (:func:`measure`, its cells labelled by the study)."""
    red = measured["reduced"]
    lrs, budgets = np.asarray(red["lrs"], float), np.asarray(red["budgets"])
    rok = {S: np.asarray(v, bool) for S, v in red["held"].items()}
    runs = {S: np.asarray(v, bool) for S, v in red["unstable"].items()}
    rval = {S: np.asarray(v, float) for S, v in red["value"].items()}
    cols, cells = measured["columns"], measured["cells"]
    draw_map(s, cols, cells, lrs, budgets, rok, runs, os.path.join(out, f"{NAME}.png"))
    write_csv(os.path.join(out, f"{NAME}_map.csv"), MAP_COLUMNS,
              map_rows(s, cells, lrs, budgets, rok, runs, rval), float_format=".6g")
    with atomic_write(os.path.join(out, f"{NAME}.md"), "w") as fh:
        fh.write(claims_markdown(s, measured) + "\n")


def claims_markdown(s, measured) -> str:
    """``claims.md``: the claims table (:func:`.claims_draw.claims_table`) and the fixed
    PEs that fit (:func:`.claims_draw.fits_markdown`)."""
    r = s["reduced"]
    return (claims_table(s, measured["cells"], measured["reduced"]) + "\n\n"
            + "### Fixed PEs that fit in distribution, and S6/S7\n\n"
            + fits_markdown(measured["cells"], measured.get("fits_reduced", []),
                            measured.get("interference", []), 0.5 * r["d"] / r["q"], r["q"]))


def run_claims(mode="quick", out=os.path.join("runs", "claims"), *, workers=1, overrides=None,
               log=None) -> dict:
    """The claims map on its own, from Python: ``stsim figures --only claims`` (the figures
    study, :func:`stsim.studies.contract.run_study`, into ``out``; its runs in
    ``<out>/runs``, resumed from there) with ``overrides`` ``{key: value}`` of the claims
    settings and ``workers`` processes. Returns the claims summary."""
    from stsim.studies import figures
    from stsim.studies.contract import run_study
    over = {"only": ["claims"], **{f"claims.{k}": v for k, v in (overrides or {}).items()}}
    ex = make_executor(workers)
    try:
        summary = run_study(figures, out, mode=mode, overrides=over, executor=ex, log=log)
    finally:
        ex.shutdown(wait=True)
    return summary["summaries"]["claims"]
