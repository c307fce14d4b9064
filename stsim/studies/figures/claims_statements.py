"""The statements of the claims map (:mod:`.claims`) and their values on a group of
simulated runs: S1–S3 and S9 of a practical-model setting (:func:`fig1_statements`), S4–S8
of an out-of-distribution group (:func:`ood_statements`), and whether a value meets its
statement (:func:`held`). A value is NaN when a run of its setting did not succeed.
"""
from __future__ import annotations

import numpy as np

from stsim.util.stats import fit_linear
from stsim.studies.figures.ood import block_mass, final_stats, is_fixed

__all__ = ["STATEMENTS", "held", "ood_statements", "fig1_statements"]

STATEMENTS = {
    "S1": ("convergence (Fig. 1)", "final training loss <= 1% of initial", "<=", 0.01),
    "S2": ("O(1/t) (Fig. 1)", "R^2 of 1/L over the 2nd half", ">=", 0.99),
    "S3": ("cosines -> 1 (Fig. 1)", "min(cos(W,W*), cos(V,V*))", ">=", 0.99),
    "S4": ("stochastic converges OOD (Fig. 2)", "max over T_test of OOD/initial", "<=", 0.02),
    "S5": ("fixed stays >= 0.15 (Figs. 2, 4)", "min over T_test of fixed OOD loss", ">=", 0.15),
    "S6": ("stochastic quicker on q_test (Fig. 4)",
           "min over q_test of fixed/stochastic (last 20%)", ">", 1.0),
    "S7": ("fixed worse as q_test grows (Fig. 4)", "share of increasing q_test pairs", ">=", 1.0),
    "S8": ("Adam keeps the length advantage (Fig. 5)",
           "min over T_test of fixed/stochastic", ">=", 2.0),
    "S9": ("heat maps block-diagonal (Fig. 3)", "max(W, V share outside block)", "<=", 0.05),
}


def _ok(runs):
    return all(r.success for r in runs)


def _tail(runs, key, frac=0.2):
    st = runs[0].history["step"]
    m = st >= (1 - frac) * st[-1]
    return float(np.mean([r.history[key][m].mean() for r in runs]))


def ood_statements(s, groups):
    """Values of S5–S8 for one OOD group (same T, optimiser, lr, steps): ``({reading:
    {S: value}}`` for each fixed reading, S4 of the group's stochastic PE)``."""
    st = groups["stochastic"]
    s4 = max(float((final_stats(st, f"val/T={t}")[0] / final_stats(st, f"val/T={t}")[1]).max())
             for t in s["T_test"]) if _ok(st) else float("nan")
    out = {}
    nan = float("nan")
    for k in [k for k in groups if is_fixed(k)]:
        fx = groups[k]
        v = {"S5": nan, "S6": nan, "S7": nan}
        if _ok(fx):      # S5, S7 are about the fixed PE alone; S6, S8 need both
            v["S5"] = min(float(final_stats(fx, f"val/T={t}")[0].min()) for t in s["T_test"])
            fq = [float(final_stats(fx, f"val/q={qt}")[0].mean()) for qt in s["q_test"]]
            v["S7"] = float(np.mean(np.diff(fq) > 0))
        if _ok(fx) and _ok(st):
            v["S6"] = min(_tail(fx, f"val/q={qt}") / _tail(st, f"val/q={qt}")
                          for qt in s["q_test"])
        if s["optimizer"] == "adam":
            v["S8"] = min(float(final_stats(fx, f"val/T={t}")[0].mean() /
                                final_stats(st, f"val/T={t}")[0].mean())
                          for t in s["T_test"]) if _ok(fx) and _ok(st) else nan
        out[k] = v
    return out, s4


def fig1_statements(runs, d, heat=False):
    """S1–S3 (and S9 for randomly initialised runs) of one practical-model setting."""
    if not _ok(runs):
        return {S: float("nan") for S in (("S1", "S2", "S3", "S9") if heat else
                                           ("S1", "S2", "S3"))}
    step = runs[0].history["step"]
    half = step >= step[-1] / 2
    s1 = max(r.final("loss") / r.history["loss"][0] for r in runs)
    s2 = min(fit_linear(step[half], 1.0 / r.history["loss"][half]).r2 for r in runs)
    s3 = min(min(r.final("cos_W"), r.final("cos_V")) for r in runs)
    out = {"S1": float(s1), "S2": float(s2), "S3": float(s3)}
    if heat:
        m = [block_mass(r.W, r.V, d) for r in runs]
        out["S9"] = float(max(max(x["W_outside_pe_block"], x["V_outside_token_block"])
                              for x in m))
    return out


def held(S, value):
    """Whether statement ``S`` (a key of ``STATEMENTS``) holds for ``value``, i.e.
    ``value <op> threshold`` with the statement's op and threshold; ``False`` for ``None`` or a
    non-finite value (NaN: a run of that setting did not succeed)."""
    if value is None or not np.isfinite(value):
        return False
    _, _, op, thr = STATEMENTS[S]
    return {"<=": value <= thr, ">=": value >= thr, ">": value > thr}[op]
