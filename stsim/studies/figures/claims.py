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

``run_claims(mode, out)`` runs everything and writes ``claims.png``, ``claims_map.csv``
(one row per statement × setting), ``claims.json``, ``claims.csv`` (the histories of its
simulations) and ``claims.md`` (the table); ``stsim figures`` includes it as the figure
``claims`` (``stsim figures --only claims`` runs it alone).
"""
from __future__ import annotations

import os

import numpy as np

from stsim.util.io import write_csv
from stsim.util.plotting import plt, savefig
from stsim.studies.figures.common import Job, check, finish
from stsim.util.stats import fit_linear
from stsim.studies.figures.ood import (block_mass, by_pe, final_stats, is_fixed, long_jobs,
                                       ood_jobs, pe_label, variants)
from stsim.studies.figures import fig1, fig2, fig3, fig5

NAME = "claims"
LINKS = {"fig1": "fig1", "fig2": "fig2", "fig3": "fig3", "fig5": "fig5"}

STATEMENTS = {
    "S1": ("convergence (Fig. 1)", "final training loss <= 1% of initial", "<=", 0.01),
    "S2": ("O(1/t) (Fig. 1)", "R^2 of 1/L over the 2nd half", ">=", 0.99),
    "S3": ("cosines -> 1 (Fig. 1)", "min(cos(W,W*), cos(V,V*))", ">=", 0.99),
    "S4": ("stochastic converges OOD (Fig. 2)", "max over T_test of OOD/initial", "<=", 0.02),
    "S5": ("fixed stays >= 0.15 (Figs. 2, 4)", "min over T_test of fixed OOD loss", ">=", 0.15),
    "S6": ("stochastic quicker on q_test (Fig. 4)",
           "min over q_test of fixed/stochastic (last 20%)", ">", 1.0),
    "S7": ("fixed worse as q_test grows (Fig. 4)", "share of increasing q_test pairs", ">=", 1.0),
    "S8": ("Adam keeps the length advantage (Fig. 5)",
           "min over T_test of fixed/stochastic", ">=", 2.0),
    "S9": ("heat maps block-diagonal (Fig. 3)", "max(W, V share outside block)", "<=", 0.05),
}

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


def _ok(runs):
    return all(r.success for r in runs)


def _tail(runs, key, frac=0.2):
    st = runs[0].history["step"]
    m = st >= (1 - frac) * st[-1]
    return float(np.mean([r.history[key][m].mean() for r in runs]))


def ood_statements(s, groups):
    """Values of S5–S8 for one OOD group (same T, optimiser, lr, steps): ``({reading:
    {S: value}}`` for each fixed reading, S4 of the group's stochastic PE)``."""
    st = groups["stochastic"]
    s4 = max(float((final_stats(st, f"val/T={t}")[0] / final_stats(st, f"val/T={t}")[1]).max())
             for t in s["T_test"]) if _ok(st) else float("nan")
    out = {}
    nan = float("nan")
    for k in [k for k in groups if is_fixed(k)]:
        fx = groups[k]
        v = {"S5": nan, "S6": nan, "S7": nan}
        if _ok(fx):      # S5, S7 are about the fixed PE alone; S6, S8 need both
            v["S5"] = min(float(final_stats(fx, f"val/T={t}")[0].min()) for t in s["T_test"])
            fq = [float(final_stats(fx, f"val/q={qt}")[0].mean()) for qt in s["q_test"]]
            v["S7"] = float(np.mean(np.diff(fq) > 0))
        if _ok(fx) and _ok(st):
            v["S6"] = min(_tail(fx, f"val/q={qt}") / _tail(st, f"val/q={qt}")
                          for qt in s["q_test"])
        if s["optimizer"] == "adam":
            v["S8"] = min(float(final_stats(fx, f"val/T={t}")[0].mean() /
                                final_stats(st, f"val/T={t}")[0].mean())
                          for t in s["T_test"]) if _ok(fx) and _ok(st) else nan
        out[k] = v
    return out, s4


def fig1_statements(runs, d, heat=False):
    """S1–S3 (and S9 for randomly initialised runs) of one practical-model setting."""
    if not _ok(runs):
        return {S: float("nan") for S in (("S1", "S2", "S3", "S9") if heat else
                                           ("S1", "S2", "S3"))}
    step = runs[0].history["step"]
    half = step >= step[-1] / 2
    s1 = max(r.final("loss") / r.history["loss"][0] for r in runs)
    s2 = min(fit_linear(step[half], 1.0 / r.history["loss"][half]).r2 for r in runs)
    s3 = min(min(r.final("cos_W"), r.final("cos_V")) for r in runs)
    out = {"S1": float(s1), "S2": float(s2), "S3": float(s3)}
    if heat:
        m = [block_mass(r.W, r.V, d) for r in runs]
        out["S9"] = float(max(max(x["W_outside_pe_block"], x["V_outside_token_block"])
                              for x in m))
    return out


def held(S, value):
    """Whether statement ``S`` (a key of ``STATEMENTS``) holds for ``value``, i.e.
    ``value <op> threshold`` with the statement's op and threshold; ``False`` for ``None`` or a
    non-finite value (NaN: a run of that setting did not succeed)."""
    if value is None or not np.isfinite(value):
        return False
    _, _, op, thr = STATEMENTS[S]
    return {"<=": value <= thr, ">=": value >= thr, ">": value > thr}[op]


# --------------------------------------------------------------------------------------
# reduced dynamics (dense)
# --------------------------------------------------------------------------------------
def reduced_map(r):
    """S1, S2, S4, S5, S6, S7 on a grid ``lr × step budget`` from the exact reduced
    dynamics (theory model, sum query, population GD). Returns ``(lrs, budgets, {S: bool
    array (n_lr, n_budget)}, {S: value array})``."""
    from stsim.theory.reduced import ood_loss_onehot, reduced_gd, reduced_loss
    T, q, d, de = r["T"], r["q"], r["d"], r["d_e"]
    lrs = np.asarray(r["lrs"], float)
    ev = int(r["record_every"])
    slots = reduced_gd(T, q, d, lrs, r["max_steps"], pe="stochastic", d_e=de, record_every=ev)
    oneh = reduced_gd(T, q, d, lrs, r["max_steps"], pe="onehot", record_every=ev)
    step = slots.step
    budgets = np.unique(np.geomspace(max(ev * 10, 100), r["max_steps"], 40).astype(int) // ev * ev)
    idx = np.searchsorted(step, budgets)
    L0 = reduced_loss(0.0, 0.0, T, q, d)
    val = {}
    val["S1"] = slots.loss[:, idx] / L0
    inv = 1.0 / slots.loss
    s2 = np.empty((lrs.size, budgets.size))
    for j, b in enumerate(budgets):
        m = (step >= b / 2) & (step <= b)
        s2[:, j] = [fit_linear(step[m], inv[i, m]).r2 for i in range(lrs.size)]
    val["S2"] = s2
    a_s, g_s = slots.a[:, idx], slots.gamma[:, idx]
    a_o, g_o = oneh.a[:, idx], oneh.gamma[:, idx]
    val["S4"] = np.max([reduced_loss(a_s, g_s, Tt, q, d) / reduced_loss(0.0, 0.0, Tt, q, d)
                        for Tt in r["T_test"]], axis=0)
    val["S5"] = np.min([ood_loss_onehot(a_o, g_o, T, Tt, q, d) for Tt in r["T_test"]], axis=0)
    # S6 at the budget's end point (population GD has no noise to average over)
    val["S6"] = np.min([reduced_loss(a_o, g_o, T, qt, d) / reduced_loss(a_s, g_s, T, qt, d)
                        for qt in r["q_test"]], axis=0)
    fq = np.array([reduced_loss(a_o, g_o, T, qt, d) for qt in r["q_test"]])
    val["S7"] = np.mean(np.diff(fq, axis=0) > 0, axis=0)
    ok = {S: np.vectorize(lambda v, S=S: held(S, v))(v) for S, v in val.items()}
    return lrs, budgets, ok, val


def _region_text(lrs, budgets, ok):
    """Where a boolean (lr × budget) map holds, in words: per lr the smallest budget from
    which it holds at every larger budget."""
    if ok.all():
        return "everywhere on the grid"
    if not ok.any():
        return "nowhere on the grid"
    parts = []
    for i, lr in enumerate(lrs):
        row = ok[i]
        if row.all():
            parts.append((lr, budgets[0]))
        elif row[-1]:
            k = len(row) - np.argmax(~row[::-1])
            parts.append((lr, budgets[k]))
        elif row.any():
            parts.append((lr, None))
    keep = parts[:: max(1, len(parts) // 6)]
    txt = ", ".join(f"lr {lr:g}: t ≥ {b}" if b is not None else f"lr {lr:g}: in a window only"
                    for lr, b in keep)
    never = [lr for i, lr in enumerate(lrs) if not ok[i].any()]
    if never:
        txt += f"; never for lr ∈ [{min(never):g}, {max(never):g}]"
    return txt


def interference_table(r):
    """The near-orthogonal interference floor (:mod:`stsim.theory.interference`): for each
    ``d_e``, a fixed table of ``T`` unit vectors (seeded), the Monte-Carlo floor over ``c``
    at the trained ``q`` (optimal γ) beside the first-order law, and the loss at that
    ``(c*, γ*)`` on each ``q_test``."""
    from stsim.theory.interference import (interference_floor_approx, interference_floor_mc,
                                           interference_loss_mc, random_table)
    rows = []
    for de in r["d_e"]:
        rng = np.random.default_rng(12345 + int(de))
        tab = random_table(rng, r["T"], int(de))
        c, L = interference_floor_mc(r["T"], r["q"], r["d"], tab, n_mc=r["n_mc"], rng=rng)
        _, gam = interference_loss_mc(c, r["T"], r["q"], r["d"], tab, n_mc=r["n_mc"], rng=rng)
        ca, La = interference_floor_approx(r["T"], r["q"], r["d"], int(de))
        by_q = {}
        for qt in r["q_test"]:
            Lq, _ = interference_loss_mc(c, r["T"], qt, r["d"], tab, gamma=float(gam),
                                         n_mc=r["n_mc"], rng=rng)
            by_q[str(qt)] = float(Lq)
        rows.append({"d_e": int(de), "c_mc": c, "floor_mc": L, "gamma_mc": float(gam),
                     "c_first_order": ca, "floor_first_order": La,
                     "floor_times_d_e": L * int(de), "loss_at_q_test": by_q})
    return rows


# --------------------------------------------------------------------------------------
# analysis
# --------------------------------------------------------------------------------------
def analyse(s, results, out, mode):
    """Build the claims map, write its files into ``out`` and return the summary.

    One column per simulated setting (the ``T = 20`` grid, the practical runs, the linked
    figure runs) with its values of S1–S9; a block whose runs are missing from ``results`` is
    left out and named in ``measured["missing"]``. Beside them the (lr × step budget) maps of
    :func:`reduced_map` and the near-orthogonal :func:`interference_table`. Writes
    ``claims.png``, ``claims_map.csv`` (one row per statement × column and per statement ×
    reduced-grid cell), ``claims.md`` (:func:`claims_table`), and ``claims.csv`` /
    ``claims.json`` (:func:`.common.finish`; ``measured``: ``columns``, ``reduced`` (``lrs``,
    ``budgets``, ``held``, ``value``, ``region``), ``table_markdown``, ``interference``,
    ``missing``). Its checks are on the interference floor (falls with ``d_e``, grows with
    ``q_test``, first-order law vs Monte-Carlo) and on S6 in the reduced dynamics."""
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
    _draw(s, cols, lrs, budgets, rok, out)

    rows = []
    for c in cols:
        for S, v in c["values"].items():
            rows.append([S, STATEMENTS[S][0], c["label"], c["setting"], "simulation", v,
                         held(S, v)])
    red = s["reduced"]
    for S in rok:
        for i, lr in enumerate(lrs):
            for j, b in enumerate(budgets):
                rows.append([S, STATEMENTS[S][0], f"reduced T{red['T']} lr {lr:g} t {b}",
                             f"theory/sum population GD, one-hot n=T={red['T']} / slots "
                             f"d_e={red['d_e']}, lr {lr:g}, {b} steps", "reduced",
                             float(rval[S][i, j]), bool(rok[S][i, j])])
    os.makedirs(out, exist_ok=True)
    write_csv(os.path.join(out, f"{NAME}_map.csv"),
              ["statement", "name", "column", "setting", "source", "value", "held"], rows,
              float_format=".6g")
    table = claims_table(s, cols, lrs, budgets, rok)
    with open(os.path.join(out, f"{NAME}.md"), "w") as fh:
        fh.write(table + "\n")
    measured = {"columns": cols, "reduced": {
        "lrs": lrs.tolist(), "budgets": budgets.tolist(),
        "held": {S: v.tolist() for S, v in rok.items()},
        "value": {S: v.tolist() for S, v in rval.items()},
        "region": {S: _region_text(lrs, budgets, v) for S, v in rok.items()}},
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
    runs = {j.name: results[j.name] for j in jobs(s) if j.name in results}
    return finish(NAME, out, s, mode, runs, checks, measured)


def _short(k):
    return "1hot" if k == "onehot" else ("NO" + k[4:] if k.startswith("near") else k)


def claims_table(s, cols, lrs, budgets, rok) -> str:
    """Markdown: statement | reduced-dynamics region | simulated: held in / failed in."""
    red = s["reduced"]
    lines = ["| statement | measure, target | reduced dynamics (theory/sum, population GD, "
             f"T={red['T']}) | simulation: held | simulation: failed |",
             "|---|---|---|---|---|"]
    for S, (name, what, op, thr) in STATEMENTS.items():
        reg = _region_text(lrs, budgets, rok[S]) if S in rok else "— (no reduction)"
        h = [f"{c['label']} ({c['values'][S]:.3g})" for c in cols
             if S in c["values"] and held(S, c["values"][S])]
        f = [f"{c['label']} ({c['values'][S]:.3g})" for c in cols
             if S in c["values"] and not held(S, c["values"][S])]
        lines.append(f"| {S} {name} | {what} {op} {thr:g} | {reg} | {'; '.join(h) or '—'} | "
                     f"{'; '.join(f) or '—'} |")
    return "\n".join(lines)


def _draw(s, cols, lrs, budgets, rok, out):
    Ss = list(STATEMENTS)
    fig = plt.figure(figsize=(max(12, 0.32 * len(cols) + 4), 10.5))
    gs = fig.add_gridspec(2, 6, height_ratios=[1.35, 1])
    ax = fig.add_subplot(gs[0, :])
    M = np.full((len(Ss), len(cols)), np.nan)
    for j, c in enumerate(cols):
        for S, v in c["values"].items():
            M[Ss.index(S), j] = 1.0 if held(S, v) else 0.0
    from matplotlib.colors import ListedColormap
    cmap = ListedColormap(["#d7301f", "#1a9850"]).with_extremes(bad="#eeeeee")
    ax.imshow(np.ma.masked_invalid(M), cmap=cmap, vmin=0, vmax=1, aspect="auto",
              interpolation="nearest")
    for j, c in enumerate(cols):
        for S, v in c["values"].items():
            ax.text(j, Ss.index(S), f"{v:.2g}" if np.isfinite(v) else "div", ha="center",
                    va="center", fontsize=5, color="white")
    ax.set_yticks(range(len(Ss)), [f"{S} {STATEMENTS[S][0]}" for S in Ss], fontsize=7)
    ax.set_xticks(range(len(cols)), [c["label"] for c in cols], rotation=70, ha="right",
                  fontsize=6)
    ax.set_title("simulated settings: green = statement held, red = failed, grey = not "
                 "applicable (cell: measured value; 1hot = fixed one-hot, NOk = fixed "
                 "near-orthogonal d_e=k, prac = practical model)", fontsize=8)
    red = s["reduced"]
    for i, S in enumerate(rok):
        a = fig.add_subplot(gs[1, i])
        a.pcolormesh(budgets, lrs, rok[S].astype(float), cmap=cmap, vmin=0, vmax=1,
                     shading="nearest")
        a.set_xscale("log")
        a.set_title(f"{S}: {STATEMENTS[S][0]}".replace(" (", "\n("), fontsize=7)
        a.set_xlabel("step budget", fontsize=7)
        a.tick_params(labelsize=6)
        if i == 0:
            a.set_ylabel("lr (population GD)", fontsize=7)
    fig.suptitle(f"Claims map. Top: simulations (T={s['sim']['T']} grid and the T=200 figure "
                 f"runs). Bottom: exact reduced dynamics, theory model, sum query, "
                 f"T={red['T']}, slots d_e={red['d_e']}, one-hot n=T (green = held at that "
                 "lr and step budget)", fontsize=9)
    fig.tight_layout()
    savefig(fig, os.path.join(out, f"{NAME}.png"), dpi=110)


def run_claims(mode="quick", out=os.path.join("runs", "claims"), *, workers=1, cache=None,
               overrides=None, log=None) -> dict:
    """Run the claims map on its own (plain function; the CLI calls it): resolve the
    settings of ``mode`` (with ``overrides`` ``{key: value}``), train the simulations in
    the pool, write ``claims.png/.csv/.json/.md`` and the ``claims_map.csv`` into ``out``.
    Returns the summary."""
    from stsim.studies.figures import resolve_all
    from stsim.studies.figures.common import run_jobs
    s = resolve_all(mode, {f"claims.{k}": v for k, v in (overrides or {}).items()},
                    only=["claims"])["claims"]
    cache = cache if cache is not None else os.path.join(out, "runs")
    results = run_jobs(jobs(s), workers=workers, cache=cache, log=log)
    return analyse(s, results, out, mode)

