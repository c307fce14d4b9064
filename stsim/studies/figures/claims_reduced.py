"""The claims map where an exact reduction exists: the statements S1, S2, S4–S7 on a dense
grid ``lr × step budget`` from the reduced (a, γ) dynamics of the theory model with the
sum query under population GD (:func:`reduced_map`, one call for every lr), said in words
(:func:`region_text`), and the near-orthogonal interference floor
(:func:`interference_table`, :mod:`stsim.theory.interference`).
"""
from __future__ import annotations

import numpy as np

from stsim.util.stats import fit_linear
from stsim.studies.figures.claims_statements import held

__all__ = ["reduced_map", "region_text", "interference_table"]


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


def region_text(lrs, budgets, ok):
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
