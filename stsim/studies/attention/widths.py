r"""The width law of every mechanism in ``stsim attention``: the located crossing ``d_e*``
where a mechanism's sphere family (``W_ee = aI``, ``V_x = γI``, the best a and γ) reaches
``width_level`` · L(0), against T — asked of the widths library
(:func:`stsim.studies.widths.locate`, its precision rule :class:`~stsim.studies.widths.
Precision` from the ``fam_*`` settings), so that softmax's crossing is the number every
study quotes, and fitted with the library's interval-censored growth laws
(:func:`stsim.studies.widths.fit_rows`; each crossing as ``x ± (t·se + rtol·x)``,
censored above ``width_max`` where a replicate does not reach the level).

Linear attention's law is also exact (docs/attention.md §5), ``⌈(T − 1)(1/ε − 1)⌉``;
the Monte-Carlo family of linear attention is checked against it. The normalised
element-wise mechanisms and a temperature give the same family as their base mechanism
(a constant scale of ``s`` and of ``a``), so they are not searched separately.
"""
from __future__ import annotations

import math

import numpy as np

from stsim.studies import widths as wl

__all__ = ["width_point", "family_rows", "width_fits", "GRID_MAX"]

#: the √2 grid on which a crossing's grid cell ``(below, width]`` is named
GRID_MAX = 2 ** 16


def width_point(mechanism, T, q, level, precision, cap):
    """A row of ``raw/width.csv``: the mechanism's located crossing at ``T``
    (:func:`stsim.studies.widths.locate`; censored at ``cap``)."""
    return wl.locate(wl.mechanism_loss(mechanism, T, q), [level], T,
                     wl.family_key(mechanism, T, q), precision, cap=cap, q=q)[float(level)]


def family_rows(table) -> list:
    """Per (mechanism, T): the located crossing (``crossing``, ``crossing_se``, ``lo``,
    ``hi``, ``censored``, ``n``, ``precise``, ``replicates``) and the √2 grid cell
    ``(below, width]`` that holds it."""
    grid = wl.width_grid(GRID_MAX)
    out = []
    for r in sorted((r for r in table if r.get("status", "ok") == "ok"),
                    key=lambda r: (r["mechanism"], int(r["T"]))):
        cens = bool(int(r["censored"]))
        x = math.nan if cens else float(r["d_e"])
        w = int(r["hi"]) if cens else wl.grid_width(x, grid)
        out.append({"series": r["mechanism"], "T": int(r["T"]), "width": w,
                    "below": int(r["hi"]) if cens else
                    max([g for g in grid if g < w], default=0),
                    "censored": cens, "crossing": x,
                    "crossing_se": math.nan if cens else float(r["se"]),
                    "lo": float(r["lo"]), "hi": float(r["hi"]), "n": int(r["n"]),
                    "precise": int(r["precise"]), "replicates": str(r["replicates"])})
    return out


def width_fits(rows) -> dict:
    """The library's growth-law fits (:func:`stsim.studies.widths.fit_rows`) of each series
    with at least 5 points (3 bounded above): ``{series: {"ranking", "tied", "fits"}}``."""
    fits = {}
    for series in sorted({r["series"] for r in rows}):
        f = wl.fit_rows([r for r in rows if r["series"] == series])
        if f["fits"]:
            fits[series] = {"ranking": list(f.get("ranking", [])),
                            "tied": list(f.get("tied", [])),
                            "fits": {k: {kk: (v.tolist() if isinstance(v, np.ndarray) else v)
                                         for kk, v in x.items()}
                                     for k, x in f["fits"].items()}}
    return fits
