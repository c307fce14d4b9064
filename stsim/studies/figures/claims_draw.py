"""The claims map's outputs: the markdown table (:func:`claims_table`), the picture
(:func:`draw_map`: simulated settings × statements on top, the reduced-dynamics maps
below) and ``claims_map.csv`` (:func:`map_rows`: one row per statement × simulated
setting and per statement × reduced-grid cell), each cell with its value, standard error,
verdict, margin and stability label.
"""
from __future__ import annotations

import textwrap

import numpy as np

from stsim.core.reduced import LEARNED
from stsim.studies.figures.claims_statements import STATEMENTS

__all__ = ["MAP_COLUMNS", "claims_table", "draw_map", "map_rows", "cell_state",
           "fits_markdown"]

MAP_COLUMNS = ("statement", "name", "column", "setting", "source", "value", "se", "verdict",
               "margin_se", "stability")
STATES = ("failed", "held", "inconclusive", "unstable")
COLORS = ("#d7301f", "#1a9850", "#fdae61", "#8073ac")


def cell_state(c) -> str:
    """``"unstable"`` for a cell labelled so, else its verdict."""
    return "unstable" if c["stability"] != "stable" else c["verdict"]


def map_rows(s, cells, lrs, budgets, rok, runs, rval) -> list:
    """The rows of ``claims_map.csv`` (columns ``MAP_COLUMNS``): every simulated cell, then
    every cell of the reduced (lr × budget) grid (exact: ``se`` 0)."""
    rows = [[c["statement"], STATEMENTS[c["statement"]][0], c["column"], c["setting"],
             "simulation", c["measured"], c["se"], c["verdict"], c["margin_se"],
             c["stability"]] for c in cells]
    red = s["reduced"]
    for S in rok:
        for i, lr in enumerate(lrs):
            for j, b in enumerate(budgets):
                u = bool(runs[S][i, j])
                rows.append([S, STATEMENTS[S][0], f"reduced T{red['T']} lr {lr:g} t {b}",
                             f"theory/sum population GD, one-hot n=T={red['T']} / slots "
                             f"d_e={red['d_e']}, lr {lr:g}, {b} steps", "reduced",
                             float(rval[S][i, j]), 0.0,
                             "inconclusive" if u else ("held" if rok[S][i, j] else "failed"),
                             "", "unstable" if u else "stable"])
    return rows


def _cell_text(c):
    m = c["margin_se"]
    margin = "" if not np.isfinite(m) else f", {m:+.1f} SE"
    return f"{c['column']} ({c['measured']:.3g}{margin})"


def claims_table(s, cells, red) -> str:
    """Markdown: statement | reduced-dynamics region (stable cells) | simulation: held /
    failed / inconclusive / unstable, each setting with its value and margin (in standard
    errors from the threshold; positive on the side where the statement holds)."""
    lines = ["| statement | measure, target | reduced dynamics (theory/sum, population GD, "
             f"T={s['reduced']['T']}; exact) | simulation: held | simulation: failed | "
             "simulation: inconclusive (within its critical value: t, S - 1 d.o.f.) | simulation: "
             "unstable (not counted) |",
             "|---|---|---|---|---|---|---|"]
    for S, (name, what, op, thr) in STATEMENTS.items():
        reg = red["region"].get(S, "— (no reduction)")
        groups = {k: [] for k in STATES}
        for c in cells:
            if c["statement"] == S:
                groups[cell_state(c)].append(_cell_text(c))
        lines.append(f"| {S} {name} | {what} {op} {thr:g} | {reg} | "
                     + " | ".join("; ".join(groups[k]) or "—"
                                  for k in ("held", "failed", "inconclusive", "unstable"))
                     + " |")
    return "\n".join(lines)


def draw_map(s, cols, cells, lrs, budgets, rok, runs, path):
    """Draw the claims map to ``path`` (PNG)."""
    from stsim.util.plotting import plt, savefig   # on drawing only
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch
    Ss = list(STATEMENTS)
    labels = [c["label"] for c in cols]
    fig = plt.figure(figsize=(max(12, 0.32 * len(cols) + 4), 10.5))
    gs = fig.add_gridspec(2, 6, height_ratios=[1.35, 1])
    ax = fig.add_subplot(gs[0, :])
    M = np.full((len(Ss), len(cols)), np.nan)
    cmap = ListedColormap(list(COLORS)).with_extremes(bad="#eeeeee")
    for c in cells:
        i, j = Ss.index(c["statement"]), labels.index(c["column"])
        M[i, j] = STATES.index(cell_state(c))
        v = c["measured"]
        ax.text(j, i, f"{v:.2g}" if np.isfinite(v) else "div", ha="center", va="center",
                fontsize=5, color="white")
    ax.imshow(np.ma.masked_invalid(M), cmap=cmap, vmin=-0.5, vmax=3.5, aspect="auto",
              interpolation="nearest")
    ax.set_yticks(range(len(Ss)), [f"{S} {STATEMENTS[S][0]}" for S in Ss], fontsize=7)
    ax.set_xticks(range(len(cols)), labels, rotation=70, ha="right", fontsize=6)
    ax.set_title("simulated settings (cell: measured value; 1hot = fixed one-hot, NOk = fixed "
                 "near-orthogonal d_e=k, prac = practical model; grey: not applicable)",
                 fontsize=8)
    ax.legend(handles=[Patch(color=c, label=k) for c, k in zip(COLORS, STATES)], fontsize=6,
              loc="upper right", bbox_to_anchor=(1.0, 1.12), ncol=4)
    red = s["reduced"]
    for i, S in enumerate(rok):
        a = fig.add_subplot(gs[1, i])
        state = np.where(runs[S], 3.0, np.where(rok[S], 1.0, 0.0))
        a.pcolormesh(budgets, lrs, state, cmap=cmap, vmin=-0.5, vmax=3.5, shading="nearest")
        a.set_xscale("log")
        a.set_title(textwrap.fill(f"{S}: {STATEMENTS[S][0]}", 24), fontsize=6)
        a.set_xlabel("step budget", fontsize=7)
        a.tick_params(labelsize=6)
        if i == 0:
            a.set_ylabel("lr (population GD)", fontsize=7)
    fig.suptitle(f"Claims map. Top: simulations (T={s['sim']['T']} grid and the T=200 figure "
                 f"runs). Bottom: exact reduced dynamics, theory model, sum query, "
                 f"T={red['T']}, slots d_e={red['d_e']}, one-hot n=T (green held, red failed, "
                 "purple unstable: lr above 2q, oscillating, or changed by a 1-ulp lr)",
                 fontsize=9)
    fig.tight_layout()
    savefig(fig, path, dpi=110)


def fits_markdown(cells, fits, inter, L0, q) -> str:
    """Markdown: which fixed PEs fit in distribution (≤ 2 % of ``L(0)``), and whether S6 /
    S7 hold for them — the simulated fixed readings (their ``FIT`` cells), the exact
    reduced one-hot dynamics with the sum and the mean query (``fits``:
    :func:`.claims_reduced.fits_reduced`), and near-orthogonal tables at the ``W_ee = cI``
    optimum of the Monte-Carlo interference table (``inter``; over the ``q_test`` other
    than the trained ``q``) — then the S6 / S7 cells that held only where their fixed PE
    does not fit."""
    by_col = {}
    for c in cells:
        by_col.setdefault(c["column"], {})[c["statement"]] = c
    lines = ["| fixed PE (setting) | fits in distribution (≤ 2 % of L(0)) | S6 stochastic "
             "quicker on q_test | S7 fixed worse as q_test grows |", "|---|---|---|---|"]

    def show(c):
        if c is None:
            return "—"
        if not np.isfinite(c["measured"]):
            return f"{cell_state(c)} (not measured: a run diverged)"
        m = f", {c['margin_se']:+.1f} SE" if np.isfinite(c["margin_se"]) else ", no SE"
        return f"{cell_state(c)} ({c['measured']:.3g}{m})"
    for col, cs in by_col.items():
        if "FIT" in cs:
            lines.append(f"| {col} | {show(cs['FIT'])} | {show(cs.get('S6'))} | "
                         f"{show(cs.get('S7'))} |")
    for f in fits:
        if f["first_fit_step"] is None:
            lines.append(f"| one-hot, {f['query']} query, population GD lr {f['lr']:g} (exact) "
                         "| not within the budget | — | — |")
            continue
        lines.append(
            f"| one-hot, {f['query']} query, population GD lr {f['lr']:g} (exact) | from step "
            f"{f['first_fit_step']} | held at {f['S6_held_share']:.0%} of the steps "
            f"{f['first_fit_step']}–{f['steps']} (largest value {f['S6_max']:.3g}) | held at "
            f"{f['S7_held_share']:.0%} (largest {f['S7_max']:.3g}) |")
    for x in inter:
        rel = x["floor_mc"] / L0
        ks = [k for k in sorted(x["loss_at_q_test"], key=int) if int(k) != q]
        L = [x["loss_at_q_test"][k] for k in ks]
        S = [x["loss_at_q_test_se"][k] for k in ks]
        j = int(np.argmin([b / a for a, b in zip(L[:-1], L[1:])]))
        s7 = L[j + 1] / L[j]
        se = s7 * np.hypot(S[j] / L[j], S[j + 1] / L[j + 1])
        lines.append(f"| near-orth. d_e={x['d_e']} at its W_ee = cI optimum (Monte-Carlo) | "
                     f"{'yes' if rel <= LEARNED else 'no'} (floor {rel:.2%} of L(0)) | — (no "
                     f"dynamics) | smallest consecutive ratio over q_test {','.join(ks)}: "
                     f"{s7:.3g} ± {se:.2g} (q_test {ks[j]} → {ks[j + 1]}) |")
    held = [(f"{c['column']} ({c['statement']})", cell_state(cs["FIT"]) == "held")
            for cs in by_col.values() for c in cs.values() if c["statement"] in ("S6", "S7")
            and cell_state(c) == "held" and "FIT" in cs]
    only = [text for text, fits in held if not fits]
    fit_held = [text for text, fits in held if fits]
    lines += ["", "S6/S7 held where the fixed PE does **not** fit in distribution (the "
              "statement holds only through its floor): " + ("; ".join(only) or "none") + ".",
              "", "S6/S7 held where the fixed PE fits: " + ("; ".join(fit_held) or "none") + "."]
    return "\n".join(lines)
