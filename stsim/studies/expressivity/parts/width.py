"""Part ``width``: the width law of the single-query construction — the smallest ``m``
whose worst weight error over the sampled subsets is ``≤ ε`` as ``N`` grows, per family
and ``q`` (exact query at the design λ), and for the sum query at its best λ; fits
``m* = a · q ln N + b`` and the ratio to the derived law (:func:`predicted_m`).

One sweep point per ``(replicate, family, query, q, N)``: :func:`width_point` (raw table
``raw/width.csv``); outputs ``width.csv``, ``width.png``, ``width.json``."""
from __future__ import annotations

import math
import time

import numpy as np

from stsim.studies.expressivity import qsa
from stsim.studies.expressivity.common import (array_text, as_list, check_settings,
                                               design_rows, fit_law, save_tight, subplots,
                                               text_array, write_part)
from stsim.studies.expressivity.parts.curves import qsa_point
from stsim.util.stats import smallest_passing

__all__ = ["NAME", "COLS", "check", "design", "width_point", "describe", "analyse", "write",
           "search_width", "predicted_m", "fit_width", "plot_width"]

NAME = "width"
COLS = ["family", "query", "q", "N", "eps", "m_star", "probes", "seconds", "rep"]


def search_width(N, q, family, query, cfg, seed, eps, m_max):
    """Smallest position width ``m ≤ m_max`` whose construction has worst weight error
    ``≤ eps`` over the sampled subsets (``query="exact"``: at the design λ; ``"sum"``: at
    the best λ of ``cfg["lams"]``): ``(m* or None if censored, probes)``."""
    n_inputs = cfg["n_inputs"] if query == "exact" else cfg.get("sum_n_inputs",
                                                                cfg["n_inputs"])
    return _search(N, q, family, query, np.asarray(cfg["lams"]), n_inputs, cfg["gamma"], seed,
                   eps, m_max)


def _search(N, q, family, query, lams, n_inputs, gamma, seed, eps, m_max):
    def passes(m):
        if query == "exact" and m < q:
            return False
        e, lam, t, _, _ = qsa_point(N, q, m, family, query, n_inputs, seed, lams,
                                    eps, gamma, grid=False)
        return e["l1"][t].max() <= eps

    start = max(q, int(round(4 * q * math.log(N))))
    return smallest_passing(passes, 1, m_max, start)


def predicted_m(N, q, eps, gamma):
    """The derived width for mean weight error ``ε`` at the design λ (exact query):
    ``m = q ln(2(N−q)/(qε)) / (2γ(1−γ))``."""
    return q * math.log(2 * (N - q) / (q * eps)) / (2 * gamma * (1 - gamma))


def check(cfg):
    """``ValueError`` for a bad setting of this part."""
    check_settings(NAME, cfg, ints=("Ns", "qs", "n_inputs", "m_max", "reps", "sum_m_max")
                   + tuple(k for k in ("sum_reps", "sum_n_inputs") if k in cfg),
                   positive=("lams", "sum_eps"), unit=("eps", "gamma"),
                   choices={"families": qsa.FAMILIES})
    if cfg["sum_qs"]:
        check_settings(NAME, cfg, ints=("sum_qs",))


def design(cfg, seed):
    """The sweep points, in the order of the rows of ``width.csv``."""
    pts, lams = [], array_text(cfg["lams"])
    common = dict(gamma=float(cfg["gamma"]), study_seed=int(seed))
    for rep in range(cfg["reps"]):
        for family in cfg["families"]:
            for q in cfg["qs"]:
                for N in cfg["Ns"]:
                    if q >= N:
                        continue
                    pts.append(dict(family=family, query="exact", q=int(q), N=int(N),
                                    eps=float(cfg["eps"]), m_max=int(cfg["m_max"]),
                                    n_inputs=int(cfg["n_inputs"]), lams="", rep=rep, **common))
        for q in (cfg["sum_qs"] if rep < cfg.get("sum_reps", cfg["reps"]) else ()):
            for N in cfg["Ns"]:
                if q >= N:
                    continue
                pts.append(dict(family=cfg["families"][0], query="sum", q=int(q), N=int(N),
                                eps=float(cfg["sum_eps"]), m_max=int(cfg["sum_m_max"]),
                                n_inputs=int(cfg.get("sum_n_inputs", cfg["n_inputs"])),
                                lams=lams, rep=rep, **common))
    return {NAME: pts}


def width_point(family, query, q, N, eps, m_max, n_inputs, gamma, lams, rep, study_seed,
                seed=None):
    """One search (:func:`search_width`; seed ``study_seed · 1000 + rep``): ``m_star``
    (None: censored at ``m_max``), ``probes``, ``seconds``. The sweep's ``seed`` is not
    used."""
    t1 = time.perf_counter()
    m, probes = _search(N, q, family, query, text_array(lams), n_inputs, gamma,
                        study_seed * 1000 + rep, eps, m_max)
    return {"m_star": m, "probes": len(probes), "seconds": time.perf_counter() - t1}


def describe(point, result) -> str:
    """One progress line."""
    return (f"rep {point['rep']} {point['family']} {point['query']} q={point['q']} "
            f"N={point['N']} m*={result.get('m_star')} ({result.get('probes')} probes)")


def analyse(cfg, seed, design_points, results) -> dict:
    """The rows of ``width.csv`` and the fits (JSON-ready)."""
    rows = design_rows(design_points[NAME], results[NAME], COLS)
    return {"rows": rows, "fits": fit_width(rows, cfg)}


def write(cfg, seed, out, A, wall_time_s=None) -> dict:
    """Write ``width.csv``, ``width.png``, ``width.json``; return the summary."""
    rows, fits = A["rows"], A["fits"]
    summary = {"fits": fits,
               "censored": [as_list(r, COLS[:5]) for r in rows if r["m_star"] is None],
               "wall_time_s": wall_time_s}
    return write_part(out, NAME, cfg, summary, [(NAME, COLS, rows)],
                      lambda path: plot_width(rows, fits, cfg, path),
                      rows=[as_list(r, COLS) for r in rows])


def fit_width(rows, cfg) -> dict:
    """Fits of the width searches (rows as in ``width.csv``): per family ``m* ~ q ln N``,
    ``m*/q ~ ln N`` (one law for every q), ``m* ~ q ln(2(N−q)/(qε))``, per q ``m* ~ ln N``,
    the ratio to :func:`predicted_m`; for the sum query ``m* ~ (q−2) ln²(…)`` and
    ``m* ~ q ln N``."""
    fits = {}
    for family in cfg["families"]:
        sel = [r for r in rows if r["family"] == family and r["query"] == "exact" and r["m_star"] is not None]
        if len(sel) >= 2:
            x = np.array([r["q"] * math.log(r["N"]) for r in sel])
            fits[f"exact/{family}: m* ~ q ln N"] = fit_law(x, [r["m_star"] for r in sel])
            # per q: m* against ln N (slope / q should be constant if the law is q ln N)
            for q in cfg["qs"]:
                sq = [r for r in sel if r["q"] == q]
                if len(sq) >= 2:
                    f = fit_law([math.log(r["N"]) for r in sq], [r["m_star"] for r in sq])
                    fits[f"exact/{family}/q={q}: m* ~ ln N"] = f
        fits[f"exact/{family}: m*/q ~ ln N"] = fit_law([math.log(r["N"]) for r in sel],
                                                           [r["m_star"] / r["q"] for r in sel])
        # the derived mean-error law m ≥ q ln(2(N−q)/(qε)) / (2γ(1−γ))
        pred = [predicted_m(r["N"], r["q"], r["eps"], cfg["gamma"]) for r in sel]
        fits[f"exact/{family}: m* ~ q ln(2(N-q)/(q eps))"] = fit_law(
            [r["q"] * math.log(2 * (r["N"] - r["q"]) / (r["q"] * r["eps"])) for r in sel],
            [r["m_star"] for r in sel])
        ratio = np.array([r["m_star"] for r in sel]) / np.array(pred)
        fits[f"exact/{family}: m* / predicted"] = {
            "min": float(ratio.min()), "max": float(ratio.max()), "mean": float(ratio.mean()),
            "cv": float(ratio.std() / ratio.mean())}
    sel = [r for r in rows if r["query"] == "sum" and r["m_star"] is not None]
    if len(sel) >= 2:
        fits["sum: m* ~ q ln N"] = fit_law([r["q"] * math.log(r["N"]) for r in sel],
                                                 [r["m_star"] for r in sel])
        fits["sum: m* ~ (q-2) ln²(2(N-q)/(q eps))"] = fit_law(
            [(r["q"] - 2) * math.log(2 * (r["N"] - r["q"]) / (r["q"] * r["eps"])) ** 2 for r in sel],
            [r["m_star"] for r in sel])
    return fits


def plot_width(rows, fits, cfg, path):
    """Three panels: m* vs q ln N with the affine fit; its relative residuals; m* over the
    derived prediction ``q ln(2(N−q)/(qε)) / (2γ(1−γ))``. ``rows`` as in ``width.csv``."""
    fig, ax = subplots(1, 3, figsize=(17, 4.5))
    marks = {"sphere": "o", "rademacher": "s"}
    fam0 = cfg["families"][0]
    for family in cfg["families"]:
        for i, q in enumerate(cfg["qs"]):
            sel = [r for r in rows if r["family"] == family and r["query"] == "exact" and r["q"] == q
                   and r["m_star"] is not None]
            x = [q * math.log(r["N"]) for r in sel]
            kw = dict(color=f"C{i}", mfc="none" if family != "sphere" else f"C{i}")
            ax[0].plot(x, [r["m_star"] for r in sel], marks[family], label=f"exact q={q} ({family})",
                       **kw)
            ax[2].plot(x, [r["m_star"] / predicted_m(r["N"], q, r["eps"], cfg["gamma"]) for r in sel],
                       marks[family], **kw)
    key = f"exact/{fam0}: m* ~ q ln N"
    if key in fits:
        f = fits[key]
        xs = np.linspace(0, max(q * math.log(N) for q in cfg["qs"] for N in cfg["Ns"]), 50)
        ax[0].plot(xs, f["a"] * xs + f["b"], "k-", lw=0.8,
                   label=f"fit ({fam0}) m* = {f['a']:.2f} q ln N + {f['b']:.1f} "
                         f"(R²={f['r2']:.3f})")
        res = np.array(f["residuals"])
        sel = [r for r in rows if r["family"] == fam0 and r["query"] == "exact" and r["m_star"] is not None]
        ax[1].scatter([r["q"] * math.log(r["N"]) for r in sel], res / np.array([r["m_star"] for r in sel]),
                      c=[f"C{cfg['qs'].index(r['q'])}" for r in sel], s=14)
    sel = [r for r in rows if r["query"] == "sum" and r["m_star"] is not None]
    if sel:
        ax[0].plot([r["q"] * math.log(r["N"]) for r in sel], [r["m_star"] for r in sel], "^", color="C5",
                   label=f"sum query q={','.join(map(str, cfg['sum_qs']))} "
                         f"(ε={cfg['sum_eps']}, best λ)")
    ax[0].set(xlabel="q ln N", ylabel="smallest width m*", yscale="log",
              title=f"(a) m*: worst weight error ≤ ε={cfg['eps']} over {cfg['n_inputs']} "
                    f"subsets, {cfg['reps']} replicates\nexact query, λ = ln(2(N−q)/(qε))/γ, "
                    f"γ={cfg['gamma']}; N = {min(cfg['Ns'])}..{max(cfg['Ns'])}")
    ax[0].set_ylim(top=ax[0].get_ylim()[1] * 20)           # headroom for the legend
    ax[0].legend(fontsize=6.5, loc="upper left", ncol=2)
    ax[1].axhline(0, color="k", lw=0.5)
    ax[1].set(xlabel="q ln N", ylabel="(m* − fit) / m*",
              title=f"(b) relative residuals of the affine fit ({fam0}; colour = q)")
    ax[2].axhline(1, color="k", lw=0.5)
    ax[2].set(xlabel="q ln N", ylabel="m* / predicted",
              title="(c) m* / [q ln(2(N−q)/(qε)) / (2γ(1−γ))] (derived mean-error law)")
    save_tight(fig, path)
