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

**The check record** (:func:`judge`) is the one schema of a check in every study's JSON and
in the theory report: the keys :data:`CHECK_KEYS` — the claim, the evidence (``measured``,
``se``, ``df``), the rule (``op``, ``threshold``, ``critical``), the outcome (``verdict``,
``margin_se``, ``exact``) and ``reason``, why it is inconclusive ("" when it is decided) —
plus the context keys a study adds (its runs, ``T``, ...). A check that is judged but must
not be believed (a run it needs failed, an unstable setting) is made inconclusive by
:func:`inconclusive`, which records why. :func:`checks_table`, :func:`counts` and
:func:`summary_line` are the one report of a list of checks; :func:`find_checks` finds the
records in any JSON and :func:`rejudge` judges one again from its recorded numbers.
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ["Z", "LEVEL", "VERDICTS", "CHECK_KEYS", "critical_value", "verdict", "judge",
           "passes", "interval_se", "inconclusive", "all_of", "rejudge", "counts", "summary_line",
           "checks_table", "check_line", "find_checks"]

Z = 2.0                 # the large-sample critical value (never below it)
LEVEL = 0.975           # one-sided quantile of the two-sided 95% t critical value
VERDICTS = ("held", "failed", "inconclusive")
#: the keys of every check record (:func:`judge`), in the order a report prints them
CHECK_KEYS = ("claim", "verdict", "measured", "se", "df", "op", "threshold", "critical",
              "margin_se", "exact", "reason", "note")


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


def _why(measured, se, margin, critical) -> str:
    """Why a judged check is inconclusive ("" when it is decided)."""
    if not np.isfinite(measured):
        return "not measured (the value is not finite)"
    if not np.isfinite(se):
        return "no standard error (no spread to estimate it from)"
    if np.isfinite(margin) and abs(margin) < critical:
        return f"within the critical value: {margin:+.2f} se, needs ±{critical:.3g}"
    return ""


def judge(claim, measured, op, threshold, se=0.0, df=None, note="", reason="",
          **context) -> dict:
    """The check record of ``claim`` (module docstring): ``{claim, verdict, measured, se,
    df, op, threshold, critical, margin_se, exact, reason, note}`` and the ``context`` keys
    (``critical`` is 0 for an exact value, else :func:`critical_value` of ``df``; a given
    ``reason`` makes it inconclusive, :func:`inconclusive`).

    >>> c = judge("x", 0.2, ">=", 0.15, 0.01, df=2)
    >>> c["verdict"], round(c["critical"], 2), c["reason"], judge("y", 3, "<=", 3)["exact"]
    ('held', 4.3, '', True)
    >>> judge("x", 0.17, ">=", 0.15, 0.01, df=2)["reason"]
    'within the critical value: +2.00 se, needs ±4.3'
    """
    clash = set(context) & set(CHECK_KEYS)
    if clash:
        raise ValueError(f"context keys {sorted(clash)} are the record's own")
    m, t, s = float(measured), float(threshold), float(se)
    k = 0.0 if s == 0 else critical_value(df)
    v, margin = verdict(m, op, t, s, k)
    out = {"claim": claim, "verdict": v, "measured": m, "se": s,
           "df": None if df is None else int(df), "op": op, "threshold": t, "critical": k,
           "margin_se": margin, "exact": s == 0,
           "reason": _why(m, s, margin, k) if v == "inconclusive" else "", "note": note,
           **context}
    return inconclusive(out, reason) if reason else out


def inconclusive(check, reason) -> dict:
    """A copy of ``check`` made inconclusive because of ``reason`` (a run it needs failed,
    its setting is unstable, ...): it is not judged on what remains as if that were all.
    The reason is added to any the record already has."""
    c = dict(check)
    c["verdict"] = "inconclusive"
    c["reason"] = "; ".join(x for x in (c.get("reason", ""), reason) if x
                            and not x.startswith("within the critical value"))
    return c


def all_of(claim, parts, **context) -> dict:
    """The check of a conjunction: ``claim`` holds when every check in ``parts`` held,
    fails when one failed, else is inconclusive; its evidence (``measured``, ``se``,
    ``critical``, margin) is that of the deciding part — the failed one, the undecided one,
    or, when all held, the one nearest its critical value. ``parts`` (their claims) and
    ``decided_by`` are recorded."""
    if not parts:
        raise ValueError("parts must hold at least one check")
    vs = [p["verdict"] for p in parts]
    v = "failed" if "failed" in vs else "held" if set(vs) == {"held"} else "inconclusive"
    if v == "held":
        key = min(parts, key=lambda p: abs(p["margin_se"]) / max(p["critical"], 1e-300)
                  if p["margin_se"] is not None and math.isfinite(p["margin_se"])
                  else math.inf)
    else:
        key = next(p for p in parts if p["verdict"] == v)
    out = {**{k: key[k] for k in CHECK_KEYS}, **context, "claim": claim, "verdict": v,
           "parts": [p["claim"] for p in parts], "decided_by": key["claim"]}
    if v == "inconclusive":
        out["reason"] = f"{key['claim']}: {key['reason']}"
    return out


def rejudge(check, reason="") -> dict:
    """``check`` judged again by :func:`judge` from its recorded ``measured``, ``op``,
    ``threshold``, ``se`` and ``df``, every context key kept (``reason``: a downgrade that
    still applies, :func:`inconclusive`)."""
    context = {k: v for k, v in check.items() if k not in CHECK_KEYS}
    m = check["measured"]
    return judge(check["claim"], math.nan if m is None else m, check["op"],
                 check["threshold"], check["se"], check.get("df"), check.get("note", ""),
                 reason, **context)


def counts(checks) -> dict:
    """``{verdict: count}`` over ``checks`` (every verdict of :data:`VERDICTS` present)."""
    out = dict.fromkeys(VERDICTS, 0)
    for c in checks:
        out[c["verdict"]] += 1
    return out


def summary_line(checks) -> str:
    """``"N checks: a held, b failed, c inconclusive"``.

    >>> summary_line([judge("x", 1, ">=", 0)])
    '1 checks: 1 held, 0 failed, 0 inconclusive'
    """
    n = counts(checks)
    return (f"{sum(n.values())} checks: {n['held']} held, {n['failed']} failed, "
            f"{n['inconclusive']} inconclusive")


def _num(x, fmt) -> str:
    return "" if x is None else format(float(x), fmt)


def checks_table(checks, context=()) -> list:
    """The one report of ``checks``: markdown lines ``verdict | claim | measured | se |
    claim's side | critical | margin | why inconclusive | note`` (critical "exact" for
    se = 0), with a column per ``context`` key first."""
    head = list(context) + ["verdict", "claim", "measured", "se", "holds if", "critical",
                            "margin (se)", "why inconclusive", "note"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for c in checks:
        # a record older than a key shows it empty; one older than the verdicts, unjudged
        c = {"verdict": "not judged (no se recorded)", "exact": False, "se": None,
             "critical": None, "margin_se": None, **c}
        v = c["verdict"]
        cells = [str(c.get(k, "")) for k in context] + [
            f"**{v}**" if v in ("held", "failed") else v, str(c["claim"]),
            _num(c["measured"], ".4g"), "" if c["exact"] else _num(c["se"], ".2g"),
            f"{c['op']} {c['threshold']:.4g}",
            "exact" if c["exact"] else _num(c["critical"], ".3g"),
            "" if c["margin_se"] is None or not math.isfinite(c["margin_se"])
            else f"{c['margin_se']:+.1f}", c.get("reason", ""), c.get("note", "")]
        lines.append("| " + " | ".join(x.replace("|", "/") for x in cells) + " |")
    return lines


def check_line(c) -> str:
    """One check on one line: ``verdict: claim — measured m op threshold (se s, critical k;
    why inconclusive)``."""
    ev = "exact" if c["exact"] else f"se {_num(c['se'], '.2g')}, critical {c['critical']:.3g}"
    m = "not measured" if c["measured"] is None else f"{c['measured']:.4g}"
    why = f"; {c['reason']}" if c.get("reason") else ""
    return f"{c['verdict']}: {c['claim']} — measured {m} {c['op']} {c['threshold']:.4g} " \
           f"({ev}{why})"


def find_checks(obj) -> list:
    """Every check record in a JSON value (a dict with the keys :data:`CHECK_KEYS`),
    depth first."""
    out = []
    if isinstance(obj, dict):
        if "verdict" in obj and "claim" in obj:
            out.append(obj)
        for v in obj.values():
            if isinstance(v, (dict, list)):
                out += find_checks(v)
    elif isinstance(obj, list):
        for v in obj:
            out += find_checks(v)
    return out


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
