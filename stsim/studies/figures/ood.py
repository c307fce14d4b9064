"""Shared pieces of the out-of-distribution experiments (Figs. 2, 4, 5 and the
beyond-the-paper runs): the base settings, the runs (the two fixed-PE readings — one-hot
and near-orthogonal — against the stochastic PE, same seeds, same validation data), the
analytic one-hot floor, the exact OOD loss at a run's own state, and the panels.

Chosen settings (the paper does not give them; see ``docs/reproduction.md``):
``d = 5``, ``d_e = 400 = max T_test`` for both one-hot families, batch 256, validation sets
of 128 points drawn once, zero initialisation (Theorem 1), theory model with
``query="sum"``.
"""
from __future__ import annotations

import numpy as np

from stsim.studies.figures.common import Job, seed_band

# the paper's task sizes; d, d_e, lr and steps are ours. ``near_d_e``: widths of the fixed
# near-orthogonal PE (a table of max(T_test) unit vectors drawn once, trained on the first
# T); ``long``: the stochastic PE trained again at its own lr / steps (and optionally
# seeds) for Fig. 2's convergence claim, or None.
FULL_BASE = dict(T=200, q=3, d=5, d_e=400, pe="stochastic", sampler="slots", batch=256,
                 init="zero", T_test=[250, 300, 350, 400], q_test=[1, 2, 4, 6], n_val=128,
                 eval_every=None, seeds=[0, 1], near_d_e=[32, 64, 128], long=None)
# the same experiment scaled down (T_test / T as in the paper) for tests and --quick
QUICK_BASE = dict(T=20, q=3, d=5, d_e=40, pe="stochastic", sampler="slots", batch=128,
                  init="zero", T_test=[25, 30, 35, 40], q_test=[1, 2, 4, 6], n_val=128,
                  eval_every=None, seeds=[0, 1], near_d_e=[16], long=None)

RUN_KEYS = ("T", "q", "d", "d_e", "sampler", "model", "query", "optimizer", "lr", "steps",
            "batch", "init", "T_test", "q_test", "n_val", "eval_every")
PES = ("onehot", "stochastic")
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
    out = []
    for key, over in variants(s):
        if pes is not None and key not in pes:
            continue
        for seed in s["seeds"]:
            opts = dict({k: s[k] for k in RUN_KEYS}, **over, seed=seed)
            out.append(Job(f"ood/{s['model']}-{s['query']}-{s['optimizer']}-{key}-s{seed}", opts))
    return out


def long_jobs(s):
    """The stochastic PE trained again with ``s["long"]`` (``{"lr", "steps"}``) overriding
    the group's settings; empty if ``s["long"]`` is None."""
    if not s.get("long"):
        return []
    over = dict(s["long"])
    seeds = over.pop("seeds", s["seeds"])
    tag = "-".join(f"{k}{v}" for k, v in sorted(over.items()))
    return [Job(f"ood/{s['model']}-{s['query']}-{s['optimizer']}-stochastic-long-{tag}-s{seed}",
                dict({k: s[k] for k in RUN_KEYS}, pe="stochastic", seed=seed, **over))
            for seed in seeds]


def by_pe(s, results, pes=None):
    """``{key: [Result per seed]}`` for the OOD runs of settings ``s`` (plus
    ``"stochastic-long"`` when the group has a long run)."""
    groups = {}
    for j in ood_jobs(s, pes):
        key = j.name.split("-")[-2]          # .../<model>-<query>-<opt>-<key>-s<seed>
        groups.setdefault(key, []).append(results[j.name])
    if pes is None and long_jobs(s):
        groups["stochastic-long"] = [results[j.name] for j in long_jobs(s)]
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


def point_losses(res, key):
    """Loss of the run's final ``(W, V)`` on each point of its validation set ``key``
    (the set is re-drawn from the run's config and seed exactly as in training)."""
    from stsim.core.config import Config
    from stsim.core.encodings import PEBatch
    from stsim.core.model import forward_backward
    from stsim.core.problem import make_problem
    cfg = Config.from_options(**res.config)
    b, pe = make_problem(cfg).val[key]
    out = np.empty(b.B)
    for i in range(b.B):
        if pe.idx is not None:
            pi = pe if pe.idx.ndim == 1 else PEBatch(d_e=pe.d_e, idx=pe.idx[i:i + 1])
        else:
            pi = pe if pe.P.ndim == 2 else PEBatch(d_e=pe.d_e, P=pe.P[i:i + 1])
        out[i] = forward_backward(res.W, res.V, b.X[i:i + 1], b.y[i:i + 1], pi,
                                  model=cfg.model, query=cfg.query,
                                  target=b.target[i:i + 1], need_grad=False)[0]
    return out


def exact_agreement(s, runs, T_test):
    """Per seed: measured fixed one-hot OOD loss (mean over the validation points), the
    exact OOD loss at the run's own ``(a, γ)``, the standard error of the measured mean
    over the validation points (``std / sqrt(n_val)``) and ``z = (measured − exact)/SE``."""
    rows = []
    for r in runs:
        pts = point_losses(r, f"val/T={T_test}")
        se = float(pts.std(ddof=1) / np.sqrt(pts.size))
        ex = predicted_fixed_ood(s, r, T_test)
        rows.append({"measured": float(pts.mean()), "exact": ex, "se": se,
                     "z": float((pts.mean() - ex) / se) if se > 0 else 0.0})
    return rows


def block_mass(W, V, d):
    """Frobenius share of ``W`` outside its PE block ``W_ee`` and of ``V`` outside its
    token block ``V_x``: ``‖W − W_ee‖_F / ‖W‖_F`` and ``‖V_e‖_F / ‖V‖_F``."""
    nW, nV = np.linalg.norm(W), np.linalg.norm(V)
    w_out = np.sqrt(max(nW ** 2 - np.linalg.norm(W[d:, d:]) ** 2, 0.0))
    v_out = np.linalg.norm(V[:, d:])
    return {"W_outside_pe_block": float(w_out / nW) if nW > 0 else 0.0,
            "V_outside_token_block": float(v_out / nV) if nV > 0 else 0.0}


def final_stats(runs, key, upto=None):
    """Per run: the value of ``history[key]`` at the last record ``<= upto`` (default the
    end) and at step 0."""
    v = np.array([at_step(r, key, upto) for r in runs])
    i = np.array([r.history[key][0] for r in runs])
    return v, i


def at_step(r, key, upto=None):
    """``history[key]`` of the result ``r`` at its last record ``<= upto`` (the first record
    if ``upto`` precedes them all), or its final value if ``upto`` is None, as a float."""
    if upto is None:
        return float(r.final(key))
    j = int(np.searchsorted(r.history["step"], upto, "right")) - 1
    return float(r.history[key][max(j, 0)])


def panel_curves(ax, groups, key, title, floor_value=None, log=True, s=None, upto=None):
    """Seed bands of ``history[key]`` for each PE reading (up to step ``upto``), plus the
    dashed analytic one-hot floor."""
    for pe, runs in groups.items():
        seed_band(ax, runs, key, label=pe_label(pe), color=pe_color(pe, s), upto=upto,
                  lw=1.2 if pe.startswith("near") else 1.6)
    if floor_value is not None:
        ax.axhline(floor_value, color=PE_COLOR["onehot"], ls="--", lw=1.0,
                   label=f"fixed-PE floor (analytic) {floor_value:.3f}")
    if log:
        ax.set_yscale("log")
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("step")
