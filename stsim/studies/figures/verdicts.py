r"""Verdicts that carry their uncertainty: every check of the figures has a measured value,
its standard error ``se`` and a verdict (docs/reproduction.md, "How every number is
judged": the rule, the bootstrap and its small-sample correction).

The verdict is :mod:`stsim.util.verdict`'s, with ``df = S − 1`` over ``S`` seeds and
``DF_WITHIN`` within one run; an unstable setting
(:mod:`stsim.studies.figures.stability`) is inconclusive.
The standard error of a statistic of several runs is the bootstrap one (:class:`Boot`):
the seeds resampled with replacement (the same indices for every reading in a check) and,
within each run, its stored block means (:mod:`.evaluate`; for an R², the fitted points),
drawn from a fixed seed and, per run, a seed derived from its name (CRC-32) and the set;
:func:`boot_check` multiplies it by ``√(S/(S−1))`` and records the raw one as
``se_bootstrap``.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass, field

import numpy as np

from stsim.util.verdict import counts, inconclusive, judge
from stsim.util.verdict import rejudge as _rejudge

__all__ = ["N_BOOT", "make_check", "relabel", "Boot", "Sample", "boot_check", "DF_WITHIN",
           "rejudge", "verdict_counts"]

DF_WITHIN = 31          # one run's own sampling error: at least 32 evaluation blocks
N_BOOT = 1000           # bootstrap replicates
_NO_SPREAD = 1e-12      # a bootstrap spread below this (relative): the replicates are equal


def make_check(claim, measured, op, threshold, se, note="", runs=(), df=None,
               se_bootstrap=None) -> dict:
    """A claim's check record (:func:`stsim.util.verdict.judge`; ``df``: the degrees of
    freedom of ``se``, None: a large sample) with the figures' context: ``ok``
    (``verdict == "held"``), ``unmeasured`` (the value is not finite: a run it needs
    diverged), ``stability`` (``"stable"`` until :mod:`stsim.studies.figures.stability`
    labels it), ``runs`` (the runs it was measured on) and ``se_bootstrap`` when given."""
    extra = {} if se_bootstrap is None else {"se_bootstrap": float(se_bootstrap)}
    out = judge(claim, measured, op, threshold, se, df, note, runs=sorted(set(runs)),
                stability="stable", **extra)
    out.update(ok=out["verdict"] == "held", unmeasured=not np.isfinite(out["measured"]))
    return out


def verdict_counts(checks) -> dict:
    """``{verdict: count}`` over ``checks`` (:func:`stsim.util.verdict.counts`), and the
    ``unstable`` and ``unmeasured`` ones."""
    out = {**counts(checks), "unstable": 0, "unmeasured": 0}
    for c in checks:
        out["unstable"] += c["stability"] != "stable"
        out["unmeasured"] += bool(c["unmeasured"])
    return out


def rejudge(check) -> dict:
    """``check`` judged again from its recorded numbers (:func:`stsim.util.verdict.rejudge`),
    its stability label kept (an unstable one stays inconclusive)."""
    return relabel({**_rejudge(check), "ok": None}, check.get("stability"))


def relabel(check, stability=None) -> dict:
    """``check`` with ``stability`` set: ``"unstable: why"`` makes it inconclusive
    (:func:`stsim.util.verdict.inconclusive`, the label its reason)."""
    c = dict(check)
    if stability is not None:
        c["stability"] = stability
    if c["stability"] != "stable":
        c = inconclusive(c, c["stability"])
    c["ok"] = c["verdict"] == "held"
    return c


def _crc(*parts) -> int:
    return zlib.crc32("|".join(map(str, parts)).encode())


@dataclass
class Sample:
    """One quantity over the seeds of a setting: ``value`` (S,) — its estimate per seed —
    and ``boot`` (B, S) — bootstrap replicates with the seeds resampled (:class:`Boot`);
    ``runs``: the runs it comes from."""

    value: np.ndarray
    boot: np.ndarray
    runs: list = field(default_factory=list)


class Boot:
    """The shared seed resampling of one figure: ``I[b]`` (S indices with replacement)
    for each replicate ``b`` and each number of seeds ``S`` met (drawn once, seed 0)."""

    def __init__(self, n_boot=N_BOOT, seed=0):
        self.n_boot, self.seed, self._I = int(n_boot), int(seed), {}

    def indices(self, S) -> np.ndarray:
        """``(B, S)`` seed indices of the replicates for ``S`` seeds."""
        if S not in self._I:
            rng = np.random.default_rng([self.seed, S])
            self._I[S] = rng.integers(S, size=(self.n_boot, S))
        return self._I[S]

    def sample(self, values, within=None, runs=()) -> Sample:
        """A :class:`Sample` from per-seed ``values`` (S,) and, if the runs have sampling
        error of their own, ``within`` (S, B): replicate ``b`` of seed ``s``'s value."""
        v = np.asarray(values, dtype=float)
        I = self.indices(v.size)
        if within is None:
            boot = v[I]
        else:
            w = np.asarray(within, dtype=float)
            boot = w[I, np.arange(self.n_boot)[:, None]]
        return Sample(v, boot, list(runs))

    def blocks(self, name, key, block_means, den=None) -> np.ndarray:
        """``(B,)`` replicates of the mean of ``block_means`` (resampled with
        replacement; seeded by the run ``name`` and the set ``key``); with ``den``
        (paired blocks), of the ratio of the two means."""
        x = np.asarray(block_means, dtype=float)
        rng = np.random.default_rng([self.seed, _crc(name, key)])
        idx = rng.integers(x.size, size=(self.n_boot, x.size))
        if den is None:
            return x[idx].mean(axis=1)
        return x[idx].mean(axis=1) / np.asarray(den, dtype=float)[idx].mean(axis=1)


def boot_check(claim, fn, samples, op, threshold, note="") -> dict:
    """The check of ``fn(*values) <op> threshold`` (:func:`make_check`) where ``samples``
    are :class:`Sample` s and ``fn`` maps arrays whose last axis is the seeds (the values
    ``(S,)``, the replicates ``(B, S)``) to a number per replicate; ``se`` is the standard
    deviation of the replicates times ``√(S/(S−1))`` (``S``: the fewest seeds of the
    samples; module docstring), judged at ``t_{0.975, S−1}`` (``DF_WITHIN`` d.o.f. for one
    seed), NaN (an inconclusive verdict) where they do not vary
    (one seed of a quantity without sampling error within a run)."""
    with np.errstate(all="ignore"):
        measured = float(fn(*(s.value for s in samples)))
        reps = np.asarray(fn(*(s.boot for s in samples)), dtype=float)
    finite = reps[np.isfinite(reps)]
    se = float(np.std(finite, ddof=1)) if finite.size > 1 and np.isfinite(measured) \
        else float("nan")
    if se <= _NO_SPREAD * max(1.0, abs(measured)):
        # the replicates do not vary (one seed of a quantity with no sampling error
        # within a run): no standard error can be estimated, so no verdict either
        se = float("nan")
        note = "; ".join(x for x in (note, "no spread over the resamples (one seed): no "
                                     "standard error") if x)
    runs = [r for s in samples for r in s.runs]
    S = min(s.value.size for s in samples)
    raw = se
    if S > 1 and np.isfinite(se):
        se = se * float(np.sqrt(S / (S - 1.0)))        # the small-sample bias of the bootstrap
    return make_check(claim, measured, op, threshold, se, note, runs,
                      df=S - 1 if S > 1 else DF_WITHIN, se_bootstrap=raw)
