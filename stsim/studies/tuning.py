"""What the studies' equal tuning shares (``stsim attention``, ``stsim targets``): the
measures of one trained run, and the multiplier each arm's tuning rows choose."""
from __future__ import annotations

import json
import math
import time

import numpy as np

__all__ = ["run_measures", "choose", "at_chosen", "read_curve", "seed_stats"]


def run_measures(res, L0, T_test, t0) -> dict:
    """The measures of the run ``res`` (a :class:`~stsim.core.result.Result`) for a study's
    table: ``rel``, its final validation loss over ``L0`` (infinite unless completed), the
    CPU time since ``t0`` (``time.process_time()`` before the run), the validation curve
    over ``L0`` as JSON, and ``rel_T<T>`` at each length of ``T_test``."""
    ok = res.status == "completed"
    h = res.history
    row = {"rel": res.final("val") / L0 if ok else math.inf,
           "cpu_time_s": time.process_time() - t0,
           "curve": json.dumps({"step": [int(s) for s in h["step"]],
                                "rel": [float(v) / L0 for v in h["val"]]})}
    for Tt in T_test:
        row[f"rel_T{Tt}"] = res.final(f"val/T={Tt}") / L0 if ok else math.inf
    return row


def choose(rows, arm, mults=None) -> dict:
    """``{arm: multiplier}`` from the tuning rows (``arm``: the column naming the arm): the
    lowest final ``rel`` (a diverged, failed or non-finite run is infinite), ties to the
    larger multiplier; with ``mults``, among the rows at those multipliers only (a folder's
    table keeps the rows of every multiplier an earlier invocation tried)."""
    best = {}
    keep = None if mults is None else {float(m) for m in mults}
    for r in rows:
        if keep is not None and float(r["mult"]) not in keep:
            continue
        v = float(r["rel"]) if r.get("run_status") == "completed" else math.inf
        key = (v if math.isfinite(v) else math.inf, -float(r["mult"]))
        if r[arm] not in best or key < best[r[arm]][0]:
            best[r[arm]] = (key, float(r["mult"]))
    return {a: b[1] for a, b in best.items()}


def at_chosen(rows, arm, chosen) -> list:
    """The reported runs of ``rows`` made at their arm's chosen multiplier
    (``chosen``: :func:`choose`). A table written before the multiplier was part of a
    reported run's point has no ``mult``: it is kept whole when no row has one; in a table
    that mixes both, a row without one was made at a choice not recorded, and is dropped."""
    if all(r.get("mult") in (None, "") for r in rows):
        return list(rows)
    return [r for r in rows if r.get("mult") not in (None, "")
            and float(r["mult"]) == chosen.get(r[arm])]


def read_curve(row, table: str, arm: str) -> dict:
    """The validation curve of a table's row (:func:`run_measures`' JSON: ``step`` and
    ``rel``, lists of one length); ``ValueError`` naming the table and the row (its arm
    and seed) when it is damaged, instead of a traceback in the figure."""
    try:
        c = json.loads(row["curve"])
        ok = (isinstance(c, dict) and isinstance(c.get("step"), list)
              and isinstance(c.get("rel"), list) and len(c["step"]) == len(c["rel"]))
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise ValueError(f"raw/{table}: the curve of the run {arm}={row.get(arm)!r}, seed "
                         f"{row.get('seed')} is damaged ({str(row.get('curve'))[:40]!r}): "
                         f"rerun without --analyse-only in another --out to compute it "
                         f"again")
    return c


def seed_stats(values) -> tuple:
    """``(mean, se = s/√n, df = n − 1)`` of a statistic over the seeds (``n`` values); the
    se NaN and df None where it cannot be estimated (fewer than two values, or one not
    finite: a run that diverged)."""
    v = np.asarray(values, float)
    if v.size < 2 or not np.all(np.isfinite(v)):
        return float(np.mean(v)) if v.size else math.nan, math.nan, None
    return float(v.mean()), float(v.std(ddof=1) / math.sqrt(v.size)), v.size - 1
