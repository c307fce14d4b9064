"""Experiments reproducing the figures of Wang, Wei, Hsu & Lee (ICML 2024), plus one beyond
the paper. :func:`run_figures` (command line: ``stsim figures [--quick|--full] --out DIR``)
runs them all:

========  ==============================================================================
module    figure
========  ==============================================================================
fig1      training loss, inverse loss, cosine similarity (practical model, stochastic PE)
fig2      OOD loss at longer T_test: stochastic vs fixed PE, analytic fixed-PE floor
fig3      heat maps of W and V at random initialisation and after training
fig4      length generalisation and unseen q_test (same runs as fig2)
fig5      figs 2 and 4 with Adam
beyond    sphere PE width sweep (loss floor vs d_e); theory vs practical model
========  ==============================================================================

All runs of all figures go into one pool (shared runs are trained once, longest first);
each figure is drawn as soon as its runs are in, so an interrupted ``--full`` run keeps
the figures that finished. Every output folder gets ``<fig>.png``, ``<fig>.csv`` (all
histories) and ``<fig>.json`` (settings, resolved configs, measured numbers, claim
checks), plus ``figures.json`` (wall time, peak memory, all checks).

Submodules are imported lazily so that ``stsim.studies.separation.study`` (another
experiment living in this package) does not load the figure code.
"""
from __future__ import annotations

import importlib
import os
import time

__all__ = ["FIGURES", "run_figures", "resolve_all"]

FIGURES = ("fig1", "fig2", "fig3", "fig4", "fig5", "beyond")


def _module(name):
    return importlib.import_module(f"{__name__}.{name}")


def resolve_all(mode, overrides=None, only=None) -> dict:
    """Resolved settings of every figure: ``{name: settings}``.

    ``overrides`` maps ``"<figure>.<key>"`` to a value; figures sharing runs (``GROUP``)
    share their settings, and a figure with ``LINKS`` (``beyond``) takes the resolved
    settings of the figures it compares.
    """
    from stsim.studies.figures.common import resolve_settings
    names = list(FIGURES if not only else only)
    for n in names:
        if n not in FIGURES:
            raise ValueError(f"unknown figure {n!r}; choose from {FIGURES}")
    per = {}
    for k, v in (overrides or {}).items():
        fig, _, key = k.partition(".")
        if not key:
            raise ValueError(f"--set for `stsim figures` needs <figure>.<key>=value, got {k!r}")
        if fig not in FIGURES:
            raise ValueError(f"--set names unknown figure {fig!r} in {k!r}; choose from {FIGURES}")
        per.setdefault(fig, {})[key] = v
    settings = {}
    for n in FIGURES:
        mod = _module(n)
        group = getattr(mod, "GROUP", n)
        settings[n] = resolve_settings(mod.SETTINGS[mode], {**per.get(group, {}),
                                                            **per.get(n, {})})
    for n in FIGURES:
        for key, src in getattr(_module(n), "LINKS", {}).items():
            settings[n][key] = settings[src]
    return {n: settings[n] for n in names}


def run_figures(settings: dict, out: str, *, workers: int = 1, cache: str | None = None,
                log=None, mode: str | None = None) -> dict:
    """Run the figures ``settings`` (``{name: settings}``, see :func:`resolve_all`) in one
    pool; draw each into ``out`` as soon as its runs are done; write ``figures.json``.

    ``workers`` processes (1: this process); ``cache``: folder of per-run results, reused
    when the config matches (``None``: no cache); ``log``: callable(str) for progress.
    Returns the overview (wall time, peak memory, checks) with every figure's summary
    under ``"summaries"``.
    """
    from stsim.studies.figures.common import peak_rss_mb, run_jobs
    from stsim.util.io import write_json

    needs = {n: [j.name for j in _module(n).jobs(s)] for n, s in settings.items()}
    jobs = [j for n, s in settings.items() for j in _module(n).jobs(s)]
    os.makedirs(out, exist_ok=True)
    summaries, t0 = {}, time.perf_counter()

    def draw_ready(results):
        for n, names in needs.items():
            if n not in summaries and all(x in results for x in names):
                summaries[n] = _module(n).analyse(settings[n], results, out, mode)
                summaries[n]["drawn_after_s"] = time.perf_counter() - t0
                if log:
                    log(f"drew {n} -> {os.path.join(out, n + '.png')}")

    results = run_jobs(jobs, workers=workers, cache=cache, log=log, on_done=draw_ready)
    draw_ready(results)
    wall = time.perf_counter() - t0
    rss = [r.info.get("peak_rss_mb") for r in results.values() if r.info.get("peak_rss_mb")]
    overview = {"mode": mode, "wall_time_s": wall, "workers": workers,
                "n_runs": len(results), "peak_rss_mb_max_run": max(rss, default=None),
                "peak_rss_mb_driver": peak_rss_mb(),
                "checks": {n: summaries[n]["checks"] for n in summaries}}
    write_json(os.path.join(out, "figures.json"), overview)
    return dict(overview, summaries={n: summaries[n] for n in settings})
