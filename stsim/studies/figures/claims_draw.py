"""The claims map's outputs: the markdown table (:func:`claims_table`), the picture
(:func:`draw_map`: simulated settings × statements on top, the reduced-dynamics maps
below) and ``claims_map.csv`` (:func:`map_rows`: one row per statement × simulated
setting and per statement × reduced-grid cell).
"""
from __future__ import annotations

import numpy as np

from stsim.util.plotting import plt, savefig
from stsim.studies.figures.claims_reduced import region_text
from stsim.studies.figures.claims_statements import STATEMENTS, held

__all__ = ["MAP_COLUMNS", "claims_table", "draw_map", "map_rows"]

MAP_COLUMNS = ("statement", "name", "column", "setting", "source", "value", "held")


def map_rows(s, cols, lrs, budgets, rok, rval) -> list:
    """The rows of ``claims_map.csv`` (columns ``MAP_COLUMNS``): every simulated column's
    value of each statement, then every cell of the reduced (lr × budget) grid."""
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
    return rows


def claims_table(s, cols, lrs, budgets, rok) -> str:
    """Markdown: statement | reduced-dynamics region | simulated: held in / failed in."""
    red = s["reduced"]
    lines = ["| statement | measure, target | reduced dynamics (theory/sum, population GD, "
             f"T={red['T']}) | simulation: held | simulation: failed |",
             "|---|---|---|---|---|"]
    for S, (name, what, op, thr) in STATEMENTS.items():
        reg = region_text(lrs, budgets, rok[S]) if S in rok else "— (no reduction)"
        h = [f"{c['label']} ({c['values'][S]:.3g})" for c in cols
             if S in c["values"] and held(S, c["values"][S])]
        f = [f"{c['label']} ({c['values'][S]:.3g})" for c in cols
             if S in c["values"] and not held(S, c["values"][S])]
        lines.append(f"| {S} {name} | {what} {op} {thr:g} | {reg} | {'; '.join(h) or '—'} | "
                     f"{'; '.join(f) or '—'} |")
    return "\n".join(lines)


def draw_map(s, cols, lrs, budgets, rok, path):
    """Draw the claims map to ``path`` (PNG)."""
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
    savefig(fig, path, dpi=110)
