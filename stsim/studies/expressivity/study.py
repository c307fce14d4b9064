r"""Expressivity experiments: explicit attention constructions and their width laws.

``stsim expressivity [--quick|--full] [--only a,b] --out DIR`` runs six parts, each
writing ``<part>.csv``, ``<part>.png`` and ``<part>.json`` into ``DIR`` as soon as it is
done (an interrupted run keeps the parts that finished), then ``expressivity.json``.

=========  ==========================================================================
part       what it measures (:mod:`~.qsa`, :mod:`~.patterns`)
=========  ==========================================================================
curves     q-sparse averaging, one query: worst / mean weight error ``‖s − 1_y/q‖₁``
           and Gaussian-token error vs the position width ``m``; error vs ``λ``
width      smallest ``m`` reaching ``ε`` (worst over sampled subsets) as ``N`` grows to
           ``16384``, for ``q ∈ {1,2,4,8}``; fit ``m* = a · q ln N + b``
seq2seq    sequence-to-sequence qSA (every token its own subset): worst error over all
           ``N`` rows vs ``m``, and ``m*``
trained    ``stsim.run(pe="stochastic", sampler="sphere")``: share of ``‖W‖²`` in the
           PE block, cosine with ``I``, learned scale vs the construction's ``λ``
patterns   sparse attention patterns from fixed ``W_Q, W_K`` (exact-interpolation
           queries): smallest head dimension ``d`` with off-support mass ``≤ ε_off`` as
           ``L`` grows to 4096, four target kinds, several ``k``; fit ``d* = a ln L + b``
jl         the same with JL (sum) queries, where ratios are only approximate: ``d*``
           for a log-ratio tolerance; fits against ``ln L`` and ``τ² ln L``
=========  ==========================================================================

Every random number comes from ``SeedSequence((seed, …))`` keyed by the point's sizes,
so a part's numbers do not depend on which other parts ran.
"""
from __future__ import annotations

import math
import os
import time

import numpy as np

from stsim.studies.expressivity import patterns as pt
from stsim.studies.expressivity import qsa
from stsim.util.stats import fit_linear, smallest_passing
from stsim.util.io import write_csv, write_json
from stsim.core.task import sample_subsets
from stsim.util.validate import check_int

__all__ = ["PARTS", "QUICK", "FULL", "predicted_m", "predicted_d",
           "compute_curves", "curve_slopes", "plot_curves", "part_curves",
           "search_width", "compute_width", "fit_width", "plot_width", "part_width",
           "compute_seq2seq", "seq2seq_mstar", "plot_seq2seq", "part_seq2seq",
           "structure_of", "construction_loss", "part_trained",
           "search_pattern_dim", "compute_patterns", "fit_patterns", "plot_patterns",
           "part_patterns", "compute_jl", "fit_jl", "plot_jl", "part_jl", "run_study"]

PARTS = ("curves", "width", "seq2seq", "trained", "patterns", "jl")

_LAMS = tuple(np.geomspace(0.5, 300.0, 36))

QUICK = {
    "curves": dict(N=256, qs=(2, 4), ms=(8, 16, 32, 64, 128, 256), n_inputs=100, d=5,
                   eps=0.1, gamma=0.5, lams=_LAMS, families=("sphere", "rademacher"),
                   m_lam=64),
    "width": dict(Ns=(64, 256, 1024), qs=(1, 2, 4), n_inputs=100, eps=0.1, gamma=0.5,
                  m_max=2048, families=("sphere",), sum_qs=(4,), sum_eps=0.5, lams=_LAMS,
                  sum_m_max=2048, reps=1),
    "seq2seq": dict(Ns=(64, 256), q=3, ms=(16, 32, 64, 128, 256), eps=0.1, gamma=0.5,
                    lams=_LAMS, d=5),
    "trained": dict(T=20, q=3, d=5, d_es=(16,), steps=200, batch=64, lr=1.0, n_val=512,
                    lams=tuple(np.geomspace(0.25, 60.0, 40))),
    "patterns": dict(Ls=(64, 128, 256), k=4, targets=pt.TARGETS, ks=(2, 4), eps_off=0.01,
                     tol=0.01, d_max=2048, reps=1),
    "jl": dict(Ls=(32, 64, 128), k=4, tol=1.0, eps_off=0.1, tau_slack=2.0, d_max=8192,
               fixed_tau=5.0, ratio_tols=(1.0, 2.0), ratio_Ls=(32, 64, 128)),
}
FULL = {
    "curves": dict(N=1024, qs=(2, 4, 8), ms=(8, 16, 32, 64, 128, 256, 512, 1024, 2048),
                   n_inputs=1000, d=5, eps=0.1, gamma=0.5, lams=_LAMS,
                   families=("sphere", "rademacher"), m_lam=256),
    "width": dict(Ns=(64, 256, 1024, 4096, 16384), qs=(1, 2, 4, 8), n_inputs=1000, eps=0.1,
                  gamma=0.5, m_max=4096, families=("sphere", "rademacher"), sum_qs=(4,),
                  sum_eps=0.5, lams=_LAMS, sum_m_max=8192, reps=4,
                  sum_reps=2, sum_n_inputs=300),
    "seq2seq": dict(Ns=(128, 512, 2048), q=3, ms=(16, 32, 64, 128, 256, 512, 1024), eps=0.1,
                    gamma=0.5, lams=_LAMS, d=5),
    "trained": dict(T=64, q=3, d=5, d_es=(32, 128), steps=3000, batch=128, lr=1.0,
                    n_val=2048, lams=tuple(np.geomspace(0.25, 60.0, 60))),
    "patterns": dict(Ls=(64, 128, 256, 512, 1024, 2048, 4096), k=4, targets=pt.TARGETS,
                     ks=(2, 4, 8), eps_off=0.01, tol=0.01, d_max=8192, reps=4),
    "jl": dict(Ls=(32, 64, 128, 256, 512, 1024, 2048, 4096), k=4, tol=1.0, eps_off=0.1,
               tau_slack=2.0, d_max=16384, fixed_tau=5.0, ratio_tols=(0.5, 1.0),
               ratio_Ls=(64, 256, 1024, 4096), reps=4, rel=0.02),
}


# the columns of the CSV tables (rows are dicts with these keys)
CURVES_COLS = ["family", "q", "query", "m", "lam", "l1_worst", "l1_mean", "leak_worst",
               "margin_min", "spread_max", "token_err_worst", "token_err_mean"]
WIDTH_COLS = ["family", "query", "q", "N", "eps", "m_star", "probes", "seconds", "rep"]
SEQ2SEQ_COLS = ["N", "m", "query", "lam", "l1_worst", "l1_mean", "token_err_worst",
                "margin_min"]
TRAINED_COLS = ["d_e", "W_share_ee", "cos_Wee_I", "c_learned", "gamma_learned", "V_share_x",
                "offdiag_rms_over_c", "trained_loss", "projected_loss", "lam_match", "lam_opt",
                "construction_loss_opt"]
PATTERNS_COLS = ["target", "k", "k_actual", "L", "d_star", "probes", "seconds", "rep"]
JL_COLS = ["L", "k", "tau", "d_star", "probes", "seconds", "d_star_exact_scheme", "rep"]
JL_RATIO_COLS = ["tol", "L", "k", "tau", "d_star", "probes", "seconds", "rep"]


def _as_list(row: dict, cols) -> list:
    """A row as a list in column order (the JSON files keep the CSV layout)."""
    return [row[c] for c in cols]


def _fit(x, y) -> dict:
    """A width law for the JSON summaries: the affine least-squares fit
    (:func:`stsim.util.stats.fit_linear`: ``a, b, r2, residuals``),
    ``max_rel_residual`` and the fit through the origin
    ``y ≈ c x`` with its ``max_rel_residual_origin``."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    f = fit_linear(x, y)
    c = float(x @ y / (x @ x))
    return {"a": f.slope, "b": f.intercept, "r2": f.r2, "residuals": f.residuals.tolist(),
            "max_rel_residual": float(np.max(np.abs(f.residuals) / y)),
            "c": c, "max_rel_residual_origin": float(np.max(np.abs(y - c * x) / y))}


def _rng(*key):
    return np.random.default_rng(np.random.SeedSequence([int(k) for k in key]))


def _plt():
    from stsim.util.plotting import plt, savefig
    return plt, savefig


def _qid(query):
    return qsa.QUERIES.index(query)


def _fam(family):
    return qsa.FAMILIES.index(family)


# ======================================================================================
# part 1: error curves of the single-query construction
# ======================================================================================
def _qsa_point(N, q, m, family, query, n_inputs, seed, lams, eps, gamma, grid=True):
    """Errors of one (N, q, m) point: design λ for ``exact`` (appended to the grid, or
    alone if ``grid`` is false), best λ of the grid for ``sum``. Returns the
    selection-error dict, the λ used, its index, the table and the subsets."""
    Y = sample_subsets(_rng(seed, 1, N, q), n_inputs, N, q)
    table = qsa.PositionTable(N, m, family, seed=(seed, 2, N, q, m, _fam(family)))
    lams = np.asarray(lams, dtype=float)
    if query == "exact":
        lam = qsa.design_lambda(N, q, eps, gamma)
        lams = np.append(lams, lam) if grid else np.array([lam])
    e = qsa.qsa_errors(table, Y, lams, query)
    worst = e["l1"].max(axis=1)
    t = lams.size - 1 if query == "exact" else int(np.argmin(worst))
    return e, float(lams[t]), t, table, Y


def compute_curves(cfg, seed, log=lambda m: None):
    """Worst / mean weight error and token error vs ``m`` (both queries, both families):
    the rows of ``curves.csv`` (dicts) and the error-vs-λ curves
    ``{(q, query): (lams, worst, mean)}`` at ``m = m_lam``."""
    N, d = cfg["N"], cfg["d"]
    rows, lam_curves = [], {}
    for family in cfg["families"]:
        for q in cfg["qs"]:
            for query in qsa.QUERIES:
                for m in cfg["ms"]:
                    if query == "exact" and q > m:
                        continue
                    want_curve = family == cfg["families"][0] and m == cfg["m_lam"]
                    e, lam, t, table, Y = _qsa_point(N, q, m, family, query, cfg["n_inputs"],
                                                     seed, cfg["lams"], cfg["eps"],
                                                     cfg["gamma"], grid=want_curve)
                    X = _rng(seed, 3, N, q, m).standard_normal((cfg["n_inputs"], N, d))
                    _, terr = qsa.qsa_output(X, table.dense(), Y, lam, query)
                    rows.append(dict(zip(CURVES_COLS, [family, q, query, m, lam, float(e["l1"][t].max()),
                                 float(e["l1"][t].mean()), float(e["leak"][t].max()),
                                 float(e["margin"].min()), float(e["spread"].max()),
                                 float(terr.max()), float(terr.mean())])))
                    if want_curve:
                        lam_curves[(q, query)] = (np.asarray(cfg["lams"]),
                                                  e["l1"][:len(cfg["lams"])].max(axis=1),
                                                  e["l1"][:len(cfg["lams"])].mean(axis=1))
                log(f"curves: {family} q={q} {query} done")
    return rows, lam_curves


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
    plt, savefig = _plt()
    fig, axs = plt.subplots(2, 2, figsize=(12, 8.4))
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
    fig.tight_layout()
    savefig(fig, path, dpi=100)


def part_curves(cfg, seed, out, log):
    """Compute, fit, plot and write ``curves.csv``, ``curves.png``, ``curves.json``."""
    rows, lam_curves = compute_curves(cfg, seed, log)
    write_csv(os.path.join(out, "curves.csv"), CURVES_COLS, rows)
    slopes = curve_slopes(rows, cfg)
    plot_curves(rows, lam_curves, cfg, os.path.join(out, "curves.png"))
    summary = {"sum_floor_loglog_slope_vs_m": slopes, "rows": len(rows)}
    write_json(os.path.join(out, "curves.json"), {"config": cfg, "summary": summary})
    return summary


# ======================================================================================
# part 2: width law of the single-query construction
# ======================================================================================
def search_width(N, q, family, query, cfg, seed, eps, m_max):
    """Smallest position width ``m ≤ m_max`` whose construction has worst weight error
    ``≤ eps`` over the sampled subsets (``query="exact"``: at the design λ; ``"sum"``: at
    the best λ of ``cfg["lams"]``): ``(m* or None if censored, probes)``."""
    lams = np.asarray(cfg["lams"])
    n_inputs = cfg["n_inputs"] if query == "exact" else cfg.get("sum_n_inputs",
                                                                cfg["n_inputs"])

    def passes(m):
        if query == "exact" and m < q:
            return False
        e, lam, t, _, _ = _qsa_point(N, q, m, family, query, n_inputs, seed, lams,
                                     eps, cfg["gamma"], grid=False)
        return e["l1"][t].max() <= eps

    start = max(q, int(round(4 * q * math.log(N))))
    return smallest_passing(passes, 1, m_max, start)


def predicted_m(N, q, eps, gamma):
    """The derived width for mean weight error ``ε`` at the design λ (exact query):
    ``m = q ln(2(N−q)/(qε)) / (2γ(1−γ))``."""
    return q * math.log(2 * (N - q) / (q * eps)) / (2 * gamma * (1 - gamma))


def predicted_d(L, k, eps_off):
    """The derived head dimension of the exact pattern scheme with ``τ = 2 ln(L/ε_off)``:
    ``d = k τ = 2 k ln(L/ε_off)``."""
    return 2 * k * math.log(L / eps_off)


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
            fits[f"exact/{family}: m* ~ q ln N"] = _fit(x, [r["m_star"] for r in sel])
            # per q: m* against ln N (slope / q should be constant if the law is q ln N)
            for q in cfg["qs"]:
                sq = [r for r in sel if r["q"] == q]
                if len(sq) >= 2:
                    f = _fit([math.log(r["N"]) for r in sq], [r["m_star"] for r in sq])
                    fits[f"exact/{family}/q={q}: m* ~ ln N"] = f
        fits[f"exact/{family}: m*/q ~ ln N"] = _fit([math.log(r["N"]) for r in sel],
                                                           [r["m_star"] / r["q"] for r in sel])
        # the derived mean-error law m ≥ q ln(2(N−q)/(qε)) / (2γ(1−γ))
        pred = [predicted_m(r["N"], r["q"], r["eps"], cfg["gamma"]) for r in sel]
        fits[f"exact/{family}: m* ~ q ln(2(N-q)/(q eps))"] = _fit(
            [r["q"] * math.log(2 * (r["N"] - r["q"]) / (r["q"] * r["eps"])) for r in sel],
            [r["m_star"] for r in sel])
        ratio = np.array([r["m_star"] for r in sel]) / np.array(pred)
        fits[f"exact/{family}: m* / predicted"] = {
            "min": float(ratio.min()), "max": float(ratio.max()), "mean": float(ratio.mean()),
            "cv": float(ratio.std() / ratio.mean())}
    sel = [r for r in rows if r["query"] == "sum" and r["m_star"] is not None]
    if len(sel) >= 2:
        fits["sum: m* ~ q ln N"] = _fit([r["q"] * math.log(r["N"]) for r in sel],
                                                 [r["m_star"] for r in sel])
        fits["sum: m* ~ (q-2) ln²(2(N-q)/(q eps))"] = _fit(
            [(r["q"] - 2) * math.log(2 * (r["N"] - r["q"]) / (r["q"] * r["eps"])) ** 2 for r in sel],
            [r["m_star"] for r in sel])
    return fits


def plot_width(rows, fits, cfg, path):
    """Three panels: m* vs q ln N with the affine fit; its relative residuals; m* over the
    derived prediction ``q ln(2(N−q)/(qε)) / (2γ(1−γ))``. ``rows`` as in ``width.csv``."""
    plt, savefig = _plt()
    fig, ax = plt.subplots(1, 3, figsize=(17, 4.5))
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
    fig.tight_layout()
    savefig(fig, path)


def compute_width(cfg, seed, log=lambda m: None) -> list:
    """Smallest ``m`` (worst weight error over sampled subsets ≤ ε) per (replicate,
    family, query, q, N): the rows of ``width.csv``, as dicts."""
    rows = []
    for rep in range(cfg["reps"]):
        sd = seed * 1000 + rep
        for family in cfg["families"]:
            for q in cfg["qs"]:
                for N in cfg["Ns"]:
                    if q >= N:
                        continue
                    t1 = time.perf_counter()
                    m, probes = search_width(N, q, family, "exact", cfg, sd, cfg["eps"],
                                          cfg["m_max"])
                    rows.append(dict(zip(WIDTH_COLS, [family, "exact", q, N, cfg["eps"], m, len(probes),
                                 time.perf_counter() - t1, rep])))
                    log(f"width: rep {rep} {family} exact q={q} N={N} m*={m} "
                        f"({len(probes)} probes, {time.perf_counter() - t1:.1f}s)")
        for q in (cfg["sum_qs"] if rep < cfg.get("sum_reps", cfg["reps"]) else ()):
            for N in cfg["Ns"]:
                if q >= N:
                    continue
                t1 = time.perf_counter()
                m, probes = search_width(N, q, cfg["families"][0], "sum", cfg, sd,
                                      cfg["sum_eps"], cfg["sum_m_max"])
                rows.append(dict(zip(WIDTH_COLS, [cfg["families"][0], "sum", q, N, cfg["sum_eps"], m,
                                               len(probes), time.perf_counter() - t1, rep])))
                log(f"width: rep {rep} sum q={q} N={N} m*={m} "
                    f"({time.perf_counter() - t1:.1f}s)")
    return rows


def part_width(cfg, seed, out, log):
    """Compute, fit, plot and write ``width.csv``, ``width.png``, ``width.json``."""
    t0 = time.perf_counter()
    rows = compute_width(cfg, seed, log)
    write_csv(os.path.join(out, "width.csv"), WIDTH_COLS, rows)
    fits = fit_width(rows, cfg)
    plot_width(rows, fits, cfg, os.path.join(out, "width.png"))
    summary = {"fits": fits,
               "censored": [_as_list(r, WIDTH_COLS[:5]) for r in rows if r["m_star"] is None],
               "wall_time_s": time.perf_counter() - t0}
    write_json(os.path.join(out, "width.json"), {
        "config": cfg, "summary": summary, "rows": [_as_list(r, WIDTH_COLS) for r in rows]})
    return summary


# ======================================================================================
# part 3: sequence-to-sequence qSA
# ======================================================================================
def compute_seq2seq(cfg, seed, log=lambda m: None) -> list:
    """Every token carries its own q-subset; worst error over all N rows vs m: the rows of
    ``seq2seq.csv``, as dicts."""
    q, rows = cfg["q"], []
    lams = np.asarray(cfg["lams"])
    for N in cfg["Ns"]:
        Ys = sample_subsets(_rng(seed, 10, N, q), N, N, q)
        X = _rng(seed, 11, N).standard_normal((N, cfg["d"]))
        for m in cfg["ms"]:
            U = qsa.position_vectors(_rng(seed, 12, N, m), N, m)
            for query in qsa.QUERIES:
                if query == "exact" and m < q:
                    continue
                if query == "exact":
                    lam = qsa.design_lambda(N, q, cfg["eps"], cfg["gamma"])
                else:       # best λ of the grid for the worst row, then the token error
                    worst = qsa.seq2seq_errors(U, Ys, lams, query)["l1"].max(axis=1)
                    lam = float(lams[int(np.argmin(worst))])
                e = qsa.seq2seq_errors(U, Ys, [lam], query, X=X)
                rows.append(dict(zip(SEQ2SEQ_COLS, [N, m, query, float(lam), float(e["l1"][0].max()),
                             float(e["l1"][0].mean()), float(e["err"][0].max()),
                             float(e["margin"].min())])))
        log(f"seq2seq: N={N} done")
    return rows


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
    plt, savefig = _plt()
    fig, ax = plt.subplots(1, 1, figsize=(6.5, 4.3))
    for i, N in enumerate(cfg["Ns"]):
        for query, ls in (("exact", "-"), ("sum", "--")):
            sel = [r for r in rows if r["N"] == N and r["query"] == query]
            ax.plot([r["m"] for r in sel], np.maximum([r["l1_worst"] for r in sel], 1e-16), ls,
                    marker="o", ms=3, color=f"C{i}", label=f"N={N} {query}")
    ax.axhline(cfg["eps"], color="k", lw=0.6, ls=":")
    ax.set(xscale="log", yscale="log", xlabel="position width m",
           ylabel="max over all N rows of ‖s_i − 1_{y_i}/q‖₁",
           title=f"sequence-to-sequence qSA, q={q}: tokens [x_i; u_i; w_(y_i)]\n"
                 f"exact: design λ (ε={cfg['eps']}); sum: best λ")
    ax.set_ylim(1e-8, 3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    savefig(fig, path)


def part_seq2seq(cfg, seed, out, log):
    """Compute, plot and write ``seq2seq.csv``, ``seq2seq.png``, ``seq2seq.json``."""
    rows = compute_seq2seq(cfg, seed, log)
    write_csv(os.path.join(out, "seq2seq.csv"), SEQ2SEQ_COLS, rows)
    mstar = seq2seq_mstar(rows, cfg)
    plot_seq2seq(rows, cfg, os.path.join(out, "seq2seq.png"))
    summary = {"m_star_on_grid": mstar}
    write_json(os.path.join(out, "seq2seq.json"), {"config": cfg, "summary": summary})
    return summary


# ======================================================================================
# part 4: a trained W against the construction
# ======================================================================================
def structure_of(W, V, d):
    """Structure of trained parameters: share of ``‖W‖_F²`` in the PE block ``W_ee``,
    cosine of ``W_ee`` with ``I``, learned scale ``c = tr W_ee / d_e``, the same for ``V``
    (``γ = tr V_x / d``, share of ``‖V‖²`` in ``V_x``)."""
    Wee, Vx = W[d:, d:], V[:, :d]
    d_e = Wee.shape[0]
    return {"W_share_ee": float((Wee ** 2).sum() / (W ** 2).sum()),
            "cos_Wee_I": float(np.trace(Wee) / (np.linalg.norm(Wee) * math.sqrt(d_e))),
            "c": float(np.trace(Wee) / d_e),
            "offdiag_rms_over_c": float(np.sqrt(((Wee - np.diag(np.diag(Wee))) ** 2).sum()
                                                / (d_e * (d_e - 1))) / (np.trace(Wee) / d_e)),
            "V_share_x": float((Vx ** 2).sum() / (V ** 2).sum()),
            "gamma": float(np.trace(Vx) / d)}


def construction_loss(lams, T, q, d, d_e, n, rng, gammas=None):
    """Loss of the construction ``W = λ W*``, ``V = γ V*`` on ``n`` fresh STS_q samples with
    stochastic/sphere PE (sum query), for each λ: with ``γ = 1`` and with the
    least-squares ``γ*(λ) = Σ<h,t>/Σ‖h‖²``. Returns (loss_gamma1, loss_gamma_opt, gamma_opt).
    """
    from stsim.core.encodings import StochasticSphere
    from stsim.core.task import sample_batch
    b = sample_batch(rng, n, T, q, d)
    P = StochasticSphere(d_e).sample(rng, n, T).P
    pq = np.take_along_axis(P, b.y[:, :, None], axis=1).sum(axis=1)
    g = np.einsum("bte,be->bt", P, pq)
    out1, outg, gam = [], [], []
    for lam in lams:
        a = lam * g
        s = np.exp(a - a.max(axis=1, keepdims=True))
        s /= s.sum(axis=1, keepdims=True)
        h = (s[:, None, :] @ b.X)[:, 0, :]
        t = b.target
        gs = float((h * t).sum() / (h * h).sum())
        out1.append(0.5 * float(((h - t) ** 2).sum()) / n)
        outg.append(0.5 * float(((gs * h - t) ** 2).sum()) / n)
        gam.append(gs)
    return np.array(out1), np.array(outg), np.array(gam)


def part_trained(cfg, seed, out, log):
    """Train with stochastic/sphere PE (theory model, x_query = 0, sum query, zero init)
    and compare the learned W with the construction λ W*."""
    from stsim.core.model import forward_backward
    from stsim.core.run import run
    T, q, d = cfg["T"], cfg["q"], cfg["d"]
    lams = np.asarray(cfg["lams"])
    rows, per = [], {}
    for d_e in cfg["d_es"]:
        t1 = time.perf_counter()
        res = run(T=T, q=q, pe="stochastic", sampler="sphere", d_e=d_e, d=d, model="theory",
                  query="sum", optimizer="sgd", lr=cfg["lr"], steps=cfg["steps"],
                  batch=cfg["batch"], seed=seed, n_val=cfg["n_val"],
                  eval_every=max(1, cfg["steps"] // 20))
        st = structure_of(res.W, res.V, d)
        val = res.final("val")
        l1, lg, gam = construction_loss(lams, T, q, d, d_e, cfg["n_val"],
                                        _rng(seed, 20, T, d_e))
        # the trained model's loss on the same fresh samples as the construction
        from stsim.core.encodings import StochasticSphere
        from stsim.core.task import sample_batch
        r2 = _rng(seed, 20, T, d_e)
        b = sample_batch(r2, cfg["n_val"], T, q, d)
        pe = StochasticSphere(d_e).sample(r2, cfg["n_val"], T)
        trained_loss = forward_backward(res.W, res.V, b.X, b.y, pe, need_grad=False)[0]
        # the trained model projected onto the construction: W = c W*, V = γ V*
        Wp, Vp = qsa.qsa_params(d, d_e, st["c"])
        proj_loss = forward_backward(Wp, st["gamma"] * Vp, b.X, b.y, pe, need_grad=False)[0]
        iopt = int(np.argmin(lg))
        below = np.flatnonzero(lg <= trained_loss)
        lam_match = float(lams[below[0]]) if below.size else None
        per[d_e] = dict(structure=st, val_loss=val, trained_loss=float(trained_loss),
                        projected_loss=float(proj_loss), lam_opt=float(lams[iopt]),
                        loss_opt=float(lg[iopt]), gamma_opt=float(gam[iopt]),
                        lam_match=lam_match, initial_loss=d / (2 * q),
                        wall_time_s=time.perf_counter() - t1, curves=(l1, lg, gam),
                        history=res.history, W=res.W)
        rows.append(dict(zip(TRAINED_COLS, [
            d_e, st["W_share_ee"], st["cos_Wee_I"], st["c"], st["gamma"], st["V_share_x"],
            st["offdiag_rms_over_c"], float(trained_loss), float(proj_loss), lam_match,
            float(lams[iopt]), float(lg[iopt])])))
        log(f"trained: d_e={d_e} c={st['c']:.3g} share={st['W_share_ee']:.4f} "
            f"cos={st['cos_Wee_I']:.4f} loss={trained_loss:.4g} "
            f"({time.perf_counter() - t1:.1f}s)")
    write_csv(os.path.join(out, "trained.csv"), TRAINED_COLS, rows)
    plt, savefig = _plt()
    n = len(cfg["d_es"])
    fig, ax = plt.subplots(1, n + 1, figsize=(5.2 * (n + 1), 4.2))
    d_e0 = cfg["d_es"][0]
    W0 = per[d_e0]["W"]
    vm = float(np.abs(W0).max())
    im = ax[0].imshow(W0, cmap="RdBu_r", vmin=-vm, vmax=vm)
    ax[0].axhline(d - 0.5, color="k", lw=0.5)
    ax[0].axvline(d - 0.5, color="k", lw=0.5)
    fig.colorbar(im, ax=ax[0], fraction=0.046)
    st0 = per[d_e0]["structure"]
    ax[0].set_title(f"(a) trained W, d_e={d_e0} (first {d} rows/cols = token block)\n"
                    f"PE-block share {st0['W_share_ee']:.4f}, cos(W_ee, I) "
                    f"{st0['cos_Wee_I']:.4f}", fontsize=9)
    for i, d_e in enumerate(cfg["d_es"]):
        p = per[d_e]
        l1, lg, _ = p["curves"]
        a = ax[i + 1]
        a.plot(lams, l1, "-", color="C0", label="construction λW*, V*")
        a.plot(lams, lg, "-", color="C1", label="construction λW*, γ*(λ)V*")
        a.axhline(p["trained_loss"], color="C2", ls="--",
                  label=f"trained model: {p['trained_loss']:.3g}")
        a.axvline(p["structure"]["c"], color="C2", lw=0.8,
                  label=f"learned scale c = tr W_ee/d_e = {p['structure']['c']:.2f}")
        a.axvline(p["lam_opt"], color="C1", lw=0.8, ls=":",
                  label=f"λ_opt = {p['lam_opt']:.2f} (loss {p['loss_opt']:.3g})")
        a.set(xscale="log", yscale="log", xlabel="λ", ylabel="loss ½‖f − STS_q‖² (fresh samples)",
              title=f"({chr(98 + i)}) d_e={d_e}, T={T}, q={q}: {cfg['steps']} SGD steps, "
                    f"lr={cfg['lr']}",
              ylim=(None, 2 * d / (2 * q)))
        a.legend(fontsize=7)
    fig.tight_layout()
    savefig(fig, os.path.join(out, "trained.png"))
    summary = {str(k): {kk: vv for kk, vv in v.items() if kk not in ("curves", "history", "W")}
               for k, v in per.items()}
    write_json(os.path.join(out, "trained.json"), {"config": cfg, "summary": summary})
    return summary


# ======================================================================================
# part 5/6: sparse attention patterns
# ======================================================================================
def search_pattern_dim(A, L, k, kind_id, scheme, tol, eps_off, tau, d_max, seed, start,
                       rel=0.0):
    """Smallest head dimension ``d ≤ d_max`` whose construction (``scheme``, keys seeded
    by ``(seed, 30, L, k, kind_id, d)``) meets log-ratio error ``≤ tol`` and off-support
    mass ``≤ eps_off`` on every row of ``A``: ``(d* or None if censored, probes)``."""
    def passes(d):
        if scheme == "exact" and d < int(np.diff(A.indptr).max()):
            return False
        Q, K, _ = pt.pattern_inputs(A, d, _rng(seed, 30, L, k, kind_id, d), scheme=scheme,
                                    eps_off=eps_off, tau=tau)
        e = pt.pattern_errors(A, Q, K)
        return e["ratio"].max() <= tol and e["off_mass"].max() <= eps_off
    return smallest_passing(passes, 1, d_max, start, rel)


def _pattern_jobs(cfg):
    return ([(kind, cfg["k"]) for kind in cfg["targets"]]
            + [("random", k) for k in cfg["ks"] if k != cfg["k"]])


def compute_patterns(cfg, seed, log=lambda m: None) -> list:
    """Smallest head dimension of the exact-interpolation construction per (target kind,
    k, L, replicate): the rows of ``patterns.csv``, as dicts."""
    rows = []
    jobs = _pattern_jobs(cfg)
    for rep in range(cfg["reps"]):
        sd = seed * 1000 + rep
        for kind, k in jobs:
            kid = pt.TARGETS.index(kind)
            for L in cfg["Ls"]:
                A = pt.sparse_target(kind, L, k, _rng(sd, 31, L, k, kid))
                kk = int(max(np.diff(A.indptr).max(),
                             np.bincount(A.indices, minlength=L).max()))
                t1 = time.perf_counter()
                d, probes = search_pattern_dim(A, L, k, kid, "exact", cfg["tol"], cfg["eps_off"],
                                            None, cfg["d_max"], sd, int(8 * k * math.log(L)))
                rows.append(dict(zip(PATTERNS_COLS, [kind, k, kk, L, d, len(probes),
                                                     time.perf_counter() - t1, rep])))
                log(f"patterns: rep {rep} {kind} k={k} L={L} d*={d} "
                    f"({time.perf_counter() - t1:.1f}s)")
    return rows


def fit_patterns(rows, cfg) -> dict:
    """d* against ln L per (kind, k), the ratio to :func:`predicted_d`, and d* against
    k ln L over every random target."""
    jobs = _pattern_jobs(cfg)
    fits = {}
    for kind, k in jobs:
        sel = [r for r in rows if r["target"] == kind and r["k"] == k and r["d_star"] is not None]
        if len(sel) >= 2:
            fits[f"{kind}/k={k}: d* ~ ln L"] = _fit([math.log(r["L"]) for r in sel],
                                                             [r["d_star"] for r in sel])
    for kind, k in jobs:
        sel = [r for r in rows if r["target"] == kind and r["k"] == k and r["d_star"] is not None]
        if sel:
            ratio = np.array([r["d_star"] / predicted_d(r["L"], r["k_actual"], cfg["eps_off"]) for r in sel])
            fits[f"{kind}/k={k}: d* / (2 k_actual ln(L/eps_off))"] = {
                "min": float(ratio.min()), "max": float(ratio.max()),
                "mean": float(ratio.mean())}
    sel = [r for r in rows if r["target"] == "random" and r["d_star"] is not None]
    if len(sel) >= 2:
        fits["random/all k: d* ~ k ln L"] = _fit([r["k"] * math.log(r["L"]) for r in sel],
                                                 [r["d_star"] for r in sel])
    return fits


def plot_patterns(rows, fits, cfg, seed, path):
    """(a) d* vs ln L per target kind with the fits, (b) d*/k vs ln L per k, (c) a banded
    example target beside the constructed attention."""
    plt, savefig = _plt()
    fig, ax = plt.subplots(1, 3, figsize=(16, 4.3))
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
        Lk = [L for L in cfg["Ls"] if any(r["target"] == "random" and r["k"] == k and r["L"] == L
                                          and r["d_star"] is not None for r in rows)]
        mean = [np.mean([r["d_star"] for r in rows if r["target"] == "random" and r["k"] == k and r["L"] == L
                         and r["d_star"] is not None]) / k for L in Lk]
        ax[1].plot(np.log(Lk), mean, "o-", color=f"C{i}", label=f"random, k={k}")
    ax[1].set(xlabel="ln L", ylabel="d* / k  (mean over replicates)",
              title="(b) k-dependence: d*/k vs ln L")
    ax[1].legend(fontsize=7)
    # (c) an example: banded target and the constructed attention at small L
    Ls = 48
    A = pt.sparse_target("banded", Ls, 5, _rng(seed, 32))
    dd = 96
    Q, K, tau = pt.pattern_inputs(A, dd, _rng(seed, 33), eps_off=cfg["eps_off"])
    WQ, WK = pt.pattern_params(dd)
    S = pt.pattern_attention(np.concatenate([Q, K], axis=1), WQ, WK)
    Ad = A.toarray()
    Ad /= Ad.sum(axis=1, keepdims=True)
    ax[2].imshow(np.concatenate([Ad, np.full((Ls, 2), np.nan), S], axis=1), cmap="viridis")
    ax[2].set_title(f"(c) banded target (left, row-normalised) and softmax(QKᵀ) (right)\n"
                    f"L={Ls}, d={dd}: max |S − Â| = {np.abs(S - Ad).max():.2g}", fontsize=9)
    ax[2].axis("off")
    fig.tight_layout()
    savefig(fig, path)


def part_patterns(cfg, seed, out, log):
    """Compute, fit, plot and write ``patterns.csv``, ``patterns.png``, ``patterns.json``."""
    rows = compute_patterns(cfg, seed, log)
    write_csv(os.path.join(out, "patterns.csv"), PATTERNS_COLS, rows)
    fits = fit_patterns(rows, cfg)
    plot_patterns(rows, fits, cfg, seed, os.path.join(out, "patterns.png"))
    summary = {"fits": fits, "censored": [_as_list(r, PATTERNS_COLS[:4]) for r in rows
                                          if r["d_star"] is None]}
    write_json(os.path.join(out, "patterns.json"), {
        "config": cfg, "summary": summary, "rows": [_as_list(r, PATTERNS_COLS) for r in rows]})
    return summary


def plot_jl(rows, rrows, fits, cfg, path):
    """JL figure from the rows of ``jl.csv`` / ``jl_ratio.csv`` (dicts) and the fits."""
    k = cfg["k"]
    plt, savefig = _plt()
    fig, ax = plt.subplots(1, 3, figsize=(16, 4.2))
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
    fig.tight_layout()
    savefig(fig, path)


def compute_jl(cfg, seed, log=lambda m: None):
    """JL (sum) queries: rows of ``jl.csv`` (d* for the log-ratio tolerance and the
    off-support mass, with the exact scheme's d* on the same target) and of
    ``jl_ratio.csv`` (the ratio criterion alone at a fixed τ), as dicts."""
    rows, k = [], cfg["k"]
    reps = cfg.get("reps", 1)
    for rep, L in [(r, L) for r in range(reps) for L in cfg["Ls"]]:
        sd = seed * 1000 + rep
        A = pt.sparse_target("random", L, k, _rng(sd, 41, L, k))
        tau = math.log(L / cfg["eps_off"]) + cfg["tau_slack"]
        t1 = time.perf_counter()
        start = int(8 * k * tau ** 2 * math.log(L * k) / cfg["tol"] ** 2 / 4)
        d, probes = search_pattern_dim(A, L, k, 0, "jl", cfg["tol"], cfg["eps_off"], tau,
                                       cfg["d_max"], sd, max(start, 4), cfg.get("rel", 0.0))
        # the exact scheme on the same target, criteria and τ, for comparison
        d_ex, _ = search_pattern_dim(A, L, k, 0, "exact", cfg["tol"], cfg["eps_off"], tau,
                                     cfg["d_max"], sd, int(2 * k * tau))
        rows.append(dict(L=L, k=k, tau=tau, d_star=d, probes=len(probes),
                         seconds=time.perf_counter() - t1, d_star_exact_scheme=d_ex, rep=rep))
        log(f"jl: rep {rep} L={L} d*={d} (exact scheme: {d_ex}) "
            f"({time.perf_counter() - t1:.1f}s)")
    # ratio criterion alone at a fixed τ: the d ∝ ln(Lk)/tol² law
    rrows = []
    for rep, tol, L in [(r, t, L) for r in range(reps) for t in cfg["ratio_tols"]
                        for L in cfg["ratio_Ls"]]:
        sd = seed * 1000 + rep
        A = pt.sparse_target("random", L, k, _rng(sd, 41, L, k))
        t1 = time.perf_counter()
        start = int(1.5 * k * cfg["fixed_tau"] ** 2 * math.log(L * k) / tol ** 2)
        d, probes = search_pattern_dim(A, L, k, 0, "jl", tol, 1.0, cfg["fixed_tau"],
                                       cfg["d_max"], sd, max(start, 4), cfg.get("rel", 0.0))
        rrows.append(dict(tol=tol, L=L, k=k, tau=cfg["fixed_tau"], d_star=d, probes=len(probes),
                          seconds=time.perf_counter() - t1, rep=rep))
        log(f"jl ratio-only: tol={tol} L={L} d*={d} ({time.perf_counter() - t1:.1f}s)")
    return rows, rrows


def fit_jl(rows, rrows, cfg) -> dict:
    """Fits of :func:`compute_jl`'s rows: d* against ln(Lk) per tolerance, against
    ``k τ² ln(Lk)/tol²`` over all tolerances, and (JL with both criteria) against ln L and
    ``τ² ln(Lk)``."""
    k = cfg["k"]
    sel = [r for r in rows if r["d_star"] is not None]
    fits = {}
    for tol in cfg["ratio_tols"]:
        rs = [r for r in rrows if r["tol"] == tol and r["d_star"] is not None]
        if len(rs) >= 2:
            fits[f"ratio-only tol={tol}: d* ~ ln(Lk)"] = _fit(
                [math.log(r["L"] * k) for r in rs], [r["d_star"] for r in rs])
    rs = [r for r in rrows if r["d_star"] is not None]
    if len(rs) >= 2:
        fits["ratio-only all tol: d* ~ k tau^2 ln(Lk)/tol^2"] = _fit(
            [k * r["tau"] ** 2 * math.log(r["L"] * k) / r["tol"] ** 2 for r in rs],
            [r["d_star"] for r in rs])
    if len(sel) >= 2:
        fits["d* ~ ln L"] = _fit([math.log(r["L"]) for r in sel], [r["d_star"] for r in sel])
        fits["d* ~ tau^2 ln(L k)"] = _fit([r["tau"] ** 2 * math.log(r["L"] * k) for r in sel],
                                          [r["d_star"] for r in sel])
    return fits


def part_jl(cfg, seed, out, log):
    """Compute, fit, plot and write ``jl.csv``, ``jl_ratio.csv``, ``jl.png``, ``jl.json``."""
    rows, rrows = compute_jl(cfg, seed, log)
    write_csv(os.path.join(out, "jl.csv"), JL_COLS, rows)
    write_csv(os.path.join(out, "jl_ratio.csv"), JL_RATIO_COLS, rrows)
    fits = fit_jl(rows, rrows, cfg)
    plot_jl(rows, rrows, fits, cfg, os.path.join(out, "jl.png"))
    summary = {"fits": fits,
               "censored": [_as_list(r, JL_COLS[:3]) for r in rows if r["d_star"] is None]
               + [_as_list(r, JL_RATIO_COLS[:4]) for r in rrows if r["d_star"] is None]}
    write_json(os.path.join(out, "jl.json"), {
        "config": cfg, "summary": summary, "rows": [_as_list(r, JL_COLS) for r in rows],
        "ratio_rows": [_as_list(r, JL_RATIO_COLS) for r in rrows]})
    return summary


_RUNNERS = {"curves": part_curves, "width": part_width, "seq2seq": part_seq2seq,
            "trained": part_trained, "patterns": part_patterns, "jl": part_jl}


# ======================================================================================
# the whole study (the command line is stsim.cli.expressivity)
# ======================================================================================
def run_study(cfgs: dict, out: str, *, only=PARTS, seed: int = 0, log=None, mode=None) -> dict:
    """Run the parts ``only`` with the settings ``cfgs`` (``QUICK`` or ``FULL``: one dict
    per part); each writes its CSV/PNG/JSON into ``out`` as soon as it finishes, then
    ``expressivity.json``. Returns ``{"parts", "wall_time_s", "summaries", ...}``."""
    only = list(only)
    for name in only:
        if name not in PARTS:
            raise ValueError(f"--only must name parts from {PARTS}, got {name!r}")
    seed = check_int("seed", seed, 0)
    os.makedirs(out, exist_ok=True)
    log = log or (lambda m: None)
    summaries, times = {}, {}
    for name in only:
        t0 = time.perf_counter()
        summaries[name] = _RUNNERS[name](cfgs[name], seed, out, log)
        times[name] = time.perf_counter() - t0
        log(f"{name}: {times[name]:.1f}s -> {os.path.join(out, name + '.png')}")
    overview = {"mode": mode, "seed": seed, "parts": only, "wall_time_s": times,
                "summaries": summaries}
    write_json(os.path.join(out, "expressivity.json"), overview)
    return overview
