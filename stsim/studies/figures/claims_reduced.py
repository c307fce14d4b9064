"""The claims map where an exact reduction exists: the statements S1, S2, S4–S7 on a dense
grid ``lr × step budget`` from the reduced (a, γ) dynamics of the theory model with the
sum query under population GD (:func:`reduced_map`, one call for every lr), each cell
labelled stable or unstable (:mod:`stsim.studies.figures.stability`: above the bound
``2q``, an oscillating
trajectory, or a verdict that changes when the lr moves by one unit in the last place),
said in words (:func:`region_text`), and the near-orthogonal interference floor
(:func:`interference_table`, :mod:`stsim.theory.interference`).
"""
from __future__ import annotations

import functools
import json

import numpy as np

from stsim.core.reduced import LEARNED
from stsim.theory.interference import (interference_floor_approx, interference_floor_mc,
                                       interference_loss_mc, random_table)
from stsim.theory.reduced import ood_loss_onehot, reduced_gd, reduced_loss
from stsim.util.stats import fit_linear
from stsim.studies.figures.claims_statements import STATEMENTS
from stsim.studies.figures.stability import reduced_stability
from stsim.util.verdict import passes

__all__ = ["reduced_map", "region_text", "interference_table", "fits_reduced",
           "REDUCED_STATEMENTS"]

REDUCED_STATEMENTS = ("S1", "S2", "S4", "S5", "S6", "S7")


def _values(r, lrs, budgets):
    """The statements' values and the oscillation flags at each (lr, budget)."""
    T, q, d, de = r["T"], r["q"], r["d"], r["d_e"]
    ev = int(r["record_every"])
    step, a_s, g_s, loss_s, osc_s = reduced_stability(T, q, d, lrs, r["max_steps"],
                                                      pe="stochastic", d_e=de,
                                                      record_every=ev)
    _, a_o, g_o, _, osc_o = reduced_stability(T, q, d, lrs, r["max_steps"], pe="onehot",
                                              record_every=ev)
    idx = np.searchsorted(step, budgets)
    L0 = reduced_loss(0.0, 0.0, T, q, d)
    val = {"S1": loss_s[:, idx] / L0}
    inv = 1.0 / loss_s
    s2 = np.empty((lrs.size, budgets.size))
    for j, b in enumerate(budgets):
        m = (step >= b / 2) & (step <= b)
        s2[:, j] = [fit_linear(step[m], inv[i, m]).r2 for i in range(lrs.size)]
    val["S2"] = s2
    As, Gs, Ao, Go = a_s[:, idx], g_s[:, idx], a_o[:, idx], g_o[:, idx]
    val["S4"] = np.max([reduced_loss(As, Gs, Tt, q, d) / reduced_loss(0.0, 0.0, Tt, q, d)
                        for Tt in r["T_test"]], axis=0)
    val["S5"] = np.min([ood_loss_onehot(Ao, Go, T, Tt, q, d) for Tt in r["T_test"]], axis=0)
    # S6 at the budget's end point (population GD has no noise to average over)
    val["S6"] = np.min([reduced_loss(Ao, Go, T, qt, d) / reduced_loss(As, Gs, T, qt, d)
                        for qt in r["q_test"]], axis=0)
    fq = np.array([reduced_loss(Ao, Go, T, qt, d) for qt in r["q_test"]])
    val["S7"] = np.min(fq[1:] / fq[:-1], axis=0)
    os_, oo = osc_s[:, idx], osc_o[:, idx]
    osc = {"S1": os_, "S2": os_, "S4": os_, "S5": oo, "S6": os_ | oo, "S7": oo}
    return val, osc


def _cached(fn):
    """``fn(r)`` computed once per settings ``r`` (a JSON-ready dict; its ``lrs`` as
    floats): the key is the settings as sorted JSON."""
    @functools.lru_cache(maxsize=4)
    def by_key(key):
        return fn(json.loads(key))

    @functools.wraps(fn)
    def cached(r):
        return by_key(json.dumps({k: (list(map(float, v)) if k == "lrs" else v)
                                  for k, v in r.items()}, sort_keys=True))
    return cached


def _held(S, v):
    _, _, op, thr = STATEMENTS[S]
    return np.vectorize(lambda x: passes(x, op, thr))(v)


@_cached
def reduced_map(r):
    """S1, S2, S4, S5, S6, S7 on a grid ``lr × step budget`` from the exact reduced
    dynamics (theory model, sum query, population GD; cached per settings). Returns
    ``(lrs, budgets, held, value, unstable, why)``: ``{S: (n_lr, n_budget) array}`` for
    the first four (``held`` and ``unstable`` boolean) and ``why[S]`` the number of
    unstable cells per reason (above the bound ``2q``; an oscillating trajectory; a
    verdict changed by the twin, ``lr`` moved one unit in the last place)."""
    lrs = np.asarray(r["lrs"], float)
    ev = int(r["record_every"])
    budgets = np.unique(np.geomspace(max(ev * 10, 100), r["max_steps"], 40).astype(int)
                        // ev * ev)
    val, osc = _values(r, lrs, budgets)
    tval, _ = _values(r, np.nextafter(lrs, np.inf), budgets)
    bound = 2.0 * r["q"]
    held, unstable, why = {}, {}, {}
    for S in REDUCED_STATEMENTS:
        held[S] = _held(S, val[S])
        flip = held[S] != _held(S, tval[S])
        above = np.broadcast_to((lrs > bound)[:, None], held[S].shape)
        unstable[S] = above | osc[S] | flip
        why[S] = {"above_bound": int(above.sum()), "oscillating": int((osc[S] & ~above).sum()),
                  "twin_flips": int((flip & ~above & ~osc[S]).sum())}
    return lrs, budgets, held, val, unstable, why


def region_text(lrs, budgets, ok, unstable=None):
    """Where a boolean (lr × budget) map holds, in words: per lr the smallest budget from
    which it holds at every larger budget; with ``unstable``, only stable cells count and
    the unstable ones are named."""
    uns = np.zeros_like(ok, dtype=bool) if unstable is None else np.asarray(unstable, bool)
    stable_ok = ok & ~uns
    parts = []
    for i, lr in enumerate(lrs):
        row, u = stable_ok[i], uns[i]
        if u.all():
            continue
        if row[~u].all():
            parts.append((lr, budgets[np.argmax(~u)]))
        elif row[-1]:
            k = len(row) - np.argmax(~row[::-1])
            parts.append((lr, budgets[k]))
        elif row.any():
            parts.append((lr, None))
    if not parts:
        txt = "nowhere on the grid"
    elif len(parts) == len(lrs) and all(b == budgets[0] for _, b in parts):
        txt = "everywhere on the grid"
    else:
        keep = parts[:: max(1, len(parts) // 6)]
        txt = ", ".join(f"lr {lr:g}: t ≥ {b}" if b is not None else
                        f"lr {lr:g}: in a window only" for lr, b in keep)
        never = [lr for i, lr in enumerate(lrs) if not stable_ok[i].any() and not uns[i].all()]
        if never:
            txt += f"; never for lr ∈ [{min(never):g}, {max(never):g}]"
    if uns.any():
        full = [lr for i, lr in enumerate(lrs) if uns[i].all()]
        part = [lr for i, lr in enumerate(lrs) if uns[i].any() and not uns[i].all()]
        bits = []
        if full:
            bits.append(f"lr ∈ [{min(full):g}, {max(full):g}]")
        if part:
            bits.append(f"some budgets at lr ∈ [{min(part):g}, {max(part):g}]")
        txt += f" (unstable, not counted: {'; '.join(bits)})"
    return txt


@_cached
def interference_table(r):
    """The near-orthogonal interference floor (:mod:`stsim.theory.interference`): for each
    ``d_e``, a fixed table of ``T`` unit vectors (seeded), the Monte-Carlo floor over ``c``
    at the trained ``q`` (optimal γ) beside the first-order law, and the loss at that
    ``(c*, γ*)`` on each ``q_test`` as the mean of four independent Monte-Carlo estimates
    with its standard error (``floor_mc_se``: that of the trained ``q``, which must be in
    ``q_test``). Cached per settings."""
    rows = []
    for de in r["d_e"]:
        rng = np.random.default_rng(12345 + int(de))
        tab = random_table(rng, r["T"], int(de))
        c, L = interference_floor_mc(r["T"], r["q"], r["d"], tab, n_mc=r["n_mc"], rng=rng)
        _, gam = interference_loss_mc(c, r["T"], r["q"], r["d"], tab, n_mc=r["n_mc"], rng=rng)
        ca, La = interference_floor_approx(r["T"], r["q"], r["d"], int(de))
        by_q, se_q = {}, {}
        for qt in r["q_test"]:
            reps = [interference_loss_mc(c, r["T"], qt, r["d"], tab, gamma=float(gam),
                                         n_mc=max(1, r["n_mc"] // 4), rng=rng)[0]
                    for _ in range(4)]
            by_q[str(qt)] = float(np.mean(reps))
            se_q[str(qt)] = float(np.std(reps, ddof=1) / 2.0)
        rows.append({"d_e": int(de), "c_mc": c, "floor_mc": L, "gamma_mc": float(gam),
                     "floor_mc_se": se_q.get(str(r["q"]), float("nan")),
                     "c_first_order": ca, "floor_first_order": La,
                     "floor_times_d_e": L * int(de), "loss_at_q_test": by_q,
                     "loss_at_q_test_se": se_q})
    return rows


@_cached
def fits_reduced(r):
    """Fixed one-hot PEs that fit in distribution, in the exact reduced dynamics
    (population GD, theory model, T of ``r``, lr 5 and 6 ≤ 2q), with the sum and the mean
    query: the first step where the in-distribution loss is ≤ 2 % of ``L(0)`` and, from
    there to ``max_steps``, the largest value of S6 (fixed / slots at every ``q_test``,
    min over ``q_test``) and of S7 (smallest consecutive ratio over ``q_test``) and the
    share of records where each holds. With the mean query the selected logits at an
    unseen ``q_test`` are ``a / q_test`` (the query is the mean of ``q_test`` encodings).
    Cached per settings."""
    T, q, d, de, ev = r["T"], r["q"], r["d"], r["d_e"], int(r["record_every"])
    lrs = [lr for lr in (5.0, 6.0) if lr <= 2 * q]
    rows = []
    for query in ("sum", "mean"):
        o = reduced_gd(T, q, d, lrs, r["max_steps"], pe="onehot", query=query, record_every=ev)
        sl = reduced_gd(T, q, d, lrs, r["max_steps"], pe="stochastic", d_e=de, query=query,
                        record_every=ev)
        L0 = reduced_loss(0.0, 0.0, T, q, d, query=query)
        for i, lr in enumerate(lrs):
            fit = o.loss[i] / L0 <= LEARNED
            if not fit.any():
                rows.append({"query": query, "lr": lr, "first_fit_step": None})
                continue
            k = int(np.argmax(fit))
            fq = np.array([reduced_loss(o.a[i, k:], o.gamma[i, k:], T, qt, d, query=query)
                           for qt in r["q_test"]])
            sq = np.array([reduced_loss(sl.a[i, k:], sl.gamma[i, k:], T, qt, d, query=query)
                           for qt in r["q_test"]])
            s6 = (fq / sq).min(axis=0)
            s7 = (fq[1:] / fq[:-1]).min(axis=0)
            rows.append({"query": query, "lr": lr, "first_fit_step": int(o.step[k]),
                         "steps": int(o.step[-1]), "S6_max": float(s6.max()),
                         "S6_held_share": float(np.mean(s6 > 1)),
                         "S7_max": float(s7.max()), "S7_held_share": float(np.mean(s7 > 1)),
                         "loss_by_q_test_at_fit": dict(zip(map(str, r["q_test"]),
                                                           map(float, fq[:, 0])))})
    return rows
