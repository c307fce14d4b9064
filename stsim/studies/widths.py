r"""The widths library: how wide a model must be to reach a loss level, one answer for every
study (docs/widths.md).

A study that needs a width asks it here, so that the same family at the same
``(T, q, level)`` gives the same number, with the same interval and the same law ranking,
in every study and every doc:

* **the family's loss** — the sphere family (``W_ee = aI``, the best ``a`` and readout) of a
  mechanism (:func:`mechanism_loss`) or of a task's target (:func:`target_loss`), one
  Monte-Carlo replicate ``loss(d_e, n, seed)`` of its ``L/L(0)``;
* **the crossing** — one replicate's crossing of ``level`` in ``d_e`` (:func:`bisect`),
  and the located crossing (:func:`locate`): :attr:`Precision.replicates` independent
  replicates, whose **spread** gives the SE, at a sample size ``n`` that grows ×4 from
  :attr:`Precision.n_start` until the SE is at most :attr:`Precision.se_rel` of the
  crossing and the crossing has stopped moving with ``n`` (the precision rule);
* **the interval a fit takes** (:func:`interval`): ``x ± (t·se + rtol·x)``, ``t`` the
  97.5% Student quantile on ``replicates − 1`` degrees of freedom; a grid cell
  ``(below, width]`` where only a grid width is known;
* **the growth-law fits** (:func:`fit`): the interval-censored laws of
  :func:`stsim.util.stats.compare_growth`, ranked by likelihood;
* **a trained width** (:func:`trained_width`): the smallest grid width whose seed median
  reaches the level, with a paired bootstrap over seeds;
* **the √2 width grid** (:func:`width_grid`).

The replicates' seeds depend only on the family's key (its mechanism or target, ``q``,
``T``, ``d``) and the stage: never on the study that asks, nor on the level (the levels
of one family share their draws: common random numbers).
"""
from __future__ import annotations

import dataclasses
import math
import zlib

import numpy as np

from stsim.core.attention import make_attention
from stsim.theory.family import width_grid as _width_grid
from stsim.util.stats import (LAWS, LOG_SQUARED, bootstrap_threshold, compare_growth,
                              threshold_width)
from stsim.util.validate import check_int, check_real
from stsim.util.verdict import interval_se, judge

__all__ = ["Precision", "QUICK", "ROOT", "FAMILY_LAWS", "width_grid", "mechanism_loss",
           "target_loss", "family_key", "family_seeds", "bisect", "locate", "crossing_row",
           "interval", "row_interval", "fit", "fit_rows", "FIT_KEYS", "trained_width",
           "grid_width", "fit_check"]

#: the root of every family replicate's seed
ROOT = 2
#: the laws a family's crossings are ranked by, in every study: ``log``, ``linear``,
#: ``power`` and the softmax family's asymptotic ``(ln T)²`` (docs/separation.md, "The
#: width laws")
FAMILY_LAWS = LAWS + (LOG_SQUARED,)


_PRECISION_HELP = {
    "replicates": "independent Monte-Carlo replicates of a family crossing (its SE is their "
                  "spread)",
    "rtol": "relative bracket of each replicate's bisection in d_e",
    "se_rel": "the SE a crossing needs, relative to it: the sample size grows x4 until it "
              "is met and the crossing stops moving",
    "n_start": "Monte-Carlo samples of a crossing's first stage",
    "n_max": "most Monte-Carlo samples of a crossing's stage",
    "n_cells": "most samples x T of one family evaluation (memory)"}


@dataclasses.dataclass(frozen=True)
class Precision:
    """The precision rule of a located crossing (:func:`locate`), recorded in each study's
    config: ``replicates`` independent Monte-Carlo replicates (≥ 2: the SE is their spread,
    ``s/√replicates``), each bisected in ``d_e`` to the relative bracket ``rtol``, at a
    sample size ``n`` that starts at ``n_start`` and grows ×4 while the SE exceeds
    ``se_rel`` × the crossing or the crossing moved by more than 2 SE (of the difference)
    from the stage before, up to ``n_max`` samples and ``n_cells / T`` (the memory of one
    evaluation)."""

    replicates: int = 4
    rtol: float = 0.01
    se_rel: float = 0.01
    n_start: int = 1024
    n_max: int = 2 ** 16
    n_cells: int = 2 ** 26

    def __post_init__(self):
        check_int("replicates", self.replicates, 2)
        check_int("n_start", self.n_start, 16)
        check_int("n_max", self.n_max, self.n_start)
        check_int("n_cells", self.n_cells, 1)
        check_real("rtol", self.rtol, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
        check_real("se_rel", self.se_rel, lo=0.0, hi=1.0, lo_open=True, hi_open=True)

    def n_limit(self, cells) -> int:
        """The largest sample size when one sample holds ``cells`` numbers (the family
        draws ``T`` scores and ``q·d_e`` encoding coordinates a sample): ``n_max`` and
        ``n_cells / cells``, at least ``n_start``."""
        return max(self.n_start, min(self.n_max, self.n_cells // max(1, int(cells))))

    def memory(self, T) -> int:
        """Bytes of one family evaluation at ``T`` at most: 5 float64 arrays of
        ``n_cells`` numbers, or of the first stage's ``n_start × T``."""
        return 5 * 8 * max(self.n_cells, self.n_start * int(T))

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)

    def settings(self, prefix="fam_") -> dict:
        """The rule as a study config's ``<prefix><field>`` keys (its presets)."""
        return {prefix + k: v for k, v in self.as_dict().items()}

    @staticmethod
    def help(prefix="fam_") -> dict:
        """The help of each ``<prefix><field>`` setting (the study commands' options)."""
        return {prefix + k: v for k, v in _PRECISION_HELP.items()}

    @classmethod
    def from_cfg(cls, cfg, prefix="fam_") -> "Precision":
        """The rule from a study config's ``<prefix><field>`` keys (the defaults for the
        others); ``ValueError`` naming the config key."""
        try:
            return cls(**{f.name: cfg[prefix + f.name] for f in dataclasses.fields(cls)
                          if prefix + f.name in cfg})
        except ValueError as exc:       # each message opens with the field's name
            raise ValueError(f"{prefix}{exc}") from None


#: the coarse rule of the studies' quick presets
QUICK = Precision(replicates=2, se_rel=0.05, n_start=256, n_cells=2 ** 15)


def width_grid(max_width: int, min_width: int = 1) -> list:
    """Integer widths ``round(2^{k/2})`` in ``[min_width, max_width]`` (ratio √2)."""
    check_int("max_width", max_width, 1)
    return _width_grid(max_width, min_width)


def grid_width(x, grid) -> int:
    """The smallest width of ``grid`` at or above ``x`` (the largest where none is)."""
    g = sorted(grid)
    return next((w for w in g if w >= x), g[-1])


# --------------------------------------------------------------------------------------
# the family's loss: one Monte-Carlo replicate of L/L(0) at d_e
# --------------------------------------------------------------------------------------
def mechanism_loss(mechanism, T: int, q: int):
    """``loss(d_e, n, seed)``: one replicate of a mechanism's sphere-family best ``L/L(0)``
    (``n`` samples, the best ``a`` and ``γ``), d-free. A mechanism of the softmax family
    (any temperature: the best over ``a`` is softmax's) through
    :func:`stsim.theory.family.best_softmax_family` (its ``a`` searched near the
    replicate's last best ``a``), any other mechanism's through
    :func:`stsim.theory.attention.best_mechanism_family_loss`."""
    from stsim.theory.attention import best_mechanism_family_loss
    from stsim.theory.family import best_softmax_family, sample_scores
    att = make_attention(mechanism)
    if not att.softmax_family:
        def loss(d_e, n, seed):
            return best_mechanism_family_loss(att, T, q, d_e, n_mc=n, rng=seed)["rel"]
        return loss
    last = {}

    def loss(d_e, n, seed):
        g = sample_scores(T, q, d_e, n, seed)
        rel, la, _ = best_softmax_family(g, q, last.get((n, seed)))
        last[(n, seed)] = la
        return rel
    return loss


def target_loss(target, T: int, q: int, d: int):
    """``loss(d_e, n, seed)``: one replicate of a target's sphere-family ``L/L(0)``
    (:func:`stsim.theory.targets.family_target_rel`: the mean's best ``a``, the target's
    readout fitted on ``n`` samples, its loss on ``n`` fresh ones)."""
    from stsim.theory.targets import family_target_rel

    def loss(d_e, n, seed):
        return family_target_rel(target, T, q, d, d_e, n, seed)["rel"]
    return loss


def family_key(family, T, q, d=None) -> str:
    """The text that names one family's draws: ``"<family>|q=<q>|T=<T>"`` (and ``|d=<d>``
    where the loss depends on d)."""
    return f"{family}|q={int(q)}|T={int(T)}" + ("" if d is None else f"|d={int(d)}")


def family_seeds(key: str, stage: int, replicates: int) -> list:
    """The replicates' seeds of stage ``stage`` of the family ``key``: spawned from
    ``(ROOT, crc32(key), stage)``, so they depend on nothing else."""
    ss = np.random.SeedSequence([ROOT, zlib.crc32(key.encode()), int(stage)])
    return [int(s.generate_state(1)[0]) for s in ss.spawn(replicates)]


# --------------------------------------------------------------------------------------
# the crossing
# --------------------------------------------------------------------------------------
def bisect(f, level, rtol, lo=None, hi=None, cap=2 ** 15):
    """One replicate's crossing of ``level`` by ``f(d_e)`` (a loss that falls with ``d_e``):
    the bracket ``[lo, hi]`` (``f(lo) > level >= f(hi)``) found from the given one by
    halving ``lo`` / doubling ``hi`` (from ``lo = 2`` upwards by doubling when none is
    given), then bisected on the integer ``d_e`` until ``hi/lo − 1 <= rtol`` or
    ``hi = lo + 1``; the crossing is the linear interpolation between the bracket,
    ``lo + (f(lo) − level)/(f(lo) − f(hi)) · (hi − lo)``. Returns ``{"x", "lo", "hi"}``,
    or None when ``f(cap) > level`` (censored at ``cap``)."""
    memo = {}

    def m(w):
        w = int(w)
        if w not in memo:
            memo[w] = float(f(w))
        return memo[w]
    if lo is None and hi is None:
        lo, hi = 1, 2
        while m(hi) > level:
            if hi >= cap:
                return None
            lo, hi = hi, min(2 * hi, cap)
    else:
        lo = max(1, int(lo if lo is not None else 1))
        hi = min(int(hi if hi is not None else 2 * lo), cap)
        hi = max(hi, lo + 1)
        while m(hi) > level:
            if hi >= cap:
                return None
            lo, hi = hi, min(2 * hi, cap)
        while lo > 1 and m(lo) <= level:
            lo, hi = max(1, lo // 2), lo
    while hi - lo > 1 and hi / lo - 1 > rtol:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if m(mid) <= level else (mid, hi)
    if lo == 1 and 1 not in memo:          # d_e = 1 passes too: the crossing is below 1
        return {"x": 1.0, "lo": 1, "hi": hi}
    ml, mh = m(lo), m(hi)
    t = (ml - level) / (ml - mh) if ml != mh else 0.5
    return {"x": float(lo + min(max(t, 0.0), 1.0) * (hi - lo)), "lo": lo, "hi": hi}


def locate(loss, levels, T, key, precision=Precision(), cap=2 ** 15, q=3) -> dict:
    """The located crossing of each of ``levels`` by the family ``loss`` (:func:`mechanism_loss`,
    :func:`target_loss`) at ``T``, under the precision rule (:class:`Precision`).

    Stage ``k`` draws ``precision.replicates`` replicates at ``n = n_start · 4^k`` samples
    (seeds :func:`family_seeds` of ``key``); each replicate bisects its own loss
    (:func:`bisect`; from stage 1 on, started from the bracket ``[0.85, 1.2] ×`` the stage
    before's crossing, widened until it holds). The crossing is the replicates' mean, its
    SE their standard deviation over ``√replicates``. The stages stop at the first ``n``
    where ``se <= se_rel · x`` and (from stage 1 on) ``|x − x_prev| <= 2 √(se² +
    se_prev²)``, or where the next stage would exceed :meth:`Precision.n_limit` (a sample
    holds ``T + q·d_e`` numbers, ``d_e`` up to 1.2 × the crossing).

    Returns ``{level: row}``, each row ``{"d_e", "se", "n", "replicates", "stages",
    "precise", "censored", "lo", "hi"}`` (:func:`crossing_row`): ``censored`` when a
    replicate does not reach the level by ``cap`` (``d_e`` NaN, ``lo`` the largest
    crossing found or 0); ``precise`` False when the largest sample size was reached first;
    ``stages``: ``"n:x±se"`` of each stage."""
    levels = [check_real("level", v, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
              for v in np.atleast_1d(levels)]
    out = {}
    for level in levels:
        prev, hist = None, []
        k, n = 0, precision.n_start
        while True:
            xs, censored = [], False
            for s in family_seeds(key, k, precision.replicates):
                f = lambda w, n=n, s=s: loss(w, n, s)
                if prev is None:
                    r = bisect(f, level, precision.rtol, cap=cap)
                else:
                    r = bisect(f, level, precision.rtol, lo=int(0.85 * prev["d_e"]),
                               hi=int(math.ceil(1.2 * prev["d_e"])) + 1, cap=cap)
                if r is None:
                    censored = True
                    break
                xs.append(r["x"])
            if censored:
                cur = {"d_e": math.nan, "se": math.nan, "n": n, "replicates": xs,
                       "censored": True}
                hist.append(f"{n}:censored")
                break
            x, se = float(np.mean(xs)), float(np.std(xs, ddof=1) / math.sqrt(len(xs)))
            cur = {"d_e": x, "se": se, "n": n, "replicates": xs, "censored": False}
            hist.append(f"{n}:{x:.4g}+-{se:.2g}")
            stable = prev is None or abs(x - prev["d_e"]) <= 2 * math.hypot(se, prev["se"])
            if se <= precision.se_rel * x and (stable and k > 0 or k == 0 and se == 0):
                cur["precise"] = True
                break
            prev, k, n = cur, k + 1, 4 * n
            if n > precision.n_limit(T + q * math.ceil(1.2 * x + 1)):
                break
        cur.setdefault("precise", False)
        cur["stages"] = " ".join(hist)
        out[level] = crossing_row(cur, precision, cap)
    return out


def crossing_row(r, precision, cap) -> dict:
    """A located crossing as a table row: ``d_e``, ``se`` (NaN where censored), ``n``,
    ``replicates`` (space-separated), ``stages``, ``precise`` (0/1), ``censored`` (0/1),
    ``lo``/``hi`` (the interval a fit takes, :func:`interval`; ``(largest replicate
    crossing, cap)`` where censored)."""
    reps = " ".join(f"{v:.6g}" for v in r["replicates"])
    if r["censored"]:
        lo = max(r["replicates"]) if r["replicates"] else 0.0
        return {"d_e": math.nan, "se": math.nan, "n": r["n"], "replicates": reps,
                "stages": r["stages"], "precise": 0, "censored": 1, "lo": lo,
                "hi": float(cap)}
    lo, hi = interval(r["d_e"], r["se"], precision.replicates, precision.rtol)
    return {"d_e": r["d_e"], "se": r["se"], "n": r["n"], "replicates": reps,
            "stages": r["stages"], "precise": int(r["precise"]), "censored": 0, "lo": lo,
            "hi": hi}


def interval(x, se, replicates, rtol) -> tuple:
    """``(lower, upper)``: where a located crossing ``x`` lies, as the width fits take it,
    ``x ± (t·se + rtol·x)`` (``t`` the 97.5% Student quantile on ``replicates − 1``
    degrees of freedom; ``rtol·x`` bounds the interpolation error of the bisection);
    lower clipped at 0."""
    from scipy.stats import t as student_t
    h = float(student_t.ppf(0.975, replicates - 1)) * se + rtol * x
    return max(x - h, 0.0), x + h


def row_interval(row) -> tuple:
    """``(lower, upper, censored)`` of a crossing row (:func:`crossing_row`) for :func:`fit`:
    censored rows are bounded below by ``hi`` (the cap)."""
    if int(row["censored"]):
        return float(row["hi"]), float(row["hi"]), True
    return float(row["lo"]), float(row["hi"]), False


# --------------------------------------------------------------------------------------
# the fits
# --------------------------------------------------------------------------------------
#: the fields of a published growth-law fit (``width`` is the fit's upper end of each point)
FIT_KEYS = ("law", "formula", "method", "a", "b", "a_ci", "b_ci", "level", "n", "n_censored",
            "T", "y", "lower", "censored", "sigma", "flat", "loglik", "delta_2loglik", "crit",
            "fit", "residuals_log2", "rms_log2", "max_abs_log2")


def fit(T, upper, censored, lower, laws=LAWS) -> dict:
    """The growth-law comparison of widths (:func:`stsim.util.stats.compare_growth`): each
    width an interval ``(lower, upper]`` (a located crossing's :func:`interval`, or a grid
    cell) or censored above ``upper``; interval-censored maximum likelihood on
    ``log2 width``, ≥ 5 points (3 bounded above), every point entering; ``laws`` of
    :func:`~stsim.util.stats.fit_growth_law` to compare. Each fit is published with
    :data:`FIT_KEYS` (``y`` as ``width``)."""
    c = compare_growth(T, upper, censored=censored, lower=lower, min_points=5, what="width",
                       laws=laws)
    c["fits"] = {law: {("width" if k == "y" else k): f[k] for k in FIT_KEYS}
                 for law, f in c["fits"].items()}
    return c


def fit_rows(rows, laws=FAMILY_LAWS) -> dict:
    """:func:`fit` of crossing rows (each with ``T``; :func:`row_interval`): with fewer
    than 5 rows or 3 bounded above, nothing is fitted (``fits = {}``, ``note`` says
    why)."""
    rows = sorted(rows, key=lambda r: int(r["T"]))
    lo, up, cens = zip(*(row_interval(r) for r in rows)) if rows else ((), (), ())
    return fit(np.array([int(r["T"]) for r in rows], float), np.array(up, float),
               np.array(cens, bool), np.array(lo, float), laws=laws)


# --------------------------------------------------------------------------------------
# a trained width
# --------------------------------------------------------------------------------------
def trained_width(ws, vals, level, n_boot, rng) -> dict:
    """The smallest grid width of ``ws`` whose seed median of ``vals`` (one list of
    ``L/L(0)`` per width) reaches ``level``, with a paired bootstrap over seeds
    (:func:`stsim.util.stats.threshold_width` on each resample of the seed columns):
    ``width`` (None: censored above ``ws[-1]``), ``below`` (the grid width under it),
    the bootstrap's ``lo``, ``hi``, ``frac_censored``."""
    bt = bootstrap_threshold(lambda V: threshold_width(ws, V, level)[0], vals,
                             resample="paired", n_boot=n_boot, rng=rng)
    w = bt["estimate"]
    below = None if w is None or w == ws[0] else ws[ws.index(w) - 1]
    return {"width": w, "censored": bt["censored"], "lo": bt["lo"], "hi": bt["hi"],
            "frac_censored": bt["frac_censored"], "below": below,
            "lower_censored": bool(w is not None and w == ws[0]), "level": bt["level"],
            "n_boot": bt["n_boot"], "n_seeds": len(vals[0])}


def fit_check(label, fits, what, op, threshold, law="power"):
    """The check ``exponent op threshold`` of the law ``law`` fitted to a width series
    (:func:`fit`): se from its profile CI on ``m − 2`` degrees of freedom (``m`` points
    bounded above); the claim ``"{label}: {what}"``, the law recorded as ``law``."""
    f = (fits or {}).get("fits", {}).get(law)
    if not f:
        return judge(f"{label}: {what}", math.nan, op, threshold, math.nan,
                     note=(fits or {}).get("note", "not fitted"))
    df = max(1, int(f["n"]) - int(f["n_censored"]) - 2)
    lo, hi = f["a_ci"]
    se = interval_se(lo, hi, df) if np.isfinite(lo) and np.isfinite(hi) else math.inf
    return dict(judge(f"{label}: {what}", f["a"], op, threshold, se, df,
                      note=f"{f['formula']}: a = {f['a']:.3g} [{lo:.3g}, {hi:.3g}]"),
                law=law)
