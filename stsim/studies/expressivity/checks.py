"""The expressivity study's checks (:func:`checks`): the statements docs/expressivity.md
makes about its data, each judged by :func:`stsim.util.verdict.judge`, read from the
tables the parts wrote (``<part>.csv``) so that the committed outputs are judged by the
same code as a new run.

* ``width``: per position family and q, the slope of m* in ``ln N`` (least squares over
  every N and replicate, se on ``n − 2`` df) lies within a factor 2 of the derived ``2q``
  (``q <= slope <= 4q``); the sum query needs more width than the exact query at every N
  (``log2`` of the ratio of the replicate means ``> 0``, se from the replicates' spread on
  the fewer replicates' ``n − 1`` df);
* ``curves``: the sum query is exact to rounding at q = 2 (worst error ``<= 1e-10`` at
  every m ≥ 64; exact) and, at q ≥ 3, its worst error falls more slowly than ``m^(−1/2)``
  (log-log slope over m ≥ 64 ``> −1/2``, se of the fitted slope, ``n − 2`` df);
* ``seq2seq``: the exact query reaches ε on the m grid at every N, the sum query at none
  (counts; exact);
* ``trained``: the trained W is the sum-query construction (off-diagonal rms of W_ee
  ``< 1%`` of c) and replacing it by ``c W*, γ V*`` does not raise the loss — one
  training seed, so no standard error: inconclusive, as the check says;
* ``patterns``: per target and k, d* grows with ``ln L`` (slope ``> 0``, ``n − 2`` df);
* ``jl``: the JL scheme needs more dimension than the exact scheme at every L (per L,
  ``log2`` of the ratio, paired by replicate, ``> 0``; ``reps − 1`` df).
"""
from __future__ import annotations

import math
import os

import numpy as np

from stsim.studies.tuning import seed_stats
from stsim.util.io import read_csv, read_json
from stsim.util.verdict import all_of, judge

__all__ = ["checks", "read_table", "slope_se"]

ROUNDING = 1e-10      # "exact (to rounding)"
M_FROM = 64           # the curves' widths the statements are about (m >= 64)
OFFDIAG = 0.01        # "off-diagonal entries < 1 % of c"


def read_table(out, name) -> list:
    """The rows of ``<out>/<name>.csv`` as dicts, numbers parsed (empty: None)."""
    path = os.path.join(out, f"{name}.csv")
    return read_csv(path) if os.path.exists(path) else []


def slope_se(x, y):
    """(slope, se, df) of the least-squares line of ``y`` on ``x`` (se NaN below 3
    points)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    n = len(x)
    b, c = np.polyfit(x, y, 1)
    if n < 3:
        return float(b), math.nan, 1
    res = y - (b * x + c)
    se = math.sqrt(float(res @ res) / (n - 2) / float(((x - x.mean()) ** 2).sum()))
    return float(b), se, n - 2


def _log_ratio(a, b):
    """(log2(mean a / mean b), se, df) from two replicate lists (delta method)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    var = sum(np.var(v, ddof=1) / len(v) / np.mean(v) ** 2 if len(v) > 1 else math.nan
              for v in (a, b)) / math.log(2) ** 2
    return math.log2(a.mean() / b.mean()), math.sqrt(var), max(1, min(len(a), len(b)) - 1)


def _width(out):
    rows = [r for r in read_table(out, "width") if r["m_star"] is not None]
    cs = []
    for fam in sorted({r["family"] for r in rows if r["query"] == "exact"}):
        for q in sorted({r["q"] for r in rows if r["family"] == fam and r["query"] == "exact"}):
            sel = [r for r in rows if (r["family"], r["query"], r["q"]) == (fam, "exact", q)]
            a, se, df = slope_se([math.log(r["N"]) for r in sel], [r["m_star"] for r in sel])
            claim = (f"width, {fam}, q = {q}: the slope of m* in ln N is within a factor 2 "
                     f"of the derived 2q ({q} <= slope <= {4 * q})")
            note = f"m* = {a:.3g}·ln N + b over {len(sel)} searches"
            cs.append(all_of(claim, [judge(f"{claim}: slope >= {q}", a, ">=", q, se, df,
                                           note=note),
                                     judge(f"{claim}: slope <= {4 * q}", a, "<=", 4 * q, se, df,
                                           note=note)], part="width", q=q))
    for fam in sorted({r["family"] for r in rows if r["query"] == "sum"}):
        for q in sorted({r["q"] for r in rows if (r["family"], r["query"]) == (fam, "sum")}):
            for N in sorted({r["N"] for r in rows if r["query"] == "sum" and r["q"] == q}):
                s, e = ([r["m_star"] for r in rows if (r["family"], r["query"], r["q"], r["N"])
                         == (fam, query, q, N)] for query in ("sum", "exact"))
                if not s or not e:
                    continue
                v, se, df = _log_ratio(s, e)
                cs.append(judge(f"width, {fam}, q = {q}, N = {N}: the sum query (at its looser "
                                f"ε) needs more width than the exact query (log2 of the ratio "
                                f"of mean m* > 0)", v, ">", 0.0, se, df,
                                note=f"{np.mean(s):.0f} against {np.mean(e):.0f} "
                                     f"({len(s)} and {len(e)} replicates)",
                                part="width", q=q, N=N))
    return cs


def _curves(out):
    rows = read_table(out, "curves")
    if not rows:
        return []
    fam = rows[0]["family"]
    cs = []
    q2 = [r["l1_worst"] for r in rows if (r["family"], r["q"], r["query"]) == (fam, 2, "sum")
          and r["m"] >= M_FROM]
    if q2:
        cs.append(judge(f"curves, {fam}: the sum query is exact to rounding at q = 2 (worst "
                        f"error <= {ROUNDING:g} at every m >= {M_FROM})", max(q2), "<=",
                        ROUNDING, part="curves", q=2))
    for q in sorted({r["q"] for r in rows if r["q"] >= 3}):
        pts = [(r["m"], r["l1_worst"]) for r in rows if (r["family"], r["q"], r["query"])
               == (fam, q, "sum") and r["m"] >= M_FROM and r["l1_worst"] > 1e-12]
        if len(pts) < 2:
            continue
        b, se, df = slope_se(np.log([m for m, _ in pts]), np.log([e for _, e in pts]))
        cs.append(judge(f"curves, {fam}, q = {q}: the sum query's worst error has a floor, "
                        f"falling more slowly than m^(-1/2) (log-log slope over m >= {M_FROM} "
                        f"> -0.5)", b, ">", -0.5, se, df,
                        note=f"{len(pts)} widths, one table each", part="curves", q=q))
    return cs


def _seq2seq(out):
    rows = read_table(out, "seq2seq")
    if not rows:
        return []
    eps = _config(out, "seq2seq").get("eps", 0.1)
    Ns = sorted({r["N"] for r in rows})
    reach = {qy: [N for N in Ns if any(r["l1_worst"] <= eps for r in rows
                                       if (r["N"], r["query"]) == (N, qy))]
             for qy in ("exact", "sum")}
    return [judge(f"seq2seq: the exact query reaches ε = {eps:g} on the m grid at every N "
                  f"(the number of N where it does not <= 0)",
                  len(Ns) - len(reach["exact"]), "<=", 0, note=f"N = {Ns}", part="seq2seq"),
            judge(f"seq2seq: the sum query reaches ε = {eps:g} at no N of the m grid (the "
                  f"number of N where it does <= 0)", len(reach["sum"]), "<=", 0,
                  note=f"N = {Ns}", part="seq2seq")]


def _trained(out):
    cs = []
    for r in read_table(out, "trained"):
        why = "one training seed: no spread to estimate a standard error from"
        cs.append(judge(f"trained, d_e = {r['d_e']}: the trained W is the construction ≈ cI "
                        f"(off-diagonal rms of W_ee < {OFFDIAG:g}·c)", r["offdiag_rms_over_c"],
                        "<", OFFDIAG, math.nan, note=why, part="trained", d_e=r["d_e"]))
        cs.append(judge(f"trained, d_e = {r['d_e']}: replacing W, V by c W*, γ V* does not "
                        f"raise the loss (trained − projected loss >= 0)",
                        r["trained_loss"] - r["projected_loss"], ">=", 0.0, math.nan,
                        note=f"{why}; {r['trained_loss']:.3f} against "
                             f"{r['projected_loss']:.3f}", part="trained", d_e=r["d_e"]))
    return cs


def _patterns(out):
    rows = [r for r in read_table(out, "patterns") if r["d_star"] is not None]
    cs = []
    for t, k in sorted({(r["target"], r["k"]) for r in rows}):
        sel = [r for r in rows if (r["target"], r["k"]) == (t, k)]
        a, se, df = slope_se([math.log(r["L"]) for r in sel], [r["d_star"] for r in sel])
        cs.append(judge(f"patterns, {t}, k = {k}: d* grows with ln L (slope of d* = a ln L + b "
                        f"> 0)", a, ">", 0.0, se, df, note=f"{len(sel)} searches",
                        part="patterns", k=k))
    return cs


def _jl(out):
    rows = [r for r in read_table(out, "jl") if r["d_star"] is not None
            and r["d_star_exact_scheme"] is not None]
    cs = []
    for L in sorted({r["L"] for r in rows}):
        v = [math.log2(r["d_star"] / r["d_star_exact_scheme"]) for r in rows if r["L"] == L]
        mean, se, df = seed_stats(v)
        cs.append(judge(f"jl, L = {L}: the JL scheme needs more dimension than the exact "
                        f"scheme (log2 of d*_JL / d*_exact, paired by replicate, > 0)",
                        mean, ">", 0.0, se, df or 1,
                        note=f"ratio {2 ** min(v):.0f}–{2 ** max(v):.0f} over {len(v)} "
                             f"replicates", part="jl", L=L))
    return cs


def _config(out, name):
    path = os.path.join(out, f"{name}.json")
    return read_json(path).get("config", {}) if os.path.exists(path) else {}


_PARTS = {"curves": _curves, "width": _width, "seq2seq": _seq2seq, "trained": _trained,
          "patterns": _patterns, "jl": _jl}


def checks(out, parts) -> list:
    """The check records of the ``parts`` (complete ones) from the tables in ``out``."""
    return [c for name in parts for c in _PARTS[name](out)]
