"""The outputs of ``stsim attention``: :func:`report` and every writer of its files
(:func:`write_outputs`): ``attention.json`` (every check with se, critical and verdict;
``errors``, the failed runs, when there are), the CSVs beside each figure, ``curves.png``
(validation loss per mechanism, every seed), ``width.png`` (width against T on log axes with
the fitted laws), ``report.md``; and :func:`console`, what the command prints."""
from __future__ import annotations

import os

import numpy as np

from stsim.util.io import atomic_write, write_csv, write_json
from stsim.util.stats import law_value
from stsim.studies.attention.design import made_by, named
from stsim.studies.contract import raw_path
from stsim.studies.cells import made_with
from stsim.studies.tuning import at_chosen, read_curve
from stsim.util.verdict import checks_table

__all__ = ["write_outputs", "report", "console"]


def _curves(cfg, out, table):
    # matplotlib only when a figure is drawn: importing the study (its command, its
    # workers) does not load it
    from stsim.util.plotting import plt, savefig
    fig, ax = plt.subplots(1, 1, figsize=(7, 4.5))
    rows = []
    for k, mech in enumerate(cfg["mechanisms"]):
        runs = [r for r in table if r["mechanism"] == mech and r.get("curve")]
        for j, r in enumerate(runs):
            c = read_curve(r, "runs.csv", "mechanism")
            ax.plot(c["step"], c["rel"], color=f"C{k % 10}", lw=1.2 if j == 0 else 0.6,
                    alpha=1.0 if j == 0 else 0.5, label=mech if j == 0 else None)
            rows += [[mech, r["seed"], s, v] for s, v in zip(c["step"], c["rel"])]
    write_csv(os.path.join(out, "curves.csv"), ["mechanism", "seed", "step", "rel"], rows)
    ax.axhline(cfg["level"], color="k", ls=":", lw=0.8)
    ax.set(yscale="log", xlabel="step", ylabel="validation loss / L(0)")
    task = "" if cfg["target"] == "mean" else f", target {cfg['target']}"
    ax.set_title(f"T = {cfg['T']}, q = {cfg['q']}{task}: every seed (dotted: {cfg['level']:g})",
                 fontsize=9)
    ax.legend(fontsize=7, ncol=2)
    savefig(fig, os.path.join(out, "curves.png"))


def _widths(cfg, out, results):
    # matplotlib only when a figure is drawn: importing the study (its command, its
    # workers) does not load it
    from stsim.util.plotting import plt, savefig
    rows = results["width"]
    write_csv(os.path.join(out, "width.csv"),
              ["series", "T", "crossing", "crossing_se", "lo", "hi", "censored", "n",
               "precise", "replicates", "width", "below"],
              [[r["series"], r["T"], r["crossing"], r["crossing_se"], r["lo"], r["hi"],
                int(r["censored"]), r["n"], r["precise"], r["replicates"], r["width"],
                r["below"]] for r in rows])
    fig, ax = plt.subplots(1, 1, figsize=(7, 4.5))
    for k, series in enumerate(sorted({r["series"] for r in rows})):
        pts = [r for r in rows if r["series"] == series]
        T = np.array([p["T"] for p in pts], float)
        # the located crossing where there is one (the grid width where censored)
        w = np.array([p["crossing"] if not p["censored"] and np.isfinite(p["crossing"])
                      else p["width"] for p in pts], float)
        cen = np.array([p["censored"] for p in pts], bool)
        col = f"C{k % 10}"
        mk = "s" if "exact" in series else "o"
        if (~cen).any():
            ax.plot(T[~cen], w[~cen], mk, color=col, ms=4, label=series)
        if cen.any():
            ax.plot(T[cen], w[cen], "^", color=col, ms=6, mfc="none",
                    label=f"{series}: above the largest width tried")
        f = results["fits"].get(series)
        if f and f["ranking"]:
            law = f["ranking"][0]
            fit = f["fits"][law]
            x = np.geomspace(T.min(), T.max(), 50)
            y = law_value(law, fit["a"], fit["b"], x)
            ax.plot(x, y, "-", color=col, lw=0.8, alpha=0.7)
    ax.set(xscale="log", yscale="log", xlabel="T",
           ylabel=f"d_e where the sphere family reaches {cfg['width_level']:g} L(0)")
    ax.set_title("points: located crossings; lines: the best-ranked interval-censored law of "
                 "each series", fontsize=9)
    ax.legend(fontsize=7)
    savefig(fig, os.path.join(out, "width.png"))


def _markdown(cfg, results):
    lines = [f"# stsim attention ({cfg['mode']})", "",
             f"Task: the target {cfg['target']} (its own L(0)) in the tuned, reported and rank "
             f"runs; the width family, trained widths and temperature map are the mean "
             f"task's.", "",
             "| mechanism | step x | lr W | lr V | held | init |", "|---|---|---|---|---|---|"]
    for m, p in results["mechanisms"].items():
        lines.append(f"| {m} | {p['mult']} | {p['lr_W']} | {p['lr_V']} | {p['freeze']} | "
                     f"{p['init']} |")
    lines += [""] + checks_table(results["checks"], context=("n",))
    lines += ["", "| T | q | d_e | smallest r <= level | smallest r <= width level |",
              "|---|---|---|---|---|"]
    loose = f"smallest_r_{cfg['width_level']:g}"
    for r in results["rank"]:
        lines.append(f"| {r['T']} | {r['q']} | {r['d_e']} | {r['smallest_r_learns']} | "
                     f"{r[loose]} |")
    lines += ["", "| trained on the sphere | T | smallest d_e <= width level | family cell |",
              "|---|---|---|---|"]
    for r in results.get("trained", []):
        lines.append(f"| {r['mechanism']} | {r['T']} | {r['smallest_trained']} | "
                     f"{r['family']} |")
    if results.get("errors"):
        lines += ["", "## Failed runs", "", f"{len(results['errors'])} run(s) raised an "
                  "error; the checks that needed them are inconclusive (a rerun with the same "
                  "--out tries them again):", ""]
        lines += [f"- raw/{e['table']}.csv, {e['run']}: {e['error']}" for e in results["errors"]]
    return "\n".join(lines) + "\n"


def write_outputs(cfg, out, results) -> dict:
    """Write every output of the study into ``out``; the summary: its ``checks`` and, when
    runs failed, ``errors`` (``"raw/<table>.csv, <run>: <error>"``)."""
    write_json(os.path.join(out, "attention.json"), results)
    temp = results["temperature"]
    write_csv(os.path.join(out, "temperature.csv"), list(temp[0]) if temp else ["tau"],
              [list(r.values()) for r in temp])
    write_csv(os.path.join(out, "rank.csv"), ["T", "q", "d_e", "r", "measured", "se",
                                              "critical", "verdict"],
              [[r["T"], r["q"], r["d_e"], c["r"], c["measured"], c["se"], c["critical"],
                c["verdict"]] for r in results["rank"] for c in r["cells"]])
    write_csv(os.path.join(out, "trained.csv"), ["mechanism", "T", "d_e", "measured", "se",
                                                 "critical", "verdict"],
              [[r["mechanism"], r["T"], c["d_e"], c["measured"], c["se"], c["critical"],
                c["verdict"]] for r in results.get("trained", []) for c in r["cells"]])
    _curves(cfg, out, at_chosen(made_with(raw_path(out, "runs.csv"),
                                          made_by(cfg, "runs")), "mechanism",
                                {m: p["mult"] for m, p in results["mechanisms"].items()}))
    _widths(cfg, out, results)
    with atomic_write(os.path.join(out, "report.md"), "w") as f:
        f.write(_markdown(cfg, results))
    errors = [f"raw/{e['table']}.csv, {e['run']}: {e['error']}"
              for e in results.get("errors", [])]
    return {"checks": results["checks"], "out": out, **({"errors": errors} if errors else {})}


def report(cfg, out, results) -> dict:
    """Every output file (:func:`stsim.studies.attention.outputs.write_outputs`)."""
    return dict(write_outputs(named(cfg), out, results),
                **{k: results[k] for k in ("diverged", "unmeasured")})


def console(summary) -> list:
    """What ``stsim attention`` prints above the counts of its checks: nothing more (its
    tables are in report.md)."""
    return []
