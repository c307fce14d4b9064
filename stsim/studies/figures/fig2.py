"""Fig. 2 — OOD loss during training at longer test lengths T_test: stochastic PE against
both fixed-PE readings (one-hot; near-orthogonal table drawn once), with the analytic
one-hot floor drawn dashed.

Paper (Fig. 2): at ``T = 200, q = 3`` and ``T_test ∈ {250, 300, 350, 400}`` the stochastic
PE converges (~10k steps) while the fixed PE stays above a constant. The one-hot floor is
the ``a → ∞, γ → 1`` limit of the exact fixed one-hot OOD loss
(:func:`stsim.theory.reduced.ood_floor_onehot`): positions ``>= T`` are never trained; it
is approached from below, so the check is instead that the measured loss agrees with the
exact OOD loss at the run's own ``(a, γ)`` (:func:`.ood.exact_agreement`). The near-
orthogonal table has no untrained coordinates but an interference floor
(:mod:`stsim.theory.interference`). The stochastic PE is also trained again at the
settings ``long`` (a larger stable lr, as many steps as the reduced dynamics say it needs
for 2 % at every T_test).
"""
from __future__ import annotations

import os

import numpy as np

from stsim.util.plotting import plt, savefig
from stsim.studies.figures.common import check, n_seeds
from stsim.studies.figures.ood import (FULL_BASE, QUICK_BASE, by_pe, exact_agreement,
                                       final_stats, floor, is_fixed, long_jobs, ood_jobs,
                                       panel_curves, pe_label, predicted_fixed_ood,
                                       reduced_state_onehot)

NAME = "fig2"

SETTINGS = {
    "quick": dict(QUICK_BASE, model="theory", query="sum", optimizer="sgd", lr=2.0, steps=600,
                  long=dict(lr=3.0, steps=1200)),
    # long: lr 7 keeps the reduced map monotone (lr·S2 <= 1.8 up to 40k steps, bound 2);
    # population GD needs 33 650 steps for 2 % at T_test = 400, SGD ~3 000 more
    # (the claim's run, 2 seeds; the comparison runs at lr 5, one seed)
    "full": dict(FULL_BASE, model="theory", query="sum", optimizer="sgd", lr=5.0, steps=8000,
                 seeds=[0], long=dict(lr=7.0, steps=40000, seeds=[0, 1])),
}


def jobs(s):
    """The OOD runs of every PE reading and seed (:func:`.ood.ood_jobs`) plus the long
    stochastic runs of ``s["long"]`` (:func:`.ood.long_jobs`)."""
    return ood_jobs(s) + long_jobs(s)


def draw_length_panels(axes, s, groups):
    """Draw one panel per ``T_test`` of ``s["T_test"]`` on ``axes``: the OOD validation
    curves of each PE reading in ``groups`` (``{key: [Result per seed]}``, :func:`.ood.by_pe`),
    the analytic one-hot floor (dashed) and, as crosses at each one-hot run's last step, the
    exact OOD loss at that run's final ``(a, γ)``. The legend goes on ``axes[0]``. Also used by
    Fig. 5."""
    for ax, Tt in zip(axes, s["T_test"]):
        panel_curves(ax, groups, f"val/T={Tt}", f"T_test = {Tt}", floor_value=floor(s, Tt),
                     s=s)
        runs = groups["onehot"]
        pred = [predicted_fixed_ood(s, r, Tt) for r in runs]
        ax.plot([r.history["step"][-1] for r in runs], pred, "kx", ms=6,
                label="one-hot: exact OOD loss at the run's final (a, γ)")
    axes[0].set_ylabel("OOD validation loss")
    axes[0].legend(fontsize=6, loc="lower left")


def length_checks(s, groups, tag=""):
    """Measured final OOD losses and the claims of Fig. 2 for each T_test, for every
    fixed-PE reading against the stochastic PE of the same group (same lr and steps), and
    the stochastic PE's convergence for the group and (if any) its long run."""
    measured, checks = {}, []
    fixed = [k for k in groups if is_fixed(k)]
    conv = ["stochastic"] + (["stochastic-long"] if "stochastic-long" in groups else [])
    for Tt in s["T_test"]:
        key = f"val/T={Tt}"
        st, st0 = final_stats(groups["stochastic"], key)
        fl = floor(s, Tt)
        row = {"stochastic_final": st.tolist(), "stochastic_initial": st0.tolist(),
               "fixed_floor_analytic": fl}
        for k in conv:
            v, v0 = final_stats(groups[k], key)
            setting = _setting(s, groups[k][0])
            row[f"{k}_final_over_initial"] = (v / v0).tolist()
            checks.append(check(f"{tag}stochastic OOD loss at T_test={Tt} <= 2% of initial "
                                f"(worst seed) [{setting}]", (v / v0).max(), "<=", 0.02))
        for k in fixed:
            fx, _ = final_stats(groups[k], key)
            row[f"{k}_final"] = fx.tolist()
            row[f"{k}_over_stochastic"] = float(fx.mean() / st.mean())
            checks.append(check(f"{tag}{pe_label(k)} OOD loss at T_test={Tt} >= 0.15 "
                                "(worst seed; the paper's constant)", fx.min(), ">=", 0.15))
            checks.append(check(f"{tag}{pe_label(k)} / stochastic final OOD loss at "
                                f"T_test={Tt} (visibly apart)", fx.mean() / st.mean(), ">=", 2.0,
                                note="'visibly apart' operationalised as a factor >= 2 "
                                     "between seed means"))
        agree = exact_agreement(s, groups["onehot"], Tt)
        row["onehot_exact_agreement"] = agree
        row["fixed_final"] = row["onehot_final"]          # the name used before issue 12
        checks.append(check(f"{tag}fixed one-hot OOD loss at T_test={Tt} agrees with the exact "
                            "OOD loss at the run's own (a, γ): max |z| over seeds",
                            max(abs(a["z"]) for a in agree), "<=", 3.0,
                            note="z = (measured − exact) / SE, SE = std of the per-point "
                                 f"losses / sqrt({s['n_val']}) validation points"))
        measured[key] = row
    return measured, checks


def _setting(s, r):
    c = r.config
    return f"{c['optimizer']} lr {c['lr']:g}, {c['steps']} steps"


def draw(s, results, measured, out):
    """Draw ``fig2.png`` (:func:`draw_length_panels`)."""
    groups = by_pe(s, results)
    n = len(s["T_test"])
    fig, axes = plt.subplots(1, n, figsize=(3.4 * n, 3.6), sharey=True)
    draw_length_panels(np.atleast_1d(axes), s, groups)
    long = (f"; long stochastic run: lr {s['long']['lr']}, {s['long']['steps']} steps, "
            f"{n_seeds(s['long'].get('seeds', s['seeds']))}") if s.get("long") else ""
    fig.suptitle(f"Fig. 2  length generalisation: theory model, T={s['T']} q={s['q']} "
                 f"d={s['d']}, one-hot/slots d_e={s['d_e']}, {s['optimizer']} lr={s['lr']}, "
                 f"{s['steps']} steps, {n_seeds(s['seeds'])}{long}; batch {s['batch']} "
                 "(seed mean, min–max band)", fontsize=8)
    fig.tight_layout()
    savefig(fig, os.path.join(out, f"{NAME}.png"))


def measure(s, results):
    """The claims of :func:`length_checks` and the ``(a, γ)`` read off each one-hot run
    (``measured["fixed_reduced_state_a_gamma"]``); returns ``(measured, checks)``."""
    groups = by_pe(s, results)
    measured, checks = length_checks(s, groups)
    measured["fixed_reduced_state_a_gamma"] = [reduced_state_onehot(r, s["T"], s["d"])
                                               for r in groups["onehot"]]
    return measured, checks
