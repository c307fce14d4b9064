"""The separation study's checks (:func:`checks`): the statements docs/separation.md makes
about its data, each judged by :func:`stsim.util.verdict.judge` from the analysis alone.

* the trained FCN's smallest width grows at least linearly in T (per q and budget): the
  power-law exponent of its interval-censored fit ``>= 1``, se from the profile CI on
  ``n − n_censored − 2`` degrees of freedom (:func:`stsim.studies.widths.fit_check`, the
  targets study's check too);
* the FCN's width grows faster with T than the transformer's: the difference of the two
  exponents ``> 0``, se the two SEs in quadrature on the smaller df;
* from T = 64 the FCN needs more width than the transformer (per q, budget, T):
  ``log2(width_fcn / width_transformer) > 0``, se from the two bootstrap intervals over
  ``seeds`` seeds (``seeds − 1`` df; exact when neither interval has a spread; a censored
  FCN width enters at its largest grid width, a lower bound);
* the family's width grows more slowly than linearly: its power-law exponent ``< 1``
  (profile CI, ``n − 2`` df), per q and level;
* the family's width grows like ``a·log2 T + b`` at q = 2 and like ``(log2 T)²`` at
  q ≥ 3: that law ranks first and every other lies ``Δ2ℓ >= 2`` below it (the report's
  "told apart"; exact: a likelihood statistic against its stated bound);
* the trained transformer's smallest ``d_e`` equals the family's at every trained T (the
  agreement that licenses the family beyond the trained range; exact: grid positions).
"""
from __future__ import annotations

import math

import numpy as np

from stsim.studies.widths import fit_check
from stsim.util.verdict import interval_se, judge

__all__ = ["checks", "FAMILY_LAW", "FROM_T"]

#: the law docs/separation.md names for the family: q = 2 and q >= 3
FAMILY_LAW = {2: "log"}
FAMILY_LAW_MANY = "log2"
#: the first T of "from T = 64 the FCN needs more width"
FROM_T = 64
TOLD_APART = 2.0


def _law_text(law):
    return {"log": "a·log2 T + b", "log2": "(log2 T)^2", "power": "T^a",
            "linear": "a·T + b"}.get(law, law)


def _exponent(fits):
    """(a, se, df) of the power law of a fit record, or None."""
    f = (fits or {}).get("fits", {}).get("power")
    if not f:
        return None
    df = max(1, int(f["n"]) - int(f["n_censored"]) - 2)
    lo, hi = f["a_ci"]
    se = interval_se(lo, hi, df) if np.isfinite(lo) and np.isfinite(hi) else math.inf
    return f["a"], se, df


def _log_se(w, seeds):
    """se of ``log2`` of a trained width from its bootstrap interval (0: no spread; inf:
    open)."""
    if w["censored"] or w["lo"] is None or w["hi"] is None:
        return 0.0 if w["censored"] else math.inf
    return interval_se(math.log2(w["lo"]), math.log2(w["hi"]), max(1, seeds - 1))


def checks(cfg, A) -> list:
    """The check records of the analysis ``A`` (:func:`~stsim.studies.separation.analysis
    .analyse`) under the settings ``cfg``."""
    out = []
    fits, widths = A["fits"], A["widths"]
    fcn_series = sorted({w["series"] for w in widths if w["arch"] == "fcn"})
    for qs, e in sorted(fits.items(), key=lambda kv: int(kv[0])):
        q = int(qs)
        for name in fcn_series:
            if name not in e:
                continue
            out.append(dict(fit_check(f"q = {q}, {name}", e[name], "the trained FCN's "
                                      "smallest width grows at least linearly in T "
                                      "(power-law exponent >= 1)", ">=", 1.0), q=q))
            a, b = _exponent(e[name]), _exponent(e.get("transformer"))
            if a and b:
                out.append(judge(
                    f"q = {q}, {name}: the FCN's width grows faster with T than the "
                    f"transformer's (power-law exponent of the FCN − the transformer's > 0)",
                    a[0] - b[0], ">", 0.0, math.hypot(a[1], b[1]), min(a[2], b[2]),
                    note=f"T^{a[0]:.3g} against T^{b[0]:.3g}", q=q))
        for lv in cfg["levels"]:
            c = e.get(f"family@{lv:g}")
            if not c:
                continue
            out.append(dict(fit_check(f"q = {q}, family at {lv:g}·L0", c, "the transformer's "
                                      "family width grows more slowly than linearly in T "
                                      "(power-law exponent < 1)", "<", 1.0), q=q, level=lv))
            law = FAMILY_LAW.get(q, FAMILY_LAW_MANY)
            fs = c.get("fits", {})
            claim = (f"q = {q}, family at {lv:g}·L0: its width grows like {_law_text(law)} "
                     f"(that law ranks first, every other Δ2ℓ >= {TOLD_APART:g} below it)")
            if law not in fs or len(fs) < 2:
                out.append(judge(claim, math.nan, ">=", TOLD_APART, 0.0,
                                 note=c.get("note", "not fitted"), q=q, level=lv))
                continue
            others = {k: f["delta_2loglik"] for k, f in fs.items() if k != law}
            nxt = min(others, key=others.get)
            gap = others[nxt] - fs[law]["delta_2loglik"]
            out.append(judge(claim, gap, ">=", TOLD_APART,
                             note=f"ranking {', '.join(c['ranking'])}; next {_law_text(nxt)}",
                             q=q, level=lv))
    seeds = cfg["seeds"]
    tf = {(w["q"], w["T"]): w for w in widths if w["series"] == "transformer"}
    for w in widths:
        if w["arch"] != "fcn" or w["T"] < FROM_T or (w["q"], w["T"]) not in tf:
            continue
        t = tf[(w["q"], w["T"])]
        if t["censored"] or t["width"] is None:
            continue
        wf = w["grid"][-1] if w["censored"] else w["width"]
        se = math.hypot(_log_se(w, seeds), _log_se(t, seeds))
        out.append(judge(f"q = {w['q']}, {w['series']}, T = {w['T']}: from T = {FROM_T} the "
                         f"FCN needs more width than the transformer "
                         f"(log2(FCN width / transformer width) > 0)",
                         math.log2(wf / t["width"]), ">", 0.0, se, max(1, seeds - 1),
                         note=f"{'>' if w['censored'] else ''}{wf} against {t['width']}",
                         q=w["q"], T=w["T"]))
    fam = {(f["q"], f["T"]): f for f in A["family"] if f["level"] == cfg["level"]}
    for q in sorted({q for q, _ in tf}):
        pairs = [(T, tf[(q, T)]["width"], fam[(q, T)]["width"]) for (qq, T) in sorted(tf)
                 if qq == q and (q, T) in fam]
        if not pairs:
            continue
        off = [f"T = {T}: {a} against {b}" for T, a, b in pairs if a != b]
        out.append(judge(f"q = {q}: the trained transformer's smallest d_e equals the "
                         f"family's at every trained T (the number of T where they differ "
                         f"<= 0)", len(off), "<=", 0,
                         note="; ".join(off) or ", ".join(str(a) for _, a, _ in pairs), q=q))
    return out
