r"""The analysis of ``stsim targets``: :func:`analyse`, every part's checks from the tables
under ``<out>/raw/`` alone (only the rows made with the settings,
:func:`stsim.studies.cells.made_with`), and the checks of a construction's row
(:func:`represents_checks`). The width parts' checks:
:func:`stsim.studies.targets.widths.analyse`.
"""
from __future__ import annotations

import math

import numpy as np

from stsim.core.targets import make_target
from stsim.studies.cells import made_with
from stsim.studies.targets import widths
from stsim.studies.contract import raw_path
from stsim.studies.targets.design import EXACT_LOSS, made_by
from stsim.studies.targets.runs import choose
from stsim.studies.tuning import at_chosen, seed_stats
from stsim.util.verdict import judge

__all__ = ["analyse", "represents_checks"]


def represents_checks(label, row, q, d, tol):
    """The checks of a ``represents`` row: the construction's loss ``< EXACT_LOSS``
    (exact); for the variance, ``|fit − floor| ≤ tol·floor`` on the fit's SE."""
    from stsim.theory.targets import variance_linear_floor
    out = [judge(f"{label}: the exact construction's loss < {EXACT_LOSS:g}",
                 row["construction_loss"], "<", EXACT_LOSS,
                 note="largest over the batches")]
    if np.isfinite(float(row["fit"])):
        floor, fit = variance_linear_floor(d, q), float(row["fit"])
        out.append(dict(judge(
            f"{label}: the best linear readout's loss is the floor d(q-1)/q^3 = {floor:.6g} "
            f"(within {tol:g} of it)", abs(fit - floor), "<=", tol * floor,
            float(row["fit_se"]), note=f"least-squares fit, held-out loss {fit:.6g}"),
            fit=fit, floor=floor, L0=make_target(label).zero_loss(d, q),
            Lc=make_target(label).constant_loss(d, q)))
    return out


def analyse(cfg, out):
    """The checks of every part, from the tables under ``raw/`` alone. A run that raised
    (its row's ``status``) leaves its target's checks of that part inconclusive (measured
    NaN, the error in the note) and is listed in ``errors``."""
    ts = cfg["targets"]

    def table(name, needed):        # the rows made with these settings; each needed one
        return made_with(raw_path(out, f"{name}.csv"), made_by(cfg, name), needed)
    tables = {"represents": table("represents", [{"target": t} for t in ts]),
              "tune": table("tune", [{"target": t, "mult": m} for t in ts
                                     for m in cfg["mults"]])}
    mults = choose(tables["tune"], cfg["mults"])
    tables["runs"] = at_chosen(table("runs", [{"target": t, "mult": mults[t]} for t in ts]),
                               "target", mults)
    errors = [f"{n}: {r['target']} seed {r['seed']}: {r.get('error')}"
              for n, rows in tables.items() for r in rows if r["status"] != "ok"]
    ok = {n: [r for r in rows if r["status"] == "ok"] for n, rows in tables.items()}
    rep = {r["target"]: r for r in ok["represents"]}
    res = {"represents": {}, "learns": {}, "length": {}, "mults": mults, "errors": errors,
           "diverged": []}
    for t in cfg["targets"]:
        failed = [e for e in errors if e.startswith(f"runs: {t} ")]
        res["represents"][t] = represents_checks(
            t, rep.get(t, {"construction_loss": math.nan, "fit": math.nan}), cfg["q"],
            cfg["d"], cfg["floor_tol"])
        rows = [r for r in ok["runs"] if r["target"] == t]
        res["diverged"] += [f"{t} seed {r['seed']}" for r in rows
                            if r["run_status"] != "completed"]
        up = widths.footing(t, cfg["d"], cfg["q"])
        for part, key, where in [("learns", "rel", cfg["T"])] + [
                ("length", f"rel_T{Tt}", Tt) for Tt in cfg["T_test"]]:
            m, se, df = seed_stats([math.nan] if failed else [float(r[key]) for r in rows])
            ck = judge(f"{t}: val/L_c at T = {where} <= {cfg['ratio']:g} (trained at "
                       f"T = {cfg['T']}, {len(rows)} seeds, multiplier {mults.get(t)})",
                       m * up, "<=", cfg["ratio"], se * up, df,
                       note="; ".join(failed) or f"seed mean, se = s/sqrt(n); val/L(0) = "
                                                 f"{m:.4g} ± {se:.2g}", T=where,
                       n=len(rows), rel_zero=m, rel_zero_se=se)
            res[part].setdefault(t, []).append(ck)
    return dict(res, **widths.analyse(cfg, out))
