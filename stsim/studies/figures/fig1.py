"""Fig. 1 — global convergence of the practical model with stochastic PE: training loss,
inverse loss (linear growth = O(1/t) rate) and cosine similarity of W, V with W*, V*.

Paper (Wang et al. 2024, Fig. 1): the loss of the one-layer transformer attending to
``[Z, z_query]`` with stochastic PE converges to 0, ``1/L`` grows linearly, and
``cos(W, W*)``, ``cos(V, V*)`` rise to 1.

Setting (issue 12): the practical model with ``query="mean"`` and plain SGD at lr 10.
With the mean query the practical model reduces exactly to the two-scalar map with
denominator ``(q+1)e^θ + r`` (the query token gets the selected tokens' logit): the γ step
is stable only for ``lr < 2(q+1)²/q = 10.7`` (q = 3), and ``1/L ≈ 4 lr t/(q²(n−1))``, so
at ``T = 200, d_e = 400`` the plateau ends near step 8 000 and ``1/L`` is linear over the
second half only after ~20 000 steps. With ``query="sum"`` the query token's own logit is
``q`` times a selected token's, attention collapses onto the query token (whose token part
is 0) and SGD escapes only by growing the all-ones component of ``W_ee``, so
``W ∝ W*`` is not what it learns (SPEC §3; cos(W, W*) ≈ 0.63 measured). Adam (used before
issue 12) moves the zero-mean-gradient off-diagonal entries of ``W_ee`` by ~lr per step,
so its cos(W, W*) stays near 0.83 and its 1/L is super-linear.
The same runs also record OOD validation losses, used by :mod:`.beyond` (theory vs
practical model).
"""
from __future__ import annotations

import os

import numpy as np

from stsim.util.plotting import plt, savefig
from stsim.studies.figures.common import Job, check, seed_band, seed_values
from stsim.util.stats import fit_linear
from stsim.studies.figures.ood import QUICK_BASE, FULL_BASE, block_mass

NAME = "fig1"

SETTINGS = {
    "quick": dict(QUICK_BASE, model="practical", query="mean", optimizer="sgd", lr=10.0,
                  steps=600),
    "full": dict(FULL_BASE, model="practical", query="mean", optimizer="sgd", lr=10.0,
                 steps=26000, seeds=[0, 1]),
}


def run_options(s, seed):
    """Options of :func:`stsim.run` for the Fig. 1 run with ``seed``: the task, model,
    optimiser and validation keys of the settings ``s``, plus ``seed``."""
    keys = ("T", "q", "d", "d_e", "pe", "sampler", "model", "query", "optimizer", "lr",
            "steps", "batch", "init", "T_test", "q_test", "n_val", "eval_every")
    return dict({k: s[k] for k in keys}, seed=seed)


def jobs(s):
    """One run per seed in ``s["seeds"]``, named ``fig1/<model>-<query>-<optimizer>-s<seed>``
    (also used by :mod:`.beyond` and :mod:`.claims`)."""
    return [Job(f"fig1/{s['model']}-{s['query']}-{s['optimizer']}-s{seed}",
                run_options(s, seed)) for seed in s["seeds"]]


def inverse_loss_fit(runs):
    """The seed mean of ``1/loss`` on the common steps and its least-squares line over the
    second half: ``(step, inverse, half, coef)`` (``coef`` = slope, intercept)."""
    step, Y = seed_values(runs, "loss", transform=lambda y: 1.0 / y)
    inv = Y.mean(axis=0)
    half = step >= step[-1] / 2
    A = np.vstack([step[half], np.ones(half.sum())]).T
    coef, *_ = np.linalg.lstsq(A, inv[half], rcond=None)
    return step, inv, half, coef


def draw(s, results, measured, out):
    """Draw ``fig1.png``: training loss, 1/loss with the linear fit over the second half
    (:func:`inverse_loss_fit`), cos(W, W*) and cos(V, V*); seed mean with min–max band."""
    runs = [results[j.name] for j in jobs(s)]
    fig, ax = plt.subplots(1, 3, figsize=(13, 3.6))
    seed_band(ax[0], runs, "loss", label="training loss (seed mean, min–max)")
    ax[0].axhline(s["d"] / (2 * s["q"]), color="gray", ls=":", lw=1, label="L(0) = d/(2q)")
    ax[0].set_yscale("log")
    ax[0].set_xlabel("step")
    ax[0].set_ylabel("loss")
    ax[0].legend(fontsize=8)
    ax[0].set_title("training loss")
    seed_band(ax[1], runs, "loss", transform=lambda y: 1.0 / y, label="1 / loss")
    step, _, half, coef = inverse_loss_fit(runs)
    A = np.vstack([step[half], np.ones(half.sum())]).T
    ax[1].plot(step[half], A @ coef, "k--", lw=1, label="linear fit, 2nd half")
    ax[1].set_xlabel("step")
    ax[1].set_ylabel("1 / training loss")
    ax[1].legend(fontsize=8)
    ax[1].set_title("inverse loss (linear = O(1/t))")
    seed_band(ax[2], runs, "cos_W", label="cos(W, W*)")
    seed_band(ax[2], runs, "cos_V", label="cos(V, V*)")
    ax[2].set_ylim(-0.05, 1.05)
    ax[2].set_xlabel("step")
    ax[2].legend(fontsize=8, loc="lower right")
    ax[2].set_title("cosine similarity with ground truth")
    fig.suptitle(f"Fig. 1  practical model, query={s['query']}, stochastic/{s['sampler']} PE, "
                 f"T={s['T']} q={s['q']} d={s['d']} d_e={s['d_e']}, {s['optimizer']} "
                 f"lr={s['lr']}, batch {s['batch']}, {len(runs)} seeds", fontsize=9)
    fig.tight_layout()
    savefig(fig, os.path.join(out, f"{NAME}.png"))


def measure(s, results):
    """Measure and check Fig. 1; returns ``(measured, checks)``.

    ``measured``: per seed the initial and final loss and their ratio, the R² of 1/L over the
    second half, the final cosines and :func:`.ood.block_mass`; also the R² and slope of the
    seed-mean 1/L. Checks (worst seed): final ≤ 1 % of initial, R² ≥ 0.99, both cosines
    ≥ 0.99."""
    runs = [results[j.name] for j in jobs(s)]
    step, inv, half, coef = inverse_loss_fit(runs)
    init = np.array([r.history["loss"][0] for r in runs])
    final = np.array([r.final("loss") for r in runs])
    ratio = final / init
    r2 = []
    for r in runs:      # each seed over its own records (a diverged run stops early)
        st = r.history["step"]
        h = st >= st[-1] / 2
        r2.append(fit_linear(st[h], 1.0 / r.history["loss"][h]).r2)
    completed = float(np.mean([r.status == "completed" for r in runs]))
    cw = [r.final("cos_W") for r in runs]
    cv = [r.final("cos_V") for r in runs]
    masses = [block_mass(r.W, r.V, s["d"]) for r in runs]
    measured = {"initial_loss": init.tolist(), "final_loss": final.tolist(),
                "final_over_initial": ratio.tolist(), "r2_inverse_loss_second_half": r2,
                "r2_of_seed_mean": fit_linear(step[half], inv[half]).r2,
                "inverse_loss_slope_per_step": float(coef[0]),
                "cos_W": cw, "cos_V": cv, "block_mass": masses}
    checks = [
        check("share of seeds that completed (none diverged)", completed, ">=", 1.0),
        check("final training loss <= 1% of initial (worst seed)", ratio.max(), "<=", 0.01),
        check("1/L linear over 2nd half, R^2 (worst seed)", min(r2), ">=", 0.99),
        check("cos(W, W*) (worst seed)", min(cw), ">=", 0.99),
        check("cos(V, V*) (worst seed)", min(cv), ">=", 0.99),
    ]
    return measured, checks
