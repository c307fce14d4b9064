"""The transformer family's smallest width at large T (docs/separation.md,
"The family at large T").

The family ``W_ee = a I, V_x = γ I`` (sphere PE, theory model, sum query, d-free) at its best
``(a, γ)``: the smallest integer ``d_e`` with ``L/L0 ≤ target`` for q = 2, 3, 4, targets
0.25 and 0.1, T = 2^3 … 2^20 and, for the asymptotics, 2^24 … 2^64, computed with
:mod:`stsim.theory.family_asymptotic` (cost independent of T):

* q = 2: the exact T-free reduction (``method="exact"``; the Gram average is a Gauss rule:
  deterministic; one replicate);
* q = 3, 4: the mean field (``method="mean"``), 3 Monte-Carlo replicates of the selected
  Gram matrices (8192 each; seeds 0, 1, 2), with its two conditions (``rem``, ``margin``)
  and a paired check against the exact reduction at every width (256 Gram samples).

The mean field's conditions: mean field against the exact reduction (same Gram samples)
over a grid of (q, T, d_e, a), with ``rem`` and ``margin`` (``conditions.csv``).  A q ≥ 3
width where ``rem < 3`` (T ≤ 64: too few unselected tokens for the sum to concentrate) is
outside the approximation: kept in ``widths.csv`` and the tables, left out of every fit and
local slope (a T enters the q ≥ 3 fits only when all its replicates have ``rem ≥ 3``), and
replicate 0's are recomputed with the exact reduction (``smallT``: 2048 Gram samples,
``small_T_exact.csv``) to show the size of the mean field's error there.

Checks against the Monte Carlo of :mod:`stsim.theory.family`: at T = 2^13 (2048 samples)
and 2^14 (1024; ``--mc``), q = 2, 3, 4, at the approximation's width d and at ``d/√2``,
``d·√2`` (the √2 grid of the study): ``best_family_loss`` as the study runs it (its CPU
cost recorded), and on an independent sample the loss at the large-T optimum ``a`` (z-score
against the large-T value; a row with |z| > 3 is rechecked with 4× the samples of both,
``mc_followup.csv``); and every probe of the committed family table
(``docs/figures/separation/raw/family.csv``, replicate 0) where it holds the √2-grid
search's probes (the table before the widths library; ``committed_check.csv`` was made
from it, and the table now holds located crossings without probes).

Fits (log2 T ∈ [3, 20] and the whole range): ``stsim.util.stats.compare_growth`` by least
squares with relative errors (``weights="relative"``: ``a·log2 T + b``, ``a·T + b``,
``2^b T^a``; the widths are integers, resolved to ``(d − 1, d]``, finer than any law's
misfit) and, fitted here, the
``(a·log2 T + b)²`` law; CIs: the wider of the Student-t interval and a bootstrap that
redraws each width uniformly in its quantisation interval ``(d − 1, d]`` and over the
replicates.

Writes ``widths.csv``, ``small_T_exact.csv``, ``conditions.csv``, ``mc_check.csv``,
``mc_followup.csv``,
``committed_check.csv``,
``fits.json``, ``summary.json``, ``report.md``, ``large_T.png``, ``conditions.png`` to
``--out``.

Usage: PYTHONPATH=$PWD python benchmarks/family_large_T.py [--out DIR] [--workers 2]
       [--quick] [--only widths,conditions,mc,committed,analyse] [--mc 8192:2048,...]
"""
import argparse
import json
import math
import os
import sys
import time

import numpy as np

from stsim.sweeps.pool import make_executor
from stsim.theory import family_asymptotic as fa
from stsim.theory import family_width as fw
from stsim.theory.family import best_family_loss, sample_scores
from stsim.theory.sphere_law import gram_rule
from stsim.util import io
from stsim.util.stats import compare_growth

QS = (2, 3, 4)
TARGETS = (0.25, 0.1)
MAIN_K = tuple(range(3, 21))                 # T = 2^3 … 2^20
ASYM_K = (24, 32, 48, 64)
SEEDS = (0, 1, 2)
N_GRAM = 8192
OUT = "docs/figures/separation/large_T"
COMMITTED = "docs/figures/separation/raw/family.csv"


def method_of(q):
    return "exact" if q == 2 else "mean"


def series(q, target, seed, ks, n_gram=N_GRAM):
    """Widths of one (q, target, Gram seed) over T = 2^k (each bracket starts at the last)."""
    rows, d0 = [], 8
    for k in ks:
        T = 2 ** k
        c0 = time.process_time()
        kw = dict(n_nodes=64 if k <= 20 else 128)
        if q > 2:
            kw.update(n_gram=n_gram, rng=seed)
        else:                               # the exact q = 2 loss is unimodal in log a
            kw.update(n_grid=29)
        r = fw.large_T_width(q, T, target, method=method_of(q), d_start=d0, step=1.25, **kw)
        d = r["d_e"]
        row = {"q": q, "target": target, "seed": seed, "log2T": k, "T": T, "d_e": d,
               "rel": r["rel"], "se": r["se"], "rel_below": r["rel_below"], "a": r["a"],
               "margin": r["margin"], "method": method_of(q)}
        G, w, mc = gram_rule(q, d, n_gram, seed, kw["n_nodes"])
        row["gamma"] = r.get("gamma")
        if q > 2:           # where the loss comes from, and the mean field against exact
            row.update({f"term_{k2}": v for k2, v in
                        fa.mean_field_terms(r["a"], T, d, G, w).items()})
            Gs = G[:256]
            ex = fa.conditional_moments(r["a"], T, d, Gs, method="exact", n_nodes=kw["n_nodes"],
                                        diagnostics=False)
            mf = fa.conditional_moments(r["a"], T, d, Gs, method="mean", diagnostics=False)
            row["exact_minus_mean"] = (fa.rel_and_se(ex["S"], ex["Q"], q)[0]
                                       - fa.rel_and_se(mf["S"], mf["Q"], q)[0])
        row["rem"] = fa.large_T_rel(r["a"], T, d, G, w, mc, method=method_of(q))["rem"]
        row["cpu_s"] = time.process_time() - c0
        rows.append(row)
        d0 = int(row["d_e"])
        print(f"q={q} target={target} seed={seed} T=2^{k}: d_e={d} rel={r['rel']:.4f} "
              f"a={r['a']:.2f} margin={r['margin']:.2f} ({row['cpu_s']:.1f} s)", flush=True)
    return rows


def mc_point(q, T, d_e, n_mc, seed):
    """Monte Carlo of theory.family at (q, T, d_e): its best loss as the study computes it
    (``best_family_loss`` on one sample), and, on an independent sample, the loss at the
    large-T optimum ``a`` with its SE against the large-T value there (no optimiser bias)."""
    c0 = time.process_time()
    r = best_family_loss(T, q, 1, d_e, n_mc=n_mc, rng=seed)
    cpu = time.process_time() - c0
    best = fw.best_large_T_loss(q, T, d_e, method=method_of(q), n_gram=N_GRAM,
                                n_grid=29 if q == 2 else 57)
    g = sample_scores(T, q, d_e, n_mc, seed + 1)
    rel, se = fa.rel_and_se(*fa.family_mc_moments(best["a"], g, q), q)
    return {"q": q, "T": T, "d_e": d_e, "n_mc": n_mc, "mc_best_rel": r["rel"], "mc_best_a": r["a"],
            "approx_best_rel": best["rel"], "approx_best_se": best["se"], "approx_best_a": best["a"],
            "mc_rel_at_approx_a": rel, "mc_se_at_approx_a": se,
            "z_at_approx_a": (rel - best["rel"]) / math.hypot(se, best["se"]),
            "margin": best["margin"], "rem": best["rem"], "mc_best_cpu_s": cpu}


def condition_point(q, T, d_e, a, n_gram=512):
    """Mean field against the exact reduction on the same Gram samples, with the
    diagnostics of its two conditions (``rem``, ``margin``)."""
    G, w, mc = gram_rule(q, d_e, n_gram, 5)
    ex = fa.large_T_rel(a, T, d_e, G, w, mc, method="exact")
    mf = fa.large_T_rel(a, T, d_e, G, w, mc, method="mean", diagnostics=False)
    return {"q": q, "T": T, "d_e": d_e, "a": a, "exact_rel": ex["rel"], "mean_rel": mf["rel"],
            "mean_minus_exact": mf["rel"] - ex["rel"], "margin": ex["margin"], "rem": ex["rem"]}


CONDITION_GRID = [(2, k, d) for k in (10, 12, 16, 20) for d in (16, 23, 32, 45)] + \
                 [(3, k, d) for k in (6, 10, 16) for d in (8, 16, 32, 64)]
CONDITION_A = (2.0, 4.0, 6.0, 8.0, 10.0, 12.0, 16.0, 20.0, 24.0, 32.0)


def mc_followup(q, T, d_e, n_mc, seeds=(2001, 2002, 2003, 2004), n_gram=4 * 32768):
    """A Monte-Carlo row with |z| > 3 rechecked: the large-T optimum a from 8192 Gram
    samples, the large-T loss there from ``n_gram`` (4×) Gram samples, and 4 independent
    Monte-Carlo samples of ``n_mc`` pooled."""
    b = fw.best_large_T_loss(q, T, d_e, method=method_of(q), n_gram=N_GRAM)
    G, w, mc = gram_rule(q, d_e, n_gram, 77)
    r = fa.large_T_rel(b["a"], T, d_e, G, w, mc, method=method_of(q), diagnostics=False)
    S, Q = zip(*(fa.family_mc_moments(b["a"], sample_scores(T, q, d_e, n_mc, s), q)
                 for s in seeds))
    m, se = fa.rel_and_se(np.concatenate(S), np.concatenate(Q), q)
    return {"q": q, "T": T, "d_e": d_e, "a": b["a"], "approx_rel": r["rel"],
            "approx_se": r["se"], "n_gram": n_gram, "mc_rel": m, "mc_se": se,
            "n_mc": n_mc * len(seeds), "z": (m - r["rel"]) / math.hypot(se, r["se"])}


REM_MIN = 3.0     # the mean field's concentration condition (conditions.csv)


def mean_field_valid(row):
    """Whether a width row is inside the approximation's validity: q = 2 (exact reduction)
    or ``rem ≥ REM_MIN`` at the width (q ≥ 3, mean field)."""
    return int(row["q"]) == 2 or float(row["rem"]) >= REM_MIN


def exact_small_T(row, n_gram=2048):
    """A q ≥ 3 mean-field width where ``rem < 3`` (T ≤ 64: too few unselected tokens for
    the sum to concentrate) recomputed with the exact reduction (``n_gram`` Gram samples,
    the row's seed), for ``small_T_exact.csv``."""
    q, T, tg, seed = int(row["q"]), int(row["T"]), float(row["target"]), int(row["seed"])
    c0 = time.process_time()
    r = fw.large_T_width(q, T, tg, method="exact", d_start=int(row["d_e"]), step=1.25,
                         n_gram=n_gram, rng=seed, n_grid=29)
    print(f"q={q} target={tg} seed={seed} T={T}: rem={float(row['rem']):.2f} < 3, exact "
          f"width {r['d_e']} (mean field {row['d_e']})", flush=True)
    return {"q": q, "target": tg, "seed": seed, "log2T": int(row["log2T"]), "T": T,
            "rem": float(row["rem"]), "d_e_mean": int(row["d_e"]), "d_e_exact": r["d_e"],
            "rel": r["rel"], "se": r["se"], "rel_below": r["rel_below"], "a": r["a"],
            "n_gram": n_gram, "cpu_s": time.process_time() - c0}


def committed_point(q, T, d_e, mc_rel, n_mc):
    b = fw.best_large_T_loss(q, T, d_e, method=method_of(q), n_gram=N_GRAM,
                             n_grid=29 if q == 2 else 57)
    return {"q": q, "T": T, "d_e": d_e, "n_mc": n_mc, "committed_mc_rel": mc_rel,
            "approx_rel": b["rel"], "approx_se": b["se"], "diff": mc_rel - b["rel"],
            "margin": b["margin"]}


# ---- writing and analysis -------------------------------------------------------------
def write_csv(path, rows):
    """``rows`` (dicts) under the union of their keys, in order of appearance
    (:func:`stsim.util.io.write_csv`)."""
    keys = []
    for r in rows:
        keys += [k for k in r if k not in keys]
    io.write_csv(path, keys, rows)


read_csv = io.read_csv


def fit_log_squared(T, w, level=0.95):
    """``width = (a·log2 T + b)²``: least squares on ``log2`` residuals (as the other laws'
    criterion), Student-t CIs from the Jacobian; ``None`` with < 3 points."""
    from scipy.optimize import least_squares
    from scipy.stats import t as student
    x, y = np.log2(np.asarray(T, float)), np.log2(np.asarray(w, float))
    if len(x) < 3:
        return None
    s = np.sqrt(np.asarray(w, float))
    a0, b0 = np.polyfit(x, s, 1)
    res = least_squares(lambda p: 2 * np.log2(np.maximum(p[0] * x + p[1], 1e-9)) - y, [a0, b0])
    a, b = res.x
    r = y - 2 * np.log2(a * x + b)
    dof = len(x) - 2
    cov = np.linalg.inv(res.jac.T @ res.jac) * float(r @ r) / max(dof, 1)
    h = float(student.ppf(0.5 + level / 2, dof)) * np.sqrt(np.diag(cov))
    return {"law": "log2", "formula": "(a·log2 T + b)²", "a": float(a), "b": float(b),
            "a_ci": [float(a - h[0]), float(a + h[0])], "b_ci": [float(b - h[1]), float(b + h[1])],
            "n": len(x), "T": list(map(float, T)), "width": list(map(float, w)),
            "fit": (2.0 ** (2 * np.log2(a * x + b))).tolist(),
            "residuals_log2": r.tolist(), "rms_log2": float(np.sqrt(np.mean(r * r))),
            "max_abs_log2": float(np.max(np.abs(r)))}


def all_fits(T, w):
    out = compare_growth(T, w, min_points=5, weights="relative", what="d_e")
    f2 = fit_log_squared(T, w)
    if f2 is not None:
        out["fits"]["log2"] = f2
    out["ranking"] = sorted(out["fits"], key=lambda k: out["fits"][k]["rms_log2"])
    out["criterion"] += "; 'log2' = (a·log2 T + b)², fitted in benchmarks/family_large_T.py"
    return out


def bootstrap_ci(T, reps, n_boot=1000, rng=0, level=0.95):
    """Percentile intervals of each law's ``a`` when every width is redrawn uniformly in
    ``(d − 1, d]`` of a randomly chosen replicate (``reps``: one list of widths per T)."""
    g = np.random.default_rng(rng)
    draws = {}
    for _ in range(n_boot):
        w = [r[g.integers(len(r))] - g.random() for r in reps]
        for law, f in all_fits(T, w)["fits"].items():
            draws.setdefault(law, []).append(f["a"])
    return {law: [float(v) for v in np.quantile(d, [(1 - level) / 2, (1 + level) / 2])]
            for law, d in draws.items()}


def analyse(out, spread_limits):
    W = read_csv(os.path.join(out, "widths.csv"))
    fits, table = {}, []
    for q in QS:
        for tg in TARGETS:
            rows = [r for r in W if int(r["q"]) == q and float(r["target"]) == tg]
            ks = sorted({int(r["log2T"]) for r in rows})
            valid = {k for k in ks if all(mean_field_valid(r) for r in rows
                                          if int(r["log2T"]) == k)}
            reps = [[int(r["d_e"]) for r in rows if int(r["log2T"]) == k] for k in ks]
            med = [float(np.median(r)) for r in reps]
            for k, r, m in zip(ks, reps, med):
                lnT = k * math.log(2)
                r0 = next(x for x in rows if int(x["log2T"]) == k and int(x["seed"]) == 0)
                row = {"q": q, "target": tg, "log2T": k, "mean_field_valid": k in valid,
                       "d_e_median": m, "d_e_min": min(r),
                       "d_e_max": max(r), "d_e_over_lnT": m / lnT, "d_e_over_lnT2": m / lnT ** 2,
                       "seed0": {x: r0.get(x) for x in ("d_e", "a", "margin", "rem",
                                                        "term_branch", "exact_minus_mean")}}
                if q > 2:       # γ* at the seed-0 width (large when the bulk branch wins)
                    G, w, mc = gram_rule(q, int(r0["d_e"]), N_GRAM, 0)
                    row["seed0"]["gamma"] = fa.large_T_rel(float(r0["a"]), 2 ** k, int(r0["d_e"]),
                                                           G, w, mc, method="mean",
                                                           diagnostics=False)["gamma"]
                table.append(row)
            for name, sel in (("main", [i for i, k in enumerate(ks) if k <= 20 and k in valid]),
                              ("all", [i for i, k in enumerate(ks) if k in valid])):
                T = [2.0 ** ks[i] for i in sel]
                f = all_fits(T, [med[i] for i in sel])
                ci = bootstrap_ci(T, [reps[i] for i in sel])
                for law, fl in f["fits"].items():
                    fl["a_ci_t"] = fl["a_ci"]
                    fl["a_ci_boot"] = ci.get(law)
                    if ci.get(law):
                        fl["a_ci"] = [min(fl["a_ci"][0], ci[law][0]), max(fl["a_ci"][1], ci[law][1])]
                slopes = [(math.log2(med[i + 1]) - math.log2(med[i])) / (ks[i + 1] - ks[i])
                          for i in sel[:-1]]
                f["log2T_range"] = [ks[sel[0]], ks[sel[-1]]]
                f["left_out_rem_below_3"] = [ks[i] for i in range(len(ks)) if ks[i] not in valid]
                f["local_power_slopes"] = {f"{ks[i]}-{ks[i + 1]}": s for i, s in zip(sel, slopes)}
                f["local_log2T_slopes"] = {f"{ks[i]}-{ks[i + 1]}": (med[i + 1] - med[i]) /
                                           (ks[i + 1] - ks[i]) for i in sel[:-1]}
                if q > 2 and name == "all":     # the (ln T)² law's slope at the largest T
                    i, j2 = ks.index(48), ks.index(64)
                    f["sqrt_slope_48_64"] = (math.sqrt(med[j2]) - math.sqrt(med[i])) / 16
                    f["sqrt_slope_predicted"] = {
                        br: math.sqrt(spread_limits[f"q{q}@{tg:g}_{br}"]) * math.log(2)
                        for br in ("selected", "bulk")}
                if q == 2:          # d_e = 2 log2 T + C √d_e (module docstring): fit C
                    x = np.sqrt([med[i] for i in sel])
                    y = np.array([med[i] - 2 * ks[i] for i in sel])
                    C = float(x @ y / (x @ x))
                    f["two_log2T_plus_C_sqrt"] = {"C": C, "residuals": (y - C * x).tolist(),
                                                  "rms": float(np.sqrt(np.mean((y - C * x) ** 2)))}
                fits[f"q{q}@{tg:g}/{name}"] = f
    summ = {"predicted_limits": spread_limits, "table": table, "q2_mechanism": q2_mechanism(W),
            "widths_cpu_s": sum(float(r["cpu_s"]) for r in W), "widths_rows": len(W)}
    with open(os.path.join(out, "fits.json"), "w") as fh:
        json.dump(fits, fh, indent=1)
    return fits, summ


def spread_limits():
    """The leading-order coefficients (:func:`stsim.theory.family_width.asymptotic_coefficients`):
    q = 2, ``d_e ≈ 2 log2 T``; q ≥ 3, ``d_e ≈ c (ln T)²`` on the selected and bulk branches."""
    out = {"q2_log2T_coefficient": fw.asymptotic_coefficients(2, 0.25)["log2T"]}
    for q in (3, 4):
        for tg in TARGETS:
            for k, v in fw.asymptotic_coefficients(q, tg).items():
                out[f"q{q}@{tg:g}_{k}"] = v
    return out


def plot(out, summ, mc_rows):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    W = read_csv(os.path.join(out, "widths.csv"))
    com = {}
    if os.path.exists(COMMITTED):
        for r in read_csv(COMMITTED):
            for tg in TARGETS:
                v = r.get(f"d_e@{tg:g}")
                if v:
                    com.setdefault((int(r["q"]), tg), {}).setdefault(int(r["T"]), []).append(int(v))
    lim = summ["predicted_limits"]
    path = os.path.join(out, "small_T_exact.csv")
    small = read_csv(path) if os.path.exists(path) else []
    fig, ax = plt.subplots(2, 3, figsize=(13, 7.5), sharex=True)
    colors = {0.25: "tab:green", 0.1: "tab:purple"}
    for j, q in enumerate(QS):
        for tg in TARGETS:
            rows = [r for r in summ["table"] if r["q"] == q and r["target"] == tg]
            k = np.array([r["log2T"] for r in rows])
            m = np.array([r["d_e_median"] for r in rows])
            lo = np.array([r["d_e_min"] for r in rows])
            hi = np.array([r["d_e_max"] for r in rows])
            c = colors[tg]
            ax[0, j].plot(k, m, "-o", ms=3, color=c, label=f"large T, target {tg:g}·L0")
            ax[0, j].fill_between(k, lo, hi, color=c, alpha=0.25, lw=0)
            ok = np.array([r.get("mean_field_valid", True) for r in rows])
            if not ok.all():                # rem < 3: outside the mean field, not fitted
                ax[0, j].plot(k[~ok], m[~ok], "o", ms=5, mfc="white", color=c,
                              label="rem < 3 (not fitted)" if tg == 0.25 else None)
            ex = [r for r in small if int(r["q"]) == q and float(r["target"]) == tg]
            if ex:
                ax[0, j].plot([int(r["log2T"]) for r in ex], [int(r["d_e_exact"]) for r in ex],
                              "x", color=c, ms=6,
                              label="exact reduction there (rep. 0)" if tg == 0.25 else None)
            k, m = k[ok], m[ok]
            cm = com.get((q, tg), {})
            if cm:
                kk = sorted(cm)
                ax[0, j].plot(np.log2(kk), [np.median(cm[t]) for t in kk], "s", mfc="none",
                              color=c, ms=6, label=f"committed MC, {tg:g} (√2 grid)")
            for r in mc_rows:
                if int(r["q"]) == q and float(r["target"]) == tg and r["role"] == "width":
                    ax[0, j].plot(math.log2(int(r["T"])), int(r["d_e"]), "*", color="k", ms=9)
            y = m if q == 2 else np.sqrt(m)       # d_e (q = 2) or √d_e (q ≥ 3)
            ax[1, j].plot(0.5 * (k[1:] + k[:-1]), np.diff(y) / np.diff(k), "-o", ms=3, color=c)
            if q == 2:
                if tg == 0.25:
                    ax[1, j].axhline(2.0, color="k", ls="--", lw=1, label="limit 2 (= q)")
                continue
            for br, ls in (("selected", "--"), ("bulk", ":")):
                ax[1, j].axhline(math.sqrt(lim[f"q{q}@{tg:g}_{br}"]) * math.log(2), color=c,
                                 ls=ls, lw=1, label=f"limit, {br} branch, {tg:g}")
        ax[0, j].set_yscale("log", base=2)
        ax[0, j].set_title(f"q = {q}" + (" (exact reduction)" if q == 2 else " (mean field)"))
        ax[1, j].set_xlabel("log2 T")
        ax[1, j].set_ylabel("Δd_e / Δlog2 T" if q == 2 else "Δ√d_e / Δlog2 T")
        ax[0, j].axvline(20, color="grey", lw=0.6, ls=":")
        ax[1, j].axvline(20, color="grey", lw=0.6, ls=":")
        ax[1, j].set_ylim(bottom=0)
    ax[0, 0].set_ylabel("smallest d_e")
    ax[0, 0].legend(fontsize=7)
    ax[1, 0].legend(fontsize=7)
    ax[1, 1].legend(fontsize=7)
    ax[0, 1].legend(fontsize=7)
    fig.suptitle("The (a, γ) family's smallest width at large T (sphere PE, sum query). Top: "
                 "width (★ Monte-Carlo check; ○ rem < 3, × exact there).\n"
                 "Bottom: local slope, flat for d_e ≈ 2 log2 T "
                 "(q = 2) and for d_e ∝ (log T)² (q ≥ 3); dotted: T = 2^20", fontsize=9)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "large_T.png"), dpi=120)


def plot_conditions(out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = read_csv(os.path.join(out, "conditions.csv"))
    fig, ax = plt.subplots(1, 2, figsize=(10, 4))
    for q, mk in ((2, "o"), (3, "^")):
        rr = [r for r in rows if int(r["q"]) == q]
        err = [max(abs(float(r["mean_minus_exact"])), 1e-7) for r in rr]
        for i, key in enumerate(("margin", "rem")):
            sc = ax[i].scatter([float(r[key]) for r in rr], err, marker=mk, s=12,
                               c=[math.log2(int(r["T"])) for r in rr], cmap="viridis",
                               vmin=6, vmax=20, label=f"q = {q}")
    for i, key in enumerate(("margin μ", "rem")):
        ax[i].set_yscale("log")
        ax[i].set_xlabel(key)
        ax[i].axvline(3, color="grey", ls=":", lw=1)
        ax[i].set_xlim(-6, 20)
    ax[0].set_ylabel("|mean field − exact|  (L/L0)")
    ax[0].legend(fontsize=8)
    fig.colorbar(sc, ax=ax, label="log2 T")
    fig.suptitle("Where the mean field holds: its error against the exact reduction",
                 fontsize=10)
    fig.savefig(os.path.join(out, "conditions.png"), dpi=120)


def fmt_w(r):
    lo, hi, m = int(r["d_e_min"]), int(r["d_e_max"]), r["d_e_median"]
    return f"{m:g}" if lo == hi else f"{m:g} [{lo}, {hi}]"


def q2_mechanism(W):
    """q = 2 at its widths: the share of L/L0 carried by the selected configurations with
    ``ε < c/√d_e`` (per-configuration loss at the common γ*; module docstring)."""
    out = []
    for r in W:
        if int(r["q"]) != 2 or int(r["log2T"]) not in (12, 20, 64):
            continue
        T, d, a = int(r["T"]), int(r["d_e"]), float(r["a"])
        nn = 64 if int(r["log2T"]) <= 20 else 128
        G, w, _ = gram_rule(2, d, n_nodes=nn)
        o = fa.conditional_moments(a, T, d, G, method="exact", n_nodes=nn, diagnostics=False)
        g = (w @ o["S"]) / (2 * (w @ o["Q"]))
        lc = 2 * g * g * o["Q"] - 2 * g * o["S"] + 1          # per-configuration L/L0
        e = G[:, 0, 1] * math.sqrt(d)
        G2, w2, _ = gram_rule(2, d, n_nodes=2 * nn)                      # quadrature check
        o2 = fa.conditional_moments(a, T, d, G2, method="exact", n_nodes=2 * nn,
                                    diagnostics=False)
        out.append({"target": float(r["target"]), "log2T": int(r["log2T"]), "d_e": d,
                    "n_nodes": nn, "rel": fa.rel_and_se(o["S"], o["Q"], 2, w, False)[0],
                    "rel_2x_nodes": fa.rel_and_se(o2["S"], o2["Q"], 2, w2, False)[0],
                    **{f"share_eps_below_{c}": float((w * lc)[e < c].sum() / (w @ lc))
                       for c in (-2, -1, 0)},
                    **{f"prob_eps_below_{c}": float(w[e < c].sum()) for c in (-2, -1, 0)}})
    return out


def write_report(out, fits, summ):
    """``report.md``: the tables docs/separation.md quotes."""
    L = ["# The family at large T (benchmarks/family_large_T.py)", ""]
    cols = [3, 4, 6, 8, 10, 12, 13, 14, 16, 18, 20, 24, 32, 48, 64]
    L += ["## Smallest integer d_e (median of the replicates [min, max])", "",
          "| q | target | " + " | ".join(f"2^{k}" for k in cols) + " |",
          "|---|---|" + "---|" * len(cols)]
    for q in QS:
        for tg in TARGETS:
            t = {r["log2T"]: r for r in summ["table"] if r["q"] == q and r["target"] == tg}
            L.append(f"| {q} | {tg:g} | " + " | ".join(fmt_w(t[k]) if k in t else "–"
                                                     for k in cols) + " |")
    L += ["", "## At the seed-0 width: optimum a, γ*, branch, conditions", "",
          "| q | target | log2 T | d_e | a | γ* | branch | margin | rem | exact − mean |",
          "|---|---|---|---|---|---|---|---|---|---|"]
    for r in summ["table"]:
        if r["log2T"] in (8, 13, 20, 32, 64):
            s0 = r["seed0"]
            g = s0.get("gamma")
            em = s0.get("exact_minus_mean")
            L.append(f"| {r['q']} | {r['target']:g} | {r['log2T']} | {s0['d_e']} | "
                     f"{float(s0['a']):.2f} | {'' if g is None else f'{g:.3g}'} | "
                     f"{s0.get('term_branch') or '–'} | {float(s0['margin']):.1f} | "
                     f"{float(s0['rem']):.1f} | {'' if not em else f'{float(em):.1e}'} |")
    L += ["", "## ln M(2λ): the sphere's MGF against its Gaussian form "
          "(λ = a√q, seed-0 width)", ""]
    from stsim.theory.sphere_law import log_gauss_mgf, log_sphere_mgf
    for q, tg, k in ((2, 0.25, 12), (3, 0.25, 20)):
        s0 = next(r for r in summ["table"]
                  if (r["q"], r["target"], r["log2T"]) == (q, tg, k))["seed0"]
        lam2, d = 2 * float(s0["a"]) * math.sqrt(q), int(s0["d_e"])
        L.append(f"* q = {q}, target {tg:g}, T = 2^{k}, d_e = {d}, a = {float(s0['a']):.2f}: "
                 f"exact {float(log_sphere_mgf(np.array([lam2]), d)[0]):.2f}, "
                 f"Gaussian {float(log_gauss_mgf(np.array([lam2]), d)[0]):.2f}")
    L += ["", "## Growth-law fits (rms of log2 residuals; a with the wider of the t and the "
          "quantisation/replicate bootstrap 95% intervals)", "",
          "| series | range | 1st | 2nd | 3rd | 4th |", "|---|---|---|---|---|---|"]
    for key, f in fits.items():
        q, rest = key.split("@")
        tg, rng = rest.split("/")
        cells = []
        for law in f["ranking"]:
            x = f["fits"][law]
            cells.append(f"{x['formula']}: a = {x['a']:.3g} [{x['a_ci'][0]:.3g}, "
                         f"{x['a_ci'][1]:.3g}], rms {x['rms_log2']:.3f}")
        lo, hi = f["log2T_range"]
        L.append(f"| {q}, {tg} | 2^{lo}–2^{hi} | "
                 + " | ".join(cells) + " |")
    L += ["", "## Local slopes", ""]
    for key, f in fits.items():
        if key.endswith("/all"):
            ps = ", ".join(f"{k}: {v:.3f}" for k, v in f["local_power_slopes"].items())
            ls = ", ".join(f"{k}: {v:.2f}" for k, v in f["local_log2T_slopes"].items())
            L += [f"* {key} — d log2 d_e / d log2 T: {ps}", f"  — d d_e / d log2 T: {ls}"]
            if "sqrt_slope_48_64" in f:
                pr = f["sqrt_slope_predicted"]
                L.append(f"  — Δ√d_e/Δlog2 T from 2^48 to 2^64: {f['sqrt_slope_48_64']:.3f}; "
                         f"predicted √c·ln 2: selected {pr['selected']:.3f}, bulk {pr['bulk']:.3f}")
            if "two_log2T_plus_C_sqrt" in f:
                c = f["two_log2T_plus_C_sqrt"]
                L.append(f"  — d_e = 2 log2 T + C √d_e: C = {c['C']:.3f}, rms {c['rms']:.2f}")
    L += ["", "## q = 2: the share of L carried by ε < c/√d_e (probability of that set)", ""]
    for r in summ["q2_mechanism"]:
        L.append(f"* target {r['target']:g}, T = 2^{r['log2T']}, d_e = {r['d_e']}: " + ", ".join(
            f"c = {c}: {r[f'share_eps_below_{c}']:.2f} ({r[f'prob_eps_below_{c}']:.3f})"
            for c in (-2, -1, 0)) + f"; L/L0 {r['rel']:.6f} with {r['n_nodes']} Gauss nodes, "
            f"{r['rel_2x_nodes']:.6f} with twice as many")
    com = {}
    if os.path.exists(COMMITTED):
        for r in read_csv(COMMITTED):
            for tg in TARGETS:
                if r.get(f"d_e@{tg:g}"):
                    com.setdefault((int(r["q"]), tg, int(r["T"])), []).append(
                        int(r[f"d_e@{tg:g}"]))
    if com:
        grid = [round(2 ** (k / 2)) for k in range(2, 21)]
        agree, diff = 0, []
        for (q, tg, T), v in sorted(com.items()):
            t = next(r for r in summ["table"] if r["q"] == q and r["target"] == tg
                     and 2 ** r["log2T"] == T)
            up = next(g for g in grid if g >= t["d_e_median"])
            if up == int(np.median(v)):
                agree += 1
            else:
                diff.append(f"q={q} {tg:g} T={T}: committed {v}, large T {t['d_e_median']:g} "
                            f"(grid {up})")
        L += ["", f"Committed family widths (√2 grid, T ≤ 4096) against the large-T integer "
              f"widths rounded up to the grid: {agree} of {len(com)} agree" +
              (": others " + "; ".join(diff) if diff else "")]
    L += ["", "## Predicted leading-order coefficients", "",
          "```", json.dumps(summ["predicted_limits"], indent=1), "```"]
    W = read_csv(os.path.join(out, "widths.csv"))
    bad = [r for r in W if not mean_field_valid(r)]
    if bad:
        L += ["", f"## q ≥ 3 widths where rem < {REM_MIN:g} (outside the mean field; not fitted)",
              "", "* " + ", ".join(f"q={r['q']} {float(r['target']):g} T={r['T']} s{r['seed']}: "
                                   f"{r['d_e']} (rem {float(r['rem']):.2f})" for r in bad)]
    path = os.path.join(out, "small_T_exact.csv")
    if os.path.exists(path):
        rows = read_csv(path)
        dd = [int(r["d_e_mean"]) - int(r["d_e_exact"]) for r in rows]
        L += ["", "## small_T_exact.csv: replicate 0 there, exact reduction (mean field)", "",
              "* " + ", ".join(f"q={r['q']} {float(r['target']):g} T={r['T']}: {r['d_e_exact']} "
                               f"({r['d_e_mean']})" for r in rows),
              f"* mean-field width − exact width: {min(dd)} … {max(dd)}; relative "
              f"{min(d / int(r['d_e_exact']) for d, r in zip(dd, rows)):.1%} … "
              f"{max(d / int(r['d_e_exact']) for d, r in zip(dd, rows)):.1%}"]
    for name in ("mc_check.csv", "mc_followup.csv", "committed_check.csv", "conditions.csv"):
        path = os.path.join(out, name)
        if not os.path.exists(path):
            continue
        rows = read_csv(path)
        L += ["", f"## {name}", ""]
        if name == "mc_check.csv":
            L += ["| q | T | target | role | d_e | MC best (study) | large-T best | MC at large-T a "
                  "± SE | z | MC CPU s |", "|---|---|---|---|---|---|---|---|---|---|"]
            L.insert(len(L) - 2, "Scores per Monte-Carlo point: " + ", ".join(
                f"T = {T}, n_mc = {n}: {T * n:.3g} scores, {8 * T * n / 1e6:.0f} MB per float64 "
                f"array" for T, n in sorted({(int(r["T"]), int(r["n_mc"])) for r in rows})) + "; "
                f"MC CPU s per point {min(float(r['mc_best_cpu_s']) for r in rows):.1f}–"
                f"{max(float(r['mc_best_cpu_s']) for r in rows):.1f}")
            L.insert(len(L) - 2, "")
            for r in rows:
                L.append(f"| {r['q']} | 2^{int(math.log2(int(r['T'])))} | {r['target']} | "
                         f"{r['role']} | {r['d_e']} | {float(r['mc_best_rel']):.4f} | "
                         f"{float(r['approx_best_rel']):.4f} | "
                         f"{float(r['mc_rel_at_approx_a']):.4f} ± "
                         f"{float(r['mc_se_at_approx_a']):.4f} | "
                         f"{float(r['z_at_approx_a']):+.2f} | {float(r['mc_best_cpu_s']):.0f} |")
        elif name == "mc_followup.csv":
            for r in rows:
                L.append(f"* q = {r['q']}, T = {r['T']}, d_e = {r['d_e']}, a = "
                         f"{float(r['a']):.3f}: large T {float(r['approx_rel']):.4f} ± "
                         f"{float(r['approx_se']):.4f} ({r['n_gram']} Gram samples), MC "
                         f"{float(r['mc_rel']):.4f} ± {float(r['mc_se']):.4f} ({r['n_mc']} "
                         f"samples), z = {float(r['z']):+.2f}")
        elif name == "committed_check.csv":
            d = np.array([float(r["diff"]) for r in rows])
            L.append(f"{len(rows)} probes: committed MC − large-T best: mean {d.mean():+.4f}, "
                     f"median {np.median(d):+.4f}, |.| ≤ {np.abs(d).max():.4f}; "
                     f"by n_mc: " + ", ".join(
                         f"{n}: rms {np.sqrt(np.mean(d[[r['n_mc'] == n for r in rows]] ** 2)):.4f}"
                         for n in sorted({r['n_mc'] for r in rows}, key=int)))
        else:
            e = np.array([abs(float(r["mean_minus_exact"])) for r in rows])
            mu = np.array([float(r["margin"]) for r in rows])
            rem = np.array([float(r["rem"]) for r in rows])
            for lo, hi in ((3, 99), (2, 3), (1, 2), (-99, 1)):
                m = (np.minimum(mu, rem) >= lo) & (np.minimum(mu, rem) < hi)
                if m.any():
                    L.append(f"* min(margin, rem) in [{lo}, {hi}): {m.sum()} points, "
                             f"|mean − exact| ≤ {e[m].max():.2g} (median {np.median(e[m]):.2g})")
    with open(os.path.join(out, "report.md"), "w") as fh:
        fh.write("\n".join(L) + "\n")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=OUT)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--quick", action="store_true", help="T ≤ 2^8, one seed, no asymptotics")
    p.add_argument("--only", default="widths,smallT,conditions,mc,committed,analyse",
                   help="parts; 'followup' alone reruns the |z| > 3 Monte-Carlo rows")
    p.add_argument("--mc", default="8192:2048,16384:1024",
                   help="T:n_mc pairs of the Monte-Carlo check")
    a = p.parse_args(argv)
    parts = set(a.only.split(","))
    os.makedirs(a.out, exist_ok=True)
    ks = MAIN_K[:6] if a.quick else MAIN_K + ASYM_K
    seeds = SEEDS[:1] if a.quick else SEEDS
    t0, c0 = time.perf_counter(), time.process_time()
    info = {"load_at_start": os.getloadavg()}
    ex = make_executor(a.workers)
    if "widths" in parts:
        jobs = [(q, tg, s) for q in QS for tg in TARGETS for s in (seeds if q > 2 else (0,))]
        futs = [ex.submit(series, q, tg, s, ks) for q, tg, s in jobs]
        rows = [r for f in futs for r in f.result()]
        write_csv(os.path.join(a.out, "widths.csv"), rows)
        info["widths_cpu_s"] = sum(r["cpu_s"] for r in rows)
    if "conditions" in parts:
        jobs = [(q, 2 ** k, d, av) for q, k, d in CONDITION_GRID for av in CONDITION_A]
        futs = [ex.submit(condition_point, *j) for j in jobs]
        write_csv(os.path.join(a.out, "conditions.csv"), [f.result() for f in futs])
    if "mc" in parts:
        W = read_csv(os.path.join(a.out, "widths.csv"))
        jobs = []
        for pair in a.mc.split(","):
            T, n = (int(x) for x in pair.split(":"))
            for q in QS:
                for tg in TARGETS:
                    ds = [int(r["d_e"]) for r in W if int(r["q"]) == q
                          and float(r["target"]) == tg and int(r["T"]) == T]
                    if not ds:
                        continue
                    d = int(np.median(ds))
                    for role, dd in (("width", d), ("below", round(d / 2 ** 0.5)),
                                     ("above", round(d * 2 ** 0.5))):
                        jobs.append((q, T, n, tg, role, dd))
        futs = [ex.submit(mc_point, q, T, dd, n, 1000 + q) for q, T, n, tg, role, dd in jobs]
        rows = [dict(f.result(), target=tg, role=role)
                for f, (q, T, n, tg, role, dd) in zip(futs, jobs)]
        write_csv(os.path.join(a.out, "mc_check.csv"), rows)
    if "mc" in parts or "followup" in parts:
        bad = [r for r in read_csv(os.path.join(a.out, "mc_check.csv"))
               if abs(float(r["z_at_approx_a"])) > 3]
        futs = [ex.submit(mc_followup, int(r["q"]), int(r["T"]), int(r["d_e"]), int(r["n_mc"]))
                for r in bad]
        write_csv(os.path.join(a.out, "mc_followup.csv"), [f.result() for f in futs])
    if "smallT" in parts:       # replicate 0's widths outside the mean field, exactly
        W = [r for r in read_csv(os.path.join(a.out, "widths.csv"))
             if not mean_field_valid(r) and int(r["seed"]) == 0]
        futs = [ex.submit(exact_small_T, r) for r in W]
        write_csv(os.path.join(a.out, "small_T_exact.csv"), [f.result() for f in futs])
    if "committed" in parts and os.path.exists(COMMITTED):
        jobs = []
        for r in read_csv(COMMITTED):
            # the √2-grid search's probes: the family table before the widths library
            # (its rows are located crossings now, with no probes: nothing to check)
            if r["seed_index"] != "0" or not r.get("probes"):
                continue
            for pr in r["probes"].split():
                dd, v = pr.split(":")
                if 4 <= int(dd) <= 724:
                    jobs.append((int(r["q"]), int(r["T"]), int(dd), float(v), int(r["n_mc"])))
        futs = [ex.submit(committed_point, *j) for j in jobs]
        write_csv(os.path.join(a.out, "committed_check.csv"), [f.result() for f in futs])
    ex.shutdown()
    if "analyse" in parts:
        lim = spread_limits()
        fits, summ = analyse(a.out, lim)
        mc_rows = read_csv(os.path.join(a.out, "mc_check.csv")) \
            if os.path.exists(os.path.join(a.out, "mc_check.csv")) else []
        plot(a.out, summ, mc_rows)
        if os.path.exists(os.path.join(a.out, "conditions.csv")):
            plot_conditions(a.out)
        info.update(wall_s=time.perf_counter() - t0, main_process_cpu_s=time.process_time() - c0,
                    load_at_end=os.getloadavg(), parts=sorted(parts), quick=a.quick,
                    n_gram=N_GRAM, seeds=list(seeds), log2T=list(ks))
        summ["run"] = info
        with open(os.path.join(a.out, "summary.json"), "w") as fh:
            json.dump(summ, fh, indent=1)
        write_report(a.out, fits, summ)
    print(json.dumps(info))
    return 0


if __name__ == "__main__":
    sys.exit(main())
