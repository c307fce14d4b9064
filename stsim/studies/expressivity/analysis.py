r"""The expressivity study's analysis (:func:`analyse`): per part, its rows and fits from
the raw tables alone (``--analyse-only``); a trained run that diverges leaves the trained
part's numbers unmeasured (:func:`stsim.studies.contract.divergence`).

The checks of the statements docs/expressivity.md makes are judged from the tables the
parts wrote (:mod:`~stsim.studies.expressivity.checks`, called by
:func:`~stsim.studies.expressivity.outputs.write_overview`).
"""
from __future__ import annotations

from stsim.studies.contract import divergence
from stsim.studies.expressivity.common import design_results
from stsim.studies.expressivity.design import PART_MODULES

__all__ = ["analyse"]


def analyse(config, out) -> dict:
    """Per part in ``only``: its rows and fits from the raw tables alone (JSON-ready), or
    ``None`` when some point of its design is missing (an incomplete part)."""
    results, where, total, unmeasured = {}, [], 0, []
    for name in config["only"]:
        mod, cfg = PART_MODULES[name], config[name]
        points = mod.design(cfg, config["seed"])
        got = {t: design_results(out, t, pts) for t, pts in points.items()}
        results[name] = (None if any(v is None for v in got.values())
                         else mod.analyse(cfg, config["seed"], points, got))
        # the trained part's runs (the other parts train nothing): diverged ones unmeasured
        for p, r in zip(points.get("trained", ()), got.get("trained") or ()):
            total += 1
            if r.get("run_status", "completed") == "diverged":
                where.append(f"trained d_e={p['d_e']} lr {p['lr']:g}")
                unmeasured.append(f"the trained structure and losses at d_e={p['d_e']} "
                                  f"(part trained): its run diverged")
    results.update(divergence(where, total, unmeasured))
    return results
