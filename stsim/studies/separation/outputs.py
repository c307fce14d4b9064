"""The separation study's outputs (:func:`report`): ``points.csv``, ``fits.json``,
``summary.json``, ``report.md``, ``separation.png`` and ``agreement.png``."""
from __future__ import annotations

import json
import math
import os

import numpy as np

from stsim.baselines.fcn import fcn_param_count
from stsim.studies.separation.design import params_of, series, tf_params
from stsim.studies.separation.runs import raw_dir
from stsim.util.io import atomic_write, write_csv, write_json
from stsim.util.stats import law_value
from stsim.util.verdict import checks_table, summary_line

__all__ = ["report", "plot_separation", "plot_agreement", "markdown_report", "width_text",
           "POINT_COLUMNS"]

POINT_COLUMNS = ["role", "arch", "q", "T", "d", "width", "budget", "lr", "lr_chosen",
                 "seed_index", "seed", "final_loss", "rel", "params", "run_steps", "cpu_time_s"]

_STYLE = {"transformer": ("o", "C0", "transformer d_e (trained)"),
          "fcn": ("s", "C3", "FCN width (trained, {steps} steps)"),
          "long": ("s", "C1", "FCN width (trained, {long} steps)")}


def plot_separation(A, cfg, path):
    """Per q (columns): smallest width (top) and parameter count (bottom) against T."""
    import matplotlib.pyplot as plt

    from stsim.util.plotting import savefig
    qs = sorted(set(cfg["qs"]) | {f["q"] for f in A["family"]})
    fig, axes = plt.subplots(2, len(qs), figsize=(5.2 * len(qs), 8.4), squeeze=False)
    d = cfg["d"]
    for j, q in enumerate(qs):
        for row, what in enumerate(("width", "params")):
            ax = axes[row, j]
            fam = [f for f in A["family"] if f["q"] == q and f["level"] == cfg["level"]]
            if fam:
                tp = (lambda v: v) if what == "width" else (lambda v: tf_params(d, v))
                fam = [f for f in fam if not f["censored"]]
                Tf, yf = [f["T"] for f in fam], [tp(f["crossing"]) for f in fam]
                lo = [tp(f["lo"]) for f in fam]
                hi = [tp(f["hi"]) for f in fam if math.isfinite(f["hi"])]
                ax.plot(Tf, yf, "-", color="C2", marker=".", label="transformer family "
                        "W=aI, V=γI: located crossing d_e* (best population loss)")
                if len(hi) == len(lo):
                    ax.fill_between(Tf, lo, hi, color="C2", alpha=0.2, lw=0)
            for name, arch, b in series(cfg):
                key = "long" if name.startswith("fcn@") else arch
                mk, col, lab = _STYLE[key]
                lab = lab.format(steps=cfg["steps"], long=cfg["long_steps"])
                ws = [w for w in A["widths"] if w["q"] == q and w["series"] == name]
                ok = [w for w in ws if not w["censored"]]
                sh = {"long": 1.05, "fcn": 1.0, "transformer": 0.95}[key]
                conv = (lambda v, T: v) if what == "width" else (
                    lambda v, T, arch=arch: params_of(arch, T, d, v))
                if ok:
                    y = [conv(w["width"], w["T"]) for w in ok]
                    lo = [conv(w["lo"], w["T"]) for w in ok]
                    hi = [conv(w["hi"], w["T"]) if w["hi"] is not None else conv(w["grid"][-1], w["T"])
                          for w in ok]
                    ax.errorbar([w["T"] * sh for w in ok], y,
                                yerr=[np.subtract(y, lo), np.subtract(hi, y)], fmt=mk,
                                color=col, mfc="none" if key == "long" else col, ms=7,
                                capsize=3, label=lab)
                    low = [w for w in ok if w["lower_censored"]]
                    if low:
                        ax.plot([w["T"] * sh for w in low], [conv(w["width"], w["T"]) for w in low],
                                "v", color=col, ms=6, alpha=0.6)
                cen = [w for w in ws if w["censored"]]
                if cen:
                    y = [conv(w["grid"][-1], w["T"]) for w in cen]
                    ax.plot([w["T"] * sh for w in cen], y, "^", color=col, mfc="none", ms=10,
                            mew=1.5, label=f"  censored: > cap ({name})")
                fit = A["fits"].get(str(q), {}).get(name, {})
                if what == "width" and fit.get("ranking"):
                    best = fit["fits"][fit["ranking"][0]]
                    Tg = np.geomspace(min(best["T"]), max(best["T"]), 60)
                    yv = law_value(best["law"], best["a"], best["b"], Tg)
                    ax.plot(Tg, yv, "--", color=col, lw=1, label=_fit_label("best fit", fit))
            ff = A["fits"].get(str(q), {}).get(f"family@{cfg['level']:g}", {})
            if what == "width" and ff.get("ranking"):
                best = ff["fits"][ff["ranking"][0]]
                Tg = np.array(best["T"])
                ax.plot(Tg, best["fit"], ":", color="C2", lw=1.2,
                        label=_fit_label("family best fit", ff))
            Ts = np.array(sorted(set(cfg["fcn_Ts"]) | set(cfg["family_Ts"])), float)
            yc = 2 * Ts * d if what == "width" else fcn_param_count(Ts, d, 2 * Ts * d)
            ax.plot(Ts, yc, ":", color="0.4", lw=1.2,
                    label="FCN exact construction: width 2Td")
            ax.set_xscale("log", base=2)
            ax.set_yscale("log", base=2)
            ax.grid(True, which="both", alpha=0.3)
            ax.set(xlabel="sequence length T", ylabel="smallest width reaching the target"
                   if what == "width" else "parameters at that width")
            ax.set_title(f"q = {q}, d = {d}: {'width' if what == 'width' else 'parameter count'}"
                         f" reaching {cfg['level']:g}·L0", fontsize=9)
            if row == 0:
                ax.legend(fontsize=6, loc="upper left")
    fig.tight_layout()
    return savefig(fig, path)


def plot_agreement(A, cfg, path):
    """Trained transformer loss (median over seeds, chosen lr) against the family's best
    loss at the same (q, T, d_e)."""
    import matplotlib.pyplot as plt

    from stsim.util.plotting import savefig
    ag = A["agreement"]
    fig, ax = plt.subplots(figsize=(5.6, 5.0))
    for i, T in enumerate(sorted({a["T"] for a in ag})):
        for q, mk in zip(sorted({a["q"] for a in ag}), "os^D"):
            pts = [a for a in ag if a["T"] == T and a["q"] == q]
            if not pts:
                continue
            ax.errorbar([a["family"] for a in pts], [a["trained_median"] for a in pts],
                        yerr=[[a["trained_median"] - min(a["trained"]) for a in pts],
                              [max(a["trained"]) - a["trained_median"] for a in pts]],
                        fmt=mk, color=f"C{i}", capsize=2, label=f"T={T}, q={q}")
    if ag:
        lim = [min(a["family"] for a in ag) * 0.8, max(max(a["trained"]) for a in ag) * 1.2]
        ax.plot(lim, lim, "k-", lw=0.8, label="equal")
        ax.axhline(cfg["level"], color="0.5", ls=":", lw=1)
        ax.axvline(cfg["level"], color="0.5", ls=":", lw=1)
        ax.set(xscale="log", yscale="log")
    ax.set_xlabel("family W=aI, V=γI: best population loss / L0 (MC)")
    ax.set_ylabel(f"trained transformer: val loss / L0 after {cfg['steps']} steps")
    ax.set_title("trained vs family at the same (T, d_e); bars: seed range", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return savefig(fig, path)


def _fit_label(what, c):
    """Legend text of a comparison's first law, naming the laws the data do not tell
    apart from it."""
    best = c["fits"][c["ranking"][0]]
    tied = [c["fits"][k]["formula"] for k in c.get("tied", [])[1:]]
    return (f"  {what}: {best['formula']} (a={best['a']:.2g})"
            + (f"; tied: {', '.join(tied)}" if tied else ""))


def _ci(ci):
    """``[lo, hi]`` with 3 significant digits; an end the data do not bound is ``∓∞``."""
    return (f"[{'−∞' if ci[0] is None else f'{ci[0]:.3g}'}, "
            f"{'∞' if ci[1] is None else f'{ci[1]:.3g}'}]")


def width_text(w) -> str:
    """``width [lo, hi]`` of one series point (``>cap`` when censored)."""
    if w["censored"]:
        return f">{w['grid'][-1]}"
    lo = "?" if w["lo"] is None else f"{w['lo']:g}"
    hi = f">{w['grid'][-1]}" if w["hi"] is None else f"{w['hi']:g}"
    pre = "≤" if w["lower_censored"] else ""
    return f"{pre}{w['width']} [{lo}, {hi}]"


def markdown_report(A, cfg) -> str:
    """Markdown tables: widths (with interval, params, grid medians), family, fits, agreement."""
    L = [f"Level: {cfg['level']:g}·L0. Widths: smallest grid width whose median over "
         f"{cfg['seeds']} seeds reaches it (and every larger grid width too); "
         f"[95% paired bootstrap over seeds]; ≤: the smallest grid width already passes. "
         f"Rates: the one the tuning seed chose; ↓ / ↑: it is the lowest / highest rate tried "
         f"for the cell (the grid {', '.join(f'{v:g}' for v in cfg['lrs'])} is extended past "
         f"an end by the rates {', '.join(f'{v:g}' for v in cfg['lr_extra'])} while the "
         f"chosen rate sits on it; an arrow at the end of all of them: nothing left to try; "
         f"? : the extension is not finished).", "",
         "| q | series | T | smallest width [95%] | params | grid: median loss/L0 (lr) |",
         "|---|---|---|---|---|---|"]
    mark = {"": "", "low-end": "↓", "high-end": "↑", "low": "↓?", "high": "↑?"}
    for w in A["widths"]:
        g = ", ".join(f"{x}: {m:.3f} ({lr:g}{mark[e]})" for x, m, lr, e in
                      zip(w["grid"], w["medians"], w["lr"], w.get("lr_edge", [""] * len(w["lr"]))))
        L.append(f"| {w['q']} | {w['series']} | {w['T']} | {width_text(w)} | "
                 f"{w['params'] if w['params'] is not None else '–'} | {g} |")
    L += ["", "Family W_ee = aI, V_x = γI: the located crossing d_e* ± its SE (the spread of "
          "its Monte-Carlo replicates; the widths library, the number every study quotes):",
          "",
          "| q | level | " + " | ".join(f"T={T}" for T in cfg["family_Ts"]) + " |",
          "|---|---|" + "---|" * len(cfg["family_Ts"])]
    for q in sorted({f["q"] for f in A["family"]}):
        for lv in cfg["levels"]:
            cellsq = {f["T"]: f for f in A["family"] if f["q"] == q and f["level"] == lv}
            row = []
            for T in cfg["family_Ts"]:
                f = cellsq.get(T)
                if f is None:
                    row.append("–")
                elif f["censored"]:
                    row.append(f">{cfg['family_max_width']}")
                else:
                    row.append(f"{f['crossing']:.1f} ± {f['se']:.2f}")
            L.append(f"| {q} | {lv:g} | " + " | ".join(row) + " |")
    L += ["", "Fits: interval-censored maximum likelihood on log2(width) — each smallest "
          "width is the grid cell (the grid width below, this width], a censored point lies "
          "above its cap (>); 95% profile-likelihood CIs, never narrower than the laws through "
          "every cell; σ: scatter of log2(width) about the law (0.01 = the floor: the law "
          "passes through every cell); Δ2ℓ: 2 × log-likelihood below the first (all laws have "
          "a, b, σ; < 2: not told apart); residuals: log2 distance from the fit to each cell "
          "(0: inside it).", "",
          "| q | series | n (cens.) | law | a [95% CI] | b [95% CI] | σ | Δ2ℓ | "
          "residuals by T | rank |", "|---|---|---|---|---|---|---|---|---|---|"]
    for q, e in sorted(A["fits"].items()):
        for name, c in sorted(e.items()):
            if not c["fits"]:
                L.append(f"| {q} | {name} | {c['n_points']} | – | – | – | – | – | {c['note']}"
                         f"{'; censored T: ' + str(c['censored_T']) if c['censored_T'] else ''} | – |")
                continue
            for rank, law in enumerate(c["ranking"], 1):
                f = c["fits"][law]
                res = ", ".join(f"{int(T)}: {r:+.2f}" for T, r in zip(f["T"], f["residuals_log2"]))
                tie = "=" if law in c.get("tied", []) and len(c.get("tied", [])) > 1 else ""
                L.append(f"| {q} | {name} | {f['n']} ({f['n_censored']}) | {f['formula']} | "
                         f"{f['a']:.3g} {_ci(f['a_ci'])} | {f['b']:.3g} {_ci(f['b_ci'])} | "
                         f"{f['sigma']:.2f} | {f['delta_2loglik']:.1f} | {res} | {rank}{tie} |")
    if A["agreement"]:
        L += ["", "Trained transformer vs family at the same (q, T, d_e) (loss / L0):", "",
              "| q | T | d_e | trained (median; seeds) | family (MC mean ± sd) | ratio |",
              "|---|---|---|---|---|---|"]
        for a in A["agreement"]:
            L.append(f"| {a['q']} | {a['T']} | {a['d_e']} | {a['trained_median']:.3f} "
                     f"({', '.join(f'{x:.3f}' for x in a['trained'])}) | {a['family']:.3f} ± "
                     f"{a['family_sd']:.3f} | {a['ratio']:.2f} |")
    if "checks" in A:
        L += ["", "## Checks", "", summary_line(A["checks"]), ""] + checks_table(A["checks"])
    return "\n".join(L) + "\n"


def published_config(cfg) -> dict:
    """The settings as written to ``summary.json`` (tuples as lists, without ``mode``)."""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in cfg.items() if k != "mode"}


def report(config, out, results) -> dict:
    """Write ``points.csv``, ``fits.json``, ``summary.json``, ``report.md``,
    ``separation.png`` and ``agreement.png`` into ``out`` from the analysis ``results``;
    ``summary.json`` carries the run record of ``raw/run.json`` (``workers``,
    ``wall_time_s``) when there is one. Returns the summary (analysis included)."""
    cfg, A = config, results
    os.makedirs(out, exist_ok=True)
    write_csv(os.path.join(out, "points.csv"), POINT_COLUMNS, A["points"])
    write_json(os.path.join(out, "fits.json"), A["fits"])
    cpu = sum(p["cpu_time_s"] or 0.0 for p in A["points"] if p["budget"] == p["run_steps"])
    record = os.path.join(raw_dir(out), "run.json")
    run_record = json.load(open(record, encoding="utf-8")) if os.path.exists(record) else {}
    summary = {"config": published_config(cfg),
               "widths": A["widths"], "family": A["family"], "agreement": A["agreement"],
               "incomplete": A["incomplete"], "cpu_time_training_s": cpu,
               "mode": cfg.get("mode"), **run_record, "checks": A["checks"]}
    write_json(os.path.join(out, "summary.json"), summary)
    with atomic_write(os.path.join(out, "report.md"), "w") as fh:
        fh.write(markdown_report(A, cfg))
    plot_separation(A, cfg, os.path.join(out, "separation.png"))
    if A["agreement"]:
        plot_agreement(A, cfg, os.path.join(out, "agreement.png"))
    return dict(A, **summary)


def console(summary) -> list:
    """What ``stsim separation`` prints: the smallest width of every series point."""
    return ([f"q={w['q']} {w['series']:>10s} T={w['T']:>4d}: {width_text(w)}"
             for w in summary["widths"]]
            + [f"q={w['q']} {w['series']:>10s} T={w['T']:>4d}: incomplete (done "
               f"{w['done']} of {w['designed']})" for w in summary["incomplete"]])
