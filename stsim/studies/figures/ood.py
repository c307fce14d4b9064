"""Shared pieces of the out-of-distribution experiments (Figs. 2, 4, 5 and the
beyond-the-paper runs): the base settings, the runs (fixed one-hot against stochastic
PE, same seeds, same validation sets), the analytic fixed-PE floor and the panels.

Chosen settings (the paper does not give them; see ``docs/reproduction.md``):
``d = 5``, ``d_e = 400 = max T_test`` for both one-hot families, batch 256, validation sets
of 128 points drawn once, zero initialisation (Theorem 1), theory model with
``query="sum"``.
"""
from __future__ import annotations

import numpy as np

from stsim.studies.figures.common import Job, seed_band

# the paper's task sizes; d, d_e, lr and steps are ours
FULL_BASE = dict(T=200, q=3, d=5, d_e=400, pe="stochastic", sampler="slots", batch=256,
                 init="zero", T_test=[250, 300, 350, 400], q_test=[1, 2, 4, 6], n_val=128,
                 eval_every=None, seeds=[0, 1, 2])
# the same experiment scaled down (T_test / T as in the paper) for tests and --quick
QUICK_BASE = dict(T=20, q=3, d=5, d_e=40, pe="stochastic", sampler="slots", batch=128,
                  init="zero", T_test=[25, 30, 35, 40], q_test=[1, 2, 4, 6], n_val=128,
                  eval_every=None, seeds=[0, 1])

RUN_KEYS = ("T", "q", "d", "d_e", "sampler", "model", "query", "optimizer", "lr", "steps",
            "batch", "init", "T_test", "q_test", "n_val", "eval_every")
PES = ("onehot", "stochastic")
PE_LABEL = {"onehot": "fixed one-hot", "stochastic": "stochastic (slots)"}
PE_COLOR = {"onehot": "C3", "stochastic": "C0"}


def ood_jobs(s, pes=PES):
    """One run per (PE, seed); the name encodes what distinguishes the runs."""
    out = []
    for pe in pes:
        for seed in s["seeds"]:
            opts = dict({k: s[k] for k in RUN_KEYS}, pe=pe, seed=seed)
            out.append(Job(f"ood/{s['model']}-{s['query']}-{s['optimizer']}-{pe}-s{seed}", opts))
    return out


def by_pe(s, results, pes=PES):
    """``{pe: [Result per seed]}`` for the OOD runs of settings ``s``."""
    groups = {pe: [] for pe in pes}
    for j in ood_jobs(s, pes):
        groups[j.options["pe"]].append(results[j.name])
    return groups


def floor(s, T_test):
    """Analytic OOD loss floor of the fixed one-hot model (``stsim.theory.reduced``)."""
    from stsim.theory.reduced import ood_floor_onehot
    return ood_floor_onehot(s["T"], T_test, s["q"], s["d"])


def reduced_state_onehot(res, T, d):
    """Read ``(a, γ)`` of the symmetry reduction off a trained fixed one-hot run:
    ``W_ee ≈ a (I − J/T)`` on the trained ``T × T`` block (``a`` = mean diagonal − mean
    off-diagonal entry) and ``V_x ≈ γ I`` (``γ`` = mean diagonal)."""
    B = res.W[d:d + T, d:d + T]
    off = (B.sum() - np.trace(B)) / (T * (T - 1))
    return float(np.trace(B) / T - off), float(np.trace(res.V[:, :d]) / d)


def predicted_fixed_ood(s, res, T_test):
    """Exact population OOD loss of the fixed one-hot model at the run's own ``(a, γ)``
    (:func:`stsim.theory.reduced.ood_loss_onehot`); the floor is its ``a → ∞, γ → 1`` limit."""
    from stsim.theory.reduced import ood_loss_onehot
    a, g = reduced_state_onehot(res, s["T"], s["d"])
    return float(ood_loss_onehot(a, g, s["T"], T_test, s["q"], s["d"]))


def block_mass(W, V, d):
    """Frobenius share of ``W`` outside its PE block ``W_ee`` and of ``V`` outside its
    token block ``V_x``: ``‖W − W_ee‖_F / ‖W‖_F`` and ``‖V_e‖_F / ‖V‖_F``."""
    nW, nV = np.linalg.norm(W), np.linalg.norm(V)
    w_out = np.sqrt(max(nW ** 2 - np.linalg.norm(W[d:, d:]) ** 2, 0.0))
    v_out = np.linalg.norm(V[:, d:])
    return {"W_outside_pe_block": float(w_out / nW) if nW > 0 else 0.0,
            "V_outside_token_block": float(v_out / nV) if nV > 0 else 0.0}


def final_stats(runs, key):
    v = np.array([r.final(key) for r in runs])
    i = np.array([r.history[key][0] for r in runs])
    return v, i


def panel_curves(ax, groups, key, title, floor_value=None, log=True):
    """Seed bands of ``history[key]`` for each PE, plus the dashed analytic floor."""
    for pe, runs in groups.items():
        seed_band(ax, runs, key, label=PE_LABEL[pe], color=PE_COLOR[pe])
    if floor_value is not None:
        ax.axhline(floor_value, color=PE_COLOR["onehot"], ls="--", lw=1.2,
                   label=f"fixed-PE floor (analytic) {floor_value:.3f}")
    if log:
        ax.set_yscale("log")
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("step")
