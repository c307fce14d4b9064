"""Part ``jl``: sparse patterns with JL (sum) queries, where ratios are only approximate —
the smallest head dimension ``d*`` for a log-ratio tolerance and an off-support mass
(beside the exact scheme's on the same target), and the ratio criterion alone at a fixed
τ; fits against ``ln L``, ``τ² ln(Lk)`` and ``k τ² ln(Lk)/tol²``.

Sweep points: one per ``(replicate, L)`` (:func:`jl_point`, raw table ``raw/jl.csv``) and
one per ``(replicate, tol, L)`` (:func:`jl_ratio_point`, ``raw/jl_ratio.csv``); outputs
``jl.csv``, ``jl_ratio.csv``, ``jl.png``, ``jl.json``."""
from __future__ import annotations

import math
import time

import numpy as np

from stsim.studies.expressivity import patterns as pt
from stsim.studies.expressivity.common import (as_list, check_settings, design_rows, fit_law,
                                               rng_of, save_tight, subplots, write_part)
from stsim.studies.expressivity.parts.patterns import search_pattern_dim

__all__ = ["NAME", "COLS", "RATIO_COLS", "check", "design", "jl_point", "jl_ratio_point",
           "describe", "analyse", "write", "fit_jl", "plot_jl"]

NAME = "jl"
COLS = ["L", "k", "tau", "d_star", "probes", "seconds", "d_star_exact_scheme", "rep"]
RATIO_COLS = ["tol", "L", "k", "tau", "d_star", "probes", "seconds", "rep"]


def check(cfg):
    """``ValueError`` for a bad setting of this part."""
    check_settings(NAME, cfg, ints=("Ls", "k", "d_max", "ratio_Ls")
                   + (("reps",) if "reps" in cfg else ()),
                   positive=("tol", "eps_off", "fixed_tau", "ratio_tols"))
    for key, v in (("tau_slack", cfg["tau_slack"]), ("rel", cfg.get("rel", 0.0))):
        if not (isinstance(v, (int, float)) and v >= 0):
            raise ValueError(f"jl.{key} must be a number >= 0, got {v!r}")


def design(cfg, seed):
    """The sweep points of both tables, in the order of the rows of ``jl.csv`` and
    ``jl_ratio.csv``."""
    reps, k = cfg.get("reps", 1), int(cfg["k"])
    common = dict(k=k, d_max=int(cfg["d_max"]), rel=float(cfg.get("rel", 0.0)),
                  study_seed=int(seed))
    main = [dict(L=int(L), rep=rep, tol=float(cfg["tol"]), eps_off=float(cfg["eps_off"]),
                 tau_slack=float(cfg["tau_slack"]), **common)
            for rep in range(reps) for L in cfg["Ls"]]
    ratio = [dict(tol=float(tol), L=int(L), rep=rep, fixed_tau=float(cfg["fixed_tau"]),
                  **common)
             for rep in range(reps) for tol in cfg["ratio_tols"] for L in cfg["ratio_Ls"]]
    return {"jl": main, "jl_ratio": ratio}


def jl_point(L, rep, k, tol, eps_off, tau_slack, d_max, rel, study_seed, seed=None):
    """JL queries with both criteria on a random target (``(seed, 41, L, k)``, seed
    ``study_seed · 1000 + rep``), ``τ = ln(L/ε_off) + tau_slack``: ``tau``, ``d_star``,
    ``probes``, ``seconds`` (both searches) and ``d_star_exact_scheme`` (the exact scheme
    on the same target, criteria and τ). The sweep's ``seed`` is not used."""
    sd = study_seed * 1000 + rep
    A = pt.sparse_target("random", L, k, rng_of(sd, 41, L, k))
    tau = math.log(L / eps_off) + tau_slack
    t1 = time.perf_counter()
    start = int(8 * k * tau ** 2 * math.log(L * k) / tol ** 2 / 4)
    d, probes = search_pattern_dim(A, L, k, 0, "jl", tol, eps_off, tau, d_max, sd,
                                   max(start, 4), rel)
    # the exact scheme on the same target, criteria and τ, for comparison
    d_ex, _ = search_pattern_dim(A, L, k, 0, "exact", tol, eps_off, tau, d_max, sd,
                                 int(2 * k * tau))
    return {"tau": tau, "d_star": d, "probes": len(probes),
            "seconds": time.perf_counter() - t1, "d_star_exact_scheme": d_ex}


def jl_ratio_point(tol, L, rep, k, fixed_tau, d_max, rel, study_seed, seed=None):
    """JL queries, the ratio criterion alone (off-support mass unbounded) at the fixed
    ``τ = fixed_tau``: ``tau``, ``d_star``, ``probes``, ``seconds``. The sweep's ``seed``
    is not used."""
    sd = study_seed * 1000 + rep
    A = pt.sparse_target("random", L, k, rng_of(sd, 41, L, k))
    t1 = time.perf_counter()
    start = int(1.5 * k * fixed_tau ** 2 * math.log(L * k) / tol ** 2)
    d, probes = search_pattern_dim(A, L, k, 0, "jl", tol, 1.0, fixed_tau, d_max, sd,
                                   max(start, 4), rel)
    return {"tau": fixed_tau, "d_star": d, "probes": len(probes),
            "seconds": time.perf_counter() - t1}


def describe(point, result) -> str:
    """One progress line."""
    what = f"ratio-only tol={point['tol']}" if "fixed_tau" in point else "both criteria"
    extra = (f" (exact scheme: {result.get('d_star_exact_scheme')})"
             if "d_star_exact_scheme" in result else "")
    return f"{what} rep {point['rep']} L={point['L']} d*={result.get('d_star')}{extra}"


def analyse(cfg, seed, design_points, results) -> dict:
    """The rows of ``jl.csv`` and ``jl_ratio.csv`` and the fits (JSON-ready)."""
    rows = design_rows(design_points["jl"], results["jl"], COLS)
    rrows = design_rows(design_points["jl_ratio"], results["jl_ratio"], RATIO_COLS)
    return {"rows": rows, "ratio_rows": rrows, "fits": fit_jl(rows, rrows, cfg)}


def write(cfg, seed, out, A, wall_time_s=None) -> dict:
    """Write ``jl.csv``, ``jl_ratio.csv``, ``jl.png``, ``jl.json``; return the summary."""
    rows, rrows, fits = A["rows"], A["ratio_rows"], A["fits"]
    summary = {"fits": fits,
               "censored": [as_list(r, COLS[:3]) for r in rows if r["d_star"] is None]
               + [as_list(r, RATIO_COLS[:4]) for r in rrows if r["d_star"] is None]}
    return write_part(out, NAME, cfg, summary, [(NAME, COLS, rows),
                                                ("jl_ratio", RATIO_COLS, rrows)],
                      lambda path: plot_jl(rows, rrows, fits, cfg, path),
                      rows=[as_list(r, COLS) for r in rows],
                      ratio_rows=[as_list(r, RATIO_COLS) for r in rrows])


def fit_jl(rows, rrows, cfg) -> dict:
    """Fits of the rows of ``jl.csv`` / ``jl_ratio.csv``: d* against ln(Lk) per tolerance, against
    ``k τ² ln(Lk)/tol²`` over all tolerances, and (JL with both criteria) against ln L and
    ``τ² ln(Lk)``."""
    k = cfg["k"]
    sel = [r for r in rows if r["d_star"] is not None]
    fits = {}
    for tol in cfg["ratio_tols"]:
        rs = [r for r in rrows if r["tol"] == tol and r["d_star"] is not None]
        if len(rs) >= 2:
            fits[f"ratio-only tol={tol}: d* ~ ln(Lk)"] = fit_law(
                [math.log(r["L"] * k) for r in rs], [r["d_star"] for r in rs])
    rs = [r for r in rrows if r["d_star"] is not None]
    if len(rs) >= 2:
        fits["ratio-only all tol: d* ~ k tau^2 ln(Lk)/tol^2"] = fit_law(
            [k * r["tau"] ** 2 * math.log(r["L"] * k) / r["tol"] ** 2 for r in rs],
            [r["d_star"] for r in rs])
    if len(sel) >= 2:
        fits["d* ~ ln L"] = fit_law([math.log(r["L"]) for r in sel], [r["d_star"] for r in sel])
        fits["d* ~ tau^2 ln(L k)"] = fit_law([r["tau"] ** 2 * math.log(r["L"] * k) for r in sel],
                                          [r["d_star"] for r in sel])
    return fits


def plot_jl(rows, rrows, fits, cfg, path):
    """JL figure from the rows of ``jl.csv`` / ``jl_ratio.csv`` (dicts) and the fits."""
    k = cfg["k"]
    fig, ax = subplots(1, 3, figsize=(16, 4.2))
    for i, tol in enumerate(cfg["ratio_tols"]):
        rs = [r for r in rrows if r["tol"] == tol and r["d_star"] is not None]
        xr = np.array([math.log(r["L"] * k) for r in rs])
        ax[2].plot(xr, [r["d_star"] * tol ** 2 for r in rs], "o", color=f"C{i + 4}",
                   label=f"tol={tol}: d*·tol²")
        f = fits.get(f"ratio-only tol={tol}: d* ~ ln(Lk)")
        if f:
            ax[2].plot(xr, (f["a"] * xr + f["b"]) * tol ** 2, "-", color=f"C{i + 4}", lw=0.8,
                       label=f"  fit d* = {f['a']:.0f} ln(Lk) {f['b']:+.0f} (R²={f['r2']:.3f})")
    ax[2].set(xlabel="ln(L k)", ylabel="d* · tol²",
              title=f"(c) ratio criterion alone, fixed τ={cfg['fixed_tau']}, k={k}:\n"
                    f"d ∝ ln(Lk)/tol² (curves coincide if the 1/tol² law holds)")
    ax[2].legend(fontsize=7)
    sel = sorted([r for r in rows if r["d_star"] is not None], key=lambda r: r["L"])
    x = np.array([math.log(r["L"]) for r in sel])
    y = np.array([r["d_star"] for r in sel])
    ax[0].plot(x, y, "o", color="C3", label="JL queries, random k=%d" % k)
    ax[0].plot(x, [r["d_star_exact_scheme"] for r in sel], "s", color="C0",
               label="exact queries, same targets / criteria / τ")
    ax[0].set_yscale("log")
    if "d* ~ ln L" in fits:
        f = fits["d* ~ ln L"]
        ax[0].plot(x, f["a"] * x + f["b"], "-", color="C3", lw=0.8,
                   label=f"fit {f['a']:.0f} ln L {f['b']:+.0f} (R²={f['r2']:.3f})")
    ax[0].set(xlabel="ln L", ylabel="d*", title=f"(a) JL scheme: log-ratio tol {cfg['tol']}, "
              f"off mass ≤ {cfg['eps_off']}\nτ = ln(L/ε_off) + {cfg['tau_slack']}")
    ax[0].legend(fontsize=7)
    if "d* ~ tau^2 ln(L k)" in fits:
        f = fits["d* ~ tau^2 ln(L k)"]
        x2 = np.array([r["tau"] ** 2 * math.log(r["L"] * k) for r in sel])
        ax[1].plot(x2, y, "o", color="C3")
        ax[1].plot(x2, f["a"] * x2 + f["b"], "-", color="k", lw=0.8,
                   label=f"fit {f['a']:.2f} τ² ln(Lk) {f['b']:+.0f} (R²={f['r2']:.3f})")
        ax[1].legend(fontsize=7)
    ax[1].set(xlabel="τ² ln(L k)", ylabel="d*", title="(b) the derived law d ∝ k τ² ln(Lk)/tol²")
    save_tight(fig, path)
