r"""The full-matrix step of :func:`stsim.theory.checks.check_theorem`: population GD of
W and V themselves (``stsim.run(objective="population")``, exact enumeration), its
invariants at every step and its agreement with the reduced map; and the derived bound
``0 <= γ <= Γ`` along the trajectory (:func:`gamma_bound`)."""
from __future__ import annotations

import math

import numpy as np

from stsim.core.families import make_encoding
from stsim.core.run import run
from stsim.theory.reduced import reduced_gd_scalar
from stsim.theory.report import make_check, not_run

__all__ = ["gamma_bound", "full_plan", "full_matrix", "MAX_CONFIGURATIONS"]

def gamma_bound(T, q) -> float:
    r"""``Γ``: the bound ``0 <= γ(t) <= Γ`` along population GD from zero (docs/theory.md §6).

    Derivation. ``∂L/∂γ = d (γ S₂ − s₊)`` (``S₂ = |s|²``, ``s₊ = s·u``), so the GD step is
    ``γ ← (1 − η S₂) γ + η S₂ γ*(θ)`` with ``γ* = s₊/S₂``: for ``η S₂ <= 1`` a convex
    combination of ``γ`` and ``γ*``. With ``u = e^θ >= 1`` (``a >= 0``, non-decreasing from
    0, checked) and ``r = T − q``, ``γ* = 1 + r (u − 1)/(q u² + r) ∈ [1, Γ]``, maximal at
    ``u* = 1 + √(1 + r/q)``; and ``S₂ = (q u² + r)/(q u + r)² <= 1/q``, so ``η <= q``
    suffices. Hence, from ``γ(0) = 0``, ``0 <= γ(t) <= Γ = 1 + r (u* − 1)/(q u*² + r)``
    at every step (the width ``n`` of the encoding only scales the step of ``a``).

    >>> round(gamma_bound(12, 2), 4)
    1.7247
    """
    r = float(T - q)
    u = 1.0 + math.sqrt(1.0 + r / q)
    return 1.0 + r * (u - 1.0) / (q * u * u + r)


MAX_CONFIGURATIONS = 10 ** 6     # most configurations the full-matrix run enumerates


def full_plan(s, full_steps, max_full_work):
    """What the full-matrix population GD check runs: ``(enc, count, steps, why_smaller)``
    — the encoding (its width), the configurations enumerated, the steps, and why a
    smaller width than the trained one was taken (``None`` when it was not) — or ``(None,
    reason)`` when it cannot run. A stochastic family whose exact enumeration at ``d_e`` is
    too costly (e.g. ``T = 9``, ``d_e = 24``: 4.7·10⁷ configurations) is checked at the
    width ``d_e' = T + ⌈T/3⌉`` of the default check (or the largest affordable width
    ``T < d_e' < d_e`` below it): the same law (the slots of a width-``d_e'`` space),
    compared with the reduced map at that width. The sampler at the trained width itself
    is checked by the block gradients (Monte-Carlo over :meth:`Encoding.sample`)."""
    T, q = s.T, s.q
    n_fs = min(full_steps, s.steps)
    if n_fs == 0:
        return None, "full_steps = 0"
    if T * T * q * n_fs > max_full_work:      # count >= C(T, q) >= T
        return None, (f"enumeration of >= C(T, q) >= T configurations x {n_fs} steps is too "
                      f"costly (work >= T^2 q steps = {T * T * q * n_fs:.2g} > "
                      f"{max_full_work:.2g}); lower T or full_steps")

    def count_of(enc):
        count = enc.n_configurations(T, q)
        ok = count is not None and count <= MAX_CONFIGURATIONS and \
            float(count) * T * q * n_fs <= max_full_work
        return count, ok
    count, ok = count_of(s.enc)
    if ok:
        return s.enc, int(count), n_fs, None
    why = (f"exact enumeration at d_e = {s.enc.d_e} needs {float(count):.3g} configurations "
           f"x {n_fs} steps (work {float(count) * T * q * n_fs:.2g} > {max_full_work:.2g})")
    if not s.enc.fixed:
        # the default width T + ceil(T/3) of a check without T_test, or the largest
        # affordable one below it (the count grows with the width)
        for w in range(min(s.enc.d_e - 1, T + math.ceil(T / 3)), T, -1):
            enc = make_encoding(s.enc.name, T_max=T, d_e=w)
            c, ok = count_of(enc)
            if ok:
                return enc, int(c), n_fs, why
    return None, why + "; lower T or full_steps"


def full_matrix(s, full_steps, max_full_work, checks) -> dict:
    T, q = s.T, s.q
    plan = full_plan(s, full_steps, max_full_work)
    if plan[0] is None:
        checks.append(not_run("full-matrix GD = reduced map", plan[1], on="model"))
        return {"ran": False, "reason": plan[1]}
    enc, count, n_fs, why_smaller = plan
    res = run(T=T, q=q, pe=enc.name, d=s.d, d_e=enc.d_e, query=s.query,
              objective="population", optimizer="gd", lr=s.lr, steps=n_fs, eval_every=1)
    h = res.history
    with np.errstate(over="ignore", invalid="ignore"):
        ref = reduced_gd_scalar(T, q, s.d, s.lr, n_fs, pe=enc, query=s.query)
    m = min(len(h["loss"]), ref.loss.shape[1])
    full = {"ran": True, "steps": n_fs, "configurations": int(count), "status": res.status,
            "d_e": int(enc.d_e), "why_smaller": why_smaller,
            "loss_non_increasing": bool(np.all(np.diff(h["loss"]) <= 0)),
            "a_non_decreasing": bool(np.all(np.diff(h["a"]) >= 0))}
    for k in ("inv/W_xx", "inv/W_xe", "inv/W_ex", "inv/V_e", "inv/W_ee_offspan",
              "inv/V_x_offspan"):
        full[k] = float(np.max(h[k]))
    for k, r in (("loss", ref.loss[0]), ("a", ref.a[0]), ("gamma", ref.gamma[0])):
        rel = np.abs(h[k][1:m] - r[1:m]) / np.maximum(np.abs(r[1:m]), 1e-300)
        full[f"rel_dev_{k}"] = float(rel.max()) if rel.size else 0.0
    dev = max(full["rel_dev_loss"], full["rel_dev_a"], full["rel_dev_gamma"])
    at = f" (at d_e = {enc.d_e})" if why_smaller else ""
    checks.append(make_check("full-matrix population GD completed", res.status, "completed",
                             res.status == "completed", on="model"))
    checks.append(make_check("full-matrix GD = reduced map",
                             f"max relative deviation {dev:.3g}{at}",
                             "<= 1e-9 (rounding)", dev if res.status == "completed" else
                             math.nan, "<=", 1e-9, on="model"))
    G = gamma_bound(T, q)
    gam = np.asarray(h["gamma"], dtype=float)
    full["gamma_min"], full["gamma_max"] = float(gam.min()), float(gam.max())
    ok = bool(full["a_non_decreasing"] and gam.min() >= 0 and gam.max() <= G * (1 + 1e-12))
    checks.append(make_check("W, V: a non-decreasing and 0 <= gamma <= Gamma at every step",
                             f"gamma in [{gam.min():.6g}, {gam.max():.6g}]; a non-decreasing: "
                             f"{full['a_non_decreasing']}{at}", f"gamma in [0, Gamma = "
                             f"{G:.6g}] (derived bound), every a(t+1) >= a(t)", ok, on="model"))
    off = max(full["inv/W_ee_offspan"], full["inv/V_x_offspan"])
    checks.append(make_check("W_ee = a(I - J/n), V_x = gamma I along the run",
                             f"max off-span distance {off:.3g}{at}", "<= 1e-10 (rounding)",
                             off, "<=", 1e-10, on="model"))
    return full
