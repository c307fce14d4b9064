"""Part ``seq2seq``: sequence-to-sequence qSA — every token carries its own q-subset; the
worst weight error over all ``N`` rows against ``m`` (exact query at the design λ, sum
query at the best λ of the grid) and ``m*`` on the grid.

One sweep point per ``(N, m, query)``: :func:`seq2seq_point` (raw table
``raw/seq2seq.csv``); outputs ``seq2seq.csv``, ``seq2seq.png``, ``seq2seq.json``."""
from __future__ import annotations

import numpy as np

from stsim.core.task import sample_subsets
from stsim.studies.expressivity import qsa
from stsim.studies.expressivity.common import (array_text, check_settings, design_rows,
                                               rng_of, save_tight, subplots, text_array,
                                               write_part)

__all__ = ["NAME", "COLS", "check", "design", "seq2seq_point", "describe", "analyse", "write",
           "seq2seq_mstar", "plot_seq2seq"]

NAME = "seq2seq"
COLS = ["N", "m", "query", "lam", "l1_worst", "l1_mean", "token_err_worst", "margin_min"]


def check(cfg):
    """``ValueError`` for a bad setting of this part."""
    check_settings(NAME, cfg, ints=("Ns", "q", "ms", "d"), positive=("lams",),
                   unit=("eps", "gamma"))


def design(cfg, seed):
    """The sweep points, in the order of the rows of ``seq2seq.csv``."""
    lams = array_text(cfg["lams"])
    q = int(cfg["q"])
    pts = [dict(N=int(N), m=int(m), query=query, q=q, eps=float(cfg["eps"]),
                gamma=float(cfg["gamma"]), d=int(cfg["d"]),
                lams=lams if query == "sum" else "", study_seed=int(seed))
           for N in cfg["Ns"] for m in cfg["ms"] for query in qsa.QUERIES
           if not (query == "exact" and m < q)]
    return {NAME: pts}


def seq2seq_point(N, m, query, q, eps, gamma, d, lams, study_seed, seed=None):
    """Errors of one ``(N, m, query)``: subsets ``Y_i`` (one per token), tokens ``X`` and
    positions ``U`` from ``study_seed`` and the sizes; λ the design λ (exact) or the best
    of ``lams`` for the worst row (sum). The sweep's ``seed`` is not used."""
    Ys = sample_subsets(rng_of(study_seed, 10, N, q), N, N, q)
    X = rng_of(study_seed, 11, N).standard_normal((N, d))
    U = qsa.position_vectors(rng_of(study_seed, 12, N, m), N, m)
    if query == "exact":
        lam = qsa.design_lambda(N, q, eps, gamma)
    else:       # best λ of the grid for the worst row, then the token error
        grid = text_array(lams)
        worst = qsa.seq2seq_errors(U, Ys, grid, query)["l1"].max(axis=1)
        lam = float(grid[int(np.argmin(worst))])
    e = qsa.seq2seq_errors(U, Ys, [lam], query, X=X)
    return dict(zip(COLS[3:], [float(lam), float(e["l1"][0].max()), float(e["l1"][0].mean()),
                               float(e["err"][0].max()), float(e["margin"].min())]))


def describe(point, result) -> str:
    """One progress line."""
    return (f"N={point['N']} m={point['m']} {point['query']}: worst "
            f"{result.get('l1_worst', float('nan')):.3g}")


def analyse(cfg, seed, design_points, results) -> dict:
    """The rows of ``seq2seq.csv`` and ``m*`` on the grid (JSON-ready)."""
    rows = design_rows(design_points[NAME], results[NAME], COLS)
    return {"rows": rows, "m_star_on_grid": seq2seq_mstar(rows, cfg)}


def write(cfg, seed, out, A, wall_time_s=None) -> dict:
    """Write ``seq2seq.csv``, ``seq2seq.png``, ``seq2seq.json``; return the summary."""
    return write_part(out, NAME, cfg, {"m_star_on_grid": A["m_star_on_grid"]},
                      [(NAME, COLS, A["rows"])], lambda path: plot_seq2seq(A["rows"], cfg, path))


def seq2seq_mstar(rows, cfg) -> dict:
    """m* on the grid: the smallest grid m with worst error ≤ ε, per query and N."""
    mstar = {}
    for N in cfg["Ns"]:
        for query in qsa.QUERIES:
            ok = [r["m"] for r in rows if r["N"] == N and r["query"] == query and r["l1_worst"] <= cfg["eps"]]
            mstar[f"{query}/N={N}"] = min(ok) if ok else None
    return mstar


def plot_seq2seq(rows, cfg, path):
    """Worst error over all N rows against m, per N and query."""
    q = cfg["q"]
    fig, ax = subplots(1, 1, figsize=(6.5, 4.3))
    for i, N in enumerate(cfg["Ns"]):
        for query, ls in (("exact", "-"), ("sum", "--")):
            sel = [r for r in rows if r["N"] == N and r["query"] == query]
            ax.plot([r["m"] for r in sel], np.maximum([r["l1_worst"] for r in sel], 1e-16), ls,
                    marker="o", ms=3, color=f"C{i}", label=f"N={N} {query}")
    ax.axhline(cfg["eps"], color="k", lw=0.6, ls=":")
    ax.set(xscale="log", yscale="log", xlabel="position width m",
           ylabel="max over all N rows of ‖s_i − 1_{y_i}/q‖₁",
           title=f"sequence-to-sequence qSA, q={q}: tokens [x_i; u_i; w_(y_i)]\n"
                 f"exact: design λ (ε={cfg['eps']}); sum: best λ", ylim=(1e-8, 3))
    ax.legend(fontsize=7, ncol=2)
    save_tight(fig, path)
