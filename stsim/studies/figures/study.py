"""The figures study on the study contract (:mod:`stsim.studies.contract`).

Config (``PRESETS["quick"]`` / ``PRESETS["full"]``, overridden with ``--set
<figure>.<key>=<value>``)::

    {"mode": "quick" | "full",          # the preset's name: labels every output
     "only": ["fig1", ..., "claims"],   # the figures to make (--only)
     "fig1": {...}, "fig2": {...}, "fig3": {...}, "fig5": {...},
     "beyond": {...}, "claims": {...}}  # each figure's SETTINGS[mode]

:func:`check` resolves what figures share: ``fig4`` takes the settings of ``fig2`` (its
``GROUP``: the same runs), and ``beyond`` / ``claims`` take the settings of the figures
they compare (their ``LINKS``), so ``--set fig2.lr=3`` changes Figs. 2 and 4 and the
linked parts of the others. It then builds every run and validates its options
(:meth:`stsim.Config.from_options`) before any work.

:func:`run` trains every run of the selected figures once, longest first, as the rows of
one :func:`stsim.sweep` into ``<out>/runs/jobs.csv`` (:func:`.common.train_job`; resumed
and never reused: docs/reproduction.md, "How to run"), drawing each figure as soon as its
runs are in; ``<out>/runs/run.json`` records the workers and the wall time of the run step.

:func:`analyse` rebuilds every figure's numbers from the ``.npz`` files alone (a figure
whose runs are missing is left out and named); :func:`report` draws ``<fig>.png`` and
writes ``<fig>.csv`` (every history), ``<fig>.json`` (settings, the resolved config of
every run, measured numbers, claim checks), ``figures.json`` (wall time: the run step
plus this analysis; peak memory; every check) and ``blocks.csv`` (every run's evaluation
block means, from which every final estimate and its SE are recomputed: :mod:`.blocks`).
"""
from __future__ import annotations

import copy
import functools
import json
import os
import time

from stsim.util.io import read_json, write_csv, write_json
from stsim.util.validate import check_choice, check_int
from stsim.sweeps import sweep
from stsim.sweeps.grid import point_key
from stsim.sweeps.journal import journal_path, load_journal
from stsim.studies.contract import MODES
from stsim.studies.figures.common import FIGURES, NAME
from stsim.studies.figures.common import (Job, figure_jobs, figure_module, load_current,
                                          load_runs, npz_path, peak_rss_mb, runs_dir,
                                          summarise, train_job, unique_jobs,
                                          write_histories_csv)
from stsim.studies.figures.blocks import COLUMNS as BLOCK_COLUMNS, FILE as BLOCKS, block_rows
from stsim.studies.figures.evaluate import evaluation_stats
from stsim.studies.figures.stability import above_bound
from stsim.studies.figures.verdicts import relabel, verdict_counts
from stsim.util.verdict import check_line

__all__ = ["NAME", "FIGURES", "PRESETS", "HELP", "EPILOG", "check", "run", "analyse",
           "report", "console"]

TABLE = "jobs.csv"          # the sweep table of the runs, in <out>/runs
SESSION = "run.json"        # workers and wall time of the last run step, in <out>/runs
# (folder, figure) -> the summary (JSON text) whose files run() wrote in this process:
# report() does not write the same files twice
_WRITTEN: dict = {}


def _preset(mode) -> dict:
    cfg = {"mode": mode, "only": list(FIGURES)}
    for n in FIGURES:
        mod = figure_module(n)
        if hasattr(mod, "GROUP"):          # fig4: fig2's settings, filled by check
            continue
        s = copy.deepcopy(mod.SETTINGS[mode])
        for key in getattr(mod, "LINKS", {}):
            s.pop(key, None)               # filled by check from the linked figure
        cfg[n] = s
    return cfg


PRESETS = {m: _preset(m) for m in MODES}
#: the help of the top-level settings (the options of ``stsim figures``; the figures' own
#: settings are nested: ``--set fig2.lr=3``)
HELP = {"only": f"comma-separated subset of {','.join(FIGURES)} (fig4 shares the runs and "
                "settings of fig2)"}
#: the command's epilog
EPILOG = ("examples: stsim figures                      # all figures, small problem "
          "(seconds)\n"
          "          stsim figures --full --only fig2,fig4 --set fig2.lr=3\n"
          "          stsim figures --out runs/figures-quick --analyse-only   # redraw only\n"
          "          stsim figures --report docs/figures   # tables of a finished run")


def console(summary) -> list:
    """What ``stsim figures`` prints: every figure's checks, one line each
    (:func:`stsim.util.verdict.check_line`), and the figures not drawn."""
    out = []
    for s in summary["summaries"].values():
        out.append(f"== {s['figure']} ({s['mode']})")
        out += ["  " + check_line(c) for c in s["checks"]]
    for fig, runs in summary["missing"].items():
        out.append(f"== {fig}: NOT drawn, runs missing: "
                   + "; ".join(f"{name} ({why})" for name, why in runs.items()))
    return out


def _link(cfg, fig, key, src):
    """Set ``cfg[fig][key]`` (``key`` None: ``cfg[fig]``) to a copy of ``cfg[src]``; a value
    already there that differs is refused (the two share runs)."""
    target, name = (cfg, fig) if key is None else (cfg[fig], key)
    value = copy.deepcopy(cfg[src])
    if name in target and target[name] != value:
        where = fig if key is None else f"{fig}.{key}"
        raise ValueError(f"{where} takes the settings of {src} (shared runs): set {src}.<key> "
                         f"instead")
    target[name] = value


def _check_seeds(where, settings) -> None:
    """Every ``seeds`` setting in ``settings`` (nested dicts too) is a non-empty list of
    whole numbers >= 0: a figure's verdicts need a seed to stand on (``seeds=[]`` ran
    the other figures for minutes, then failed in the verdicts)."""
    for key, value in settings.items():
        if isinstance(value, dict):
            _check_seeds(f"{where}.{key}", value)
        elif key == "seeds":
            if not isinstance(value, (list, tuple)) or not value:
                raise ValueError(f"{where}.seeds must be a non-empty list of seeds, got "
                                 f"{value!r}")
            for s in value:
                check_int(f"{where}.seeds", s, 0)


def check(config) -> dict:
    """Validate ``config`` and resolve the shared settings (module docstring); every run's
    options are validated (``ValueError`` naming the figure, the run and the option) and
    two runs of one name with different options are refused, before any work."""
    cfg = copy.deepcopy(dict(config))
    check_choice("mode", cfg.get("mode"), MODES)
    only = cfg.get("only")
    only = [only] if isinstance(only, str) else list(only or ())
    if not only:
        raise ValueError(f"only must name at least one figure of {FIGURES}")
    for n in only:
        if n not in FIGURES:
            raise ValueError(f"only: unknown figure {n!r}; choose from {FIGURES}")
    cfg["only"] = list(dict.fromkeys(only))
    for n in FIGURES:
        group = getattr(figure_module(n), "GROUP", None)
        if group is not None:
            _link(cfg, n, None, group)
        elif not isinstance(cfg.get(n), dict):
            raise ValueError(f"the settings of {n} are missing (a dict under {n!r})")
    for n in FIGURES:
        for key, src in getattr(figure_module(n), "LINKS", {}).items():
            _link(cfg, n, key, src)
    for n in cfg["only"]:
        _check_seeds(n, cfg[n])
        if not figure_module(n).jobs(cfg[n]):
            raise ValueError(f"{n}: its settings give no runs; a figure needs at least one")
        for j in figure_module(n).jobs(cfg[n]):  # before their twins: a bound needs a config
            try:
                j.estimated_seconds()                # Config.from_options: validates
            except ValueError as exc:
                raise ValueError(f"{n}: run {j.name}: {exc}") from None
    unique_jobs(cfg)
    return cfg


def _still_current(rec, runs):
    """Sweep ``keep``: a finished row stands while its file holds its config's result."""
    return load_current(runs, Job.from_point(rec["point"])) is not None


def _finished(table, jobs, runs) -> set:
    """The names of ``jobs`` the sweep into ``table`` will skip: finished in its journal,
    and still current (:func:`_still_current`)."""
    records = load_journal(journal_path(table))
    return {j.name for j in jobs if (rec := records.get((point_key(j.point()), 0)))
            is not None and rec["status"] == "ok" and _still_current(rec, runs)}


def _label(checks, twin_checks, options, results):
    """The checks (or cells) relabelled (:mod:`stsim.studies.figures.stability`,
    :func:`.verdicts.relabel`):
    unstable where a run they use is above its step bound, or where the check computed with
    the twins in place of their originals has another verdict; inconclusive where
    unmeasured (a run diverged: named in ``why``)."""
    out = []
    for k, c in enumerate(checks):
        why = [w for r in c.get("runs", ()) if r in options and (w := above_bound(options[r]))]
        if twin_checks is not None:
            t = twin_checks[k]
            if t["claim"] == c["claim"] and t["verdict"] != c["verdict"]:
                why.append(f"unstable: the verdict changes from {c['verdict']} to "
                           f"{t['verdict']} when the lr moves by one unit in the last place "
                           f"(measured {c['measured']:.4g} vs {t['measured']:.4g})")
        c = relabel(c, why[0] if why else None)
        if c["unmeasured"]:
            div = [r for r in c.get("runs", ()) if r in results
                   and results[r].status != "completed"]
            c["why_unmeasured"] = (f"runs did not complete: {div}" if div
                                   else "not finite")
        out.append(c)
    return out


def _figure(config, name, results):
    """The summary of figure ``name`` from ``results`` (``{run name: Result}``): its
    checks (and the claims map's cells) labelled for stability (:func:`_label`; the
    figure is measured again with each twin in place of its original), its diverged runs
    and its unmeasured checks."""
    mod, s = figure_module(name), config[name]
    js = mod.jobs(s)
    measured, checks = mod.measure(s, results)
    pairs = {j.name: t.name for j, t in ((j, j.twin()) for j in js) if t.name in results}
    tm, tc = None, None
    if pairs:
        alt = dict(results)
        alt.update({n: results[t] for n, t in pairs.items()})
        tm, tc = mod.measure(s, alt)
    options = {j.name: j.options for j in js}
    checks = _label(checks, tc, options, results)
    if "cells" in measured:
        measured["cells"] = _label(measured["cells"], tm and tm["cells"], options, results)
    names = [j.name for j in js] + list(pairs.values())
    runs = {n: results[n] for n in names if n in results}
    summary = summarise(name, s, config["mode"], runs, checks, measured)
    summary["twins"] = pairs
    summary["diverged"] = sorted(n for n, r in runs.items() if r.status != "completed")
    summary["unmeasured"] = [c["claim"] for c in checks if c["unmeasured"]]
    return summary


def _write(config, out, name, results, summary):
    """Draw figure ``name`` and write its ``.csv`` (histories) and ``.json`` (summary)."""
    mod, s = figure_module(name), config[name]
    os.makedirs(out, exist_ok=True)
    mod.draw(s, results, summary["measured"], out)
    runs = {j.name: results[j.name] for j in mod.jobs(s) if j.name in results}
    write_histories_csv(os.path.join(out, f"{name}.csv"), runs)
    write_json(os.path.join(out, f"{name}.json"), summary)


def run(config, out, executor, log=None) -> None:
    """Train every run of the selected figures (module docstring) on ``executor``; draw
    each figure as soon as its runs are in. ``log``: callable(str) or None."""
    t0 = time.perf_counter()
    say = log or (lambda msg: None)
    runs = runs_dir(out)
    os.makedirs(runs, exist_ok=True)
    per_fig = figure_jobs(config)
    needs = {n: {j.name for j in js} for n, js in per_fig.items()}
    order = sorted(unique_jobs(config), key=Job.estimated_seconds, reverse=True)
    table = os.path.join(runs, TABLE)
    done = _finished(table, order, runs)
    drawn = {n for n, names in needs.items() if names <= done}   # report draws these
    say(f"{len(done)} of {len(order)} runs already finished in {runs}; training "
        f"{len(order) - len(done)}, longest first")

    def progress(k, total, rec):
        name, r = rec["point"]["job"], rec["result"]
        if rec["status"] == "ok":
            done.add(name)
            say(f"[{time.perf_counter() - t0:7.1f}s] done   {name}: {r.get('message')}, "
                f"final loss {r.get('final_loss', float('nan')):.4g}, "
                f"{r.get('wall_time_s') or 0:.1f}s, peak {r.get('peak_rss_mb') or 0:.0f} MB")
        else:
            say(f"[{time.perf_counter() - t0:7.1f}s] FAILED {name}: {rec['error']}")
        if k == total:          # the last run: report draws what is left, right after
            return
        for n, names in needs.items():
            if n not in drawn and names <= done:
                drawn.add(n)
                results = load_runs(out, per_fig[n])
                summary = _figure(config, n, results)
                _write(config, out, n, results, summary)
                _WRITTEN[(os.path.abspath(out), n)] = json.dumps(summary, sort_keys=True)
                say(f"drew {n} -> {os.path.join(out, n + '.png')}")

    res = sweep(functools.partial(train_job, runs=runs), [j.point() for j in order],
                executor=executor, out=table,
                keep=functools.partial(_still_current, runs=runs), progress=progress)
    write_json(os.path.join(runs, SESSION), {
        "mode": config["mode"], "workers": getattr(executor, "workers", None),
        "wall_time_s": time.perf_counter() - t0, "n_runs": len(order),
        "n_trained": res.n_run, "n_failed": res.n_failed})


def _why_missing(out, job, records) -> str:
    for rec in records.values():
        if rec["point"] == job.point() and rec["status"] != "ok":
            return f"failed: {rec['error']}"
    if os.path.exists(npz_path(runs_dir(out), job.name)):
        return "its file holds a run with other settings (or is unreadable)"
    return "not trained"


def analyse(config, out) -> dict:
    """Every selected figure's summary (settings, configs, measured numbers, checks) from
    the ``.npz`` files in ``<out>/runs`` alone. A figure with a run missing or stale is
    left out and named under ``"missing"`` (``{figure: {run: why}}``); ``ValueError`` if
    no figure can be analysed."""
    t0 = time.perf_counter()
    jobs = unique_jobs(config)
    results = load_runs(out, jobs)
    records = load_journal(journal_path(os.path.join(runs_dir(out), TABLE)))
    figures, missing = {}, {}
    for n, js in figure_jobs(config).items():
        lack = {j.name: _why_missing(out, j, records) for j in js if j.name not in results}
        if lack:
            missing[n] = lack
            continue
        figures[n] = _figure(config, n, results)
    if not figures:
        raise ValueError(f"no figure can be analysed: their runs are not in "
                         f"{runs_dir(out)} ({json.dumps(missing)[:300]}); run `stsim "
                         "figures` without --analyse-only first")
    rss = [r.info.get("peak_rss_mb") for r in results.values() if r.info.get("peak_rss_mb")]
    return {"figures": figures, "missing": missing, "n_runs": len(jobs),
            "blocks": block_rows(results),
            "peak_rss_mb_max_run": max(rss, default=None),
            "evaluation": evaluation_stats({n: r.info.get("evaluation", {})
                                          for n, r in results.items()}),
            "analyse_s": time.perf_counter() - t0}


def _wall_of_runs(figures) -> float:
    """Seconds of training summed over every distinct run of the figures: each run's wall
    time in its worker (``wall_time_s``). Not CPU time: under load a run's wall time
    includes the time other processes held its core."""
    seen = {name: r.get("wall_time_s") or 0.0 for f in figures.values()
            for name, r in f["runs"].items()}
    return float(sum(seen.values()))


def report(config, out, results) -> dict:
    """Draw every analysed figure and write its files (module docstring) and
    ``figures.json``; return the overview with every summary under ``"summaries"``. A
    figure whose files :func:`run` wrote in this process from the same summary is not
    written again."""
    t0 = time.perf_counter()
    for n, summary in results["figures"].items():
        done = _WRITTEN.pop((os.path.abspath(out), n), None)
        if done == json.dumps(summary, sort_keys=True) and all(
                os.path.exists(os.path.join(out, f"{n}.{ext}")) for ext in ("png", "json")):
            continue                  # drawn by run() in this process from the same numbers
        _write(config, out, n, load_runs(out, figure_module(n).jobs(config[n])), summary)
    path = os.path.join(runs_dir(out), SESSION)
    session = read_json(path) if os.path.exists(path) else {}
    analysis = results["analyse_s"] + time.perf_counter() - t0
    overview = {"mode": config["mode"],
                "wall_time_s": session.get("wall_time_s", 0.0) + analysis,
                "workers": session.get("workers"), "n_runs": results["n_runs"],
                "peak_rss_mb_max_run": results["peak_rss_mb_max_run"],
                "peak_rss_mb_driver": peak_rss_mb(),
                "runs_wall_time_sum_s": _wall_of_runs(results["figures"]),
                "diverged": {n: s["diverged"] for n, s in results["figures"].items()
                             if s["diverged"]},
                "unmeasured": {n: s["unmeasured"] for n, s in results["figures"].items()
                               if s["unmeasured"]},
                "verdicts": verdict_counts(c for f in results["figures"].values()
                                            for c in f["checks"]),
                "evaluation": results["evaluation"],
                "checks": {n: s["checks"] for n, s in results["figures"].items()}}
    write_json(os.path.join(out, "figures.json"), overview)
    write_csv(os.path.join(out, BLOCKS), BLOCK_COLUMNS, results["blocks"])
    return dict(overview, summaries=results["figures"], missing=results["missing"],
                n_trained=session.get("n_trained"), out=out)
