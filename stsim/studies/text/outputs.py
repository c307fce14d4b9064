"""The outputs of ``stsim text``: :func:`report` and the files it writes (``text.json``,
``report.md``, ``length.png``/``.csv``, ``attention.png``/``.csv``), and :func:`console`.

:func:`report` adds the divergence entries (:func:`stsim.studies.contract.divergence`) to
the analysis and writes ``text.json`` (every check with se, critical and verdict),
``report.md`` (the side-by-side table and the checks), ``length.png`` with ``length.csv``
(the loss against the test length per encoding and task, log axis) and ``attention.png``
with ``attention.csv`` (a trained masked model's attention by offset from the masked
position, per encoding); :func:`console` is what the command prints.
"""
from __future__ import annotations

import os

import numpy as np

from stsim.studies.contract import divergence, divergence_markdown
from stsim.studies.text.design import arms_of
from stsim.util.io import atomic_write, write_csv, write_json
from stsim.util.verdict import checks_table, summary_line

__all__ = ["report", "console", "write_outputs", "table"]


def table(cfg, s) -> list:
    """A row per arm: task, encoding, multiplier, in distribution, then each T_test, and
    the verdict of each of its length checks."""
    verdict = {(c["task"], c["encoding"], c["T"]):
               ("does not generalise: " if "fails to generalise" in c["claim"] else
                "generalises: " if c["part"] == "length" else "learns: ") + c["verdict"]
               for c in s["checks"] if c.get("part") in ("learns", "length")}
    rows = []
    for a in s["arms"]:
        m, se = a["in_distribution"]
        cells = [f"{v[0]:.4g} ± {v[1]:.2g} "
                 f"({verdict.get((a['task'], a['encoding'], int(T)), '?')})"
                 for T, v in a["length"].items()]
        rows.append([a["task"], a["encoding"], f"{a['mult']}",
                     f"{m:.4g} ± {se:.2g} ({verdict.get((a['task'], a['encoding'], cfg['T']))})",
                     *cells])
    return rows


def _length(cfg, out, s):
    # matplotlib only when a figure is drawn: importing the study (its command, its
    # workers) does not load it
    from stsim.util.plotting import plt, savefig
    tasks = list(dict.fromkeys(a["task"] for a in s["arms"]))
    fig, axes = plt.subplots(1, len(tasks), figsize=(5.2 * len(tasks), 4), squeeze=False)
    rows = []
    for ax, t in zip(axes[0], tasks):
        for k, a in enumerate(x for x in s["arms"] if x["task"] == t):
            Ts = [cfg["T"]] + [int(T) for T in a["length"]]
            v = [a["in_distribution"]] + list(a["length"].values())
            ax.errorbar(Ts, [x[0] for x in v], yerr=[x[1] for x in v], fmt="o-", ms=4,
                        capsize=2, color=f"C{k}", label=a["encoding"])
            rows += [[t, a["encoding"], T, x[0], x[1]] for T, x in zip(Ts, v)]
        unit = "bits per character" if t == "masked" else "loss / initial loss"
        ax.set(xscale="log", yscale="log" if t != "masked" else "linear",
               xlabel="T at evaluation (first point: T of training)", ylabel=unit)
        ticks = [cfg["T"], *cfg["T_test"]]
        ax.set_xticks(ticks, [str(x) for x in ticks])
        ax.xaxis.set_minor_locator(plt.NullLocator())
        if t == "masked":
            ax.axhline(s["baselines"]["unigram_bits"], color="0.5", ls=":", lw=1,
                       label="unigram")
            ax.axhline(s["baselines"]["neighbour"]["bits"], color="0.3", ls="--", lw=1,
                       label="neighbours")
        else:
            ax.axhline(cfg["ratio"], color="k", ls=":", lw=0.8)
        ax.set_title(f"{t}: trained at T = {cfg['T']}, seed mean ± SE", fontsize=9)
        ax.legend(fontsize=7)
    write_csv(os.path.join(out, "length.csv"), ["task", "encoding", "T", "loss", "se"], rows)
    fig.tight_layout()
    savefig(fig, os.path.join(out, "length.png"))


def _attention(cfg, out, s):
    # matplotlib only when a figure is drawn: importing the study (its command, its
    # workers) does not load it
    from stsim.util.plotting import plt, savefig
    arms = [a for a in s["arms"] if a["task"] == "masked" and a["attention"]]
    rows = [[a["encoding"], int(k), v] for a in arms for k, v in a["attention"].items()]
    write_csv(os.path.join(out, "attention.csv"), ["encoding", "offset", "weight"], rows)
    if not arms:
        return
    fig, ax = plt.subplots(1, 1, figsize=(6.5, 4))
    for k, a in enumerate(arms):
        off = sorted(int(x) for x in a["attention"])
        ax.plot(off, [a["attention"][str(o)] for o in off], "o-", ms=3, color=f"C{k}",
                label=a["encoding"])
    ax.axhline(1.0 / cfg["T"], color="0.5", ls=":", lw=1, label="uniform 1/T")
    ax.set(xlabel="offset from the masked position", ylabel="mean attention weight",
           yscale="log")
    ax.set_title(f"masked character, trained at T = {cfg['T']} (seed 0, held-out windows)",
                 fontsize=9)
    ax.legend(fontsize=7)
    savefig(fig, os.path.join(out, "attention.png"))


def write_outputs(cfg, out, s):
    """Every output file (module docstring)."""
    rows = table(cfg, s)
    write_json(os.path.join(out, "text.json"), dict(s, table=rows))
    _length(cfg, out, s)
    _attention(cfg, out, s)
    head = ["task", "encoding", "multiplier", f"T = {cfg['T']}"] + \
        [f"T = {T}" for T in cfg["T_test"]]
    b = s["baselines"]
    lines = [f"# stsim text ({cfg['mode']})", "",
             f"Trained at T = {cfg['T']}, q = {cfg['q']} (masked: 1), d = 65 (one-hot; the "
             f"Gaussian task at the same d), SGD {cfg['steps']} steps at lr {cfg['lr']:g} x "
             f"the multiplier chosen from {list(cfg['mults'])}, extended one at a time past an "
             f"end the choice sat on (from {list(cfg['mults_extra'])}; each arm's grid tried "
             f"in text.json), {cfg['seeds']} seeds. "
             f"Masked: bits per character (unigram {b['unigram_bits']:.3f}, neighbours "
             f"{b['neighbour']['bits']:.3f}); else loss / initial loss.", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    lines += ["", "## Checks", "", summary_line(s["checks"]), ""] + checks_table(s["checks"])
    with atomic_write(os.path.join(out, "report.md"), "w") as fh:
        fh.write("\n".join(lines) + "\n" + divergence_markdown(s))


def report(cfg, out, results) -> dict:
    """``text.json``, ``report.md``, ``length.png``/``.csv``, ``attention.png``/``.csv``;
    returns the summary (its ``checks``, the divergence entries)."""
    n_runs = len(arms_of(cfg)) * cfg["seeds"]
    div = divergence(results["diverged"], n_runs,
                     [f"{a['arm']}: in distribution" for a in results["arms"]
                      if not np.isfinite(a["in_distribution"][0])])
    summary = dict(results, **div, config=dict(cfg))
    write_outputs(cfg, out, summary)
    return summary


def console(summary) -> list:
    """What ``stsim text`` prints: a row per arm (in distribution, then at each T_test)."""
    out = []
    for a in summary["arms"]:
        m, se = a["in_distribution"]
        cells = ", ".join(f"T={T} {v[0]:.4g}" for T, v in a["length"].items())
        out.append(f"{a['arm']:>24s} x{a['mult']}: {m:.4g} ± {se:.2g} ({a['unit']}); {cells}")
    return out
