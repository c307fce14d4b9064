"""The separation study's diverged runs (:func:`stsim.studies.contract.divergence`): which
training runs diverged, and which smallest widths could not be measured because of them."""
from __future__ import annotations

from stsim.studies.contract import divergence
from stsim.studies.separation.design import budgets_of, series

__all__ = ["divergence_of"]


def divergence_of(cfg, tune, runs, widths, incomplete) -> dict:
    """The ``diverged`` and ``unmeasured`` entries of the summary, from the ``ok`` rows of
    the tuning and reported tables and the analysis' ``widths`` and ``incomplete``.

    A series point (series, q, T) is *unmeasured* when it has runs but no width because
    every tuning run diverged (no learning rate could be chosen), or when its width is
    censored while some of its reported runs diverged (the width grid may not be what
    failed)."""
    rows = list(tune) + list(runs)
    where = [f"{r['arch']} q={r['q']} T={r['T']} width {r['width']} lr {r['lr']:g}"
             for r in rows if r.get("diverged")]
    done = {(w["series"], w["q"], w["T"]): w for w in widths}
    pending = {(w["series"], w["q"], w["T"]) for w in incomplete}
    unmeasured = []
    for name, arch, b in series(cfg):
        at = [r for r in rows if r["arch"] == arch and b in budgets_of(r["budgets"], r["steps"])]
        for q in cfg["qs"]:
            for T in sorted({r["T"] for r in at if r["q"] == q}):
                mine = [r for r in at if r["q"] == q and r["T"] == T]
                bad = sum(bool(r.get("diverged")) for r in mine)
                key = (name, q, T)
                if not bad or key in pending:
                    continue
                w = done.get(key)
                if w is None:
                    unmeasured.append(f"the smallest width of {name} at q={q}, T={T}: "
                                      f"every tuning run diverged ({bad} of {len(mine)} "
                                      f"runs)")
                elif w.get("censored"):
                    unmeasured.append(f"the smallest width of {name} at q={q}, T={T}: "
                                      f"censored, and {bad} of {len(mine)} runs diverged")
    return divergence(where, len(rows), unmeasured)
