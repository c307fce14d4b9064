r"""Expressivity experiments: explicit attention constructions and their width laws.

``stsim expressivity [--quick|--full] [--only a,b] [--workers N] --out DIR`` runs six
parts (:mod:`~stsim.studies.expressivity.parts`; what each measures: its module, and
docs/expressivity.md): ``curves``, ``width``, ``seq2seq``, ``trained``, ``patterns``,
``jl``. Each part's heavy loop is one or two resumable :func:`stsim.sweep` over its points
into raw tables ``DIR/raw/<table>.csv`` on the executor the caller passes (an interrupted
run keeps every finished point); the analysis reads those tables alone
(``--analyse-only``) and each part writes ``<part>.csv``, ``<part>.png`` and
``<part>.json``, then ``expressivity.json``.

The constructions are in :mod:`~stsim.studies.expressivity.qsa` and
:mod:`~stsim.studies.expressivity.patterns`. A trained run that diverges leaves the
trained part's numbers unmeasured (:func:`stsim.studies.contract.divergence`).

Every random number comes from ``SeedSequence((seed, …))`` keyed by the point's sizes,
so a part's numbers do not depend on which other parts ran, nor on the executor or the
order of the points (the sweep's own replicate seed is not used).
"""
from __future__ import annotations

import os
import time

import numpy as np

from stsim.studies.contract import divergence
from stsim.studies.expressivity import patterns as pt
from stsim.studies.expressivity.checks import checks as part_checks
from stsim.studies.expressivity.common import (design_results, load_run_record, raw_table,
                                               rng_of, update_run_record)
from stsim.studies.expressivity.memory import check_part_memory
from stsim.studies.expressivity.parts import curves, jl, patterns, seq2seq, trained, width
from stsim.studies.expressivity.parts.patterns import predicted_d, search_pattern_dim
from stsim.studies.expressivity.parts.width import predicted_m, search_width
from stsim.sweeps import sweep
from stsim.util.io import atomic_write, write_json
from stsim.util.validate import check_int
from stsim.util.verdict import checks_table, summary_line

__all__ = ["NAME", "PRESETS", "PARTS", "QUICK", "FULL", "check", "run", "analyse", "report",
           "predicted_m", "predicted_d", "search_width", "search_pattern_dim", "part_module",
           "write_overview"]

NAME = "expressivity"
PARTS = ("curves", "width", "seq2seq", "trained", "patterns", "jl")

_LAMS = tuple(np.geomspace(0.5, 300.0, 36))

QUICK = {
    "curves": dict(N=256, qs=(2, 4), ms=(8, 16, 32, 64, 128, 256), n_inputs=100, d=5,
                   eps=0.1, gamma=0.5, lams=_LAMS, families=("sphere", "rademacher"),
                   m_lam=64),
    "width": dict(Ns=(64, 256, 1024), qs=(1, 2, 4), n_inputs=100, eps=0.1, gamma=0.5,
                  m_max=2048, families=("sphere",), sum_qs=(4,), sum_eps=0.5, lams=_LAMS,
                  sum_m_max=2048, reps=1),
    "seq2seq": dict(Ns=(64, 256), q=3, ms=(16, 32, 64, 128, 256), eps=0.1, gamma=0.5,
                    lams=_LAMS, d=5),
    "trained": dict(T=20, q=3, d=5, d_es=(16,), steps=200, batch=64, lr=1.0, n_val=512,
                    lams=tuple(np.geomspace(0.25, 60.0, 40))),
    "patterns": dict(Ls=(64, 128, 256), k=4, targets=pt.TARGETS, ks=(2, 4), eps_off=0.01,
                     tol=0.01, d_max=2048, reps=1),
    "jl": dict(Ls=(32, 64, 128), k=4, tol=1.0, eps_off=0.1, tau_slack=2.0, d_max=8192,
               fixed_tau=5.0, ratio_tols=(1.0, 2.0), ratio_Ls=(32, 64, 128)),
}
FULL = {
    "curves": dict(N=1024, qs=(2, 4, 8), ms=(8, 16, 32, 64, 128, 256, 512, 1024, 2048),
                   n_inputs=1000, d=5, eps=0.1, gamma=0.5, lams=_LAMS,
                   families=("sphere", "rademacher"), m_lam=256),
    "width": dict(Ns=(64, 256, 1024, 4096, 16384), qs=(1, 2, 4, 8), n_inputs=1000, eps=0.1,
                  gamma=0.5, m_max=4096, families=("sphere", "rademacher"), sum_qs=(4,),
                  sum_eps=0.5, lams=_LAMS, sum_m_max=8192, reps=4,
                  sum_reps=2, sum_n_inputs=300),
    "seq2seq": dict(Ns=(128, 512, 2048), q=3, ms=(16, 32, 64, 128, 256, 512, 1024), eps=0.1,
                    gamma=0.5, lams=_LAMS, d=5),
    "trained": dict(T=64, q=3, d=5, d_es=(32, 128), steps=3000, batch=128, lr=1.0,
                    n_val=2048, lams=tuple(np.geomspace(0.25, 60.0, 60))),
    "patterns": dict(Ls=(64, 128, 256, 512, 1024, 2048, 4096), k=4, targets=pt.TARGETS,
                     ks=(2, 4, 8), eps_off=0.01, tol=0.01, d_max=8192, reps=4),
    "jl": dict(Ls=(32, 64, 128, 256, 512, 1024, 2048, 4096), k=4, tol=1.0, eps_off=0.1,
               tau_slack=2.0, d_max=16384, fixed_tau=5.0, ratio_tols=(0.5, 1.0),
               ratio_Ls=(64, 256, 1024, 4096), reps=4, rel=0.02),
}

# the presets of the contract: one dict per part, the root seed, the parts to run
# (``--only``); ``mode`` (reserved by the contract) names the preset in the outputs
PRESETS = {"quick": dict(QUICK, seed=0, only=PARTS, mode="quick"),
           "full": dict(FULL, seed=0, only=PARTS, mode="full")}

EPILOG = ("every part sweeps its points into raw/<table>.csv (resumable; --workers N runs\n"
          "them on N processes), then writes <part>.csv, <part>.png and <part>.json, and\n"
          "expressivity.json; part settings: --set width.eps=0.05 (dotted keys)\n"
          "examples: stsim expressivity                    # seconds\n"
          "          stsim expressivity --full --only width,patterns --out DIR\n"
          "          stsim expressivity --full --out DIR --analyse-only")

HELP = {"seed": "root seed of every part", "only": "the parts to run, a comma list"}

#: the help of ``--workers`` (the parts' points run on the workers)
WORKERS_HELP = ("worker processes for the points of each part, one BLAS thread each "
                "(default: 2); 0 or 1 runs in this process")


def console(summary) -> list:
    """What ``stsim expressivity`` prints: the wall time of each part and the incomplete
    ones."""
    times = ", ".join(f"{k} {v:.1f}s" if v is not None else f"{k} (no run record)"
                      for k, v in summary["part_wall_time_s"].items())
    how = (" (analysed only; the parts' times are their runs')" if summary["analyse_only"]
           else "")
    return [f"expressivity{how}: {times}"] + [
        f"  {name}: incomplete (points missing from raw/)" for name in summary["incomplete"]]

_MODULES = dict(zip(PARTS, (curves, width, seq2seq, trained, patterns, jl)))
_rng = rng_of   # the generator of a point (tests build the same targets)


def part_module(name):
    """The module of part ``name`` (``ValueError`` naming the parts otherwise)."""
    if name not in _MODULES:
        raise ValueError(f"only must name parts from {PARTS}, got {name!r}")
    return _MODULES[name]


def check(config):
    """Validate the root ``seed``, the parts in ``only`` and every setting of those parts
    (``ValueError`` naming it), before any work."""
    cfg = dict(config)
    check_int("seed", cfg["seed"], 0)
    only = list(cfg["only"])
    if not only:
        raise ValueError(f"only must name at least one part from {PARTS}")
    for name in only:
        part_module(name)
    if len(set(only)) != len(only):
        raise ValueError(f"only must name each part once, got {only}")
    for name in only:
        part_module(name).check(cfg[name])
    for name in only:                   # sizes beyond the machine, before any work
        check_part_memory(name, cfg[name])
    cfg["only"] = tuple(only)
    return cfg


def run(config, out, executor, log=None) -> None:
    """Run the parts in ``only``: every sweep of a part on ``executor``, its points
    submitted dearest first where the part says so, into ``<out>/raw/<table>.csv``
    (resumable); a failed point stops the study (``RuntimeError``). The run record
    (per part: ``wall_time_s``, ``n_run``, ``workers``) goes to ``<out>/raw/run.json``."""
    say = log or (lambda m: None)
    workers = getattr(executor, "_max_workers", 1)
    for name in config["only"]:
        mod, cfg = _MODULES[name], config[name]
        t0, n_run = time.perf_counter(), 0
        for table, points in mod.design(cfg, config["seed"]).items():
            def progress(done, total, rec, _t=table):
                say(f"{_t}: {mod.describe(rec['point'], rec['result'])} ({done}/{total}, "
                    f"{rec['time_s']:.1f}s)" if rec["status"] == "ok" else
                    f"{_t}: FAILED at {rec['point']}: {rec['error']}")
            res = sweep(getattr(mod, f"{table}_point"), points, seeds=1, executor=executor,
                        out=raw_table(out, table), progress=progress)
            bad = [r for r in res.rows if r["status"] != "ok"]
            if bad:
                raise RuntimeError(f"{table} failed: {bad[0]['error']}")
            n_run += res.n_run
        seconds = time.perf_counter() - t0
        update_run_record(out, name, workers, seconds, n_run)
        say(f"{name}: {seconds:.1f}s, {n_run} points computed now")


def analyse(config, out) -> dict:
    """Per part in ``only``: its rows and fits from the raw tables alone (JSON-ready), or
    ``None`` when some point of its design is missing (an incomplete part)."""
    results, where, total, unmeasured = {}, [], 0, []
    for name in config["only"]:
        mod, cfg = _MODULES[name], config[name]
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


def report(config, out, results) -> dict:
    """Each complete part writes its CSV, PNG and JSON; then ``expressivity.json``
    (:func:`write_overview`: ``mode``, ``seed``, ``parts``, per-part ``wall_time_s`` of the
    run that computed its points, ``summaries``, the ``incomplete`` parts, the
    ``checks``). Returns that overview, with the
    per-part times also as ``part_wall_time_s`` (the driver puts the command's total in
    ``wall_time_s``)."""
    record = load_run_record(out).get("parts", {})
    summaries, times, incomplete = {}, {}, []
    for name in config["only"]:
        if results[name] is None:
            incomplete.append(name)
            continue
        times[name] = record.get(name, {}).get("wall_time_s")
        summaries[name] = _MODULES[name].write(config[name], config["seed"], out,
                                               results[name], wall_time_s=times[name])
    overview = write_overview(config, out, summaries, times, incomplete,
                              {k: results[k] for k in ("diverged", "unmeasured") if k in results})
    return dict(overview, part_wall_time_s=times)


def write_overview(config, out, summaries, times, incomplete, extra=None) -> dict:
    """Write ``expressivity.json``: ``mode``, ``seed``, ``parts``, per-part ``wall_time_s``,
    ``summaries``, the ``incomplete`` parts, ``extra`` (diverged / unmeasured) and the
    ``checks`` of the complete parts, judged from the tables they wrote in ``out``
    (:mod:`~stsim.studies.expressivity.checks`), and ``report.md``, their table. Returns
    it."""
    done = [p for p in config["only"] if p not in incomplete]
    overview = {"mode": config.get("mode"), "seed": config["seed"],
                "parts": list(config["only"]), "wall_time_s": times, "summaries": summaries,
                "incomplete": incomplete, **(extra or {}), "checks": part_checks(out, done)}
    write_json(os.path.join(out, "expressivity.json"), overview)
    with atomic_write(os.path.join(out, "report.md"), "w") as fh:
        fh.write("\n".join([f"# Expressivity: checks ({config.get('mode')} run, parts "
                            f"{', '.join(done)})", "", summary_line(overview["checks"]), ""]
                           + checks_table(overview["checks"], ("part",))) + "\n")
    return overview
