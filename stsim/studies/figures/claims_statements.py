"""The statements of the claims map (:mod:`.claims`) and their values on a group of
simulated runs: S1–S3 and S9 of a practical-model setting (:func:`fig1_statements`), S4–S8
of an out-of-distribution group (:func:`ood_statements`). Each value is a check
(:func:`.verdicts.boot_check`): measured on the final estimates on large fresh sets
(:mod:`.evaluate`) where it is a loss, with a bootstrap standard error over seeds and
evaluation points, and a verdict. A value is NaN (unmeasured) when a run of its setting
did not complete.
"""
from __future__ import annotations

import numpy as np

from stsim.core.reduced import LEARNED
from stsim.studies.figures.common import second_half
from stsim.studies.figures.evaluate import eval_sample, r2_sample, scalar_sample
from stsim.studies.figures.ood import block_mass, is_fixed
from stsim.studies.figures.verdicts import boot_check

__all__ = ["STATEMENTS", "ood_statements", "fig1_statements", "statement_check", "increasing"]

STATEMENTS = {
    "S1": ("convergence (Fig. 1)", "worst seed: final loss / initial", "<=", 0.01),
    "S2": ("O(1/t) (Fig. 1)", "worst seed: R^2 of 1/L over the 2nd half", ">=", 0.99),
    "S3": ("cosines -> 1 (Fig. 1)", "worst seed: min(cos(W,W*), cos(V,V*))", ">=", 0.99),
    "S4": ("stochastic converges OOD (Fig. 2)", "worst seed: max over T_test of OOD/initial",
           "<=", LEARNED),
    "S5": ("fixed stays >= 0.15 (Figs. 2, 4)", "worst seed: min over T_test of fixed OOD loss",
           ">=", 0.15),
    "S6": ("stochastic quicker on q_test (Fig. 4)",
           "min over q_test of fixed/stochastic final loss (seed means)", ">", 1.0),
    "S7": ("fixed worse as q_test grows (Fig. 4)",
           "min over consecutive q_test of L(q_k+1)/L(q_k) (seed means)", ">", 1.0),
    "S8": ("Adam keeps the length advantage (Fig. 5)",
           "min over T_test of fixed/stochastic (seed means)", ">=", 2.0),
    "S9": ("heat maps block-diagonal (Fig. 3)", "worst seed: max(W, V share outside block)",
           "<=", 0.05),
    "FIT": ("fixed PE fits in distribution (not a paper statement)",
            "worst seed: final in-distribution loss / initial", "<=", LEARNED),
}


def statement_check(S, fn, samples) -> dict:
    """The check of statement ``S`` (its measure, op and threshold) on ``samples``."""
    name, what, op, thr = STATEMENTS[S]
    return boot_check(f"{S} {name}: {what}", fn, samples, op, thr)


def _min_all(*xs):
    return np.minimum.reduce([x.min(-1) for x in xs])


def _max_all(*xs):
    return np.maximum.reduce([x.max(-1) for x in xs])


def _min_ratio_means(k):
    """fn of 2k samples (k fixed, then k stochastic): min_i mean(f_i)/mean(s_i)."""
    def fn(*xs):
        return np.minimum.reduce([a.mean(-1) / b.mean(-1) for a, b in zip(xs[:k], xs[k:])])
    return fn


def increasing(*xs):
    """Smallest ratio of consecutive seed means (last axis: seeds)."""
    m = [x.mean(-1) for x in xs]
    return np.minimum.reduce([b / a for a, b in zip(m[:-1], m[1:])])


def ood_statements(s, names, results, boot):
    """S4–S8 for one OOD group (same T, optimiser, lr, steps; ``names``: ``{reading: [run
    names]}``): ``({reading: {S: check}}`` for each fixed reading — with ``FIT``, whether it
    fits in distribution — and the S4 check of the group's stochastic PE)``."""
    Ts, qs = s["T_test"], s["q_test"]
    st = names["stochastic"]
    st_T = [eval_sample(boot, results, st, f"val/T={t}") for t in Ts]
    st_q = [eval_sample(boot, results, st, f"val/q={q}") for q in qs]
    s4 = statement_check("S4", _max_all, [eval_sample(boot, results, st, f"val/T={t}",
                                                      relative=True) for t in Ts])
    out = {}
    for k in [k for k in names if is_fixed(k)]:
        fx_T = [eval_sample(boot, results, names[k], f"val/T={t}") for t in Ts]
        fx_q = [eval_sample(boot, results, names[k], f"val/q={q}") for q in qs]
        v = {"FIT": statement_check("FIT", lambda x: x.max(-1), [eval_sample(
                 boot, results, names[k], "val", relative=True)]),
             "S5": statement_check("S5", _min_all, fx_T),
             "S6": statement_check("S6", _min_ratio_means(len(qs)), fx_q + st_q),
             "S7": statement_check("S7", increasing, fx_q)}
        if s["optimizer"] == "adam":
            v["S8"] = statement_check("S8", _min_ratio_means(len(Ts)), fx_T + st_T)
        out[k] = v
    return out, s4


def fig1_statements(names, results, d, boot, heat=False):
    """S1–S3 (and S9 for randomly initialised runs) of one practical-model setting
    (``names``: its runs, one per seed)."""
    runs = [results[n] for n in names]
    pts = [second_half(r) for r in runs]
    out = {"S1": statement_check("S1", lambda x: x.max(-1),
                                 [eval_sample(boot, results, names, "val", relative=True)]),
           "S2": statement_check("S2", lambda x: x.min(-1),
                                 [r2_sample(boot, names, [p[0] for p in pts],
                                            [p[1] for p in pts])]),
           "S3": statement_check("S3", lambda x: x.min(-1), [scalar_sample(
               boot, names, [min(r.final("cos_W"), r.final("cos_V")) if r.success
                             else np.nan for r in runs])])}
    if heat:
        m = [block_mass(r.W, r.V, d) if r.success else None for r in runs]
        out["S9"] = statement_check("S9", lambda x: x.max(-1), [scalar_sample(
            boot, names, [max(x["W_outside_pe_block"], x["V_outside_token_block"]) if x
                          else np.nan for x in m])])
    return out
