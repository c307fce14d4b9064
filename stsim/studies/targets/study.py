r"""``stsim targets``: does one attention layer represent, learn and generalise in length the
task's other targets (:mod:`stsim.core.targets`; docs/targets.md, "The study")?

For each target of ``targets`` at ``q``, three parts, each a table under ``raw/`` written by
:func:`stsim.sweep` (its journal makes a rerun compute only what is missing):

- **represents** (``raw/represents.csv``): the exact construction
  (:func:`stsim.core.constructions.construction`, the ideal attention) on ``n_batches``
  batches of 256 at ``rep_T``: its largest loss, judged ``< 1e-20``; for the variance also the best
  readout linear in the attended vector, fitted by least squares on ``n_fit`` samples
  (:func:`stsim.theory.targets.variance_linear_fit`), its held-out loss against the derived
  floor ``d(q−1)/q³`` (:func:`~stsim.theory.targets.variance_linear_floor`), judged within
  ``floor_tol`` of it on its SE.
- **learns** (``raw/tune.csv``, ``raw/runs.csv``): :func:`stsim.run` at ``T`` from its
  natural initialisation with the target's features, readout and default plan; the plan's
  step times each multiplier of ``mults`` on one tuning replicate (root seed
  ``TUNE_ROOT``) at the full budget (the plan's step count, the same for every
  multiplier), the lowest final val/L(0) chosen per target (ties to the larger), then
  ``seeds`` replicates at it: the seed mean of the final val/L_c judged ``≤ ratio`` on
  ``seeds − 1`` degrees of freedom. Every target is judged on one footing, ``L_c =
  ½E‖target − E target‖²``, the best constant output's loss
  (:meth:`~stsim.core.targets.Target.constant_loss`, :func:`.widths.footing`); it is ``L(0) =
  ½E‖target‖²`` where ``E target = 0`` (the mean, the moments) and ``2/(q+1)`` of it for
  the variance, whose val/L(0) each check records beside (``rel_zero``).
- **length generalisation**: the same runs (the default encoding is the stochastic one,
  its width ``d_e = 2 max(T, T_test)``, :func:`encoding_width`) evaluated at each
  ``T_test``: the seed mean of val/L_c judged ``≤ ratio``.
- **widths** (:mod:`stsim.studies.targets.widths`; ``raw/family_width.csv``,
  ``raw/family_equal.csv``, ``raw/fcn_tune.csv``, ``raw/fcn_runs.csv``): the transformer's
  sphere-family width and the trained FCN's smallest width reaching ``reach``·L_c against
  T per target, their growth laws, and the separation per target.
"""
from __future__ import annotations

import math
import os
import time

import numpy as np

import stsim
from stsim.core.config import Config
from stsim.core.constructions import construction
from stsim.core.encodings import PEBatch
from stsim.core.model import forward_backward
from stsim.core.reduced import LEARNED
from stsim.core.targets import Variance, make_target
from stsim.studies.cells import made_with, stamped
from stsim.studies.targets import widths
from stsim.studies.targets.settings import made_by
from stsim.studies.tuning import at_chosen, choose as choose_by, run_measures, seed_stats
from stsim.sweeps import sweep
from stsim.util.io import read_json, write_json
from stsim.util.validate import Steps, check_int, check_real
from stsim.util.verdict import judge

__all__ = ["NAME", "PRESETS", "check", "run", "analyse", "report", "represents",
           "represents_checks", "encoding_width", "train_one", "choose"]

NAME = "targets"
TUNE_ROOT = 1          # root seed of the tuning replicate (the reported seeds: root 0)
EXACT_LOSS = 1e-20     # the construction's loss is below it
_COMMON = dict(targets=("mean", "moment:2", "moment:3", "variance"), q=3, d=5, batch=256,
               mults=(0.25, 0.5, 1.0, 2.0), ratio=LEARNED, rep_T=8, n_batches=3,
               floor_tol=0.02)
PRESETS = {"quick": dict(_COMMON, mode="quick", T=20, steps=300, seeds=2,
                         T_test=(25, 30, 40), n_fit=50_000, **widths.QUICK),
           "full": dict(_COMMON, mode="full", T=200, steps=0, seeds=3,
                        T_test=(250, 300, 400), n_fit=200_000, **widths.FULL)}

EPILOG = ("writes raw/represents.csv, raw/tune.csv, raw/runs.csv, raw/family_width.csv,\n"
          "raw/family_equal.csv, raw/fcn_tune.csv, raw/fcn_runs.csv (a rerun with the same\n"
          "--out resumes) and raw/run.json, then targets.json (every check with se,\n"
          "critical, verdict), report.md, represents.png/.csv, learns.png with curves.csv,\n"
          "length.png/.csv, widths.png/.csv (--analyse-only: from raw/)\n"
          "examples: stsim targets                       # quick, T = 20\n"
          "          stsim targets --full --out docs/figures/targets")

HELP = {"targets": "targets: mean, moment:k, variance", "T": "training length",
        "q": "subset size", "d": "token dimension", "batch": "batch size",
        "mults": "multipliers of each target's default step tried on the tuning seed",
        "ratio": "learns: final val <= ratio L_c (the best constant output's loss)",
        "rep_T": "length of the constructions",
        "n_batches": "batches of 256 on which a construction is evaluated",
        "floor_tol": "the variance's linear fit within floor_tol of its floor",
        "steps": "steps of every run (0: the plan's default)", "seeds": "seeds per target",
        "T_test": "lengths of evaluation (<= 2T)",
        "n_fit": "samples of the variance's least-squares fit (and as many held out)",
        **widths.HELP}


def console(summary) -> list:
    """What ``stsim targets`` prints: its side-by-side table, a row per target."""
    return [" | ".join(row) for row in summary["table"]]


def check(cfg):
    """Every setting validated (``ValueError`` naming it) before any work."""
    for t in cfg["targets"]:
        if not isinstance(t, str):      # the tables' column: a built-in target's label
            raise ValueError(f"targets must hold names ('mean', 'moment:k', 'variance'), "
                             f"got {t!r}")
    # one spelling a target: its label (the tables' column), so MOMENT:3 is moment:3
    labels = [make_target(t).label for t in cfg["targets"]]
    if not labels or len(set(labels)) != len(labels):
        raise ValueError(f"targets must hold distinct targets, got {cfg['targets']}")
    cfg["targets"] = type(cfg["targets"])(labels)
    T = check_int("T", cfg["T"], 3)
    check_int("q", cfg["q"], max(make_target(t).min_q for t in labels), T - 1)
    check_int("rep_T", cfg["rep_T"], cfg["q"] + 1)
    for key, lo in (("d", 1), ("batch", 1), ("steps", 0), ("seeds", 2), ("n_batches", 1),
                    ("n_fit", 1000)):
        check_int(key, cfg[key], lo)
    check_real("ratio", cfg["ratio"], lo=0.0, hi=1.0, lo_open=True)
    check_real("floor_tol", cfg["floor_tol"], lo=0.0, hi=1.0, lo_open=True)
    if not cfg["mults"] or any(not (m > 0 and math.isfinite(m)) for m in cfg["mults"]):
        raise ValueError(f"mults must be finite numbers > 0, got {cfg['mults']}")
    if len(set(cfg["mults"])) != len(cfg["mults"]):
        raise ValueError(f"mults must hold distinct multipliers, got {list(cfg['mults'])}")
    for Tt in cfg["T_test"]:
        check_int("T_test", Tt, cfg["q"] + 1, 2 * T)    # at most twice the training T
    for t in labels:        # each run fits (its memory, its options), before any work
        try:
            Config(T=T, q=cfg["q"], d=cfg["d"], batch=cfg["batch"], T_test=tuple(cfg["T_test"]),
                   target=t, **({"steps": cfg["steps"]} if cfg["steps"] else {})).resolve()
        except ValueError as exc:
            raise ValueError(f"targets: the run of {t} (T, d, batch, T_test): {exc}") from None
    return widths.check(cfg)


def _raw(out, name):
    return os.path.join(out, "raw", name)


def represents(target, T, q, d, n_batches, n_fit, seed):
    """A row of ``raw/represents.csv`` (module docstring); ``fit``/``fit_se`` NaN for a
    target other than the variance."""
    from stsim.theory.targets import variance_linear_fit
    t = make_target(target)
    rng = np.random.default_rng(seed)
    p = construction(t, d, T)
    head = {"b": p["b"], "Q": p["Q"]} if "Q" in p else None
    loss = 0.0
    for _ in range(n_batches):
        b = t.draw(rng, 256, T, q, d, features=True)
        loss = max(loss, float(forward_backward(
            p["W"], p["V"], b.X, b.y, PEBatch(d_e=T, idx=np.arange(T)), target=b.target,
            readout=head, need_grad=False)[0]))
    fit, se = (variance_linear_fit(T, q, d, n_fit, seed=seed) if isinstance(t, Variance)
               else (math.nan, math.nan))
    return {"construction_loss": loss, "fit": fit, "fit_se": se}


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


def _resolved(target, T, q, d, batch, T_test):
    """The resolved config of the study's run of ``target`` at its defaults (the one place
    its plan and its encoding are decided)."""
    return Config(T=T, q=q, d=d, batch=batch, T_test=tuple(T_test),
                  target=target).resolve().resolved


def _base(target, T, q, d, batch, T_test):
    """``(lr, freeze, steps)`` of the target's default plan at this config."""
    plan = _resolved(target, T, q, d, batch, T_test).plan
    return plan.lr.record(), plan.freeze, plan.steps


def encoding_width(cfg) -> int:
    """The width ``d_e`` of the runs' default encoding at this config (the same for every
    target)."""
    return int(_resolved("mean", *(cfg[k] for k in ("T", "q", "d", "batch", "T_test")))
               .encoding.d_e)


def train_one(target, T, q, d, batch, steps, T_test, mult, seed):
    """One run (a row of ``raw/tune.csv`` or ``raw/runs.csv``): the final val/L(0) at
    ``T`` and at each ``T_test`` (``inf`` when not completed), the status, the steps, CPU
    time and the validation curve (JSON). ``steps`` 0: the default plan's count at
    multiplier 1 (the same budget at every multiplier; a plan given a step of its own
    would scale its count with it)."""
    lr, freeze, default_steps = _base(target, T, q, d, batch, T_test)
    t0 = time.process_time()
    res = stsim.run(T=T, q=q, d=d, batch=batch, T_test=tuple(T_test), target=target,
                    seed=seed, progress=False, lr=Steps(lr).scaled(mult).record(),
                    steps=steps or default_steps,
                    **({"freeze": tuple(freeze)} if freeze else {}))
    return {"run_status": res.status, "steps": int(res.config["steps"]),
            **run_measures(res, make_target(target).zero_loss(d, q), T_test, t0)}


def choose(rows, mults=None) -> dict:
    """``{target: multiplier}`` from the tuning rows at ``mults``
    (:func:`stsim.studies.tuning.choose`)."""
    return choose_by(rows, "target", mults)


def run(cfg, out, executor, log=None):
    """The three tables under ``raw/`` (module docstring), each a resumable sweep."""
    os.makedirs(os.path.join(out, "raw"), exist_ok=True)
    say, walls, t0 = log or (lambda msg: None), {}, time.time()
    c = {k: cfg[k] for k in ("T", "q", "d", "batch", "steps")}
    c["T_test"] = tuple(cfg["T_test"])

    def part(name, fn, points, **kw):
        t = time.time()
        fn, points = stamped(fn, points, made_by(cfg, name))
        sweep(fn, points, executor=executor, out=_raw(out, f"{name}.csv"), **kw)
        walls[name] = time.time() - t
        say(f"{name}: {walls[name]:.1f}s")

    part("represents", lambda target, seed: represents(
        target, cfg["rep_T"], cfg["q"], cfg["d"], cfg["n_batches"], cfg["n_fit"], seed),
         {"target": list(cfg["targets"])})
    part("tune", lambda target, mult, seed: train_one(target, mult=mult, seed=seed, **c),
         {"target": list(cfg["targets"]), "mult": list(cfg["mults"])}, root_seed=TUNE_ROOT)
    mults = choose(made_with(_raw(out, "tune.csv"), made_by(cfg, "tune")), cfg["mults"])
    # the chosen multiplier is part of each run's point: another choice reruns the runs
    part("runs", lambda target, mult, seed: train_one(target, mult=mult, seed=seed, **c),
         [{"target": t, "mult": mults[t]} for t in cfg["targets"]], seeds=cfg["seeds"])
    more = widths.run(cfg, out, executor, part, say)
    walls["fcn"] = more.pop("fcn")
    write_json(_raw(out, "run.json"), {"wall_time_s": time.time() - t0,
                                       "wall_time_parts_s": walls, "mults": mults,
                                       "load_avg": list(os.getloadavg()), **more})


def analyse(cfg, out):
    """The checks of every part, from the tables under ``raw/`` alone. A run that raised
    (its row's ``status``) leaves its target's checks of that part inconclusive (measured
    NaN, the error in the note) and is listed in ``errors``."""
    ts = cfg["targets"]

    def table(name, needed):        # the rows made with these settings; each needed one
        return made_with(_raw(out, f"{name}.csv"), made_by(cfg, name), needed)
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


def _cause(t, results) -> str:
    """Why the learns check of target ``t`` has no finite value."""
    n = sum(w.startswith(f"{t} seed ") for w in results["diverged"])
    if n:
        return f"{n} of its runs diverged at multiplier {results['mults'].get(t)}"
    if any(e.startswith(f"runs: {t} ") for e in results["errors"]):
        return "a run raised"
    return "its value is not finite"


def report(cfg, out, results):
    """``targets.json`` (every check with se, critical and verdict; the config; the run
    record), ``represents.png``/``.csv``, ``learns.png`` with ``curves.csv``,
    ``length.png``/``.csv``, ``widths.png``/``.csv``, ``report.md``; returns the summary."""
    from stsim.studies.contract import divergence
    rec = _raw(out, "run.json")
    record = read_json(rec, "run record") if os.path.isfile(rec) else {}
    n_runs = len(cfg["targets"]) * cfg["seeds"]
    div = divergence(results["diverged"], n_runs,
                     [f"learns: {t} ({_cause(t, results)})" for t in cfg["targets"]
                      if not np.isfinite(results["learns"][t][0]["measured"])]
                     + [f"a run raised: {e}" for e in results["errors"]])
    summary = dict(results, **div, record=record, config=dict(cfg))
    # the figures' module (matplotlib) only where they are written, as in the other studies
    from stsim.studies.targets.outputs import write_outputs
    return write_outputs(cfg, out, summary, encoding_width(cfg))
