"""Shared pieces of the out-of-distribution experiments (Figs. 2, 4, 5 and the
beyond-the-paper runs): the base settings, the runs (the two fixed-PE readings — one-hot
and near-orthogonal — against the stochastic PE, same seeds, same validation data), the
analytic one-hot floor, the exact OOD loss at a run's own state, and the panels.

Chosen settings (the paper does not give them; see ``docs/reproduction.md``):
``d = 5``, ``d_e = 400 = max T_test`` for both one-hot families, batch 256, validation sets
of 128 points drawn once (the curves), zero initialisation (Theorem 1), theory model with
``query="sum"``. Every reported loss is the final estimate on large fresh sets
(:mod:`.evaluate`, ``evaluate``).
"""
from __future__ import annotations

import numpy as np

from stsim.theory.reduced import ood_floor_onehot, ood_loss_onehot
from stsim.studies.figures.common import Job, seed_band
from stsim.studies.figures.evaluate import EVALUATE, QUICK_EVALUATE, run_estimate

# the paper's task sizes; d, d_e, lr and steps are ours. ``near_d_e``: widths of the fixed
# near-orthogonal PE (a table of max(T_test) unit vectors drawn once, trained on the first
# T); ``long``: the stochastic PE trained again at its own lr / steps (and optionally
# seeds) for Fig. 2's convergence claim, or None.
FULL_BASE = dict(T=200, q=3, d=5, d_e=400, pe="stochastic", sampler="slots", batch=256,
                 init="zero", T_test=[250, 300, 350, 400], q_test=[1, 2, 4, 6], n_val=128,
                 eval_every=None, seeds=[0, 1, 2], near_d_e=[64, 128, 256], long=None,
                 evaluate=EVALUATE)
# the same experiment scaled down (T_test / T as in the paper) for tests and --quick
QUICK_BASE = dict(T=20, q=3, d=5, d_e=40, pe="stochastic", sampler="slots", batch=128,
                  init="zero", T_test=[25, 30, 35, 40], q_test=[1, 2, 4, 6], n_val=128,
                  eval_every=None, seeds=[0, 1], near_d_e=[16], long=None,
                  evaluate=QUICK_EVALUATE)

RUN_KEYS = ("T", "q", "d", "d_e", "sampler", "model", "query", "optimizer", "lr", "steps",
            "batch", "init", "T_test", "q_test", "n_val", "eval_every")
PE_LABEL = {"onehot": "fixed one-hot", "stochastic": "stochastic (slots)",
            "stochastic-long": "stochastic (slots), long run"}
PE_COLOR = {"onehot": "C3", "stochastic": "C0", "stochastic-long": "C9"}
_NEAR_COLORS = ("C1", "C2", "C4", "C5", "C6")


def near_key(d_e) -> str:
    """Key of the fixed near-orthogonal reading of width ``d_e``: ``"near<d_e>"``."""
    return f"near{int(d_e)}"


def is_fixed(key) -> bool:
    """Whether the reading ``key`` is a fixed PE (one-hot or near-orthogonal), i.e. not
    ``"stochastic"`` or ``"stochastic-long"``."""
    return not key.startswith("stochastic")


def pe_label(key) -> str:
    """Legend and claim label of a PE reading: ``PE_LABEL[key]``, or
    ``"fixed near-orth. d_e=<k>"`` for ``"near<k>"``."""
    if key.startswith("near"):
        return f"fixed near-orth. d_e={key[4:]}"
    return PE_LABEL[key]


def pe_color(key, s=None) -> str:
    """Plot colour of a PE reading: ``PE_COLOR[key]``; the near-orthogonal readings take
    ``_NEAR_COLORS`` in the order of ``s["near_d_e"]`` (the first one if ``key`` is not there)."""
    if key.startswith("near"):
        des = [near_key(x) for x in (s or {}).get("near_d_e", [])]
        i = des.index(key) if key in des else 0
        return _NEAR_COLORS[i % len(_NEAR_COLORS)]
    return PE_COLOR[key]


def variants(s) -> list:
    """The PE readings of one OOD group, as ``[(key, run-option overrides)]``: fixed
    one-hot (``d_e`` = the group's), fixed near-orthogonal at each ``s["near_d_e"]``,
    stochastic/slots."""
    out = [("onehot", {"pe": "onehot"})]
    out += [(near_key(de), {"pe": "near-orthogonal", "d_e": int(de)})
            for de in s.get("near_d_e") or ()]
    out.append(("stochastic", {"pe": "stochastic"}))
    return out


def ood_jobs(s, pes=None):
    """One run per (PE reading, seed); the name encodes what distinguishes the runs.
    ``pes``: the keys to keep (default: all of :func:`variants`)."""
    return [Job(f"ood/{s['model']}-{s['query']}-{s['optimizer']}-{key}-s{seed}",
                dict({k: s[k] for k in RUN_KEYS}, **over, seed=seed), s.get("evaluate"))
            for key, over in variants(s) if pes is None or key in pes for seed in s["seeds"]]


def long_jobs(s):
    """The stochastic PE trained again with ``s["long"]`` (``{"lr", "steps"}``) overriding
    the group's settings; empty if ``s["long"]`` is None."""
    if not s.get("long"):
        return []
    over = dict(s["long"])
    seeds = over.pop("seeds", s["seeds"])
    tag = "-".join(f"{k}{v}" for k, v in sorted(over.items()))
    return [Job(f"ood/{s['model']}-{s['query']}-{s['optimizer']}-stochastic-long-{tag}-s{seed}",
                dict({k: s[k] for k in RUN_KEYS}, pe="stochastic", seed=seed, **over),
                s.get("evaluate")) for seed in seeds]


def names_by_pe(s, pes=None):
    """``{key: [run name per seed]}`` for the OOD runs of settings ``s`` (plus
    ``"stochastic-long"`` when the group has a long run and ``pes`` is None)."""
    groups = {}
    for j in ood_jobs(s, pes):
        key = j.name.split("-")[-2]          # .../<model>-<query>-<opt>-<key>-s<seed>
        groups.setdefault(key, []).append(j.name)
    if pes is None and long_jobs(s):
        groups["stochastic-long"] = [j.name for j in long_jobs(s)]
    return groups


def by_pe(s, results, pes=None):
    """``{key: [Result per seed]}`` of :func:`names_by_pe`."""
    return {k: [results[n] for n in names] for k, names in names_by_pe(s, pes).items()}


def groups_of(s, results):
    """The group's runs by PE reading (the long stochastic run left out)."""
    return by_pe(s, results, pes=[k for k, _ in variants(s)])


def group_names(s):
    """The group's run names by PE reading (the long stochastic run left out)."""
    return names_by_pe(s, pes=[k for k, _ in variants(s)])


def run_setting(c) -> str:
    """``"<optimizer> lr <lr>, <steps> steps"`` of settings or a run's options or config
    ``c``: how claim texts and the claims map's settings name a run's training."""
    return f"{c['optimizer']} lr {c['lr']:g}, {c['steps']} steps"


def floor(s, T_test):
    """Analytic OOD loss floor of the fixed one-hot model (``stsim.theory.reduced``)."""
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


def final_estimates(runs, key):
    """``(mean, se)`` arrays: each run's final estimate on set ``key`` (:mod:`.evaluate`;
    NaN for a run without one)."""
    e = [run_estimate(r, key) for r in runs]
    return (np.array([x["mean"] if x else np.nan for x in e]),
            np.array([x["se"] if x else np.nan for x in e]))


def mark_final(ax, runs, key, color, s=None):
    """The seed mean of the final estimates (:func:`final_estimates`) at the last step,
    with a bar of ±2 standard errors of that mean (the larger of the seeds' spread and
    the evaluation points' error)."""
    m, se = final_estimates(runs, key)
    if not np.all(np.isfinite(m)):
        return
    k = m.size
    tot = np.sqrt(np.sum(se ** 2)) / k          # the evaluation points alone
    if k > 1:                                   # the seeds' spread includes them
        tot = max(tot, m.std(ddof=1) / np.sqrt(k))
    ax.errorbar([runs[0].history["step"][-1]], [m.mean()], yerr=[[2 * tot], [2 * tot]],
                fmt="D", ms=3.5, color=color, capsize=2, lw=1, zorder=5)


def panel_curves(ax, groups, key, title, floor_value=None, log=True, s=None, upto=None):
    """Seed bands of ``history[key]`` for each PE reading (up to step ``upto``) with the
    final estimate on the large evaluation set (:func:`mark_final`, diamond ± 2 SE), plus
    the dashed analytic one-hot floor."""
    for pe, runs in groups.items():
        seed_band(ax, runs, key, label=pe_label(pe), color=pe_color(pe, s), upto=upto,
                  lw=1.2 if pe.startswith("near") else 1.6)
        if upto is None:
            mark_final(ax, runs, key, pe_color(pe, s), s)
    if floor_value is not None:
        ax.axhline(floor_value, color=PE_COLOR["onehot"], ls="--", lw=1.0,
                   label=f"fixed-PE floor (analytic) {floor_value:.3f}")
    if log:
        ax.set_yscale("log")
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("step")
