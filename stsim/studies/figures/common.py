"""Shared machinery of the figure experiments: the runs (:class:`Job`, trained as rows of
:func:`stsim.sweep`), seed bands, claim checks and the per-figure summary.

Every figure module (``fig1`` … ``fig5``, ``beyond``, ``claims``) exposes

* ``NAME`` and ``SETTINGS = {"quick": {...}, "full": {...}}`` — the chosen values of the
  parameters the paper does not give (d, d_e, lr, steps, ...); each key can be overridden
  (command line: ``stsim figures --set <figure>.key=value``); ``GROUP`` (a figure whose
  settings and runs are another's) or ``LINKS`` (keys that take other figures' settings)
  where it shares runs;
* ``jobs(s) -> list[Job]`` — the training runs it needs (figures that share runs return
  jobs with the same name and options; they are trained once);
* ``measure(s, results) -> (measured, checks)`` — its numbers and the checks of the
  paper's claims, from ``results`` (``{job name: Result}``) alone;
* ``draw(s, results, measured, out)`` — writes ``<NAME>.png`` (and any table derived
  from ``measured``).

The study (:mod:`stsim.studies.figures.figure`) writes ``<NAME>.csv``
(:func:`write_histories_csv`) and ``<NAME>.json`` (:func:`summarise`); every run is one
sweep row through :func:`stsim.run` (:func:`train_job`).
"""
from __future__ import annotations

import importlib
import json
import os
import sys
import warnings
from dataclasses import dataclass, field

import numpy as np

from stsim.util.io import to_jsonable, write_csv
from stsim.core.config import Config
from stsim.core.result import Result
from stsim.core.run import run
from stsim.core.cost import estimated_seconds
from stsim.studies.contract import MODES
from stsim.studies.figures.stability import TWIN, needs_twin, twin_options

#: the study's name and its figures (in their order)
NAME = "figures"
FIGURES = ("fig1", "fig2", "fig3", "fig4", "fig5", "beyond", "claims")

__all__ = ["Job", "train_job", "npz_path", "load_current", "runs_dir", "load_runs",
           "figure_module", "figure_jobs", "unique_jobs", "write_histories_csv",
           "seed_values", "second_half", "seed_band", "save_png", "n_seeds", "summarise", "MODES",
           "peak_rss_mb"]


@dataclass(frozen=True)
class Job:
    """One call ``stsim.run(**options)``; ``name`` is unique and names its file
    ``<runs>/<name>.npz``; ``evaluate``: the settings of its final evaluation on large
    fresh sets (:mod:`.evaluate`), or None."""

    name: str
    options: dict = field(hash=False)
    evaluate: dict | None = field(default=None, hash=False)

    def config(self) -> dict:
        """The resolved config of the run (what its saved result must hold)."""
        return Config.from_options(**self.options).to_dict()

    def point(self) -> dict:
        """Its sweep grid point: ``{"job": name, "options": the options as sorted JSON,
        "evaluate": its evaluation settings as JSON}`` (a changed option is a new point,
        so the journal never counts it as done)."""
        return {"job": self.name, "options": json.dumps(to_jsonable(self.options),
                                                        sort_keys=True),
                "evaluate": json.dumps(self.evaluate, sort_keys=True)}

    @classmethod
    def from_point(cls, point) -> "Job":
        """Inverse of :meth:`point`."""
        return cls(point["job"], json.loads(point["options"]),
                   json.loads(point.get("evaluate", "null")))

    def twin(self) -> "Job":
        """The same run with its lr moved by one unit in the last place, named
        ``<name>-ulp`` (:mod:`stsim.studies.figures.stability`, test 3)."""
        return Job(self.name + TWIN, twin_options(self.options), self.evaluate)

    def estimated_seconds(self) -> float:
        """Its cost on one core (:func:`stsim.core.cost.estimated_seconds`, the one
        cost model; the long-run warning is silenced: the figures give lr and steps)."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return estimated_seconds(Config.from_options(**self.options))


def peak_rss_mb() -> float:
    """Peak resident memory of this process in MB (``ru_maxrss``; Linux reports KB)."""
    import resource
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return r / 1024.0 if sys.platform != "darwin" else r / 2**20


# --------------------------------------------------------------------------------------
# running
# --------------------------------------------------------------------------------------
def npz_path(runs, name) -> str:
    """The result file of the run ``name`` in the folder ``runs``."""
    return os.path.join(runs, name.replace("/", os.sep) + ".npz")


def train_job(job, options, seed, runs, evaluate="null"):
    """One sweep row: ``stsim.run(**json.loads(options))``, evaluated on large fresh sets
    (:func:`.evaluate.evaluate_run`, stored in ``info["evaluation"]``) when ``evaluate``
    (JSON) is not null, and saved to ``npz_path(runs, job)`` with the worker's peak
    memory in ``info["peak_rss_mb"]``. ``seed`` (the sweep's replicate seed) is unused: the
    run's seed is in ``options``. Returns its status, message, final loss, wall time and
    peak memory."""
    from stsim.studies.figures.evaluate import evaluate_run
    res = run(**json.loads(options))
    ev = json.loads(evaluate)
    if ev is not None:
        res.info["evaluation"] = evaluate_run(res, ev)
    res.info["peak_rss_mb"] = peak_rss_mb()
    res.save(npz_path(runs, job))
    return {"status": res.status, "message": res.message, "final_loss": res.final("loss"),
            "wall_time_s": res.info.get("wall_time_s"), "peak_rss_mb": res.info["peak_rss_mb"]}


def load_current(runs, job: Job):
    """The saved :class:`Result` of ``job`` if its file exists, is readable and holds the
    job's resolved config and evaluation settings; else ``None`` (not trained, or trained
    with other settings: never reused)."""
    path = npz_path(runs, job.name)
    if not os.path.exists(path):
        return None
    try:
        res = Result.load(path)
    except (OSError, ValueError, KeyError):
        return None
    if res.config != job.config():
        return None
    ev = res.info.get("evaluation", {}).get("settings")
    return res if ev == (None if job.evaluate is None else to_jsonable(job.evaluate)) else None


def runs_dir(out) -> str:
    """The folder of the runs' ``.npz`` files and their sweep table: ``<out>/runs``."""
    return os.path.join(out, "runs")


def load_runs(out, jobs) -> dict:
    """``{name: Result}`` of the ``jobs`` whose current result is in ``<out>/runs``
    (:func:`load_current`)."""
    runs = runs_dir(out)
    return {j.name: r for j in jobs if (r := load_current(runs, j)) is not None}


def figure_module(name):
    """The module of figure ``name`` (``fig1`` … ``claims``), imported on first use."""
    return importlib.import_module(f"stsim.studies.figures.{name}")


def figure_jobs(config) -> dict:
    """``{figure: [Job]}`` for the selected figures (``config["only"]``), in that order;
    each figure's jobs followed by the twins its jobs get (:func:`.stability.needs_twin`)."""
    out = {}
    for n in config["only"]:
        js = figure_module(n).jobs(config[n])
        out[n] = js + [j.twin() for j in js if needs_twin(j.options, j.estimated_seconds())]
    return out


def unique_jobs(config) -> list:
    """Every run of the selected figures once (first-seen order); ``ValueError`` if two
    runs share a name but not their options."""
    unique: dict = {}
    for js in figure_jobs(config).values():
        for j in js:
            if j.name in unique and (unique[j.name].options, unique[j.name].evaluate) != (
                    j.options, j.evaluate):
                raise ValueError(f"two runs named {j.name!r} with different options")
            unique[j.name] = j
    return list(unique.values())


# --------------------------------------------------------------------------------------
# output
# --------------------------------------------------------------------------------------
def write_histories_csv(path, results: dict) -> str:
    """All histories in long format: ``run, seed, <history keys…>`` one row per record."""
    keys = []
    for res in results.values():
        keys += [k for k in res.history if k not in keys]
    rows = []
    for name, res in results.items():
        n = len(res.history["step"])
        cols = [res.history.get(k, np.full(n, np.nan)) for k in keys]
        rows += [[name, res.config["seed"]] + [float(c[i]) for c in cols] for i in range(n)]
    return write_csv(path, ["run", "seed"] + keys, rows, float_format=".6g")


def seed_values(results, key, *, transform=None, upto=None, tail=None):
    """``(steps, Y)``: the common recorded steps of ``results`` and ``history[key]`` of
    each run on them (rows), restricted and transformed as in :func:`seed_band`."""
    n = min(len(r.history["step"]) for r in results)   # a diverged run stops early
    if upto is not None:
        n = min(n, int(np.searchsorted(results[0].history["step"], upto, "right")))
    steps = results[0].history["step"][:n]
    Y = np.array([r.history[key][:n] for r in results], dtype=float)
    if tail is not None:
        keep = steps >= (1 - tail) * steps[-1]
        steps, Y = steps[keep], Y[:, keep]
    if transform is not None:
        with np.errstate(divide="ignore"):
            Y = transform(Y)
    return steps, Y


def second_half(r):
    """``(steps, 1/loss)`` of a run's training-loss records over the second half of its
    own records (a diverged run stops early)."""
    st = r.history["step"]
    h = st >= st[-1] / 2
    return st[h], 1.0 / r.history["loss"][h]


def seed_band(ax, results, key, *, label=None, color=None, ls="-", lw=1.6, transform=None,
              upto=None, tail=None):
    """Plot the seed mean of ``history[key]`` with a min–max band over seeds (records at
    steps ``<= upto`` if given; only the last fraction ``tail`` of the common steps, i.e.
    steps ``>= (1 - tail) ·`` the last one, if given).

    All results must share the ``step`` grid. Returns ``(step, mean)``.
    """
    steps, Y = seed_values(results, key, transform=transform, upto=upto, tail=tail)
    mean = Y.mean(axis=0)
    line, = ax.plot(steps, mean, ls=ls, lw=lw, color=color, label=label)
    if len(results) > 1:
        ax.fill_between(steps, Y.min(axis=0), Y.max(axis=0), color=line.get_color(),
                        alpha=0.2, lw=0)
    return steps, mean


def save_png(fig, out, name, dpi=120, tight=True) -> str:
    """Write ``fig`` to ``<out>/<name>.png`` (:func:`stsim.util.plotting.savefig`, which
    closes it), laid out tight first unless ``tight`` is false; returns the path."""
    from stsim.util.plotting import savefig      # matplotlib stays out of the workers
    if tight:
        fig.tight_layout()
    return savefig(fig, os.path.join(out, f"{name}.png"), dpi=dpi)


def n_seeds(seeds) -> str:
    """``"1 seed"`` / ``"3 seeds"`` for a list of seeds (figure titles)."""
    return f"{len(seeds)} seed{'s' * (len(seeds) != 1)}"


def summarise(name, s, mode, results: dict, checks: list, measured: dict) -> dict:
    """The summary written as ``<name>.json``: settings, the resolved config, status, wall
    time and peak memory of every run in ``results``, measured numbers, checks, and the
    training time summed over the runs. JSON-ready."""
    return to_jsonable({
        "figure": name, "mode": mode, "settings": s, "measured": measured, "checks": checks,
        "runs": {k: {"config": r.config, "status": r.status, "message": r.message,
                     "wall_time_s": r.info.get("wall_time_s"),
                     "peak_rss_mb": r.info.get("peak_rss_mb")} for k, r in results.items()},
        "total_train_time_s": float(sum(r.info.get("wall_time_s", 0.0)
                                        for r in results.values())),
    })
