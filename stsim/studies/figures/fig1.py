"""Fig. 1 — global convergence of the practical model with stochastic PE: training loss,
inverse loss (linear growth = O(1/t) rate) and cosine similarity of W, V with W*, V*.

Paper (Wang et al. 2024, Fig. 1): the loss of the one-layer transformer attending to
``[Z, z_query]`` with stochastic PE converges to 0, ``1/L`` grows linearly, and
``cos(W, W*)``, ``cos(V, V*)`` rise to 1.

Setting: the practical model with ``query="mean"`` and plain SGD (``SETTINGS``). Why the
mean query, the step below its bound ``2(q+1)²/q`` and the budget, and why ``query="sum"``
does not learn ``W ∝ W*``: docs/reproduction.md, "Settings", Fig. 1.
The same runs also record OOD validation losses, used by :mod:`.beyond` (theory vs
practical model).
"""
from __future__ import annotations

import numpy as np

from stsim.studies.figures.common import Job, save_png, second_half, seed_band, seed_values
from stsim.util.stats import fit_linear
from stsim.studies.figures.evaluate import eval_sample, r2_sample, scalar_sample
from stsim.studies.figures.ood import QUICK_BASE, FULL_BASE, RUN_KEYS, block_mass
from stsim.studies.figures.verdicts import Boot, boot_check, make_check

NAME = "fig1"

SETTINGS = {
    "quick": dict(QUICK_BASE, model="practical", query="mean", optimizer="sgd", lr=10.0,
                  steps=600),
    # lr 9.5 < 0.9 x the bound 2(q+1)^2/q = 10.7 of this model (stability.step_bound):
    # not at the edge; 1/L ~ 4 lr t/(q^2 (n-1)) needs 28 000 steps for ~0.8 % of L(0)
    "full": dict(FULL_BASE, model="practical", query="mean", optimizer="sgd", lr=9.5,
                 steps=28000),
}


def run_options(s, seed):
    """Options of :func:`stsim.run` for the Fig. 1 run with ``seed``: the task, model,
    optimiser and validation keys of the settings ``s``, plus ``seed``."""
    return dict({k: s[k] for k in RUN_KEYS}, pe=s["pe"], seed=seed)


def names(s):
    """The run names of :func:`jobs`."""
    return [j.name for j in jobs(s)]


def jobs(s):
    """One run per seed in ``s["seeds"]``, named ``fig1/<model>-<query>-<optimizer>-s<seed>``
    (also used by :mod:`.beyond` and :mod:`.claims`)."""
    return [Job(f"fig1/{s['model']}-{s['query']}-{s['optimizer']}-s{seed}",
                run_options(s, seed), s.get("evaluate")) for seed in s["seeds"]]


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
    from stsim.util.plotting import plt   # on drawing only
    runs = [results[j.name] for j in jobs(s)]
    fig, ax = plt.subplots(1, 3, figsize=(13, 3.6))
    seed_band(ax[0], runs, "loss", label="training loss (seed mean, min–max)")
    ax[0].axhline(s["d"] / (2 * s["q"]), color="gray", ls=":", lw=1, label="L(0) = d/(2q)")
    ax[0].set(yscale="log", xlabel="step", ylabel="loss", title="training loss")
    ax[0].legend(fontsize=8)
    seed_band(ax[1], runs, "loss", transform=lambda y: 1.0 / y, label="1 / loss")
    step, _, half, coef = inverse_loss_fit(runs)
    A = np.vstack([step[half], np.ones(half.sum())]).T
    ax[1].plot(step[half], A @ coef, "k--", lw=1, label="linear fit, 2nd half")
    ax[1].set(xlabel="step", ylabel="1 / training loss", title="inverse loss (linear = O(1/t))")
    ax[1].legend(fontsize=8)
    seed_band(ax[2], runs, "cos_W", label="cos(W, W*)")
    seed_band(ax[2], runs, "cos_V", label="cos(V, V*)")
    ax[2].set(ylim=(-0.05, 1.05), xlabel="step", title="cosine similarity with ground truth")
    ax[2].legend(fontsize=8, loc="lower right")
    fig.suptitle(f"Fig. 1  practical model, query={s['query']}, stochastic/{s['sampler']} PE, "
                 f"T={s['T']} q={s['q']} d={s['d']} d_e={s['d_e']}, {s['optimizer']} "
                 f"lr={s['lr']}, batch {s['batch']}, {len(runs)} seeds", fontsize=9)
    save_png(fig, out, NAME)


def measure(s, results):
    """Measure and check Fig. 1; returns ``(measured, checks)``.

    ``measured``: per seed the initial and final training loss and their ratio, the final
    loss on the large in-distribution set over the exact ``L(0) = d/(2q)``, the R² of 1/L
    over the second half, the final cosines and :func:`.ood.block_mass`; also the R² and
    slope of the seed-mean 1/L. Checks (worst seed, bootstrap standard error over seeds
    and points): every seed completed, final ≤ 1 % of initial, R² ≥ 0.99, both cosines
    ≥ 0.99."""
    ns = names(s)
    runs = [results[n] for n in ns]
    boot = Boot()
    step, inv, half, coef = inverse_loss_fit(runs)
    init = np.array([r.history["loss"][0] for r in runs])
    final = np.array([r.final("loss") for r in runs])
    rel = eval_sample(boot, results, ns, "val", relative=True)
    pts = [second_half(r) for r in runs]
    r2 = r2_sample(boot, ns, [p[0] for p in pts], [p[1] for p in pts])
    completed = float(np.mean([r.status == "completed" for r in runs]))
    cw = scalar_sample(boot, ns, [r.final("cos_W") for r in runs])
    cv = scalar_sample(boot, ns, [r.final("cos_V") for r in runs])
    masses = [block_mass(r.W, r.V, s["d"]) for r in runs]
    measured = {"initial_loss": init.tolist(), "final_loss": final.tolist(),
                "final_over_initial": (final / init).tolist(),
                "final_over_initial_evaluation": rel.value.tolist(),
                "r2_inverse_loss_second_half": r2.value.tolist(),
                "r2_of_seed_mean": fit_linear(step[half], inv[half]).r2,
                "inverse_loss_slope_per_step": float(coef[0]),
                "cos_W": cw.value.tolist(), "cos_V": cv.value.tolist(), "block_mass": masses}
    worst_hi, worst_lo = (lambda x: x.max(-1)), (lambda x: x.min(-1))
    checks = [
        make_check("share of seeds that completed (none diverged)", completed, ">=", 1.0, 0.0,
                   runs=ns),
        boot_check("final loss (large fresh in-distribution set) <= 1% of initial "
                   "d/(2q) (worst seed)", worst_hi, [rel], "<=", 0.01),
        boot_check("1/L linear over 2nd half, R^2 (worst seed)", worst_lo, [r2], ">=", 0.99),
        boot_check("cos(W, W*) (worst seed)", worst_lo, [cw], ">=", 0.99),
        boot_check("cos(V, V*) (worst seed)", worst_lo, [cv], ">=", 0.99),
    ]
    return measured, checks
