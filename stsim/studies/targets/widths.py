r"""The width parts of ``stsim targets`` (docs/targets.md, "The width law" and "The FCN"):
how wide each arm must be to reach ``reach``·L_c, against T, per target, at ``width_d``
(``L_c``, the best constant output's loss, the footing of every target: :func:`footing`;
the losses are recorded over L(0), so the level is ``reach`` of ``L_c`` in those units,
:func:`level`, and each row of ``raw/family_width.csv`` carries it).

- **family** (``raw/family_width.csv``): the transformer's sphere family (``W_ee = a I``
  at the mean's best ``a``, the target's readout fitted by least squares,
  :func:`stsim.theory.targets.family_target_rel`): its located crossing ``d_e*`` of
  ``reach`` (the widths library, :func:`stsim.studies.widths.locate`) at each ``fam_Ts``
  for the mean (the softmax family's, the number every study quotes) and every target
  that is not separable (a separable target's is the mean's, derived).
- **family equality** (``raw/family_equal.csv``): for each separable target but the mean,
  its family ``L/L(0)`` against the mean's at the mean's crossing at each ``eq_Ts``
  (paired Monte-Carlo, ``eq_n`` samples): judged ``|difference| <= eq_tol``.
- **FCN** (``raw/fcn_tune.csv``, ``raw/fcn_runs.csv``): the trained FCN cells the
  separation study uses too (:func:`stsim.studies.cells.cells`: its width grid, its
  budget, its equal tuning — the same rates chosen the same way,
  :func:`stsim.studies.cells.tune_and_report`) with the task's target; the smallest width
  per ``(target, T)`` by its reach criterion (:func:`stsim.studies.widths.trained_width`)
  and the interval-censored fits (:func:`stsim.studies.widths.fit`).

Verdicts: the variance's family width grows like the mean's (the exponent of
``d_var/d_mean`` in T within ``slope_tol`` of 0); the FCN's grows at least linearly (the
power law's exponent ``>= 1``); the separation per target, both of its parts.

The width parts' presets (:data:`QUICK`, :data:`FULL`), ``HELP``, :func:`check` and the
family tables' settings (:data:`MADE_BY`) are merged into the study's design
(:mod:`~stsim.studies.targets.design`).
"""
from __future__ import annotations

import math
import time
import warnings

import numpy as np

from stsim.baselines.fcn import fcn_construction
from stsim.core.config import Config
from stsim.core.cost import estimated_seconds
from stsim.core.targets import make_target
from stsim.studies import widths as wl
from stsim.studies.contract import raw_path
from stsim.studies.cells import (cells, made_with, pick_lr, read_rows, settings_text,
                                 train_cells, validate_point)
from stsim.studies.widths import FAMILY_LAWS, QUICK as QUICK_PRECISION, Precision
from stsim.util.validate import check_int, check_memory, check_real
from stsim.util.verdict import all_of, judge

__all__ = ["WIDTH_KEYS", "QUICK", "FULL", "MADE_BY", "check", "family_kind", "family_point",
           "run", "analyse", "estimate_cpu_s", "fcn_cells", "footing", "level"]

FULL = dict(width_d=1, reach=0.5, fam_Ts=tuple(2 ** k for k in range(3, 13)),
            **Precision().settings(),
            eq_Ts=(16, 64), eq_n=200_000,
            eq_tol=0.02, slope_tol=0.1, fcn_Ts=(8, 16, 32, 64, 128), fcn_steps=2000,
            fcn_batch=256,
            fcn_n_val=2048, fcn_seeds=3, fcn_lrs=(1e-3, 3e-3, 1e-2, 3e-2),
            fcn_lr_extra=(1e-4, 3e-4, 1e-1, 3e-1), fcn_span=8, fcn_max_width=2048,
            n_boot=2000)
QUICK = dict(FULL, fam_Ts=(8, 16, 32, 64, 128),
             **QUICK_PRECISION.settings(),
             eq_Ts=(16,), eq_n=50_000, fcn_Ts=(4, 6, 8, 12, 16), fcn_steps=300,
             fcn_batch=64, fcn_n_val=256, fcn_lrs=(3e-2,), fcn_lr_extra=(), fcn_span=4,
             fcn_max_width=64, n_boot=200)
WIDTH_KEYS = tuple(FULL)
#: the help of each width setting (options of ``stsim targets``), beside its preset
HELP = {"width_d": "token dimension of the width parts",
        "reach": "the width parts' level: reach L_c (the best constant output's loss)",
        "fam_Ts": "T of the family's crossings", **Precision.help(),
        "eq_Ts": "T where a separable target's family loss is compared with the mean's",
        "eq_n": "samples of that comparison", "eq_tol": "its tolerance on L/L(0)",
        "slope_tol": "the variance's family width like the mean's: |exponent| <= slope_tol",
        "fcn_Ts": "T of the trained FCN", "fcn_steps": "Adam steps of an FCN run",
        "fcn_batch": "FCN batch", "fcn_n_val": "FCN validation points",
        "fcn_seeds": "FCN seeds per cell", "fcn_lrs": "FCN rates tuned (separation's rule)",
        "fcn_lr_extra": "rates added past an end", "fcn_span": "FCN widths T/2 .. span T",
        "fcn_max_width": "largest FCN width", "n_boot": "bootstrap resamples of a width"}
FAM_ROOT = 2          # root seed of the family equality's paired samples
#: the settings that make a row of each family table (its ``settings`` cell,
#: :func:`stsim.studies.cells.settings_text`), merged into the study's
#: :data:`~stsim.studies.targets.design.MADE_BY`; the FCN tables' rows carry every argument
#: of their run in their point instead
MADE_BY = {
    # a crossing's level (reach of the target's L_c, in units of its L(0)) is in its
    # point: another reach locates other points, and a row serves every reach
    # whose level it is
    "family_width": ("q", "width_d", *Precision().settings()),
    "family_equal": ("q", "width_d", "eq_n")}


def made_by(cfg, name, tables=None) -> str:
    """The ``settings`` cell of the rows of table ``name`` made with ``cfg``: the family
    tables' (:data:`MADE_BY`), or those of ``tables`` (the study's design passes its
    own)."""
    return settings_text(**{k: cfg[k] for k in (tables or MADE_BY)[name]})


def family_kind(target) -> str:
    """``"mean"``, ``"equal"`` (separable with orthonormal features and the linear readout:
    its family loss ratio is the mean's, derived) or ``"own"`` (measured)."""
    t = make_target(target)
    if t.paper:
        return "mean"
    return "equal" if t.mean_on_features else "own"


def check(cfg):
    """The width settings validated (``ValueError`` naming each)."""
    Precision.from_cfg(cfg)         # the family's precision settings, each checked
    for key, lo in (("width_d", 1), ("eq_n", 100),
                    ("fcn_steps", 1), ("fcn_batch", 1), ("fcn_n_val", 1), ("fcn_seeds", 1),
                    ("fcn_span", 1), ("fcn_max_width", 1), ("n_boot", 10)):
        check_int(key, cfg[key], lo)
    for key in ("reach", "eq_tol", "slope_tol"):
        check_real(key, cfg[key], lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    for key, lo in (("fam_Ts", cfg["q"] + 1), ("fcn_Ts", cfg["q"] + 1)):
        for T in cfg[key]:
            check_int(key, T, lo)
    if not set(cfg["eq_Ts"]) <= set(cfg["fam_Ts"]):
        raise ValueError(f"eq_Ts must be among fam_Ts={list(cfg['fam_Ts'])}, "
                         f"got {list(cfg['eq_Ts'])}")
    for lr in tuple(cfg["fcn_lrs"]) + tuple(cfg["fcn_lr_extra"]):
        check_real("fcn_lrs", lr, lo=0.0, lo_open=True)
    if not cfg["fcn_lrs"]:
        raise ValueError("fcn_lrs must hold at least one rate")
    for T in cfg["fcn_Ts"]:
        if not [c for c in cells(_sep_cfg(cfg)) if c["T"] == T]:
            raise ValueError(f"fcn_Ts: T={T} has no FCN width in [T/2, fcn_span T] up to "
                             f"fcn_max_width={cfg['fcn_max_width']}")
    for T in cfg["eq_Ts"]:      # the family equality holds its samples' scores and features
        check_memory({"scores, features and regressors (3 x eq_n x T, float64)":
                      3 * 8 * int(cfg["eq_n"]) * T},
                     f"targets: the family equality at T={T} (eq_Ts), eq_n={cfg['eq_n']}")
    prec = Precision.from_cfg(cfg)
    for T in cfg["fam_Ts"]:
        check_memory({"scores and encodings (5 x max(fam_n_cells, fam_n_start T))":
                      prec.memory(T)}, f"targets: the family at T={T} (fam_Ts), "
                     f"fam_n_start={prec.n_start}, fam_n_cells={prec.n_cells}")
    for c, base in fcn_cells(cfg):          # every FCN run is a valid run (size, memory)
        try:
            validate_point(dict(base, lr=cfg["fcn_lrs"][0]))
        except ValueError as exc:
            raise ValueError(f"targets: the FCN cell at T={c['T']} (fcn_Ts), width "
                             f"{c['width']} (fcn_span, fcn_max_width): {exc}") from None
    return cfg


def footing(target, d, q) -> float:
    """``L(0)/L_c`` of ``target``: a loss over L(0) times it is the loss over ``L_c``, the
    best constant output's (:meth:`~stsim.core.targets.Target.constant_loss`), the one
    footing every target is judged on (1 where ``E target = 0``; ``(q+1)/2`` for the
    variance)."""
    t = make_target(target)
    return t.zero_loss(d, q) / t.constant_loss(d, q)


def level(target, cfg) -> float:
    """The width parts' level of ``target`` in units of its L(0): ``reach`` of its ``L_c``
    (``reach / footing``; the family's loss and the FCN's are recorded over L(0))."""
    return float(cfg["reach"]) / footing(target, cfg["width_d"], cfg["q"])


def family_point(target, T, q, d, reach, precision):
    """A row of ``raw/family_width.csv``: the target's family crossing of ``reach`` (in
    units of L(0)) at ``T``
    (:func:`stsim.studies.widths.locate`; censored at ``64 T``). The mean's is the softmax
    sphere family's (:func:`~stsim.studies.widths.mechanism_loss`: the number every study
    quotes); another target's is its own (:func:`~stsim.studies.widths.target_loss`)."""
    if make_target(target).paper:
        loss, key = wl.mechanism_loss("softmax", T, q), wl.family_key("softmax", T, q)
    else:
        loss = wl.target_loss(target, T, q, d)
        key = wl.family_key(f"target:{make_target(target).label}", T, q, d)
    return wl.locate(loss, [reach], T, key, precision, cap=64 * T, q=q)[float(reach)]


def equal_point(target, T, d_e, q, d, n, seed):
    """A row of ``raw/family_equal.csv`` (:func:`~stsim.theory.targets.family_target_rel`)."""
    from stsim.theory.targets import family_target_rel
    return family_target_rel(target, T, q, d, d_e, n, seed)


def _sep_cfg(cfg):
    return dict(qs=(cfg["q"],), fcn_Ts=tuple(cfg["fcn_Ts"]), long_Ts=(), tf_Ts=(),
                steps=cfg["fcn_steps"], fcn_span=cfg["fcn_span"],
                max_width_fcn=cfg["fcn_max_width"], lrs=tuple(cfg["fcn_lrs"]),
                lr_extra=tuple(cfg["fcn_lr_extra"]), seeds=cfg["fcn_seeds"])


def fcn_cells(cfg):
    """``(cell, base)`` of every FCN cell of every target: the separation study's cells
    (:func:`stsim.studies.cells.cells`) at ``q``, ``fcn_Ts``, with ``task``."""
    fixed = dict(d=cfg["width_d"], batch=cfg["fcn_batch"], n_val=cfg["fcn_n_val"])
    return [(c, dict(c, **fixed, task=t)) for t in cfg["targets"]
            for c in cells(_sep_cfg(cfg))]


#: CPU seconds per sample-token of a family evaluation (the scores, the features, the
#: softmax, the mean's a), MEASURED on an idle machine: 19.6 s for one evaluation of the
#: variance at T = 4096, 10 000 samples fitted and as many held out (docs/targets.md,
#: "Cost of the width parts")
FAMILY_S_PER_TOKEN = 2.5e-7
#: fixed CPU seconds of an FCN step beyond the cost model's multiply-adds, MEASURED at
#: T = 16-64, batch 256, one BLAS thread: 1.1 s for 2000 steps at T = 16, width 23
FCN_STEP_S = 5e-4
_PROBES = 11        # probes of a replicate's bisection (stage 0: doubling, then to rtol)


def estimate_cpu_s(cfg) -> dict:
    """The width parts' CPU seconds: the FCN's by the one cost model
    (:func:`stsim.core.cost.estimated_seconds`) per run plus ``FCN_STEP_S`` a step, times
    the runs a cell makes (the tuning rates, one extension, the seeds); the family's
    ``FAMILY_S_PER_TOKEN`` × samples × T × 2 (fit and held out) × replicates × ``_PROBES``
    per crossing, and the equality checks. ``{"fcn_model_s", "fcn_s", "runs",
    "family_s", "total_s"}``."""
    model, runs = 0.0, 0
    n = len(cfg["fcn_lrs"]) + (1 if cfg["fcn_lr_extra"] else 0) + cfg["fcn_seeds"]
    for c, base in fcn_cells(cfg):
        opts = dict(T=c["T"], q=c["q"], d=base["d"], steps=c["steps"], batch=base["batch"],
                    optimizer="adam", lr=1e-3, arch="fcn", width=c["width"])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model += n * estimated_seconds(Config.from_options(**opts).resolve())
        runs += n
    fcn = model + runs * cfg["fcn_steps"] * FCN_STEP_S
    n_own = len({"mean"} | {t for t in cfg["targets"] if family_kind(t) == "own"})
    n_eq = sum(family_kind(t) == "equal" for t in cfg["targets"])
    p = Precision.from_cfg(cfg)
    # the precision rule's stages at n_start and 4 n_start (most crossings stop there)
    fam = FAMILY_S_PER_TOKEN * 2 * (n_own * _PROBES * p.replicates * 5 * p.n_start
                                    * sum(cfg["fam_Ts"]) + n_eq * cfg["eq_n"] * sum(cfg["eq_Ts"]))
    return {"fcn_model_s": model, "fcn_s": fcn, "runs": runs, "family_s": fam,
            "total_s": fcn + fam}


def run(cfg, out, executor, part, say):
    """The width parts' raw tables (module docstring); ``part(name, fn, points, **kw)`` is
    the study's resumable sweep of one table."""
    q, d = cfg["q"], cfg["width_d"]
    est = estimate_cpu_s(cfg)
    say(f"width parts: estimated {est['total_s']:.0f} CPU-s (family {est['family_s']:.0f}, "
        f"FCN {est['fcn_s']:.0f}: {est['runs']} runs at most, cost model "
        f"{est['fcn_model_s']:.0f} s + {FCN_STEP_S:g} s a step)")
    own = _family_targets(cfg)
    prec = Precision.from_cfg(cfg)
    part("family_width", lambda target, T, level, seed: family_point(
        target, T, q, d, level, prec),
         # the longest first: the last point to start is a short one (the replicates' seeds
         # are the library's, from the family's key); each at reach·L_c in units of L(0)
         [dict(target=t, T=T, level=level(t, cfg)) for T in sorted(cfg["fam_Ts"],
                                                                    reverse=True)
          for t in own], seeds=1)
    mean_x = {r["T"]: r for r in made_with(raw_path(out, "family_width.csv"),
                                           made_by(cfg, "family_width"), ok=True)
              if r["target"] == "mean" and r["level"] == level("mean", cfg)}
    eq = [dict(target=t, T=T, d_e=int(round(mean_x[T]["d_e"])))
          for t in cfg["targets"] if family_kind(t) == "equal" for T in cfg["eq_Ts"]
          if T in mean_x and not mean_x[T]["censored"]]
    if eq:
        part("family_equal", lambda target, T, d_e, seed: equal_point(
            target, T, d_e, q, d, cfg["eq_n"], seed), eq, root_seed=FAM_ROOT)
    t = time.time()
    train_cells(fcn_cells(cfg), _sep_cfg(cfg), executor, raw_path(out, "fcn_tune.csv"),
                raw_path(out, "fcn_runs.csv"), say, time.perf_counter())
    return {"fcn": time.time() - t, "width_estimate_cpu_s": est}


def _family_targets(cfg) -> list:
    """The targets of the family's own crossings (the mean's always: the reference)."""
    own = [t for t in cfg["targets"] if family_kind(t) != "equal"]
    return (["mean"] if "mean" not in own else []) + own


def _rows(out, name, cfg):
    """The ``ok`` rows of table ``name`` made with ``cfg``: a family table's by its
    ``settings`` cell (each crossing of ``fam_Ts`` needed); an FCN table's by the arguments
    of its runs."""
    if name in MADE_BY:
        needed = [dict(target=t, T=T, level=level(t, cfg)) for t in _family_targets(cfg)
                  for T in cfg["fam_Ts"]] if name == "family_width" else []
        return made_with(raw_path(out, f"{name}.csv"), made_by(cfg, name), needed, ok=True)
    made = dict(q=cfg["q"], d=cfg["width_d"], batch=cfg["fcn_batch"], n_val=cfg["fcn_n_val"],
                steps=cfg["fcn_steps"])
    rates = {float(x) for x in (*cfg["fcn_lrs"], *cfg["fcn_lr_extra"])}
    return [r for r in read_rows(raw_path(out, f"{name}.csv"))
            if all(r.get(k) == v for k, v in made.items()) and float(r["lr"]) in rates
            and (name != "fcn_runs" or r["seed_index"] < cfg["fcn_seeds"])]


#: the check ``exponent op threshold`` of a fitted width law (:func:`stsim.studies.widths
#: .fit_check`)
_fit_check = wl.fit_check


def _ratio_check(label, T, dv, sv, dm, sm, tol):
    """``|b| <= tol`` for ``log2(d_v/d_m) = b log2 T + c`` (least squares; se of ``b`` the
    larger of the residuals' and the crossings' SEs propagated; ``n − 2`` df)."""
    claim = (f"{label}: its family width grows like the mean's (|exponent of "
             f"d_e*/d_e*(mean) in T| <= {tol:g})")
    if len(T) < 3:
        return judge(claim, math.nan, "<=", tol, math.nan, note=f"{len(T)} T values (< 3)")
    x, r = np.log2(T), np.log2(np.asarray(dv) / np.asarray(dm))
    v = (np.asarray(sv) / np.asarray(dv)) ** 2 + (np.asarray(sm) / np.asarray(dm)) ** 2
    v = v / math.log(2) ** 2                   # variance of r, log2 units
    X = np.column_stack([x, np.ones_like(x)])
    b, c = np.linalg.lstsq(X, r, rcond=None)[0]
    sxx = float(((x - x.mean()) ** 2).sum())
    res = r - (b * x + c)
    se = max(math.sqrt(float(res @ res) / (len(x) - 2) / sxx),
             math.sqrt(float((((x - x.mean()) / sxx) ** 2 * v).sum())))
    return dict(judge(claim, abs(b), "<=", tol, se, len(x) - 2,
                      note=f"exponent {b:+.3f} over T = {list(map(int, T))}"), slope=float(b))


def _both(label, parts):
    """The separation of a target: every part holds (:func:`stsim.util.verdict.all_of`)."""
    return all_of(f"{label}: separation (the transformer's width grows like the mean's "
                  f"while the FCN's grows at least linearly)", parts)


def analyse(cfg, out) -> dict:
    """The width parts' results from the raw tables alone: ``family`` (crossings per
    target), ``family_fits``, ``fcn`` (smallest widths per target and T), ``fcn_fits``,
    ``width_checks`` and ``separation`` (per target, lists of checks), ``family_levels``
    (every crossing of the raw table, by target and level in units of L(0)),
    ``fcn_construction`` (per target, the exact construction's width at each T, or None)."""
    q = cfg["q"]
    family, levels = {}, {}
    for r in sorted(_rows(out, "family_width", cfg), key=lambda r: r["T"]):
        row = {k: r[k] for k in ("T", "d_e", "se", "lo", "hi", "censored", "n", "precise",
                                 "replicates")}
        if r["target"] in _family_targets(cfg) and r["T"] in cfg["fam_Ts"] and \
                r["level"] == level(r["target"], cfg):
            family.setdefault(r["target"], []).append(row)
        levels.setdefault(r["target"], {}).setdefault(f"{r['level']:g}", []).append(row)
    fam_fits = {t: wl.fit_rows(ps, laws=FAMILY_LAWS) for t, ps in family.items()}
    eq = _rows(out, "family_equal", cfg) if any(
        family_kind(t) == "equal" for t in cfg["targets"]) else []
    checks, fcn, fcn_fits, sep = {}, {}, {}, {}
    mean = {p["T"]: p for p in family.get("mean", []) if not p["censored"]}
    # the equality rows at the mean's crossing of this level (a row at another d_e is
    # another level's)
    eq = [r for r in eq if r["T"] in mean and r["d_e"] == int(round(mean[r["T"]]["d_e"]))]
    for t in cfg["targets"]:
        kind, cs = family_kind(t), []
        if kind == "equal":
            cs = [dict(judge(f"{t}: its family L/L(0) is the mean's at T = {r['T']}, "
                             f"d_e = {r['d_e']} (|difference| <= {cfg['eq_tol']:g})",
                             abs(r["diff"]), "<=", cfg["eq_tol"], r["diff_se"],
                             note=f"{r['rel']:.4f} against the mean's {r['mean_rel']:.4f}, "
                                  f"paired, {cfg['eq_n']} samples"), T=r["T"])
                  for r in eq if r["target"] == t and r["T"] in cfg["eq_Ts"]]
            cs = cs or [judge(f"{t}: its family L/L(0) is the mean's", math.nan, "<=",
                              cfg["eq_tol"], math.nan, note="not measured")]
        elif kind == "own":
            ps = [p for p in family.get(t, []) if not p["censored"] and p["T"] in mean]
            cs = [_ratio_check(t, [p["T"] for p in ps], [p["d_e"] for p in ps],
                               [p["se"] for p in ps], [mean[p["T"]]["d_e"] for p in ps],
                               [mean[p["T"]]["se"] for p in ps], cfg["slope_tol"])]
        checks[t] = cs
    tune, runs = _rows(out, "fcn_tune", cfg), _rows(out, "fcn_runs", cfg)
    for k, t in enumerate(cfg["targets"]):
        ws_t = []
        for T in cfg["fcn_Ts"]:
            tr = [r for r in tune if r["task"] == t and r["T"] == T]
            if not tr and T > q:
                raise ValueError(f"raw/fcn_tune.csv has no row of target {t!r} at T = {T} "
                                 f"made with these settings: rerun without --analyse-only "
                                 f"to compute it")
            chosen = {w: pick_lr([r for r in tr if r["width"] == w], cfg["fcn_steps"])
                      for w in sorted({r["width"] for r in tr})}
            sel = [r for r in runs if r["task"] == t and r["T"] == T
                   and chosen.get(r["width"]) == r["lr"]]
            lost = sorted(set(chosen) - {r["width"] for r in sel})
            if lost:
                raise ValueError(f"raw/fcn_runs.csv has no row of target {t!r} at T = {T}, "
                                 f"width {lost[0]}, lr {chosen[lost[0]]:g} made with these "
                                 f"settings: rerun without --analyse-only to compute it")
            ws = sorted({r["width"] for r in sel})
            vals = [[np.nan if r["rel"] is None else r["rel"] for r in
                     sorted((r for r in sel if r["width"] == w), key=lambda r: r["seed_index"])]
                    for w in ws]
            if not ws or {len(v) for v in vals} != {cfg["fcn_seeds"]}:
                continue
            bt = wl.trained_width(ws, vals, level(t, cfg), cfg["n_boot"], [q, T, k])
            ws_t.append(dict(T=T, grid=ws, medians=[float(np.nanmedian(v)) for v in vals],
                             lr=[chosen[w] for w in ws], **bt))
        fcn[t] = ws_t
        fcn_fits[t] = wl.fit([w["T"] for w in ws_t],
                                 [w["grid"][-1] if w["censored"] else w["width"] for w in ws_t],
                                 [w["censored"] for w in ws_t], [w["below"] for w in ws_t])
        f_ck = _fit_check(t, fcn_fits[t], "the trained FCN's smallest width grows at least "
                          "linearly (power-law exponent >= 1)", ">=", 1.0)
        checks[t] = checks[t] + [f_ck]
        sep[t] = [_both(t, checks[t])]
    return {"family": family, "family_fits": fam_fits,
            # every crossing the raw table holds, by target and level in units of L(0)
            # (the mean's at 0.25: the softmax family every study quotes)
            "family_levels": levels, "fcn": fcn, "fcn_fits": fcn_fits,
            "width_checks": checks, "separation": sep,
            # the exact FCN construction's width (the mean's only); None: none in the code
            # (docs/targets.md, "The FCN side")
            "fcn_construction": {t: ({T: _fcn_construction_width(T, cfg["width_d"], q)
                                      for T in cfg["fcn_Ts"]}
                                     if make_target(t).paper else None)
                                 for t in cfg["targets"]}}


def _fcn_construction_width(T, d, q) -> int:
    """The hidden width of :func:`stsim.baselines.fcn.fcn_construction` (``2Td``)."""
    return int(fcn_construction(T, d, q)["W1"].shape[0])
