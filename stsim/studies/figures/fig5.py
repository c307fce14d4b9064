"""Fig. 5 — Figs. 2 and 4 with Adam: OOD loss at longer lengths (top) and on unseen
subset sizes (bottom), both fixed-PE readings (one-hot; near-orthogonal) against the
stochastic PE.

Paper (Fig. 5): the length-generalisation advantage of stochastic PE is the same as with
SGD; on ``q_test`` Adam may bring both to 0 in the long run, but stochastic PE dominates
for early stopping.
"""
from __future__ import annotations

from stsim.studies.figures.common import n_seeds, save_png
from stsim.studies.figures.fig2 import draw_length_panels, length_checks
from stsim.studies.figures.fig4 import draw_q_panels, group_names, groups_of, q_checks
from stsim.studies.figures.ood import FULL_BASE, QUICK_BASE, ood_jobs, reduced_state_onehot
from stsim.studies.figures.verdicts import Boot

NAME = "fig5"

SETTINGS = {
    "quick": dict(QUICK_BASE, model="theory", query="sum", optimizer="adam", lr=0.01,
                  steps=300),
    "full": dict(FULL_BASE, model="theory", query="sum", optimizer="adam", lr=0.003,
                 steps=3000, near_d_e=[64]),
}


def jobs(s):
    """The group's OOD runs at the Adam settings (:func:`.ood.ood_jobs`)."""
    return ood_jobs(s)


def draw(s, results, measured, out):
    """Draw ``fig5.png``: top row :func:`.fig2.draw_length_panels`, bottom row
    :func:`.fig4.draw_q_panels`, on the Adam runs."""
    from stsim.util.plotting import plt   # on drawing only
    groups = groups_of(s, results)
    n = max(len(s["T_test"]), len(s["q_test"]))
    fig, axes = plt.subplots(2, n, figsize=(3.3 * n, 6.6), squeeze=False)
    draw_length_panels(axes[0], s, groups)
    draw_q_panels(axes[1], s, groups)
    for ax in list(axes[0, len(s["T_test"]):]) + list(axes[1, len(s["q_test"]):]):
        ax.axis("off")                    # the shorter row's spare panels stay blank
    fig.suptitle(f"Fig. 5  Adam (lr={s['lr']}): top, OOD loss at T_test; bottom, unseen "
                 f"q_test. Theory model, T={s['T']} q={s['q']} d={s['d']} d_e={s['d_e']}, "
                 f"batch {s['batch']}, {n_seeds(s['seeds'])}", fontsize=9)
    save_png(fig, out, NAME, dpi=100)


def measure(s, results):
    """The claims of Figs. 2 and 4 on the Adam runs (:func:`.fig2.length_checks`,
    :func:`.fig4.q_checks`, tagged ``"Adam: "``) and the ``(a, γ)`` read off each one-hot
    run (``measured["fixed_reduced_state_a_gamma"]``, as in Fig. 2); returns
    ``(measured, checks)``."""
    names, boot = group_names(s), Boot()
    m1, c1 = length_checks(s, names, results, tag="Adam: ", boot=boot)
    m2, c2 = q_checks(s, names, results, tag="Adam: ", boot=boot)
    state = {"fixed_reduced_state_a_gamma": [reduced_state_onehot(results[n], s["T"], s["d"])
                                             for n in names.get("onehot", [])]}
    return {**m1, **m2, **state}, c1 + c2
