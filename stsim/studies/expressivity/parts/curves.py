"""Part ``curves``: q-sparse averaging with one query — worst / mean weight error
``‖s − 1_y/q‖₁`` and the Gaussian-token error against the position width ``m`` (both
queries, both position families), and the error against ``λ`` at ``m = m_lam``.

One sweep point per ``(family, q, query, m)``: :func:`curves_point` (raw table
``raw/curves.csv``); outputs ``curves.csv``, ``curves.png``, ``curves.json``."""
from __future__ import annotations

import numpy as np

from stsim.core.task import sample_subsets
from stsim.studies.expressivity import qsa
from stsim.studies.expressivity.common import (array_text, check_settings, design_rows,
                                               rng_of, save_tight, subplots, text_array,
                                               write_part)
from stsim.util.stats import fit_linear

__all__ = ["NAME", "COLS", "check", "design", "curves_point", "describe", "analyse",
           "write", "curve_slopes", "plot_curves", "qsa_point"]

NAME = "curves"
COLS = ["family", "q", "query", "m", "lam", "l1_worst", "l1_mean", "leak_worst",
        "margin_min", "spread_max", "token_err_worst", "token_err_mean"]


def qsa_point(N, q, m, family, query, n_inputs, seed, lams, eps, gamma, grid=True):
    """Errors of one (N, q, m) point: design λ for ``exact`` (appended to the grid, or
    alone if ``grid`` is false), best λ of the grid for ``sum``. Returns the
    selection-error dict, the λ used, its index, the table and the subsets."""
    Y = sample_subsets(rng_of(seed, 1, N, q), n_inputs, N, q)
    table = qsa.PositionTable(N, m, family, seed=(seed, 2, N, q, m, qsa.FAMILIES.index(family)))
    lams = np.asarray(lams, dtype=float)
    if query == "exact":
        lam = qsa.design_lambda(N, q, eps, gamma)
        lams = np.append(lams, lam) if grid else np.array([lam])
    e = qsa.qsa_errors(table, Y, lams, query)
    worst = e["l1"].max(axis=1)
    t = lams.size - 1 if query == "exact" else int(np.argmin(worst))
    return e, float(lams[t]), t, table, Y


def check(cfg):
    """``ValueError`` for a bad setting of this part."""
    check_settings(NAME, cfg, ints=("N", "qs", "ms", "n_inputs", "d", "m_lam"),
                   positive=("lams",), unit=("eps", "gamma"),
                   choices={"families": qsa.FAMILIES})


def design(cfg, seed):
    """The sweep points, in the order of the rows of ``curves.csv``."""
    lams = array_text(cfg["lams"])
    pts = []
    for family in cfg["families"]:
        for q in cfg["qs"]:
            for query in qsa.QUERIES:
                for m in cfg["ms"]:
                    if query == "exact" and q > m:
                        continue
                    pts.append(dict(family=family, q=int(q), query=query, m=int(m),
                                    N=int(cfg["N"]), n_inputs=int(cfg["n_inputs"]),
                                    d=int(cfg["d"]), eps=float(cfg["eps"]),
                                    gamma=float(cfg["gamma"]), lams=lams,
                                    lam_curve=family == cfg["families"][0] and m == cfg["m_lam"],
                                    study_seed=int(seed)))
    return {NAME: pts}


def curves_point(family, q, query, m, N, n_inputs, d, eps, gamma, lams, lam_curve, study_seed,
                 seed=None):
    """Errors of one ``(family, q, query, m)``: the ``exact`` query at the design λ (the
    grid ``lams`` is evaluated too when ``lam_curve``), the ``sum`` query at the best λ of
    the grid; the token error on Gaussian tokens ``N(0, I_d)`` at the same λ. With
    ``lam_curve``: the worst / mean weight error at every λ of the grid (``curve_worst``,
    ``curve_mean``, exact text). Random numbers from ``study_seed`` and the sizes; the
    sweep's ``seed`` is not used."""
    grid = text_array(lams)
    e, lam, t, table, Y = qsa_point(N, q, m, family, query, n_inputs, study_seed, grid, eps,
                                    gamma, grid=lam_curve)
    X = rng_of(study_seed, 3, N, q, m).standard_normal((n_inputs, N, d))
    _, terr = qsa.qsa_output(X, table.dense(), Y, lam, query)
    out = dict(zip(COLS[4:], [lam, float(e["l1"][t].max()), float(e["l1"][t].mean()),
                              float(e["leak"][t].max()), float(e["margin"].min()),
                              float(e["spread"].max()), float(terr.max()), float(terr.mean())]))
    if lam_curve:
        out["curve_worst"] = array_text(e["l1"][:len(grid)].max(axis=1))
        out["curve_mean"] = array_text(e["l1"][:len(grid)].mean(axis=1))
    return out


def describe(point, result) -> str:
    """One progress line."""
    return (f"{point['family']} q={point['q']} {point['query']} m={point['m']}: worst "
            f"{result.get('l1_worst', float('nan')):.3g}")


def analyse(cfg, seed, design_points, results) -> dict:
    """The rows of ``curves.csv``, the error-vs-λ curves and the slopes of the sum-query
    floor (JSON-ready)."""
    rows = design_rows(design_points[NAME], results[NAME], COLS)
    lam_curves = []
    for p, r in zip(design_points[NAME], results[NAME]):
        if p["lam_curve"]:
            lam_curves.append({"q": p["q"], "query": p["query"],
                               "worst": text_array(r["curve_worst"]).tolist(),
                               "mean": text_array(r["curve_mean"]).tolist()})
    return {"rows": rows, "lam_curves": lam_curves, "slopes": curve_slopes(rows, cfg)}


def write(cfg, seed, out, A, wall_time_s=None) -> dict:
    """Write ``curves.csv``, ``curves.png``, ``curves.json``; return the summary."""
    rows = A["rows"]
    lams = np.asarray(cfg["lams"])
    lam_curves = {(c["q"], c["query"]): (lams, np.asarray(c["worst"]), np.asarray(c["mean"]))
                  for c in A["lam_curves"]}
    summary = {"sum_floor_loglog_slope_vs_m": A["slopes"], "rows": len(rows)}
    return write_part(out, NAME, cfg, summary, [(NAME, COLS, rows)],
                      lambda path: plot_curves(rows, lam_curves, cfg, path))


def curve_slopes(rows, cfg) -> dict:
    """Slopes of the sum-query floor: log worst error against log m for ``m ≥ 64``."""
    slopes = {}
    for q in cfg["qs"]:
        pts = [(r["m"], r["l1_worst"]) for r in rows if r["family"] == cfg["families"][0] and r["q"] == q
               and r["query"] == "sum" and r["m"] >= 64 and r["l1_worst"] > 1e-12]
        if len(pts) >= 2:
            x, y = np.log([p[0] for p in pts]), np.log([p[1] for p in pts])
            slopes[f"q={q}"] = fit_linear(x, y).slope
    return slopes


def plot_curves(rows, lam_curves, cfg, path):
    """Four panels: (a, b) weight error vs m per query, (c) Gaussian-token error vs m,
    (d) weight error vs λ."""
    N, d = cfg["N"], cfg["d"]
    fig, axs = subplots(2, 2, figsize=(12, 8.4))
    ax = axs.ravel()
    fam0 = cfg["families"][0]
    for k, query in enumerate(("exact", "sum")):
        for i, q in enumerate(cfg["qs"]):
            sel = [r for r in rows if r["family"] == fam0 and r["q"] == q and r["query"] == query]
            m = [r["m"] for r in sel]
            ax[k].plot(m, np.maximum([r["l1_worst"] for r in sel], 1e-16), "-", marker="o", ms=3,
                       color=f"C{i}", label=f"q={q} worst")
            ax[k].plot(m, np.maximum([r["l1_mean"] for r in sel], 1e-16), "-", lw=0.8, color=f"C{i}",
                       alpha=0.5, label=f"q={q} mean")
            for f2 in cfg["families"][1:]:
                sel = [r for r in rows if r["family"] == f2 and r["q"] == q and r["query"] == query]
                ax[k].plot([r["m"] for r in sel], np.maximum([r["l1_worst"] for r in sel], 1e-16), "x",
                           color=f"C{i}", ms=6, label=f"q={q} worst, {f2}")
        ax[k].axhline(cfg["eps"], color="k", lw=0.6, ls=":")
        ax[k].set(xscale="log", yscale="log", xlabel="position width m", ylim=(1e-14, 4),
                  ylabel="weight error ‖s − 1_y/q‖₁  (= worst over ‖x_i‖ ≤ 1)")
        ax[k].legend(fontsize=7, ncol=2)
    ms = np.array(cfg["ms"], dtype=float)
    ax[1].plot(ms, 4.0 * np.sqrt(ms[0] / ms), "k--", lw=0.7, label="∝ m^(-1/2)")
    ax[1].legend(fontsize=7, ncol=2)
    ax[0].set_title(f"(a) exact query w_y = U_yᵀG⁻¹1, design λ = ln(2(N−q)/(qε))/γ\n"
                    f"N={N}, {cfg['n_inputs']} subsets, ε={cfg['eps']}, γ={cfg['gamma']} "
                    f"({fam0}; × {','.join(cfg['families'][1:])})", fontsize=9)
    ax[1].set_title("(b) sum query w_y = Σ u_j, best λ on the grid: floor for q ≥ 3\n"
                    "(q = 2: the two selected logits are equal, as for exact)", fontsize=9)
    for i, q in enumerate(cfg["qs"]):
        for query, ls in (("exact", "-"), ("sum", "--")):
            sel = [r for r in rows if r["family"] == fam0 and r["q"] == q and r["query"] == query]
            ax[2].plot([r["m"] for r in sel], [r["token_err_worst"] for r in sel], ls, marker="o", ms=3,
                       color=f"C{i}", label=f"q={q} {query}")
            if (q, query) in lam_curves:
                L_, w_, mn_ = lam_curves[(q, query)]
                ax[3].plot(L_, np.maximum(w_, 1e-16), ls, color=f"C{i}", label=f"q={q} {query}")
    ax[2].set(xscale="log", yscale="log", xlabel="position width m",
              ylabel="worst ‖f − STS_q‖₂ over the subsets", ylim=(1e-14, 30))
    ax[2].set_title(f"(c) error on Gaussian tokens x_i ~ N(0, I_{d}) (same subsets and λ)",
                    fontsize=9)
    ax[2].legend(fontsize=7, ncol=2)
    ax[3].set(xscale="log", yscale="log", xlabel="λ", ylabel="worst weight error",
              ylim=(1e-14, 4))
    ax[3].set_title(f"(d) error vs λ at m={cfg['m_lam']}: sum (q ≥ 3) is U-shaped, "
                    f"exact → 0", fontsize=9)
    ax[3].legend(fontsize=7)
    fig.suptitle("q-sparse averaging by construction: W = λ[[0,0],[0,I_m]], V = [I_d,0]",
                 fontsize=10)
    save_tight(fig, path, dpi=100)
