"""Fig. 4 — length generalisation (top) and unseen subset sizes ``q_test`` (bottom): both
fixed-PE readings (one-hot; near-orthogonal) against the stochastic PE. Uses the same runs
as Fig. 2 (the group's runs, same lr and steps for every PE; not the long stochastic run).

Paper (Fig. 4): stochastic PE reaches 0 validation loss at longer lengths, fixed PE ends
at >= 0.15; on unseen ``q_test`` both converge in the long run, stochastic slightly
quicker (zoom near the end), and fixed PE gets worse as ``q_test`` grows.

Every check is measured on the final estimates on large fresh sets (:mod:`.evaluate`;
"quicker" is therefore the final loss, not a mean over the last 20 % of the 128-point
curve, whose set was drawn once and biases the whole curve), with a bootstrap standard
error and a verdict (:mod:`.verdicts`). "Worse as q_test grows" is measured as the
smallest ratio of consecutive seed-mean losses, ``min_k L(q_{k+1}) / L(q_k) > 1`` (the
same statement as "every consecutive pair increases", with a standard error).
"""
from __future__ import annotations

import numpy as np

from stsim.core.reduced import LEARNED
from stsim.studies.figures.claims_statements import increasing
from stsim.studies.figures.common import n_seeds, save_png, seed_band
from stsim.studies.figures.evaluate import eval_sample
from stsim.studies.figures.ood import (final_estimates, floor, group_names, groups_of,
                                       is_fixed, ood_jobs, panel_curves, pe_color, pe_label,
                                       PE_COLOR)
from stsim.studies.figures.verdicts import Boot, boot_check
from stsim.studies.figures import fig2

NAME = "fig4"
GROUP = fig2.NAME          # settings shared with Fig. 2 (`--set fig2.lr=...` applies to both)
SETTINGS = fig2.SETTINGS
ZOOM = 0.2                 # the zoomed window: the last 20% of training


def jobs(s):
    """The group's OOD runs (:func:`.ood.ood_jobs`): Fig. 2's runs without the long one."""
    return ood_jobs(s)


def draw_length_summary(ax, s, groups):
    """Final validation loss against the test length (T_test = T is in-distribution)."""
    Ts = [s["T"]] + list(s["T_test"])
    keys = ["val"] + [f"val/T={t}" for t in s["T_test"]]
    for pe, runs in groups.items():
        v = np.array([final_estimates(runs, k)[0] for k in keys]).T       # (seeds, sets)
        ax.errorbar(Ts, v.mean(0), yerr=[v.mean(0) - v.min(0), v.max(0) - v.mean(0)],
                    marker="o", color=pe_color(pe, s), label=pe_label(pe), capsize=3)
    ax.plot(s["T_test"], [floor(s, t) for t in s["T_test"]], "--", color=PE_COLOR["onehot"],
            lw=1.2, marker="x", label="one-hot floor (analytic, a → ∞)")
    ax.axhline(0.15, color="k", ls=":", lw=0.8, label="0.15 (paper's fixed-PE level)")
    ax.set(yscale="log", xlabel="test length T_test (T_test = T: in-distribution)",
           ylabel="final loss (large fresh sets)")
    ax.set_title("length generalisation (end of training; seed mean, min–max)", fontsize=9)
    ax.legend(fontsize=6, ncol=2)


def draw_q_panels(axes, s, groups):
    """Draw one panel per ``q_test`` of ``s["q_test"]`` on ``axes``: the ``val/q=<q_test>``
    curves of each PE reading in ``groups`` (``{key: [Result per seed]}``), with an inset
    zooming on the last ``ZOOM`` of training (seed mean, min–max band). Also used by Fig. 5."""
    from matplotlib.ticker import NullFormatter
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


def q_checks(s, names, results, tag="", boot=None):
    """Measured losses on the unseen ``q_test`` and the claims of Fig. 4 for every
    fixed reading in ``names`` (``{reading: [run names]}``) against the stochastic PE;
    ``tag`` prefixes the claim texts.

    Returns ``(measured, checks)``: ``measured["val/q=<q_test>"] = {reading: {final,
    final_over_initial}}`` and ``measured["fixed_final_by_q_test"] = {reading: {q_test:
    seed-mean final loss}}``; ``checks``: every reading converges (final ≤ 5 % of the
    initial ``d/(2 q_test)``, worst seed), the stochastic PE is quicker (fixed /
    stochastic seed-mean final loss > 1), and each fixed reading gets worse as ``q_test``
    grows (smallest consecutive ratio > 1, over all ``q_test`` and over
    ``q_test ≥ q − 1``)."""
    boot = boot or Boot()
    measured, checks = {}, []
    fixed = [k for k in names if is_fixed(k)]
    pes = fixed + ["stochastic"]
    smp = {pe: {} for pe in pes}
    for qt in s["q_test"]:
        key = f"val/q={qt}"
        row = {}
        for pe in pes:
            smp[pe][qt] = eval_sample(boot, results, names[pe], key)
            rel = eval_sample(boot, results, names[pe], key, relative=True)
            row[pe] = {"final": smp[pe][qt].value.tolist(),
                       "final_over_initial": rel.value.tolist()}
            checks.append(boot_check(f"{tag}{pe_label(pe)} converges on q_test={qt}: final "
                                     "<= 5% of initial (worst seed)", lambda x: x.max(-1),
                                     [rel], "<=", 0.05))
        measured[key] = row
        for pe in fixed:
            checks.append(boot_check(f"{tag}stochastic quicker on q_test={qt} than "
                                     f"{pe_label(pe)}: final loss, fixed / stochastic "
                                     "(seed means)", lambda f, t: f.mean(-1) / t.mean(-1),
                                     [smp[pe][qt], smp["stochastic"][qt]], ">", 1.0))
    qs = list(s["q_test"])
    measured["fixed_final_by_q_test"] = {
        pe: {str(qt): float(smp[pe][qt].value.mean()) for qt in qs} for pe in fixed}
    for pe in fixed:
        if len(qs) > 1:
            checks.append(boot_check(f"{tag}{pe_label(pe)} worse as q_test grows: smallest "
                                     "ratio of consecutive q_test losses (seed means)",
                                     increasing, [smp[pe][qt] for qt in qs], ">", 1.0))
        big = [qt for qt in qs if qt >= s["q"] - 1]
        if 1 < len(big) < len(qs):
            checks.append(boot_check(f"{tag}{pe_label(pe)} worse as q_test grows, q_test >= "
                                     f"{s['q'] - 1} only: smallest consecutive ratio",
                                     increasing, [smp[pe][qt] for qt in big], ">", 1.0,
                                     note="q_test = 1 left out: below the trained q every "
                                          "PE's worst case (γ overshoots 1; the target is "
                                          "one token)"))
    return measured, checks


def draw(s, results, measured, out):
    """Draw ``fig4.png`` (top: :func:`draw_length_summary`; bottom: :func:`draw_q_panels`)."""
    from stsim.util.plotting import plt   # on drawing only
    groups = groups_of(s, results)
    nq = len(s["q_test"])
    fig = plt.figure(figsize=(3.3 * max(nq, 3), 7.0))
    gs = fig.add_gridspec(2, nq)
    draw_length_summary(fig.add_subplot(gs[0, :]), s, groups)
    draw_q_panels([fig.add_subplot(gs[1, i]) for i in range(nq)], s, groups)
    fig.suptitle(f"Fig. 4  theory model, T={s['T']} q={s['q']} d={s['d']}, one-hot/slots "
                 f"d_e={s['d_e']}, near-orth. d_e={s.get('near_d_e')}, {s['optimizer']} "
                 f"lr={s['lr']}, {s['steps']} steps, {n_seeds(s['seeds'])}", fontsize=9)
    save_png(fig, out, NAME, dpi=100)


TAIL = 0.25      # S5 on the tail: the last quarter of the validation records


def tail_check(label, curves, boot=None) -> dict:
    r"""S5 judged on the tail of the curves, not their last point: per seed, the mean over
    the last ``TAIL`` of its validation records of the min over ``T_test`` of the OOD
    validation loss; the worst seed ``>= 0.15``. ``curves``: per seed, ``(S_records,
    n_T_test)`` values (the training-time validation sets, drawn once per seed: their
    sampling error is shared by every record of the seed and varies between seeds, so the
    seed bootstrap, bias-corrected at ``S − 1`` d.o.f., carries it). The lowest single
    record of the tail is in the note."""
    boot = boot or Boot()
    per, low = [], []
    for c in curves:
        c = np.asarray(c, dtype=float)
        tail = c[int(np.floor((1.0 - TAIL) * c.shape[0])):]
        per.append(float(tail.min(axis=1).mean()))
        low.append(float(tail.min()))
    smp = boot.sample(per)
    return boot_check(f"{label} OOD loss on the tail of training (last {TAIL:.0%} of the "
                      "validation records; mean per seed of the min over T_test), worst seed "
                      "(paper: >= 0.15)", lambda x: x.min(-1), [smp], ">=", 0.15,
                      note="lowest single tail record per seed: "
                           + ", ".join(f"{x:.4g}" for x in low))


def measure(s, results):
    """Measure and check Fig. 4; returns ``(measured, checks)``.

    Checks: per fixed reading, its final OOD loss stays ≥ 0.15 (min over ``T_test`` and
    seeds) and the stochastic PE ends below it at every ``T_test`` (worst stochastic seed /
    best fixed seed < 1); then those of :func:`q_checks`; then, per reading, whether it
    fits in distribution (final ≤ 2 % of ``L(0)``, worst seed: the readings that fail it
    reproduce S6/S7 only through their floor)."""
    names = group_names(s)
    boot = Boot()
    measured, checks = q_checks(s, names, results, boot=boot)
    fixed = [k for k in names if is_fixed(k)]
    head = []
    for pe in fixed:
        ood = [eval_sample(boot, results, names[pe], f"val/T={t}") for t in s["T_test"]]
        c = boot_check(f"{pe_label(pe)} final OOD loss, min over T_test and seeds (paper: "
                       ">= 0.15)", lambda *xs: np.minimum.reduce([x.min(-1) for x in xs]),
                       ood, ">=", 0.15)
        measured[f"{pe}_min_final_ood"] = c["measured"]
        head.append(c)
        head.append(tail_check(pe_label(pe), [np.stack([np.asarray(results[n].history[
            f"val/T={t}"], dtype=float) for t in s["T_test"]], axis=1) for n in names[pe]],
            boot))
        for t, fx in zip(s["T_test"], ood):
            st = eval_sample(boot, results, names["stochastic"], f"val/T={t}")
            head.append(boot_check(f"stochastic below {pe_label(pe)} at T_test={t} (worst "
                                   "stochastic seed / best fixed seed)",
                                   lambda a, b: a.max(-1) / b.min(-1), [st, fx], "<", 1.0))
    fits = []
    for pe in list(fixed) + ["stochastic"]:
        rel = eval_sample(boot, results, names[pe], "val", relative=True)
        measured.setdefault("in_distribution_over_initial", {})[pe] = rel.value.tolist()
        fits.append(boot_check(f"{pe_label(pe)} fits in distribution: final <= 2% of "
                               "initial (worst seed)", lambda x: x.max(-1), [rel], "<=", LEARNED,
                               note="a fixed reading that fails it reproduces S6/S7 only "
                                    "through a floor that also keeps it from fitting"))
    measured["fixed_min_final_ood"] = measured.get("onehot_min_final_ood")  # its earlier name
    return measured, head + checks + fits
