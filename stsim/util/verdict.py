r"""The one verdict of every claim in the studies and in the theory report.

A claim is ``measured op threshold`` (``op``: ``<=``, ``<``, ``>=``, ``>``). Its evidence
is the measured value, its standard error ``se`` and the degrees of freedom ``df`` of
``se``. With the margin ``m = (measured − threshold)/se``, signed positive on the side
where the claim holds, and the critical value

    ``k = max(2, t_{0.975, df})``  (:func:`critical_value`)

the verdict is ``"held"`` if ``m ≥ k``, ``"failed"`` if ``m ≤ −k``, else
``"inconclusive"``, as is a value or an ``se`` that is not finite (a run diverged, no
spread to estimate ``se`` from). ``df``: ``S − 1`` for a statistic over ``S`` seeds
(three seeds: 4.30), ``n − 2`` for a parameter of a law fitted to ``n`` points, 31 for one
run's own sampling error over ≥ 32 evaluation blocks (2.04), ``None`` for a large sample
(Monte-Carlo over thousands of points): 2, the normal 1.96 rounded up — ``k`` is never
below 2, so a t quantile on many degrees of freedom does not make a claim easier than a
large sample would.

**Exact checks** (a deterministic value: the reduced dynamics, a count, a closed form, a
grid position, or a statistic compared with a stated tolerance such as a z-score against
its family-wise bound in the theory report) have ``se = 0``: they are judged as written
(``held`` iff the comparison is true), ``critical = 0``, ``exact = True``, margin ``±inf``
(0 on the threshold). A boolean outcome ``ok`` is the exact check ``float(ok) >= 1``.
"""
from __future__ import annotations

import numpy as np

__all__ = ["Z", "LEVEL", "VERDICTS", "critical_value", "verdict", "judge", "passes",
           "interval_se"]

Z = 2.0                 # the large-sample critical value (never below it)
LEVEL = 0.975           # one-sided quantile of the two-sided 95% t critical value
VERDICTS = ("held", "failed", "inconclusive")


def critical_value(df=None) -> float:
    """``max(Z, t_{0.975, df})``; ``Z`` for ``df=None`` (a large sample).

    >>> round(critical_value(2), 3), critical_value(None), round(critical_value(31), 3)
    (4.303, 2.0, 2.04)
    """
    if df is None or not np.isfinite(df):
        return Z
    if df < 1:
        raise ValueError(f"df must be >= 1, got {df}")
    from scipy.stats import t as student_t
    return max(Z, float(student_t.ppf(LEVEL, df)))


def verdict(measured, op, threshold, se, critical=Z) -> tuple:
    """``(verdict, margin)`` of the module docstring at the critical value ``critical``
    (the margin in standard errors, positive on the side where the claim holds; ±inf for
    ``se = 0`` and a value off its threshold; NaN when the value or ``se`` is not finite).

    >>> verdict(0.25, "<=", 0.5, 0.0625)
    ('held', 4.0)
    >>> verdict(0.25, "<=", 0.5, 0.0625, critical=4.303)[0]
    'inconclusive'
    >>> verdict(0.0195, "<=", 0.02, 0.0005)[0], verdict(1.0, ">=", 1.0, 0.0)[0]
    ('inconclusive', 'held')
    """
    if op not in ("<=", "<", ">=", ">"):
        raise ValueError(f"op must be one of '<=', '<', '>=', '>', got {op!r}")
    if not (np.isfinite(measured) and np.isfinite(se)):
        return "inconclusive", float("nan")
    diff = float(measured) - float(threshold)
    diff = diff if op[0] == ">" else -diff
    if se == 0:                 # exact: the comparison as written
        ok = diff > 0 or (diff == 0 and op in ("<=", ">="))
        return ("held" if ok else "failed"), (float(np.copysign(np.inf, diff)) if diff
                                              else 0.0)
    margin = diff / float(se)
    if abs(margin) < critical:
        return "inconclusive", float(margin)
    return ("held" if margin > 0 else "failed"), float(margin)


def judge(claim, measured, op, threshold, se=0.0, df=None, note="") -> dict:
    """The check of ``claim``: ``{claim, measured, se, op, threshold, verdict, margin_se,
    critical, df, exact, note}`` (module docstring; ``critical`` is 0 for an exact value,
    else :func:`critical_value` of ``df``).

    >>> c = judge("x", 0.2, ">=", 0.15, 0.01, df=2)
    >>> c["verdict"], round(c["critical"], 2), judge("y", 3, "<=", 3)["exact"]
    ('held', 4.3, True)
    """
    m, t, s = float(measured), float(threshold), float(se)
    k = 0.0 if s == 0 else critical_value(df)
    v, margin = verdict(m, op, t, s, k)
    return {"claim": claim, "measured": m, "se": s, "op": op, "threshold": t, "verdict": v,
            "margin_se": margin, "critical": k, "df": None if df is None else int(df),
            "exact": s == 0, "note": note}


def passes(measured, op=">=", threshold=1.0) -> bool:
    """Whether the exact check ``measured op threshold`` holds (:func:`judge` with
    ``se = 0``; a boolean ``measured`` is ``float(ok) >= 1``; not finite: it does not).

    >>> passes(1e-15, "<=", 1e-14), passes(True), passes(False), passes(float("nan"), "<=", 1)
    (True, True, False, False)
    """
    return judge("", float(measured), op, threshold)["verdict"] == "held"


def interval_se(lo, hi, df, level=0.95) -> float:
    """The standard error of an estimate whose ``level`` Student-t interval on ``df``
    degrees of freedom is ``[lo, hi]``: ``(hi − lo) / (2 t_{(1+level)/2, df})`` (judged on
    the same ``df``, a claim ``k`` standard errors out is one ``k/t`` half-widths out).

    >>> round(interval_se(-4.303, 4.303, 2), 3)
    1.0
    """
    from scipy.stats import t as student_t
    return (float(hi) - float(lo)) / (2.0 * float(student_t.ppf(0.5 + level / 2, df)))
