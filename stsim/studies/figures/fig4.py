"""Fig. 4 — length generalisation (top) and unseen subset sizes ``q_test`` (bottom):
fixed one-hot against stochastic PE. Uses the same runs as Fig. 2.

Paper (Fig. 4): stochastic PE reaches 0 validation loss at longer lengths, fixed PE ends
at >= 0.15; on unseen ``q_test`` both converge in the long run, stochastic slightly
quicker (zoom near the end), and fixed PE gets worse as ``q_test`` grows.
"""
from __future__ import annotations

import os

import numpy as np

from stsim.util.plotting import plt, savefig
from stsim.studies.figures.common import check, finish
from stsim.studies.figures.ood import (PE_COLOR, PE_LABEL, PES, by_pe, final_stats, floor, ood_jobs,
                  panel_curves)
from stsim.studies.figures import fig2

NAME = "fig4"
GROUP = fig2.NAME          # settings shared with Fig. 2 (`--set fig2.lr=...` applies to both)
SETTINGS = fig2.SETTINGS
ZOOM = 0.2                 # the zoomed window: the last 20% of training


def jobs(s):
    return ood_jobs(s)


def draw_length_summary(ax, s, groups):
    """Final validation loss against the test length (T_test = T is in-distribution)."""
    Ts = [s["T"]] + list(s["T_test"])
    keys = ["val"] + [f"val/T={t}" for t in s["T_test"]]
    for pe, runs in groups.items():
        v = np.array([[r.final(k) for k in keys] for r in runs])
        ax.errorbar(Ts, v.mean(0), yerr=[v.mean(0) - v.min(0), v.max(0) - v.mean(0)],
                    marker="o", color=PE_COLOR[pe], label=PE_LABEL[pe], capsize=3)
    ax.plot(s["T_test"], [floor(s, t) for t in s["T_test"]], "--", color=PE_COLOR["onehot"],
            lw=1.2, marker="x", label="fixed-PE floor (analytic, a → ∞)")
    ax.set_yscale("log")
    ax.set_xlabel("test length T_test (T_test = T: in-distribution)")
    ax.set_ylabel("final validation loss")
    ax.set_title("length generalisation (end of training)", fontsize=9)
    ax.legend(fontsize=7)


def draw_q_panels(axes, s, groups):
    for ax, qt in zip(axes, s["q_test"]):
        key = f"val/q={qt}"
        panel_curves(ax, groups, key, f"q_test = {qt} (trained q = {s['q']})")
        ins = ax.inset_axes([0.12, 0.1, 0.45, 0.4])   # lower left: empty on loss curves
        for pe, runs in groups.items():
            st = runs[0].history["step"]
            m = st >= (1 - ZOOM) * st[-1]
            Y = np.array([r.history[key][m] for r in runs])
            ins.plot(st[m], Y.mean(0), color=PE_COLOR[pe], lw=1.2)
            ins.fill_between(st[m], Y.min(0), Y.max(0), color=PE_COLOR[pe], alpha=0.2, lw=0)
        ins.tick_params(labelsize=6)
        ins.set_title("last 20% (zoom)", fontsize=6)
    axes[0].set_ylabel("validation loss")   # colours as in the legend of the panel above


def q_checks(s, groups, tag=""):
    measured, checks = {}, []
    fixed_final = []
    for qt in s["q_test"]:
        key = f"val/q={qt}"
        row = {}
        for pe in PES:
            v, v0 = final_stats(groups[pe], key)
            st = groups[pe][0].history["step"]
            m = st >= (1 - ZOOM) * st[-1]
            tail = np.mean([r.history[key][m].mean() for r in groups[pe]])
            row[pe] = {"final": v.tolist(), "initial": v0.tolist(),
                       "final_over_initial": (v / v0).tolist(), "mean_last_20pct": float(tail)}
        measured[key] = row
        fixed_final.append(np.mean(row["onehot"]["final"]))
        for pe in PES:
            checks.append(check(f"{tag}{PE_LABEL[pe]} converges on q_test={qt}: final <= 5% "
                                "of initial (worst seed)",
                                max(row[pe]["final_over_initial"]), "<=", 0.05))
        checks.append(check(f"{tag}stochastic quicker on q_test={qt}: mean loss over the last "
                            "20%, fixed / stochastic", row["onehot"]["mean_last_20pct"] /
                            row["stochastic"]["mean_last_20pct"], ">", 1.0))
    qs = list(s["q_test"])
    inc = np.diff(fixed_final) > 0
    measured["fixed_final_by_q_test"] = dict(zip(map(str, qs), map(float, fixed_final)))
    checks.append(check(f"{tag}fixed PE worse as q_test grows: share of consecutive q_test "
                        "pairs with increasing final loss", inc.mean() if len(inc) else 1.0,
                        ">=", 1.0))
    return measured, checks


def analyse(s, results, out, mode):
    groups = by_pe(s, results)
    nq = len(s["q_test"])
    fig = plt.figure(figsize=(3.2 * max(nq, 3), 6.8))
    gs = fig.add_gridspec(2, nq)
    draw_length_summary(fig.add_subplot(gs[0, :]), s, groups)
    draw_q_panels([fig.add_subplot(gs[1, i]) for i in range(nq)], s, groups)
    fig.suptitle(f"Fig. 4  theory model, T={s['T']} q={s['q']} d={s['d']} d_e={s['d_e']}, "
                 f"{s['optimizer']} lr={s['lr']}, {s['steps']} steps, {len(s['seeds'])} seeds",
                 fontsize=9)
    fig.tight_layout()
    savefig(fig, os.path.join(out, f"{NAME}.png"), dpi=100)
    measured, checks = q_checks(s, groups)
    fx_min = min(r.final(f"val/T={t}") for r in groups["onehot"] for t in s["T_test"])
    checks.insert(0, check("fixed PE final OOD validation loss, min over T_test and seeds "
                           "(paper: >= 0.15)", fx_min, ">=", 0.15))
    for t in s["T_test"]:
        st, _ = final_stats(groups["stochastic"], f"val/T={t}")
        fx, _ = final_stats(groups["onehot"], f"val/T={t}")
        checks.insert(1, check(f"stochastic below fixed at T_test={t} (worst stochastic seed "
                               "/ best fixed seed)", st.max() / fx.min(), "<", 1.0))
    measured["fixed_min_final_ood"] = fx_min
    runs = {j.name: results[j.name] for j in jobs(s)}
    return finish(NAME, out, s, mode, runs, checks, measured)

