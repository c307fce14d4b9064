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

Statements (their thresholds are the figure checks' thresholds):

======  ==========================================================================
S1      training loss converges: final <= 1 % of initial (Fig. 1)
S2      O(1/t): 1/L linear over the second half, R² >= 0.99 (Fig. 1)
S3      cos(W, W*) >= 0.99 and cos(V, V*) >= 0.99 (Fig. 1)
S4      stochastic PE converges OOD: <= 2 % of initial at every T_test (Fig. 2)
S5      fixed PE stays above a constant: OOD loss >= 0.15 at every T_test (Figs. 2, 4)
S6      stochastic quicker on q_test: fixed / stochastic > 1 at every q_test (Fig. 4)
S7      fixed PE worse as q_test grows: loss increasing over q_test (Fig. 4)
S8      Adam keeps the length advantage: fixed / stochastic >= 2 at every T_test (Fig. 5)
S9      heat maps block-diagonal: <= 5 % of W, V outside the PE / token block (Fig. 3)
======  ==========================================================================

``stsim figures`` includes it as the figure ``claims`` (``stsim figures --only claims``
runs it alone; from Python :func:`run_claims`). It writes ``claims.png``,
``claims_map.csv`` (one row per statement × setting), ``claims.json``, ``claims.csv``
(the histories of its simulations) and ``claims.md`` (the table). The statements' values
are in :mod:`.claims_statements`, the reduced-dynamics map in :mod:`.claims_reduced`, the
table and picture in :mod:`.claims_draw`.
"""
from __future__ import annotations

import os

import numpy as np

from stsim.util.io import write_csv
from stsim.studies.figures.common import Job, check
from stsim.studies.figures.ood import by_pe, long_jobs, ood_jobs, pe_label, variants
from stsim.studies.figures import fig1, fig2, fig3, fig5
from stsim.studies.figures.claims_draw import MAP_COLUMNS, claims_table, draw_map, map_rows
from stsim.studies.figures.claims_reduced import interference_table, reduced_map, region_text
from stsim.studies.figures.claims_statements import (STATEMENTS, fig1_statements, held,
                                                     ood_statements)

__all__ = ["NAME", "LINKS", "SETTINGS", "STATEMENTS", "jobs", "measure", "draw", "held",
           "run_claims"]

NAME = "claims"
LINKS = {"fig1": "fig1", "fig2": "fig2", "fig3": "fig3", "fig5": "fig5"}

_SIM_QUICK = dict(T=20, q=3, d=5, d_e=40, batch=128, n_val=128, init="zero",
                  T_test=[25, 30, 35, 40], q_test=[1, 2, 4, 6], eval_every=None, seeds=[0],
                  model="theory", query="sum", near_d_e=[16],
                  opt_lrs=[["sgd", 2.0], ["adam", 0.01]], steps=300,
                  practical=[["mean", "sgd", 5.0], ["sum", "sgd", 2.0]], practical_steps=300,
                  init_scale=0.05)
_SIM_FULL = dict(_SIM_QUICK, seeds=[0], near_d_e=[16, 32, 64],
                 opt_lrs=[["sgd", 2.0], ["sgd", 5.0], ["adam", 0.003], ["adam", 0.01],
                          ["adam", 0.03]], steps=2000,
                 practical=[[qy, "sgd", lr] for qy in ("mean", "sum") for lr in (2.0, 5.0, 10.0)]
                 + [[qy, "adam", 0.01] for qy in ("mean", "sum")], practical_steps=2000)

SETTINGS = {
    "quick": dict(sim=_SIM_QUICK,
                  reduced=dict(T=20, q=3, d=5, d_e=40, T_test=[25, 30, 35, 40],
                               q_test=[1, 2, 4, 6], lrs=[0.5, 1.0, 2.0, 3.0, 4.0, 5.0],
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
                 interference=dict(T=200, q=3, d=5, d_e=[32, 64, 128], q_test=[1, 2, 3, 4, 6],
                                   n_mc=3000),
                 fig1=fig1.SETTINGS["full"], fig2=fig2.SETTINGS["full"],
                 fig3=fig3.SETTINGS["full"], fig5=fig5.SETTINGS["full"]),
}


# --------------------------------------------------------------------------------------
# simulated settings
# --------------------------------------------------------------------------------------
def _ood_settings(sim, opt, lr):
    keys = ("T", "q", "d", "d_e", "batch", "n_val", "init", "T_test", "q_test", "eval_every",
            "seeds", "model", "query", "near_d_e", "steps")
    s = {k: sim[k] for k in keys}
    s.update(optimizer=opt, lr=float(lr), sampler="slots", pe="stochastic", long=None)
    return s


def _ood_jobs_named(s):
    """The OOD jobs of a T = 20 grid point, renamed under ``claims/``."""
    return [Job(f"claims/{j.name}-lr{s['lr']:g}", j.options) for j in ood_jobs(s)]


def _practical_jobs(sim):
    out = []
    for query, opt, lr in sim["practical"]:
        for seed in sim["seeds"]:
            opts = dict(T=sim["T"], q=sim["q"], d=sim["d"], d_e=sim["d_e"], pe="stochastic",
                        sampler="slots", model="practical", query=query, optimizer=opt,
                        lr=float(lr), steps=sim["practical_steps"], batch=sim["batch"],
                        init="random", init_scale=sim["init_scale"], n_val=sim["n_val"],
                        seed=seed)
            out.append(Job(f"claims/practical-{query}-{opt}-lr{float(lr):g}-s{seed}", opts))
    return out


def jobs(s):
    """Every run of the claims map: the ``T = 20`` OOD group of each ``s["sim"]["opt_lrs"]``
    entry (renamed under ``claims/``), the practical-model runs of ``s["sim"]["practical"]``,
    and the runs of Figs. 1, 2 (with its long run), 3 and 5 at their linked settings (shared
    with those figures, so trained once)."""
    sim = s["sim"]
    out = []
    for opt, lr in sim["opt_lrs"]:
        out += _ood_jobs_named(_ood_settings(sim, opt, lr))
    out += _practical_jobs(sim)
    out += fig1.jobs(s["fig1"]) + fig2.jobs(s["fig2"]) + fig3.jobs(s["fig3"])
    out += fig5.jobs(s["fig5"])
    return out


def _groups_renamed(s, results):
    groups = {}
    for j in ood_jobs(s):
        groups.setdefault(j.name.split("-")[-2], []).append(
            results[f"claims/{j.name}-lr{s['lr']:g}"])
    return groups


# --------------------------------------------------------------------------------------
# analysis
# --------------------------------------------------------------------------------------
def measure(s, results):
    """Build the claims map; returns ``(measured, checks)``.

    One column per simulated setting (the ``T = 20`` grid, the practical runs, the linked
    figure runs) with its values of S1–S9; a block whose runs are missing from ``results`` is
    left out and named in ``measured["missing"]``. Beside them the (lr × step budget) maps of
    :func:`.claims_reduced.reduced_map` and the near-orthogonal
    :func:`.claims_reduced.interference_table`. ``measured``: ``columns``, ``reduced``
    (``lrs``, ``budgets``, ``held``, ``value``, ``region``), ``table_markdown``
    (:func:`.claims_draw.claims_table`), ``interference``, ``missing``. Its checks are on
    the interference floor (falls with ``d_e``, grows with ``q_test``, first-order law vs
    Monte-Carlo) and on S6 in the reduced dynamics."""
    sim = s["sim"]
    cols = []                     # (label, scale, {S: value}, note)

    def add(label, scale, vals, setting):
        cols.append({"label": label, "scale": scale, "values": vals, "setting": setting})

    missing = []

    def guarded(fn, *args):
        """Add the columns of one block; a block whose runs are not (yet) available is
        left out and named in ``measured["missing"]`` (partial redraws from a cache)."""
        try:
            fn(*args)
        except KeyError as e:
            missing.append(str(e))

    def sim_ood(opt, lr):
        g = _ood_settings(sim, opt, lr)
        groups = _groups_renamed(g, results)
        per, s4 = ood_statements(g, groups)
        add(f"T{g['T']} {opt} {lr:g} slots", f"T={g['T']}", {"S4": s4},
            f"theory/sum, slots d_e={g['d_e']}, {opt} lr {lr:g}, {g['steps']} steps")
        for k, v in per.items():
            add(f"T{g['T']} {opt} {lr:g} {_short(k)}", f"T={g['T']}", v,
                f"theory/sum, {pe_label(k)} vs slots d_e={g['d_e']}, {opt} lr {lr:g}, "
                f"{g['steps']} steps")

    def sim_practical(query, opt, lr):
        runs = [results[j.name] for j in _practical_jobs(sim)
                if j.options["query"] == query and j.options["optimizer"] == opt
                and j.options["lr"] == float(lr)]
        add(f"T{sim['T']} prac-{query} {opt} {float(lr):g}", f"T={sim['T']}",
            fig1_statements(runs, sim["d"], heat=True),
            f"practical/{query}, slots d_e={sim['d_e']}, {opt} lr {float(lr):g}, random init "
            f"{sim['init_scale']}, {sim['practical_steps']} steps")

    def paper_fig1():
        f1 = s["fig1"]
        add(f"T{f1['T']} prac-{f1['query']} {f1['optimizer']} {f1['lr']:g} (Fig 1)",
            f"T={f1['T']}", fig1_statements([results[j.name] for j in fig1.jobs(f1)], f1["d"]),
            f"practical/{f1['query']}, slots d_e={f1['d_e']}, {f1['optimizer']} lr "
            f"{f1['lr']:g}, {f1['steps']} steps, zero init")

    def paper_fig3():
        f3 = s["fig3"]
        add(f"T{f3['T']} prac-{f3['query']} {f3['optimizer']} {f3['lr']:g} (Fig 3)",
            f"T={f3['T']}", fig1_statements([results[j.name] for j in fig3.jobs(f3)], f3["d"],
                                             heat=True),
            f"practical/{f3['query']}, slots d_e={f3['d_e']}, {f3['optimizer']} lr "
            f"{f3['lr']:g}, {f3['steps']} steps, random init {f3['init_scale']}")

    def paper_ood(key):
        g = s[key]
        groups = by_pe(g, results, pes=[k for k, _ in variants(g)])
        per, s4 = ood_statements(g, groups)
        add(f"T{g['T']} {g['optimizer']} {g['lr']:g} slots (Fig {key[-1]})", f"T={g['T']}",
            {"S4": s4}, f"theory/sum, slots d_e={g['d_e']}, {g['optimizer']} lr {g['lr']:g}, "
            f"{g['steps']} steps")
        for k, v in per.items():
            add(f"T{g['T']} {g['optimizer']} {g['lr']:g} {_short(k)} (Fig {key[-1]})",
                f"T={g['T']}", v,
                f"theory/sum, {pe_label(k)} vs slots d_e={g['d_e']}, {g['optimizer']} "
                f"lr {g['lr']:g}, {g['steps']} steps")

    def paper_long(key):
        g = s[key]
        long = [results[j.name] for j in long_jobs(g)]
        if long:
            _, s4 = ood_statements(g, {"stochastic": long})
            c = long[0].config
            add(f"T{g['T']} {c['optimizer']} {c['lr']:g} slots {c['steps']} (Fig 2 long)",
                f"T={g['T']}", {"S4": s4},
                f"theory/sum, slots d_e={g['d_e']}, {c['optimizer']} lr {c['lr']:g}, "
                f"{c['steps']} steps")

    for opt, lr in sim["opt_lrs"]:
        guarded(sim_ood, opt, lr)
    for query, opt, lr in sim["practical"]:
        guarded(sim_practical, query, opt, lr)
    guarded(paper_fig1)
    guarded(paper_fig3)
    for key in ("fig2", "fig5"):
        guarded(paper_ood, key)
    guarded(paper_long, "fig2")

    lrs, budgets, rok, rval = reduced_map(s["reduced"])
    table = claims_table(s, cols, lrs, budgets, rok)
    measured = {"columns": cols, "reduced": {
        "lrs": lrs.tolist(), "budgets": budgets.tolist(),
        "held": {S: v.tolist() for S, v in rok.items()},
        "value": {S: v.tolist() for S, v in rval.items()},
        "region": {S: region_text(lrs, budgets, v) for S, v in rok.items()}},
        "table_markdown": table}
    inter = interference_table(s["interference"])
    red_q = s["reduced"]["q"]
    measured["interference"] = inter
    checks = [
        check("interference floor (Monte-Carlo, fixed table, q=3) falls as d_e grows: share "
              "of consecutive d_e pairs", float(np.mean(np.diff([x["floor_mc"] for x in inter])
                                                        < 0)) if len(inter) > 1 else 1.0,
              ">=", 1.0),
        check(f"interference at the q={s['interference']['q']} optimum grows with q_test "
              f"(q_test >= {s['interference']['q']}): share of increasing consecutive pairs, "
              "worst d_e",
              min(float(np.mean(np.diff([v for k, v in x["loss_at_q_test"].items()
                                         if int(k) >= s["interference"]["q"]]) > 0))
                  for x in inter), ">=", 1.0,
              note="below the trained q the loss also rises (γ, c tuned for q), so q_test = q "
                   "is the minimum"),
        check("first-order law / Monte-Carlo floor (worst d_e; the law drops higher orders in "
              "c·ε)", min(x["floor_first_order"] / x["floor_mc"] for x in inter), ">=", 0.5),
        check(f"reduced dynamics: S6 (stochastic quicker on q_test) in the one-hot reading, "
              f"share of (lr, budget) cells where it holds, lr <= 2q = {2 * red_q} (the "
              "γ step stable for ever)", float(rok["S6"][lrs <= 2 * red_q].mean()), "<=", 0.0,
              note="slots step lr/(d_e-1) < one-hot lr/(T-1) when d_e > T; above 2q the "
                   "one-hot map, further along, is the first to oscillate"),
    ]
    measured["missing"] = missing
    return measured, checks


def _short(k):
    return "1hot" if k == "onehot" else ("NO" + k[4:] if k.startswith("near") else k)


def draw(s, results, measured, out):
    """Write ``claims.png`` (:func:`.claims_draw.draw_map`), ``claims_map.csv``
    (:func:`.claims_draw.map_rows`) and ``claims.md`` from ``measured`` (:func:`measure`)."""
    red = measured["reduced"]
    lrs, budgets = np.asarray(red["lrs"], float), np.asarray(red["budgets"])
    rok = {S: np.asarray(v, bool) for S, v in red["held"].items()}
    rval = {S: np.asarray(v, float) for S, v in red["value"].items()}
    cols = measured["columns"]
    draw_map(s, cols, lrs, budgets, rok, os.path.join(out, f"{NAME}.png"))
    write_csv(os.path.join(out, f"{NAME}_map.csv"), MAP_COLUMNS,
              map_rows(s, cols, lrs, budgets, rok, rval), float_format=".6g")
    with open(os.path.join(out, f"{NAME}.md"), "w") as fh:
        fh.write(measured["table_markdown"] + "\n")


def run_claims(mode="quick", out=os.path.join("runs", "claims"), *, workers=1, overrides=None,
               log=None) -> dict:
    """The claims map on its own, from Python: ``stsim figures --only claims`` (the figures
    study, :func:`stsim.studies.contract.run_study`, into ``out``; its runs in
    ``<out>/runs``, resumed from there) with ``overrides`` ``{key: value}`` of the claims
    settings and ``workers`` processes. Returns the claims summary."""
    from stsim.studies import figures
    from stsim.studies.contract import run_study
    from stsim.sweep.pool import make_executor
    over = {"only": ["claims"], **{f"claims.{k}": v for k, v in (overrides or {}).items()}}
    ex = make_executor(workers)
    try:
        summary = run_study(figures, out, mode=mode, overrides=over, executor=ex, log=log)
    finally:
        ex.shutdown(wait=True)
    return summary["summaries"]["claims"]
