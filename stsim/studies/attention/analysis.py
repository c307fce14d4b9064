"""The analysis of ``stsim attention`` (:mod:`~stsim.studies.attention.study`): every check
and table from the raw tables under ``raw/`` alone, only the rows the config's settings made
(:func:`stsim.studies.cells.made_with`)."""
from __future__ import annotations

import math

import numpy as np

from stsim.core.attention import Softmax
from stsim.core.attention_dynamics import reduced_gd
from stsim.core.targets import make_target
from stsim.studies.attention.design import BASE_TEXT, made_by, named, rank_points
from stsim.studies.contract import raw_path
from stsim.studies.attention.runs import choose
from stsim.studies.cells import made_with
from stsim.studies.tuning import at_chosen
from stsim.studies.widths import Precision
from stsim.util.verdict import inconclusive, interval_se, judge

__all__ = ["analyse", "verdict", "judged"]


def verdict(values, op, threshold, claim, note=""):
    """The check (:func:`judged`) of the seed mean of ``values`` against ``threshold``
    (``op``: the claimed side): ``n`` values, ``se = s/√n`` on ``n − 1`` degrees of freedom;
    one value: ``se = 0``, exact."""
    v = np.asarray(values, dtype=np.float64)
    n = int(v.size)
    m = float(np.mean(v)) if n else float("nan")
    se = float(np.std(v, ddof=1) / math.sqrt(n)) if n > 1 else 0.0
    return judged(m, se, n - 1 if n > 1 else None, op, threshold, claim, note, n)


def judged(m, se, df, op, threshold, claim, note="", n=1):
    """The check of a measured value ``m`` with standard error ``se`` on ``df`` degrees of
    freedom (:func:`stsim.util.verdict.judge`: critical ``max(2, t_{0.975, df})``; 0 and
    exact for ``se = 0``), with ``n``, the values it stands on."""
    return judge(claim, m, op, threshold, se, df, note, n=int(n))


def _failed(table, rows, keys) -> list:
    """The error rows of ``raw/<table>.csv`` (a run that raised: ``status`` not ``ok``),
    each as ``{"table", "run", "error"}`` (``run``: its ``keys``)."""
    return [{"table": table, "run": ", ".join(f"{k}={r.get(k)}" for k in keys),
             "error": r.get("error") or "?"} for r in rows if r.get("status", "ok") != "ok"]


def _incomplete(check, errors):
    """``check`` made inconclusive when it needed runs that failed (``errors``): it is not
    judged on the remaining runs as if they were all (:func:`stsim.util.verdict.inconclusive`)."""
    if errors:
        return inconclusive(check, f"{len(errors)} run(s) failed, e.g. {errors[0]['run']}: "
                                   f"{errors[0]['error']}")
    return check


def _task(cfg) -> str:
    """The words a claim adds for the task's target: none for the paper's (the mean)."""
    return "" if cfg["target"] == "mean" else f" on the target {cfg['target']}"


def _value(r, key="rel"):
    """A row's ``key`` when its run completed, else NaN (diverged, or an error row)."""
    return float(r[key]) if r.get("run_status") == "completed" else math.nan


def _temperature(cfg):
    """Reduced softmax map at each τ (step η = the τ = 1 default) against the τ = 1 map with
    steps (η/τ², η): the step to 2% of L(0) of each."""
    T, q, d = cfg["tau_T"], cfg["q"], cfg["d"]
    n = 2 * T
    eta = 0.5 * Softmax().eta_max(q, d, n, 1.0)
    horizon = 20 * T
    rows = []
    for tau in cfg["taus"]:
        hot = reduced_gd(Softmax(tau), T, q, d, eta, n, horizon)
        cold = reduced_gd("softmax", T, q, d, eta / tau ** 2, n, horizon, lr_gamma=eta)
        L0 = make_target("mean").zero_loss(d, q)

        def first(L):
            hit = np.flatnonzero(L <= cfg["level"] * L0)
            return int(hit[0]) if hit.size else None
        rows.append({"tau": tau, "lr": eta, "t2_tau": first(hot["loss"]),
                     "t2_equivalent": first(cold["loss"]),
                     "max_rel_diff": float(np.nanmax(np.abs(hot["loss"] - cold["loss"])
                                                     / cold["loss"][0]))})
    return rows


def _rank(cfg, table):
    """Per (T, q): the seed mean, se and verdict of each r (inconclusive when a run of it
    failed), and the smallest r held below ``level`` and below ``width_level`` (None:
    none in the grid, or a smaller r's runs failed)."""
    out, checks = [], []
    for T in cfg["rank_T"]:
        for q in cfg["rank_q"]:
            cells = []
            for r in cfg["rank_r"]:
                rows = [x for x in table if int(x["T"]) == T and int(x["q"]) == q
                        and int(x["rank"]) == r]
                if rows:
                    vals = [_value(x) for x in rows]
                    errs = _failed("rank", rows, ("T", "q", "rank", "seed"))
                    cells.append((r, _incomplete(verdict(vals, "<=", cfg["level"], ""), errs),
                                  _incomplete(verdict(vals, "<=", cfg["width_level"], ""),
                                              errs), errs))
            if not cells:
                continue
            small, loose = (_smallest([(r, v, e) for r, v, _, e in cells]),
                            _smallest([(r, v, e) for r, _, v, e in cells]))
            out.append({"T": T, "q": q, "d_e": 2 * T, "smallest_r_learns": small,
                        f"smallest_r_{cfg['width_level']:g}": loose,
                        "cells": [{"r": r, "measured": v["measured"], "se": v["se"],
                                   "critical": v["critical"], "verdict": v["verdict"]}
                                  for r, v, _, _ in cells]})
            for r, v, _, _ in cells:
                v["claim"] = (f"rank {r} learns{_task(cfg)} at T={T}, q={q}: final loss <= "
                              f"{cfg['level']:g} L(0)")
                checks.append(v)
    return out, checks


def _smallest(cells):
    """The first ``x`` of ``(x, check, errors)`` (increasing x) whose check held; None when
    none did or a cell before it (or it) has failed runs (the smallest is then unknown)."""
    for x, v, errs in cells:
        if errs:
            return None
        if v["verdict"] == "held":
            return x
    return None


def _trained(cfg, table, width_rows, width_errors):
    """Per trained mechanism: each width's seed mean with its verdict against
    ``width_level``, the smallest width held below it, and the check that it is within one
    grid step of the family's width at ``train_T`` (the family's replicates); a cell or
    family with failed runs (``width_errors``: per ``(mechanism, T)``) leaves them
    inconclusive."""
    out, checks = [], []
    T, eps = cfg["train_T"], cfg["width_level"]
    for m in cfg["train_mechs"]:
        cells = []
        for w in cfg["train_widths"]:
            rows = [r for r in table if r["mechanism"] == m and int(r["d_e"]) == w]
            errs = _failed("trained", rows, ("mechanism", "d_e", "seed"))
            if rows:
                cells.append((w, _incomplete(verdict([_value(r) for r in rows], "<=", eps,
                                                     f"{m} trained on the sphere at T={T}, "
                                                     f"d_e={w}: final loss <= {eps:g} L(0)"),
                                             errs), errs))
        checks += [v for _, v, _ in cells]
        small = _smallest(cells)
        fam = next((r for r in width_rows if r["series"] == m and r["T"] == T), None)
        errs = [e for _, _, es in cells for e in es] + width_errors.get((m, T), [])
        out.append({"mechanism": m, "T": T, "smallest_trained": small,
                    "family": None if fam is None else [fam["below"], fam["width"]],
                    "cells": [{"d_e": w, "measured": v["measured"], "se": v["se"],
                               "critical": v["critical"], "verdict": v["verdict"]}
                              for w, v, _ in cells]})
        if (fam is not None and not fam["censored"]) or errs:
            ok = small is not None and fam is not None and (fam["below"] / 2 ** 0.5 < small
                                                            <= fam["width"] * 2 ** 0.5 + 1)
            cell = None if fam is None else f"({fam['below']}, {fam['width']}]"
            checks.append(_incomplete(verdict(
                [1.0 if ok else 0.0], ">=", 1.0, f"{m}: the smallest trained width at T={T} "
                f"is within one grid step of the family's (rule: family cell lower end/√2 < "
                f"trained <= upper end·√2 + 1; trained widths on a √2 grid)",
                note=f"trained {small}, family {cell}"), errs))
    return out, checks


def _exponent(f):
    """The power law's exponent, its se and degrees of freedom: the fit's profile interval
    is the Student-t interval on ``m − 2`` d.o.f. (``m`` points bounded above;
    :func:`stsim.util.stats.fit_interval_law`), so ``se`` is its width over ``2 t``."""
    p = f["fits"].get("power")
    if not p or p.get("a_ci") is None or None in p["a_ci"]:
        return None
    df = p["n"] - p["n_censored"] - 2
    return float(p["a"]), interval_se(*p["a_ci"], df, p["level"]), df


def _width_checks(fits):
    """Each series' power-law exponent against softmax's family (the difference, se of
    both, on the fewer degrees of freedom of the two) and linear attention's exponent
    against 1."""
    out = []
    soft = _exponent(fits["softmax"]) if "softmax" in fits else None
    for series, f in fits.items():
        e = _exponent(f)
        if e is None:
            continue
        note = f"ranking {f['ranking']}; power exponent {e[0]:.3g} +- {e[1]:.2g}"
        if series.startswith("linear"):
            out.append(judged(abs(e[0] - 1.0), e[1], e[2], "<=", 0.1, f"{series}: the "
                              "width grows linearly in T (power exponent within 0.1 of 1)",
                              note, e[2] + 2))
        if soft is not None and series != "softmax":
            out.append(judged(e[0] - soft[0], math.hypot(e[1], soft[1]), min(e[2], soft[2]),
                              ">=", 0.0, f"{series}: the width grows faster than softmax's "
                              f"(power exponent minus softmax's {soft[0]:.3g})", note,
                              min(e[2], soft[2]) + 2))
    return out


def _diverged(cfg, tune, runs, rank, trained, mults) -> dict:
    """The ``diverged`` and ``unmeasured`` entries (:func:`stsim.studies.contract.divergence`)
    of the reported, rank and trained runs: each diverged run, and each group of runs a check
    stands on with a diverged one (its check is then not measured), naming the step."""
    from stsim.studies.contract import divergence
    groups = []
    for m in cfg["mechanisms"]:
        every = [r for r in tune if r["mechanism"] == m]
        lost = every and all(r.get("run_status") != "completed" for r in every)
        groups.append((f"{m} at step x {mults.get(m)} of {BASE_TEXT[cfg['tune_base']]}"
                       + (f" (every tuning multiplier {cfg['tune_mults']} diverged too)"
                          if lost else ""), [r for r in runs if r["mechanism"] == m]))
    groups += [(f"rank {r} at T={T}, q={q}", [x for x in rank if (int(x["T"]), int(x["q"]),
                                                                  int(x["rank"])) == (T, q, r)])
               for T, q, r in sorted({(int(x["T"]), int(x["q"]), int(x["rank"]))
                                      for x in rank})]
    groups += [(f"{m} trained at d_e={w}", [x for x in trained if x["mechanism"] == m
                                            and int(x["d_e"]) == w])
               for m in cfg["train_mechs"] for w in cfg["train_widths"]]
    where, unmeasured, total = [], [], 0
    for label, rows in groups:
        rows = [r for r in rows if r.get("status", "ok") == "ok"]   # errors: reported apart
        bad = [r for r in rows if r.get("run_status") != "completed"]
        total += len(rows)
        where += [f"{label}, seed {r['seed_index']}: {r.get('run_status')}" for r in bad]
        if bad:
            unmeasured.append(f"{label}: {len(bad)} of {len(rows)} runs diverged")
    return divergence(where, total, unmeasured)


def analyse(cfg, out) -> dict:
    """Every check, from the tables under ``raw/`` and the exact computations."""
    from stsim.studies.attention.widths import family_rows, width_fits
    from stsim.theory.attention import linear_sphere_width
    cfg = named(cfg)
    ms = cfg["mechanisms"]

    def table(name, needed):        # the rows made with these settings; each needed one
        return made_with(raw_path(out, f"{name}.csv"), made_by(cfg, name), needed)
    tune = [r for r in table("tune", [{"mechanism": m, "mult": x} for m in ms
                                      for x in cfg["tune_mults"]])
            if r["mechanism"] in ms and float(r["mult"]) in cfg["tune_mults"]]
    mults = choose(tune)
    runs = at_chosen(table("runs", [{"mechanism": m, "mult": mults[m]} for m in ms]),
                     "mechanism", mults)
    # every table read (and refused when its settings made no row) before any computation
    rank = table("rank", rank_points(cfg))
    wtab = [r for r in table("width", [{"mechanism": m, "T": T} for m in cfg["width_mechs"]
                                       for T in cfg["width_T"]])
            if r["mechanism"] in cfg["width_mechs"] and int(r["T"]) in cfg["width_T"]]
    tab = table("trained", [{"mechanism": m, "d_e": w} for m in cfg["train_mechs"]
                            for w in cfg["train_widths"]])
    errors = _failed("tune", tune, ("mechanism", "mult")) + \
        _failed("runs", runs, ("mechanism", "seed"))
    checks, per = [], {}
    for mech in cfg["mechanisms"]:
        rows = [r for r in runs if r["mechanism"] == mech]
        ok = [r for r in rows if r.get("run_status") == "completed"]
        # the tuning chose the step among these: a failed one leaves the choice open
        errs = [e for e in errors if e["run"].startswith(f"mechanism={mech},")]
        first = next((r for r in rows if r.get("status", "ok") == "ok"), {})
        per[mech] = {"runs": len(rows), "completed": len(ok), "mult": mults.get(mech),
                     **{k: first.get(k) for k in ("lr_W", "lr_V", "freeze", "steps", "init")},
                     "tuning": {str(r["mult"]): r.get("rel") for r in tune
                                if r["mechanism"] == mech},
                     # interior: the chosen m is neither end of the multipliers tried
                     "interior": min(cfg["tune_mults"]) < mults.get(mech, 0) <
                     max(cfg["tune_mults"])}
        checks.append(_incomplete(verdict(
            [_value(r) for r in rows], "<=", cfg["level"], f"{mech} learns{_task(cfg)}: final loss <= "
            f"{cfg['level']:g} L(0) in {cfg['steps']} steps (T={cfg['T']}, q={cfg['q']})",
            note=f"{len(ok)}/{len(rows)} runs completed; step x {mults.get(mech)} of "
                 f"{BASE_TEXT[cfg['tune_base']]}"), errs))
        for Tt in cfg["T_test"]:
            checks.append(_incomplete(verdict(
                [_value(r, f"rel_T{Tt}") for r in rows], "<=", cfg["ood_level"],
                f"{mech} generalises{_task(cfg)} to T_test={Tt}: loss <= {cfg['ood_level']:g} "
                f"L(0)"), errs))
    errors += _failed("rank", rank, ("T", "q", "rank", "seed"))
    rank_rows, rank_checks = _rank(cfg, rank) if rank else ([], [])
    checks += rank_checks
    temp = _temperature(cfg)
    for r in temp:
        same = r["t2_tau"] == r["t2_equivalent"] and r["max_rel_diff"] < 1e-9
        checks.append(verdict([r["max_rel_diff"]], "<=", 1e-9, f"temperature {r['tau']:g} "
                              f"equals W step / tau^2 (reduced map, T={cfg['tau_T']})",
                              note=f"steps to {cfg['level']:g} L(0): {r['t2_tau']} at tau, "
                                   f"{r['t2_equivalent']} equivalent; same: {same}"))
    werr = {}       # (mechanism, T): the failed replicates; the point is left out
    for r in wtab:
        for e in _failed("width", [r], ("mechanism", "T", "seed")):
            werr.setdefault((r["mechanism"], int(r["T"])), []).append(e)
    errors += [e for es in werr.values() for e in es]
    width_rows = [r for r in family_rows(wtab) if (r["series"], r["T"]) not in werr]
    eps = cfg["width_level"]
    prec = Precision.from_cfg(cfg)
    exact = [{"series": "linear (exact)", "T": T, "width": int(w), "below": int(w) - 1,
              "censored": False, "replicates": "exact", "lo": float(w) - 1, "hi": float(w),
              "crossing": (T - 1) * (1 / eps - 1), "crossing_se": 0.0, "n": 0, "precise": 1}
             for T, w in zip(cfg["width_T"], linear_sphere_width(cfg["width_T"], eps))]
    tol = 2 * prec.rtol
    for r in width_rows:
        if r["series"] == "linear" and not r["censored"]:
            T = r["T"]
            x = (T - 1) * (1 / eps - 1)
            checks.append(judged(abs(r["crossing"] - x) / x, r["crossing_se"] / x,
                                 prec.replicates - 1, "<=", tol,
                                 f"linear attention's located family crossing at T={T} is "
                                 f"within {tol:.0%} of the exact (T - 1)(1/eps - 1) = "
                                 f"{x:g}", note=f"crossing {r['crossing']:.4g} +- "
                                 f"{r['crossing_se']:.2g} ({prec.replicates} replicates of "
                                 f"{r['n']} samples, bisection to {prec.rtol:.0%})",
                                 n=prec.replicates))
    for (m, T), errs in sorted(werr.items()):
        if m == "linear":
            checks.append(_incomplete(verdict([math.nan], "<=", tol, f"linear "
                                              f"attention's located family crossing at T={T} "
                                              f"is within {tol:.0%} of the exact"), errs))
    fits = width_fits(width_rows + exact)
    by = {m: [e for (s, _), es in werr.items() if s == m for e in es]
          for m in cfg["width_mechs"]}
    for c in _width_checks(fits):   # a fit on a series with failed points is incomplete
        series = c["claim"].split(":")[0]
        checks.append(_incomplete(c, by.get(series, []) + (
            by.get("softmax", []) if "than softmax's" in c["claim"] else [])))
    for m in cfg["width_mechs"]:
        cens = [r["T"] for r in width_rows if r["series"] == m and r["censored"]]
        if cens or by[m]:
            checks.append(_incomplete(verdict(
                [float(len(cens))], "<=", 0.0, f"{m}: the family reaches {eps:g} L(0) within "
                f"d_e <= {cfg['width_max']} at every T", note=f"censored at T = {cens}"),
                by[m]))
    trained = []
    if tab:
        errors += _failed("trained", tab, ("mechanism", "d_e", "seed"))
        trained, tchecks = _trained(cfg, tab, width_rows, werr)
        checks += tchecks
    return {"config": cfg, "mechanisms": per, "checks": checks, "temperature": temp,
            "trained": trained, "rank": rank_rows, "width": width_rows + exact, "fits": fits,
            **_diverged(cfg, tune, runs, rank, tab, mults),
            **({"errors": errors} if errors else {})}
