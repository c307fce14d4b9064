"""Fig. 2 — OOD loss during training at longer test lengths T_test: stochastic against
fixed one-hot PE, with the analytic fixed-PE floor drawn dashed.

Paper (Fig. 2): at ``T = 200, q = 3`` and ``T_test ∈ {250, 300, 350, 400}`` the stochastic
PE converges (~10k steps) while the fixed PE stays above a constant. The floor is the
``a → ∞, γ → 1`` limit of the exact fixed one-hot OOD loss
(:func:`stsim.theory.reduced.ood_floor_onehot`): positions ``>= T`` are never trained.
"""
from __future__ import annotations

import os

import numpy as np

from stsim.util.plotting import plt, savefig
from stsim.studies.figures.common import check, finish
from stsim.studies.figures.ood import (FULL_BASE, QUICK_BASE, by_pe, final_stats, floor, ood_jobs, panel_curves,
                  predicted_fixed_ood, reduced_state_onehot)

NAME = "fig2"

SETTINGS = {
    "quick": dict(QUICK_BASE, model="theory", query="sum", optimizer="sgd", lr=2.0, steps=600),
    "full": dict(FULL_BASE, model="theory", query="sum", optimizer="sgd", lr=5.0, steps=10000),
}


def jobs(s):
    return ood_jobs(s)


def draw_length_panels(axes, s, groups):
    for ax, Tt in zip(axes, s["T_test"]):
        panel_curves(ax, groups, f"val/T={Tt}", f"T_test = {Tt}", floor_value=floor(s, Tt))
        runs = groups["onehot"]
        pred = [predicted_fixed_ood(s, r, Tt) for r in runs]
        ax.plot([r.history["step"][-1] for r in runs], pred, "kx", ms=6,
                label="fixed: exact OOD loss at the run's final (a, γ)")
    axes[0].set_ylabel("OOD validation loss")
    axes[0].legend(fontsize=7, loc="lower left")


def length_checks(s, groups, tag=""):
    """Measured final OOD losses and the claims of Fig. 2 for each T_test."""
    measured, checks = {}, []
    for Tt in s["T_test"]:
        key = f"val/T={Tt}"
        st, st0 = final_stats(groups["stochastic"], key)
        fx, _ = final_stats(groups["onehot"], key)
        fl = floor(s, Tt)
        measured[key] = {"stochastic_final": st.tolist(), "stochastic_initial": st0.tolist(),
                         "fixed_final": fx.tolist(), "fixed_floor_analytic": fl,
                         "fixed_over_floor": (fx / fl).tolist(),
                         "fixed_predicted_at_final_state": [
                             predicted_fixed_ood(s, r, Tt) for r in groups["onehot"]],
                         "fixed_over_stochastic": float(fx.mean() / st.mean())}
        checks += [
            check(f"{tag}stochastic OOD loss at T_test={Tt} <= 2% of initial (worst seed)",
                  (st / st0).max(), "<=", 0.02),
            check(f"{tag}fixed OOD loss at T_test={Tt} >= 0.9 x analytic floor {fl:.3f} "
                  "(worst seed)", (fx / fl).min(), ">=", 0.9),
            check(f"{tag}fixed / stochastic final OOD loss at T_test={Tt} (visibly apart)",
                  fx.mean() / st.mean(), ">=", 2.0,
                  note="'visibly apart' operationalised as a factor >= 2 between seed means"),
        ]
    return measured, checks


def analyse(s, results, out, mode):
    groups = by_pe(s, results)
    n = len(s["T_test"])
    fig, axes = plt.subplots(1, n, figsize=(3.3 * n, 3.3), sharey=True)
    draw_length_panels(np.atleast_1d(axes), s, groups)
    fig.suptitle(f"Fig. 2  length generalisation: theory model, T={s['T']} q={s['q']} "
                 f"d={s['d']} d_e={s['d_e']}, {s['optimizer']} lr={s['lr']}, batch "
                 f"{s['batch']}, {len(s['seeds'])} seeds (mean, min–max band)", fontsize=9)
    fig.tight_layout()
    savefig(fig, os.path.join(out, f"{NAME}.png"))
    measured, checks = length_checks(s, groups)
    measured["fixed_reduced_state_a_gamma"] = [reduced_state_onehot(r, s["T"], s["d"])
                                               for r in groups["onehot"]]
    runs = {j.name: results[j.name] for j in jobs(s)}
    return finish(NAME, out, s, mode, runs, checks, measured)

