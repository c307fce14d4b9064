r"""The width law of every mechanism in ``stsim attention``: the smallest ``d_e`` whose
sphere family (``W_ee = aI``, ``V_x = γI``, the best a and γ; :func:`stsim.theory.
attention.best_mechanism_family_loss`) reaches ``width_target`` · L(0), against T, by
bisection on the √2 grid of docs/separation.md (one Monte-Carlo replicate per root seed,
the median over ``mc_seeds`` replicates, as the separation study's family) and as a located
crossing (:func:`stsim.theory.attention.family_crossing`: bisection in ``d_e`` to
:data:`RTOL`, with an SE from :data:`REPLICATES` Monte-Carlo replicates), fitted with the
separation study's interval-censored growth laws
(:func:`stsim.studies.separation.analysis.widths_fit`). Each width enters the fit as the
interval ``x ± (t·se + RTOL·x)`` around its crossing ``x`` (``t`` the 97.5% Student
quantile on ``REPLICATES − 1`` degrees of freedom; ``RTOL·x`` bounds the interpolation
error of the bisection), or, where no crossing was located, as its grid cell
``(below, width]``, censored above the largest grid width.

Linear attention's law is also exact (docs/attention.md §5), ``⌈(T − 1)(1/ε − 1)⌉``;
the Monte-Carlo family of linear attention is checked against it. The normalised
element-wise mechanisms and a temperature give the same family as their base mechanism
(a constant scale of ``s`` and of ``a``), so they are not searched separately.
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ["width_point", "family_rows", "width_fits", "fit_interval", "RTOL", "REPLICATES"]

#: the relative resolution of the bisection that locates a family's crossing
RTOL = 0.01
#: Monte-Carlo replicates of the family at each probe of the bisection (the crossing's SE
#: stands on ``REPLICATES − 1`` degrees of freedom)
REPLICATES = 4


def width_point(mechanism, T, q, target, n_mc, max_width, seed):
    """One replicate of the smallest family width (a row of ``raw/width.csv``):
    ``width`` (0 when censored), ``below``, ``censored`` and the probes of the √2 grid; and
    the located crossing (:func:`stsim.theory.attention.family_crossing`: bisection in
    ``d_e`` to 1%, 4 Monte-Carlo replicates drawn from ``seed``) with its SE, ``crossing``
    and ``crossing_se`` (NaN when censored at ``max_width``)."""
    from stsim.studies.separation.design import width_grid
    from stsim.theory.attention import family_crossing, mechanism_family_width
    w, below, probes = mechanism_family_width(mechanism, T, q, target,
                                              width_grid(max_width, 2), n_mc, seed)
    seeds = [int(s) for s in np.random.default_rng(seed).integers(2 ** 62, size=REPLICATES)]
    x = family_crossing(mechanism, T, q, target, n_mc, seeds=seeds, rtol=RTOL, cap=max_width)
    return {"width": 0 if w is None else int(w), "below": int(below),
            "censored": int(w is None),
            "crossing": math.nan if x is None else x["d_e"],
            "crossing_se": math.nan if x is None else x["se"],
            "probes": " ".join(f"{k}:{v:.4f}" for k, v in sorted(probes.items()))}


def family_rows(table) -> list:
    """Per (mechanism, T): the median width over the replicates, as the grid cell
    ``(below, width]`` of the replicate at the median, or censored when the median is
    (``width`` is then the largest grid width tried)."""
    groups = {}
    for r in table:
        if r.get("status", "ok") != "ok":
            continue
        groups.setdefault((r["mechanism"], int(r["T"])), []).append(r)
    out = []
    for (mech, T), rows in sorted(groups.items()):
        vals = sorted(((math.inf if int(r["censored"]) else int(r["width"]), r) for r in rows),
                      key=lambda v: v[0])
        med = vals[(len(vals) - 1) // 2]
        cens = not math.isfinite(med[0])
        out.append({"series": mech, "T": T, "width": int(med[1]["below"] if cens else
                                                        med[1]["width"]),
                    "below": int(med[1]["below"]), "censored": cens,
                    # the located crossing and its SE, of the median replicate
                    "crossing": float(med[1].get("crossing", math.nan)),
                    "crossing_se": float(med[1].get("crossing_se", math.nan)),
                    "replicates": " ".join("c" if not math.isfinite(v) else str(v)
                                           for v, _ in vals)})
    return out


def fit_interval(row) -> tuple:
    """``(lower, upper)``: where a row's width lies, as the fits take it (module docstring):
    ``x ± (t·se + RTOL·x)`` around a located crossing ``x``; else the grid cell
    ``(below, width]`` (``width`` the largest grid width tried where censored)."""
    from stsim.theory.attention import crossing_interval
    x, se = float(row.get("crossing", math.nan)), float(row.get("crossing_se", math.nan))
    if row["censored"] or not (math.isfinite(x) and math.isfinite(se)) or se == 0:
        return float(row["below"]), float(row["width"])
    return crossing_interval(x, se, REPLICATES, RTOL)


def width_fits(rows) -> dict:
    """The separation study's interval-censored growth-law fits of each series with at
    least 5 points (3 bounded above), each point its :func:`fit_interval`:
    ``{series: {"ranking": [...], "fits": {...}}}``; a series with fewer is left out (its
    rows are still published)."""
    from stsim.studies.separation.analysis import widths_fit
    fits = {}
    for series in sorted({r["series"] for r in rows}):
        pts = [r for r in rows if r["series"] == series]
        if sum(not p["censored"] for p in pts) < 3 or len(pts) < 5:
            continue
        lo, up = np.array([fit_interval(p) for p in pts], float).T
        c = widths_fit(np.array([p["T"] for p in pts], float), up,
                        np.array([p["censored"] for p in pts], bool), lo)
        fits[series] = {"ranking": list(c.get("ranking", [])),
                        "fits": {k: {kk: (v.tolist() if isinstance(v, np.ndarray) else v)
                                     for kk, v in f.items()}
                                 for k, f in c.get("fits", {}).items()}}
    return fits
