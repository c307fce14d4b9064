"""Part ``patterns``: sparse attention patterns from fixed ``W_Q, W_K`` with
exact-interpolation queries — the smallest head dimension ``d`` whose off-support mass is
``≤ ε_off`` (and log-ratio error ``≤ tol``) as ``L`` grows, four target kinds, several
``k``; fit ``d* = a ln L + b`` and the ratio to the derived ``d = 2 k ln(L/ε_off)``.

One sweep point per ``(replicate, kind, k, L)``: :func:`patterns_point` (raw table
``raw/patterns.csv``); outputs ``patterns.csv``, ``patterns.png``, ``patterns.json``.
:func:`search_pattern_dim` also serves the part ``jl``."""
from __future__ import annotations

import math
import time

import numpy as np

from stsim.studies.expressivity import patterns as pt
from stsim.studies.expressivity.common import (as_list, check_settings, design_rows, fit_law,
                                               rng_of, save_tight, subplots, write_part)
from stsim.util.stats import smallest_passing

__all__ = ["NAME", "COLS", "check", "design", "patterns_point", "describe", "analyse", "write",
           "search_pattern_dim", "predicted_d", "pattern_jobs", "fit_patterns",
           "plot_patterns"]

NAME = "patterns"
COLS = ["target", "k", "k_actual", "L", "d_star", "probes", "seconds", "rep"]


def search_pattern_dim(A, L, k, kind_id, scheme, tol, eps_off, tau, d_max, seed, start,
                       rel=0.0):
    """Smallest head dimension ``d ≤ d_max`` whose construction (``scheme``, keys seeded
    by ``(seed, 30, L, k, kind_id, d)``) meets log-ratio error ``≤ tol`` and off-support
    mass ``≤ eps_off`` on every row of ``A``: ``(d* or None if censored, probes)``."""
    def passes(d):
        if scheme == "exact" and d < int(np.diff(A.indptr).max()):
            return False
        Q, K, _ = pt.pattern_inputs(A, d, rng_of(seed, 30, L, k, kind_id, d), scheme=scheme,
                                    eps_off=eps_off, tau=tau)
        e = pt.pattern_errors(A, Q, K)
        return e["ratio"].max() <= tol and e["off_mass"].max() <= eps_off
    return smallest_passing(passes, 1, d_max, start, rel)


def predicted_d(L, k, eps_off):
    """The derived head dimension of the exact pattern scheme with ``τ = 2 ln(L/ε_off)``:
    ``d = k τ = 2 k ln(L/ε_off)``."""
    return 2 * k * math.log(L / eps_off)


def pattern_jobs(cfg):
    """The (target kind, k) of the searches: every kind at ``k``, then random at each
    other ``k`` of ``ks``."""
    return ([(kind, cfg["k"]) for kind in cfg["targets"]]
            + [("random", k) for k in cfg["ks"] if k != cfg["k"]])


def check(cfg):
    """``ValueError`` for a bad setting of this part."""
    check_settings(NAME, cfg, ints=("Ls", "k", "d_max", "reps"), positive=("tol",),
                   unit=("eps_off",), choices={"targets": pt.TARGETS})
    if cfg["ks"]:
        check_settings(NAME, cfg, ints=("ks",))


def design(cfg, seed):
    """The sweep points, in the order of the rows of ``patterns.csv``."""
    return {NAME: [dict(target=kind, k=int(k), L=int(L), rep=rep, tol=float(cfg["tol"]),
                        eps_off=float(cfg["eps_off"]), d_max=int(cfg["d_max"]),
                        study_seed=int(seed))
                   for rep in range(cfg["reps"]) for kind, k in pattern_jobs(cfg)
                   for L in cfg["Ls"]]}


def patterns_point(target, k, L, rep, tol, eps_off, d_max, study_seed, seed=None):
    """One search of the exact scheme (seed ``study_seed · 1000 + rep``; the target from
    ``(seed, 31, L, k, kind)``): ``k_actual`` (the largest row or column count of the
    target), ``d_star`` (None: censored at ``d_max``), ``probes``, ``seconds``. The sweep's
    ``seed`` is not used."""
    sd = study_seed * 1000 + rep
    kid = pt.TARGETS.index(target)
    A = pt.sparse_target(target, L, k, rng_of(sd, 31, L, k, kid))
    kk = int(max(np.diff(A.indptr).max(), np.bincount(A.indices, minlength=L).max()))
    t1 = time.perf_counter()
    d, probes = search_pattern_dim(A, L, k, kid, "exact", tol, eps_off, None, d_max, sd,
                                   int(8 * k * math.log(L)))
    return {"k_actual": kk, "d_star": d, "probes": len(probes),
            "seconds": time.perf_counter() - t1}


def describe(point, result) -> str:
    """One progress line."""
    return (f"rep {point['rep']} {point['target']} k={point['k']} L={point['L']} "
            f"d*={result.get('d_star')}")


def analyse(cfg, seed, design_points, results) -> dict:
    """The rows of ``patterns.csv`` and the fits (JSON-ready)."""
    rows = design_rows(design_points[NAME], results[NAME], COLS)
    return {"rows": rows, "fits": fit_patterns(rows, cfg)}


def write(cfg, seed, out, A, wall_time_s=None) -> dict:
    """Write ``patterns.csv``, ``patterns.png``, ``patterns.json``; return the summary."""
    rows, fits = A["rows"], A["fits"]
    summary = {"fits": fits, "censored": [as_list(r, COLS[:4]) for r in rows
                                          if r["d_star"] is None]}
    return write_part(out, NAME, cfg, summary, [(NAME, COLS, rows)],
                      lambda path: plot_patterns(rows, fits, cfg, seed, path),
                      rows=[as_list(r, COLS) for r in rows])


def fit_patterns(rows, cfg) -> dict:
    """d* against ln L per (kind, k), the ratio to :func:`predicted_d`, and d* against
    k ln L over every random target."""
    laws, ratios = {}, {}                  # every job's law first, then every job's ratio
    for kind, k in pattern_jobs(cfg):
        sel = [r for r in rows if r["target"] == kind and r["k"] == k and r["d_star"] is not None]
        if len(sel) >= 2:
            laws[f"{kind}/k={k}: d* ~ ln L"] = fit_law([math.log(r["L"]) for r in sel],
                                                       [r["d_star"] for r in sel])
        if sel:
            ratio = np.array([r["d_star"] / predicted_d(r["L"], r["k_actual"], cfg["eps_off"]) for r in sel])
            ratios[f"{kind}/k={k}: d* / (2 k_actual ln(L/eps_off))"] = {
                "min": float(ratio.min()), "max": float(ratio.max()),
                "mean": float(ratio.mean())}
    fits = {**laws, **ratios}
    sel = [r for r in rows if r["target"] == "random" and r["d_star"] is not None]
    if len(sel) >= 2:
        fits["random/all k: d* ~ k ln L"] = fit_law([r["k"] * math.log(r["L"]) for r in sel],
                                                 [r["d_star"] for r in sel])
    return fits


def plot_patterns(rows, fits, cfg, seed, path):
    """(a) d* vs ln L per target kind with the fits, (b) d*/k vs ln L per k, (c) a banded
    example target beside the constructed attention."""
    fig, ax = subplots(1, 3, figsize=(16, 4.3))
    for i, kind in enumerate(cfg["targets"]):
        sel = [r for r in rows if r["target"] == kind and r["k"] == cfg["k"] and r["d_star"] is not None]
        x = [math.log(r["L"]) for r in sel]
        ax[0].plot(x, [r["d_star"] for r in sel], "o", color=f"C{i}", label=f"{kind}")
        f = fits.get(f"{kind}/k={cfg['k']}: d* ~ ln L")
        if f:
            xs = np.array([min(x), max(x)])
            ax[0].plot(xs, f["a"] * xs + f["b"], "-", color=f"C{i}", lw=0.8,
                       label=f"  fit {f['a']:.1f} ln L {f['b']:+.0f} (R²={f['r2']:.3f})")
    ax[0].set(xlabel="ln L", ylabel="smallest head dimension d*",
              title=f"(a) exact queries, k={cfg['k']}: off-support mass ≤ {cfg['eps_off']}, "
                    f"log-ratio error ≤ {cfg['tol']}\nτ = 2 ln(L/ε_off)")
    ax[0].legend(fontsize=7)
    for i, k in enumerate(sorted(set([cfg["k"]] + list(cfg["ks"])))):
        found = [r for r in rows if r["target"] == "random" and r["k"] == k
                 and r["d_star"] is not None]
        Lk = [L for L in cfg["Ls"] if any(r["L"] == L for r in found)]
        mean = [np.mean([r["d_star"] for r in found if r["L"] == L]) / k for L in Lk]
        ax[1].plot(np.log(Lk), mean, "o-", color=f"C{i}", label=f"random, k={k}")
    ax[1].set(xlabel="ln L", ylabel="d* / k  (mean over replicates)",
              title="(b) k-dependence: d*/k vs ln L")
    ax[1].legend(fontsize=7)
    # (c) an example: banded target and the constructed attention at small L
    Ls = 48
    A = pt.sparse_target("banded", Ls, 5, rng_of(seed, 32))
    dd = 96
    Q, K, tau = pt.pattern_inputs(A, dd, rng_of(seed, 33), eps_off=cfg["eps_off"])
    WQ, WK = pt.pattern_params(dd)
    S = pt.pattern_attention(np.concatenate([Q, K], axis=1), WQ, WK)
    Ad = A.toarray()
    Ad /= Ad.sum(axis=1, keepdims=True)
    ax[2].imshow(np.concatenate([Ad, np.full((Ls, 2), np.nan), S], axis=1), cmap="viridis")
    ax[2].set_title(f"(c) banded target (left, row-normalised) and softmax(QKᵀ) (right)\n"
                    f"L={Ls}, d={dd}: max |S − Â| = {np.abs(S - Ad).max():.2g}", fontsize=9)
    ax[2].axis("off")
    save_tight(fig, path)
