"""Fig. 4 — length generalisation (top) and unseen subset sizes ``q_test`` (bottom): both
fixed-PE readings (one-hot; near-orthogonal) against the stochastic PE. Uses the same runs
as Fig. 2 (the group's runs, same lr and steps for every PE; not the long stochastic run).

Paper (Fig. 4): stochastic PE reaches 0 validation loss at longer lengths, fixed PE ends
at >= 0.15; on unseen ``q_test`` both converge in the long run, stochastic slightly
quicker (zoom near the end), and fixed PE gets worse as ``q_test`` grows.
"""
from __future__ import annotations

import os

import numpy as np
from matplotlib.ticker import NullFormatter

from stsim.util.plotting import plt, savefig
from stsim.studies.figures.common import check, n_seeds, seed_band
from stsim.studies.figures.ood import (by_pe, final_stats, floor, is_fixed, ood_jobs,
                                       panel_curves, pe_color, pe_label, variants,
                                       PE_COLOR)
from stsim.studies.figures import fig2

NAME = "fig4"
GROUP = fig2.NAME          # settings shared with Fig. 2 (`--set fig2.lr=...` applies to both)
SETTINGS = fig2.SETTINGS
ZOOM = 0.2                 # the zoomed window: the last 20% of training


def jobs(s):
    """The group's OOD runs (:func:`.ood.ood_jobs`): Fig. 2's runs without the long one."""
    return ood_jobs(s)


def groups_of(s, results):
    """The group's runs by PE reading (the long stochastic run left out)."""
    return by_pe(s, results, pes=[k for k, _ in variants(s)])


def draw_length_summary(ax, s, groups):
    """Final validation loss against the test length (T_test = T is in-distribution)."""
    Ts = [s["T"]] + list(s["T_test"])
    keys = ["val"] + [f"val/T={t}" for t in s["T_test"]]
    for pe, runs in groups.items():
        v = np.array([[r.final(k) for k in keys] for r in runs])
        ax.errorbar(Ts, v.mean(0), yerr=[v.mean(0) - v.min(0), v.max(0) - v.mean(0)],
                    marker="o", color=pe_color(pe, s), label=pe_label(pe), capsize=3)
    ax.plot(s["T_test"], [floor(s, t) for t in s["T_test"]], "--", color=PE_COLOR["onehot"],
            lw=1.2, marker="x", label="one-hot floor (analytic, a → ∞)")
    ax.axhline(0.15, color="k", ls=":", lw=0.8, label="0.15 (paper's fixed-PE level)")
    ax.set_yscale("log")
    ax.set_xlabel("test length T_test (T_test = T: in-distribution)")
    ax.set_ylabel("final validation loss")
    ax.set_title("length generalisation (end of training)", fontsize=9)
    ax.legend(fontsize=6, ncol=2)


def draw_q_panels(axes, s, groups):
    """Draw one panel per ``q_test`` of ``s["q_test"]`` on ``axes``: the ``val/q=<q_test>``
    curves of each PE reading in ``groups`` (``{key: [Result per seed]}``), with an inset
    zooming on the last ``ZOOM`` of training (seed mean, min–max band). Also used by Fig. 5."""
    for ax, qt in zip(axes, s["q_test"]):
        key = f"val/q={qt}"
        panel_curves(ax, groups, key, f"q_test = {qt} (trained q = {s['q']})", s=s)
        ins = ax.inset_axes([0.12, 0.1, 0.45, 0.4])   # lower left: empty on loss curves
        for pe, runs in groups.items():
            seed_band(ins, runs, key, color=pe_color(pe, s), lw=1.0, tail=ZOOM)
        ins.set_yscale("log")
        ins.tick_params(labelsize=5)
        ins.yaxis.set_minor_formatter(NullFormatter())   # minor labels crowd the inset
        ins.set_title("last 20% (zoom)", fontsize=6)
    axes[0].set_ylabel("validation loss")   # colours as in the legend of the panel above


def _tail(runs, key):
    vals = []
    for r in runs:      # each seed over its own records (a diverged run stops early)
        st = r.history["step"]
        vals.append(r.history[key][st >= (1 - ZOOM) * st[-1]].mean())
    return float(np.mean(vals))


def q_checks(s, groups, tag=""):
    """Measured losses on the unseen ``q_test`` and the claims of Fig. 4 for every
    fixed reading in ``groups`` against the stochastic PE; ``tag`` prefixes the claim texts.

    Returns ``(measured, checks)``: ``measured["val/q=<q_test>"] = {reading: {final, initial,
    final_over_initial, mean_last_20pct}}`` and ``measured["fixed_final_by_q_test"] =
    {reading: {q_test: seed-mean final loss}}``; ``checks`` (:func:`.common.check`): every
    reading converges (final ≤ 5 % of initial, worst seed), the stochastic PE is quicker
    (fixed / stochastic mean loss over the last 20 % > 1), and each fixed reading gets worse
    as ``q_test`` grows (over all ``q_test`` and over ``q_test ≥ q − 1``)."""
    measured, checks = {}, []
    fixed = [k for k in groups if is_fixed(k)]
    pes = fixed + ["stochastic"]
    finals = {k: [] for k in fixed}
    for qt in s["q_test"]:
        key = f"val/q={qt}"
        row = {}
        for pe in pes:
            v, v0 = final_stats(groups[pe], key)
            row[pe] = {"final": v.tolist(), "initial": v0.tolist(),
                       "final_over_initial": (v / v0).tolist(),
                       "mean_last_20pct": _tail(groups[pe], key)}
        measured[key] = row
        for pe in pes:
            checks.append(check(f"{tag}{pe_label(pe)} converges on q_test={qt}: final <= 5% "
                                "of initial (worst seed)",
                                max(row[pe]["final_over_initial"]), "<=", 0.05))
        for pe in fixed:
            finals[pe].append(np.mean(row[pe]["final"]))
            checks.append(check(f"{tag}stochastic quicker on q_test={qt} than {pe_label(pe)}: "
                                "mean loss over the last 20%, fixed / stochastic",
                                row[pe]["mean_last_20pct"] / row["stochastic"]["mean_last_20pct"],
                                ">", 1.0))
    qs = list(s["q_test"])
    measured["fixed_final_by_q_test"] = {pe: dict(zip(map(str, qs), map(float, finals[pe])))
                                         for pe in fixed}
    for pe in fixed:
        inc = np.diff(finals[pe]) > 0
        checks.append(check(f"{tag}{pe_label(pe)} worse as q_test grows: share of consecutive "
                            "q_test pairs with increasing final loss",
                            inc.mean() if len(inc) else 1.0, ">=", 1.0))
        big = [f for q_, f in zip(qs, finals[pe]) if q_ >= s["q"] - 1]
        if len(big) > 1:
            inc2 = np.diff(big) > 0
            checks.append(check(f"{tag}{pe_label(pe)} worse as q_test grows, q_test >= "
                                f"{s['q'] - 1} only: share of increasing consecutive pairs",
                                inc2.mean(), ">=", 1.0,
                                note="q_test = 1 left out: below the trained q every PE's "
                                     "worst case (the target is one token)"))
    return measured, checks


def draw(s, results, measured, out):
    """Draw ``fig4.png`` (top: :func:`draw_length_summary`; bottom: :func:`draw_q_panels`)."""
    groups = groups_of(s, results)
    nq = len(s["q_test"])
    fig = plt.figure(figsize=(3.3 * max(nq, 3), 7.0))
    gs = fig.add_gridspec(2, nq)
    draw_length_summary(fig.add_subplot(gs[0, :]), s, groups)
    draw_q_panels([fig.add_subplot(gs[1, i]) for i in range(nq)], s, groups)
    fig.suptitle(f"Fig. 4  theory model, T={s['T']} q={s['q']} d={s['d']}, one-hot/slots "
                 f"d_e={s['d_e']}, near-orth. d_e={s.get('near_d_e')}, {s['optimizer']} "
                 f"lr={s['lr']}, {s['steps']} steps, {n_seeds(s['seeds'])}", fontsize=9)
    fig.tight_layout()
    savefig(fig, os.path.join(out, f"{NAME}.png"), dpi=100)


def measure(s, results):
    """Measure and check Fig. 4; returns ``(measured, checks)``.

    Checks: per fixed reading, its final OOD loss stays ≥ 0.15 (min over ``T_test`` and
    seeds) and the stochastic PE ends below it at every ``T_test`` (worst stochastic seed /
    best fixed seed < 1); then those of :func:`q_checks`."""
    groups = groups_of(s, results)
    measured, checks = q_checks(s, groups)
    fixed = [k for k in groups if is_fixed(k)]
    head = []
    for pe in fixed:
        fx_min = min(r.final(f"val/T={t}") for r in groups[pe] for t in s["T_test"])
        measured[f"{pe}_min_final_ood"] = fx_min
        head.append(check(f"{pe_label(pe)} final OOD validation loss, min over T_test and "
                          "seeds (paper: >= 0.15)", fx_min, ">=", 0.15))
        for t in s["T_test"]:
            st, _ = final_stats(groups["stochastic"], f"val/T={t}")
            fx, _ = final_stats(groups[pe], f"val/T={t}")
            head.append(check(f"stochastic below {pe_label(pe)} at T_test={t} (worst "
                              "stochastic seed / best fixed seed)", st.max() / fx.min(), "<",
                              1.0))
    measured["fixed_min_final_ood"] = measured["onehot_min_final_ood"]   # name before issue 12
    return measured, head + checks
