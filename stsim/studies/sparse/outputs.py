"""The sparse-Boolean study's outputs (:func:`report`): ``mstar.csv``, ``fits.json``,
``report.md``, ``summary.json``, ``sparse_heatmap.png`` and ``sparse_mstar.png``."""
from __future__ import annotations

import os

import numpy as np

from stsim.studies.sparse.analysis import stats_of
from stsim.studies.sparse.checks import checks as sparse_checks
from stsim.studies.sparse.design import plan, published_config, run_record_path
from stsim.util.io import atomic_write, read_json, write_csv, write_json
from stsim.util.verdict import checks_table, summary_line

__all__ = ["report", "plot_heatmaps", "plot_mstar", "markdown_report", "write_mstar_csv",
           "format_fit", "describe"]


def plot_heatmaps(stats, grid, Ts, fns, models, path, title=""):
    """Success probability over (T, m): one panel per (function, model); hatched cells
    were not run (the ladder retired the series); each cell reads successes/trials."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    from stsim.util.plotting import savefig

    nr, nc = len(fns), len(models)
    fig, axes = plt.subplots(nr, nc, figsize=(4.2 * nc + 1.2, 0.36 * len(grid) * nr + 1.4),
                             squeeze=False, constrained_layout=True)
    im = None
    for i, (fn, s) in enumerate(fns):
        for j, model in enumerate(models):
            ax = axes[i][j]
            Z = np.full((len(grid), len(Ts)), np.nan)
            label = {}
            for a, m in enumerate(grid):
                for b, T in enumerate(Ts):
                    c = stats.get((fn, s, model, T, m))
                    if c is not None:
                        Z[a, b] = c["rate"]
                        label[a, b] = f"{round(c['rate'] * c['n'])}/{c['n']}"
            im = ax.imshow(Z, origin="lower", aspect="auto", cmap="viridis", vmin=0, vmax=1)
            for a in range(len(grid)):
                for b in range(len(Ts)):
                    if np.isnan(Z[a, b]):
                        ax.add_patch(Rectangle((b - 0.5, a - 0.5), 1, 1, fill=False,
                                               hatch="///", ec="0.75", lw=0))
                    else:
                        ax.text(b, a, label[a, b], ha="center", va="center", fontsize=6,
                                color="w" if Z[a, b] < 0.6 else "k")
            ax.set_xticks(range(len(Ts)), [str(T) for T in Ts], fontsize=7)
            ax.set_yticks(range(len(grid)), [str(m) for m in grid], fontsize=7)
            ax.set_xlabel("sequence length T", fontsize=8)
            ax.set_ylabel("training samples m", fontsize=8)
            ax.set_title(f"{fn} (s={s}), {model}", fontsize=9)
    fig.colorbar(im, ax=axes, shrink=0.6, label="success probability")
    if title:
        fig.suptitle(title, fontsize=9)
    return savefig(fig, path)


def _draw_mstar(ax, mstar, fits):
    keys = sorted({(r["fn"], r["s"]) for r in mstar})
    ys = []
    for i, (fn, s) in enumerate(keys):
        for model, ls, mk, shift in (("attention", "-", "o", 0.96), ("fcn", "--", "s", 1.04)):
            rs = sorted((r for r in mstar if (r["fn"], r["s"], r["model"]) == (fn, s, model)),
                        key=lambda r: r["T"])
            if not rs:
                continue
            ok = [r for r in rs if r["m_star"] is not None]
            ax.plot([r["T"] for r in ok], [r["m_star"] for r in ok], ls, marker=mk,
                    color=f"C{i}", label=f"{fn} s={s}, {model}")
            for r in ok:   # the bootstrap interval; an open upper end runs to m_max
                lo = r.get("m_star_lo")
                hi = r.get("m_star_hi") if r.get("m_star_hi") is not None else r.get("m_max")
                if lo is not None and hi is not None:
                    x = r["T"] * (0.97 if model == "attention" else 1.03)
                    ax.plot([x, x], [lo, hi], "-", color=f"C{i}", lw=0.8, alpha=0.6)
            cen = [r for r in rs if r["m_star"] is None]
            if cen:  # side by side per model, so censored markers do not hide each other
                ax.plot([r["T"] * shift for r in cen], [r["m_max"] for r in cen], mk,
                        mfc="none", color=f"C{i}", ms=9)
            f = fits.get(f"{fn}:{s}/{model}", {}).get("log_T")
            if model == "attention" and f is not None and len(ok) >= 3:
                Tf = np.geomspace(ok[0]["T"], ok[-1]["T"], 50)
                yf = f["a"] * np.log2(Tf) + f["b"]
                pos = yf > 0
                ax.plot(Tf[pos], yf[pos], ":", color=f"C{i}", lw=1)
            ys += [r["m_star"] for r in ok] + [r["m_max"] for r in cen]
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xlabel("sequence length T")
    ax.grid(True, which="both", alpha=0.3)
    return ys


def plot_mstar(panels, path, title=""):
    """m* against T (log2 axes) for both models, one panel per success level
    (``panels``: list of ``(level, mstar, fits)``); attention solid, FCN dashed, the
    attention's log-T fit dotted, thin vertical bars the 95% bootstrap intervals of m*
    (to m_max where open above); open markers at m_max: no grid size reached the level."""
    import matplotlib.pyplot as plt

    from stsim.util.plotting import savefig

    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels) + 2.2, 5.0),
                             squeeze=False, sharey=True)
    ys = []
    for ax, (level, mstar, fits) in zip(axes[0], panels):
        ys += _draw_mstar(ax, mstar, fits)
        ax.set_title(f"smallest m with success probability ≥ {level:g}", fontsize=9)
    axes[0][0].set_ylabel("m* (training samples)")
    axes[0][-1].plot([], [], ":", color="0.4", lw=1, label="attention: fit m* = a·log2 T + b")
    axes[0][-1].plot([], [], "-", color="0.4", lw=0.8, alpha=0.6,
                     label="95% bootstrap interval of m*")
    axes[0][-1].plot([], [], "o", mfc="none", color="0.4", ms=9,
                     label="open marker at m_max:\nno m ≤ m_max reached the target")
    if ys:
        axes[0][0].set_ylim(min(ys) / 1.5, max(ys) * 1.5)
    axes[0][-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    if title:
        fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    return savefig(fig, path)


def format_fit(f, kind):
    """One fit of ``fit_mstar`` as text for reports (``kind``: ``"log_T"``, ``"linear_T"``
    or ``"power_T"``; ``"—"`` for no fit)."""
    if f is None:
        return "—"
    if kind == "power_T":
        return f"{2.0 ** f['b']:.3g}·T^{f['a']:.2f} (rms log2 {f['rms_log2']:.2f})"
    x = "log2 T" if kind == "log_T" else "T"
    return f"{f['a']:.3g}·{x} {f['b']:+.3g} (rel rms {f['rel_rms']:.3f})"


def markdown_report(mstar, fits, stats, level=0.9) -> str:
    """m* table (with its bootstrap interval), fits with residuals, and failure kinds per
    series."""
    lines = [f"### Success probability ≥ {level:g}", "",
             "m* [interval]: 95% bootstrap interval (each cell's count redrawn from its "
             "binomial; '> m_max': more than 2.5% of the draws never reach the level).", "",
             "| function | model | T | m* [interval] | first grid m ≥ level | failures below m* (opt / stat) |",
             "|---|---|---|---|---|---|"]
    for r in mstar:
        key = (r["fn"], r["s"], r["model"], r["T"])
        below = [c for k, c in stats.items() if k[:4] == key
                 and (r["m_grid"] is None or k[4] < r["m_grid"])]
        of, sf = sum(c["opt_fail"] for c in below), sum(c["stat_fail"] for c in below)
        ms = (f"> {r['m_max']}" if r["censored"] == "above" else
              f"≤ {r['m_star']:.0f}" if r["censored"] == "below" else f"{r['m_star']:.0f}")
        if r.get("m_star_lo") is not None or r.get("m_star_hi") is not None:
            lo_ = f"{r['m_star_lo']:.0f}" if r.get("m_star_lo") is not None else "?"
            hi_ = f"{r['m_star_hi']:.0f}" if r.get("m_star_hi") is not None else f"> {r['m_max']}"
            ms += f" [{lo_}, {hi_}]"
        lines.append(f"| {r['fn']} s={r['s']} | {r['model']} | {r['T']} | {ms} | "
                     f"{r['m_grid'] or '—'} | {of} / {sf} |")
    lines += ["", "| series | m* = a·log2 T + b | m* = a·T + b | power law | better |",
              "|---|---|---|---|---|"]
    for key, e in fits.items():
        fitted = " | ".join(format_fit(e[k], k) for k in ("log_T", "linear_T", "power_T"))
        lines.append(f"| {key} | {fitted} | {e.get('better', '—')} |")
    lines += ["", "Residuals (m* − fit) per T:", ""]
    for key, e in fits.items():
        for kind in ("log_T", "linear_T"):
            if e[kind] is not None:
                res = ", ".join(f"T={T}: {v:+.1f}" for T, v in zip(e["T"], e[kind]["residuals"]))
                lines.append(f"- {key} {kind}: {res}")
    return "\n".join(lines) + "\n"


def write_mstar_csv(path, mstar):
    """Write the m* rows of :func:`estimate_mstar` (dicts; rows of several levels may be
    concatenated) to the CSV file ``path``: columns ``level, fn, s, model, T, m_star,
    m_star_lo, m_star_hi, m_grid, censored, m_max, rates, n`` (``m_max``: the largest m run
    in the series; ``n``: trials per cell), floats with two decimals."""
    cols = ["level", "fn", "s", "model", "T", "m_star", "m_star_lo", "m_star_hi", "m_grid",
            "censored", "m_max", "rates", "n"]
    write_csv(path, cols, mstar, float_format=".2f")


def describe(cfg) -> str:
    """The protocol in one line (the figures' titles)."""
    lo, hi = cfg["topup_range"]
    desc = (f"success = test accuracy ≥ {cfg['threshold']:g} on {cfg['n_test']} fresh samples; "
            f"{cfg['seeds']} trials per cell"
            + (f" ({cfg['topup']} where the rate is in [{lo:g}, {hi:g}])"
               if (cfg.get("topup") or 0) > cfg["seeds"] else "")
            + f"; {cfg['max_steps']} full-batch Adam steps, "
            f"λ={cfg['weight_decay']:g}, ‖block‖ ≤ {cfg['max_norm']:g}")
    if cfg.get("restarts") not in (None, 1):
        desc += f"; min-norm fit of {cfg['restarts']} restarts"
    return desc


def report(config, out, results) -> dict:
    """Write ``mstar.csv`` (both levels), ``fits.json``, ``report.md``, ``summary.json``
    (with the run record of ``run.json`` when there is one: ``workers``, ``wall_time_s``,
    ``n_run``, ``levels``; and the ``checks``, :mod:`~stsim.studies.sparse.checks`),
    ``sparse_heatmap.png`` and ``sparse_mstar.png`` into ``out``.
    Returns the summary with ``fits`` and ``mstar`` at the first level."""
    cfg = config
    p = plan(cfg)
    stats = stats_of(results["cells"])
    panels = [(pn["level"], pn["mstar"], pn["fits"]) for pn in results["panels"]]
    _, mstar, fits = panels[0]
    checks = sparse_checks(stats, results["grid"], results["panels"])
    os.makedirs(out, exist_ok=True)
    write_mstar_csv(os.path.join(out, "mstar.csv"), [r for _, ms_, _ in panels for r in ms_])
    write_json(os.path.join(out, "fits.json"), {f"{lv:g}": f for lv, _, f in panels})
    with atomic_write(os.path.join(out, "report.md"), "w") as fh:
        fh.write("\n".join(markdown_report(ms_, f, stats, lv) for lv, ms_, f in panels))
        fh.write("\n".join(["", "## Checks", "", summary_line(checks), ""]
                           + checks_table(checks)) + "\n")
    record = run_record_path(out)
    run_record = read_json(record, "run record") if os.path.exists(record) else {}
    summary = {"config": published_config(cfg), "mode": cfg.get("mode"),
               "n_trials": results["n_trials"], "cpu_time_trials_s": results["cpu_time_trials_s"],
               "m_star": {f"{lv:g}": ms_ for lv, ms_, _ in panels},
               "cells": results["cells"], **run_record,
               **{k: results[k] for k in ("diverged", "unmeasured") if k in results},
               "checks": checks}
    write_json(os.path.join(out, "summary.json"), summary)
    desc = describe(cfg)
    plot_heatmaps(stats, results["grid"], p["Ts"], p["fns"], p["models"],
                  os.path.join(out, "sparse_heatmap.png"), desc)
    plot_mstar(panels, os.path.join(out, "sparse_mstar.png"), desc)
    return dict(summary, fits=fits, mstar=mstar)


def console(summary) -> list:
    """What ``stsim sparse`` prints: m* for every (function, model, T), the fits and the
    trials run."""
    out = []
    for r in summary["mstar"]:
        ms = (f">{r['m_max']}" if r["censored"] == "above" else
              f"<={r['m_star']:.0f}" if r["censored"] == "below" else f"{r['m_star']:.0f}")
        out.append(f"{r['fn']:>8s} s={r['s']} {r['model']:>9s} T={r['T']:>4d}: m* {ms}")
    out += [f"{key}: log2T fit {format_fit(e['log_T'], 'log_T')}; T fit "
            f"{format_fit(e['linear_T'], 'linear_T')}" for key, e in summary["fits"].items()]
    done = ("analysed only" if summary["analyse_only"] or "n_run" not in summary
            else f"{summary['n_run']} trials run")
    return out + [f"{done}, {summary['n_trials']} trials in the table"]
