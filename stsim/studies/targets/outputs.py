"""The output files of ``stsim targets`` (:func:`report`, :func:`write_outputs`):
``targets.json`` (every check with se, critical and verdict), one figure per part with its
CSV beside it (``represents``, ``learns`` with ``curves.csv``, ``length``) and ``report.md``
with the side-by-side table; and what the command prints (:func:`console`).

The figures' module (matplotlib) is imported only where they are drawn, so that loading the
study (its command's parser) does not load it."""
from __future__ import annotations

import math
import os

import numpy as np

from stsim.studies.cells import made_with
from stsim.studies.contract import divergence, divergence_markdown, raw_path
from stsim.studies.targets.design import made_by
from stsim.studies.targets.runs import encoding_width
from stsim.studies.targets.widths import family_kind, footing
from stsim.util.io import atomic_write, read_json, write_csv, write_json
from stsim.util.stats import law_value
from stsim.studies.tuning import at_chosen, read_curve
from stsim.util.verdict import checks_table

__all__ = ["write_outputs", "table", "PARTS", "report", "console"]

#: the parts whose checks targets.json lists (each a dict target -> list of checks)
PARTS = ("represents", "learns", "length", "width_checks", "separation")


def _represents(cfg, out, s):
    from stsim.util.plotting import plt, savefig
    rows = [[t, c["claim"], c["measured"], c["se"], c["threshold"], c["verdict"]]
            for t in cfg["targets"] for c in s["represents"][t]]
    write_csv(os.path.join(out, "represents.csv"),
              ["target", "claim", "measured", "se", "threshold", "verdict"], rows)
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(10, 4), width_ratios=(2, 1))
    loss = [s["represents"][t][0]["measured"] for t in cfg["targets"]]
    ax.bar(range(len(loss)), np.maximum(loss, 1e-40), color="C0")
    ax.axhline(1e-20, color="k", ls=":", lw=0.8)
    ax.set(yscale="log", xticks=range(len(loss)), xticklabels=cfg["targets"],
           ylabel="construction's loss (largest batch)")
    ax.set_title(f"the exact constructions at T = {cfg['rep_T']}, q = {cfg['q']}, "
                 f"d = {cfg['d']} (dotted: 1e-20)", fontsize=9)
    fits = [c for t in cfg["targets"] for c in s["represents"][t] if "fit" in c]
    for k, c in enumerate(fits):
        bx.errorbar([k], [c["fit"] / c["Lc"]], yerr=[c["se"] / c["Lc"]], fmt="o", color="C3",
                    label="least-squares fit (held out)" if k == 0 else None)
        bx.hlines(c["floor"] / c["Lc"], k - 0.3, k + 0.3, color="k",
                  label="floor d(q-1)/q^3" if k == 0 else None)
    bx.axhline(cfg["ratio"], color="k", ls=":", lw=0.8)
    bx.set(xticks=range(len(fits)), xticklabels=[c["claim"].split(":")[0] for c in fits],
           xlim=(-1, len(fits)), ylim=(0, None), ylabel="loss / L_c (best constant's)")
    bx.set_title(f"linear readout (dotted: {cfg['ratio']:g})", fontsize=9)
    bx.legend(fontsize=7, loc="center")
    savefig(fig, os.path.join(out, "represents.png"))


def _learns(cfg, out, table):
    from stsim.util.plotting import plt, savefig
    fig, ax = plt.subplots(1, 1, figsize=(7, 4.5))
    rows = []
    for k, t in enumerate(cfg["targets"]):
        for j, r in enumerate(r for r in table if r["target"] == t):
            c, up = read_curve(r, "runs.csv", "target"), footing(t, cfg["d"], cfg["q"])
            ax.plot(c["step"], np.asarray(c["rel"]) * up, color=f"C{k % 10}", lw=1.0,
                    alpha=1.0 if j == 0 else 0.5, label=t if j == 0 else None)
            rows += [[t, r["seed"], a, v * up, v] for a, v in zip(c["step"], c["rel"])]
    write_csv(os.path.join(out, "curves.csv"), ["target", "seed", "step", "rel", "rel_zero"],
              rows)
    ax.axhline(cfg["ratio"], color="k", ls=":", lw=0.8)
    ax.set(yscale="log", xlabel="step", ylabel="validation loss / L_c (best constant's)")
    ax.set_title(f"T = {cfg['T']}, q = {cfg['q']}, d = {cfg['d']}: every seed "
                 f"(dotted: {cfg['ratio']:g})", fontsize=9)
    ax.legend(fontsize=8)
    savefig(fig, os.path.join(out, "learns.png"))


def _length(cfg, out, s, d_e):
    from stsim.util.plotting import plt, savefig
    fig, ax = plt.subplots(1, 1, figsize=(7, 4))
    rows = []
    for k, t in enumerate(cfg["targets"]):
        cks = s["learns"][t] + s["length"][t]
        Ts = [c["T"] for c in cks]
        m = np.array([c["measured"] for c in cks])
        se = np.array([c["se"] for c in cks])
        ax.errorbar(Ts, m, yerr=se, fmt="o-", color=f"C{k % 10}", ms=4, capsize=3, label=t)
        rows += [[t, c["T"], c["measured"], c["se"], c["n"], c["verdict"], c["rel_zero"]]
                 for c in cks]
    write_csv(os.path.join(out, "length.csv"), ["target", "T_test", "rel", "se", "seeds",
                                                "verdict", "rel_zero"], rows)
    ax.axhline(cfg["ratio"], color="k", ls=":", lw=0.8)
    ax.axvline(cfg["T"], color="0.6", ls="--", lw=0.8)
    ax.set(yscale="log", xlabel="T at evaluation (dashed: T of training)",
           ylabel="validation loss / L_c (best constant's)")
    ax.set_title(f"trained at T = {cfg['T']} (stochastic encoding, d_e = "
                 f"{d_e}): seed mean ± SE", fontsize=9)
    ax.legend(fontsize=8)
    savefig(fig, os.path.join(out, "length.png"))


def _law_text(fits):
    """The best-ranked law of a width fit and the laws tied with it."""
    if not fits or not fits.get("ranking"):
        return (fits or {}).get("note") or "not fitted"
    f = fits["fits"][fits["ranking"][0]]
    tied = [k for k in fits.get("tied", []) if k != fits["ranking"][0]]
    lo, hi = f["a_ci"]
    if not determined(f):
        return (f"{f['formula']}: a not determined by the data, its interval [{lo:.3g}, "
                f"{hi:.3g}] wider than itself")
    return (f"{f['formula']}, a = {f['a']:.3g} [{lo:.3g}, {hi:.3g}]"
            + (f" (tied: {', '.join(tied)})" if tied else ""))


def determined(f) -> bool:
    """Whether a fitted law's ``a`` is determined by the data: its interval finite and
    narrower than ``|a|`` (a relative half-width below 1/2); else only the interval is
    printed, never the point."""
    lo, hi = f["a_ci"]
    return bool(np.isfinite(lo) and np.isfinite(hi) and hi - lo < abs(f["a"]))


def _widths(cfg, out, s):
    """``widths.png`` (log axes, both arms, the fitted laws) and ``widths.csv``."""
    from stsim.util.plotting import plt, savefig
    rows = []
    for t, ps in s["family"].items():
        rows += [["transformer family", t, p["T"], p["d_e"], p["se"], p["lo"], p["hi"],
                  p["censored"]] for p in ps]
    for t, ws in s["fcn"].items():
        rows += [["fcn trained", t, w["T"], w["width"], math.nan, w["below"] or 0,
                  w["width"] or w["grid"][-1], int(w["censored"])] for w in ws]
    write_csv(os.path.join(out, "widths.csv"), ["arm", "target", "T", "width", "se",
                                                "lower", "upper", "censored"], rows)
    if not rows:                # the width parts not run (yet): no figure
        return
    ts = list(cfg["targets"])
    nc = min(2, len(ts))
    nr = -(-len(ts) // nc)
    fig, axes = plt.subplots(nr, nc, figsize=(4.8 * nc, 3.9 * nr), squeeze=False)
    for ax in axes.flat[len(ts):]:
        ax.set_visible(False)
    for ax, t in zip(axes.flat, ts):
        fam_t = t if t in s["family"] else "mean"
        for name, ps, fits, col in (
                (f"family ({'the mean' if fam_t != t else t})", s["family"].get(fam_t, []),
                 s["family_fits"].get(fam_t), "C2"),
                ("FCN trained", s["fcn"].get(t, []), s["fcn_fits"].get(t), "C3")):
            ok = [p for p in ps if not p["censored"]]
            T = np.array([p["T"] for p in ok], float)
            if "fcn" in name.lower():
                w = np.array([p["width"] for p in ok], float)
                lo = np.array([p["below"] or p["width"] / 2 ** 0.5 for p in ok], float)
                ax.errorbar(T, w, yerr=[w - lo, 0 * w], fmt="s", color=col, ms=4, capsize=2,
                            label=f"{name} (cell below)")
                cen = [p for p in ps if p["censored"]]
                ax.plot([p["T"] for p in cen], [p["grid"][-1] for p in cen], "^", color=col,
                        mfc="none", label="FCN censored" if cen else None)
            else:
                ax.errorbar(T, [p["d_e"] for p in ok], yerr=[p["se"] for p in ok], fmt="o-",
                            color=col, ms=4, capsize=2, label=name)
            if fits and fits.get("ranking") and len(T) and determined(
                    fits["fits"][fits["ranking"][0]]):          # no undetermined law drawn
                f = fits["fits"][fits["ranking"][0]]
                Tg = np.geomspace(T.min(), T.max(), 50)
                ax.plot(Tg, law_value(f["law"], f["a"], f["b"], Tg), ":", color=col, lw=1,
                        label=f"fit {f['formula']}, a = {f['a']:.3g}")
        if fam_t != "mean" and s["family"].get("mean"):
            m = [p for p in s["family"]["mean"] if not p["censored"]]
            ax.plot([p["T"] for p in m], [p["d_e"] for p in m], "--", color="0.6", lw=1,
                    label="family (the mean)")
        ax.set(xscale="log", yscale="log", xlabel="T", ylabel=f"width reaching "
               f"{cfg['reach']:g} L_c")
        ax.set_title(f"{t} (q = {cfg['q']}, d = {cfg['width_d']})", fontsize=9)
        ax.legend(fontsize=6)
    fig.tight_layout()
    savefig(fig, os.path.join(out, "widths.png"))


def _width_cells(s, t):
    fam = s["family"].get(t)
    if fam:
        law = "d_e* " + ", ".join(f"{p['d_e']:.1f}" if not p["censored"] else "cens."
                                  for p in fam) + f"; {_law_text(s['family_fits'].get(t))}"
    else:
        law = "not measured" if family_kind(t) == "own" else "the mean's (derived)"
    ck = s["width_checks"][t]
    law += "".join(f"; {c['verdict']} {c['measured']:.3g} ± {c['se']:.2g}" for c in ck[:-1])
    fc = s["fcn"].get(t, [])
    fcn = (", ".join(f"T={w['T']} " + (f"> {w['grid'][-1]}" if w["censored"] else
                                        str(w["width"])) for w in fc)
           + f"; {_law_text(s['fcn_fits'].get(t))}; {ck[-1]['verdict']}; construction "
           + ("2Td" if s["fcn_construction"].get(t) else "none in the code"))
    sep = s["separation"][t][0]
    return [law, fcn, f"{sep['verdict']} (decided by: {sep['decided_by']})"]


def table(cfg, s) -> list:
    """The side-by-side rows: target, then each part's verdict (``held`` only when every
    check of the part held) with its numbers; length generalisation one verdict per T."""
    def cell(checks, fmt):
        if not checks:
            return "not measured"
        vs = {c["verdict"] for c in checks}
        v = "held" if vs == {"held"} else "failed" if "failed" in vs else "inconclusive"
        return f"{v}: " + ", ".join(fmt(c) for c in checks)
    def rel(c):             # over L_c; over L(0) beside it where the two differ
        zero = (f" (over L(0): {c['rel_zero']:.4f})"
                if abs(c["rel_zero"] - c["measured"]) > 1e-12 * abs(c["measured"]) else "")
        return f"{c['measured']:.4f} ± {c['se']:.4f}{zero}"
    rep = lambda c: (f"linear readout {c['fit']:.5g} ± {c['se']:.1g} (floor {c['floor']:.5g})"
                     if "fit" in c else f"construction {c['measured']:.2g}")  # noqa: E731
    return [[t, cell(s["represents"][t], rep), cell(s["learns"][t], rel),
             ", ".join(f"T={c['T']} {rel(c)} {c['verdict']}" for c in s["length"][t]),
             *_width_cells(s, t)] for t in cfg["targets"]]


def write_outputs(cfg, out, s, d_e):
    """Every output file (module docstring); ``d_e``: the runs' encoding width (the length
    figure's title). Returns the summary with ``checks`` (every check, a list) and
    ``table`` (the side-by-side rows)."""
    runs = at_chosen(made_with(raw_path(out, "runs.csv"), made_by(cfg, "runs"),
                               ok=True), "target", s["mults"])
    checks = [c for part in PARTS for t in cfg["targets"] for c in s[part][t]]
    s = dict(s, checks=checks, table=table(cfg, s))
    write_json(os.path.join(out, "targets.json"), s)
    _represents(cfg, out, s)
    _learns(cfg, out, runs)
    _length(cfg, out, s, d_e)
    _widths(cfg, out, s)
    rec = s.get("record") or {}
    lines = [f"# stsim targets ({cfg['mode']})", "",
             f"q = {cfg['q']}, d = {cfg['d']}, T = {cfg['T']}, batch {cfg['batch']}, "
             f"{cfg['seeds']} seeds, multipliers {list(cfg['mults'])} chosen per target on "
             f"a tuning seed: {s['mults']}. Run: {rec.get('wall_time_s', float('nan')):.0f} s, "
             f"load average (1, 5, 15 min) at its end "
             f"{', '.join(f'{x:.2f}' for x in rec.get('load_avg', []))}.", "",
             "| target | represents | learns (val/L_c) | length generalisation | width law "
             "(transformer family) | FCN law (trained) | separation |",
             "|---|---|---|---|---|---|---|"]
    lines += ["| " + " | ".join(r) + " |" for r in table(cfg, s)]
    lines += ["", "## Checks", ""] + checks_table(checks)
    with atomic_write(os.path.join(out, "report.md"), "w") as fh:
        fh.write("\n".join(lines) + "\n" + divergence_markdown(s))
    return s


def _cause(t, results) -> str:
    """Why the learns check of target ``t`` has no finite value."""
    n = sum(w.startswith(f"{t} seed ") for w in results["diverged"])
    if n:
        return f"{n} of its runs diverged at multiplier {results['mults'].get(t)}"
    if any(e.startswith(f"runs: {t} ") for e in results["errors"]):
        return "a run raised"
    return "its value is not finite"


def report(cfg, out, results):
    """``targets.json`` (every check with se, critical and verdict; the config; the run
    record), ``represents.png``/``.csv``, ``learns.png`` with ``curves.csv``,
    ``length.png``/``.csv``, ``widths.png``/``.csv``, ``report.md``; returns the summary."""
    rec = raw_path(out, "run.json")
    record = read_json(rec, "run record") if os.path.isfile(rec) else {}
    n_runs = len(cfg["targets"]) * cfg["seeds"]
    div = divergence(results["diverged"], n_runs,
                     [f"learns: {t} ({_cause(t, results)})" for t in cfg["targets"]
                      if not np.isfinite(results["learns"][t][0]["measured"])]
                     + [f"a run raised: {e}" for e in results["errors"]])
    summary = dict(results, **div, record=record, config=dict(cfg))
    return write_outputs(cfg, out, summary, encoding_width(cfg))


def console(summary) -> list:
    """What ``stsim targets`` prints: its side-by-side table, a row per target."""
    return [" | ".join(row) for row in summary["table"]]
