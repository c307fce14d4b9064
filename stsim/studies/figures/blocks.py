r"""The evaluation block means of every run, committed beside ``figures.json``, and the
recomputation of the figures' numbers from them (docs/reproduction.md, "How every number
is judged", the block means).

:func:`write_blocks` writes ``<out>/blocks.csv`` (atomically; the study's
:func:`~stsim.studies.figures.outputs.report` writes it beside ``figures.json``), one row per
run and evaluation set: ``run, set, kind, value, block, n_blocks, final, initial``
(``set``: the history key; ``kind``, ``value``: the stream
``Streams(seed).evaluation(kind, value)``; ``block``: points per block; ``final``,
``initial``: the block means of the final and initial parameters, space-separated
``repr``, ``initial`` empty from zero initialisation; a diverged run has no row).
:func:`read_blocks` returns them as :func:`.evaluate.evaluate_run` produced them, and
:func:`recheck` recomputes from the committed files alone the ``evaluation`` summary and
every number of the figures :data:`REPLAYED`, to :data:`RTOL` (:data:`HISTORY_RTOL` for a
check read off the 6-digit histories in ``<fig>.csv``).

Command line (:mod:`stsim.studies.figures.recheck`):
``python -m stsim.studies.figures.recheck <out>`` writes ``<out>/blocks.csv``
from ``<out>/runs`` (the runs of a finished ``stsim figures``) and rechecks ``<out>``.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

import numpy as np

from stsim.core.config import Config
from stsim.studies.figures.common import figure_module
from stsim.studies.figures.evaluate import block_estimate, evaluation_stats, set_keys
from stsim.studies.figures.ood import names_by_pe
from stsim.util.io import read_csv, read_json, to_jsonable, write_csv

__all__ = ["FILE", "COLUMNS", "REPLAYED", "RTOL", "HISTORY_RTOL", "block_rows",
           "write_blocks", "read_blocks", "ReplayResult", "replay_results", "recheck"]

FILE = "blocks.csv"
COLUMNS = ("run", "set", "kind", "value", "block", "n_blocks", "final", "initial")
#: the figures whose every number is recomputed from the committed files (module docstring)
REPLAYED = ("fig2", "fig4", "fig5", "beyond")
RTOL = 1e-9            # recomputed from the block means: equal up to rounding
HISTORY_RTOL = 2e-5    # read off 6-significant-digit histories (<fig>.csv)


def _join(xs) -> str:
    return " ".join(repr(float(x)) for x in xs)


def _split(text) -> np.ndarray | None:
    if text is None or str(text).strip() == "":
        return None
    return np.array([float(x) for x in str(text).split()], dtype=float)


def block_rows(results) -> list:
    """The rows of ``blocks.csv`` (module docstring) of ``results`` (``{run name:
    Result}``), sorted by run, in each run the order of :func:`.evaluate.set_keys`."""
    rows = []
    for name in sorted(results):
        r = results[name]
        sets = r.info.get("evaluation", {}).get("sets", {})
        if not sets:
            continue
        keys = {k: (kind, value) for k, kind, value, _, _ in
                set_keys(Config.from_options(**r.config))}
        for key, e in sets.items():
            kind, value = keys[key]
            fin = np.asarray(e["final"], dtype=float)
            if e["n"] % fin.size:
                raise ValueError(f"{name} {key}: {e['n']} points in {fin.size} blocks")
            rows.append({"run": name, "set": key, "kind": kind, "value": value,
                         "block": e["n"] // fin.size, "n_blocks": fin.size,
                         "final": _join(fin),
                         "initial": None if e.get("initial") is None else _join(e["initial"])})
    return rows


def write_blocks(out, results) -> str:
    """Write ``<out>/blocks.csv`` (atomically) from ``results``; returns its path."""
    return write_csv(os.path.join(out, FILE), COLUMNS, block_rows(results))


def read_blocks(path) -> dict:
    """``{run: {set: {"final", "initial", "n", "mean", "se", "kind", "value"}}}`` from
    ``blocks.csv``: the block means and the estimate :func:`.evaluate.evaluate_run`
    computed from them (:func:`.evaluate.block_estimate`). ``ValueError`` if a row's
    block count does not match its block means."""
    out = {}
    for row in read_csv(path):
        fin = _split(row["final"])
        ini = _split(row["initial"])
        if fin is None or fin.size != int(row["n_blocks"]) or (
                ini is not None and ini.size != fin.size):
            raise ValueError(f"{path}: run {row['run']} set {row['set']}: the block means do "
                             f"not match n_blocks = {row['n_blocks']}")
        mean, se = block_estimate(fin)
        out.setdefault(row["run"], {})[row["set"]] = {
            "final": fin.tolist(), "initial": None if ini is None else ini.tolist(),
            "n": int(row["block"]) * fin.size, "mean": mean, "se": se,
            "kind": row["kind"], "value": row["value"]}
    return out


# --------------------------------------------------------------------------------------
# the figures recomputed from the committed files
# --------------------------------------------------------------------------------------
@dataclass
class ReplayResult:
    """A run as the committed files hold it: ``config``, ``status`` and ``wall_time_s``
    (``<fig>.json``), ``history`` (``<fig>.csv``, 6 significant digits), its evaluation
    (``blocks.csv``) and, for a fixed one-hot run, the reduced state ``(a, γ)`` read off
    its trained ``W``, ``V`` (``<fig>.json`` → ``measured``): :attr:`W`, :attr:`V` are
    the matrices of that state, ``W_ee = a (I − J/T)``, ``V_x = γ I`` (zero elsewhere),
    which give the same ``(a, γ)`` back (:func:`.ood.reduced_state_onehot`)."""

    config: dict
    history: dict
    status: str = "completed"
    info: dict = field(default_factory=dict)
    state: tuple | None = None

    @property
    def success(self) -> bool:
        return self.status == "completed"

    def _matrices(self):
        if self.state is None:
            raise AttributeError("the trained W and V are not committed (only the fixed "
                                 "one-hot runs' reduced state (a, γ) is)")
        c, (a, g) = self.config, self.state
        d, T = int(c["d"]), int(c["T"])
        D = d + int(c["d_e"])
        W = np.zeros((D, D))
        W[d:d + T, d:d + T] = a * (np.eye(T) - np.full((T, T), 1.0 / T))
        V = np.zeros((d, D))
        V[:, :d] = g * np.eye(d)
        return W, V

    @property
    def W(self):
        return self._matrices()[0]

    @property
    def V(self):
        return self._matrices()[1]


def _histories(path) -> dict:
    """``{run: {key: array}}`` from a ``<fig>.csv`` (:func:`.common.write_histories_csv`)."""
    out = {}
    for row in read_csv(path):
        out.setdefault(row.pop("run"), []).append(row)
    res = {}
    for run, rows in out.items():
        h = {k: np.array([math.nan if r[k] is None else r[k] for r in rows], dtype=float)
             for k in rows[0] if k != "seed"}
        h["step"] = h["step"].astype(int)
        res[run] = h
    return res


def _states(summary) -> dict:
    """``{run: (a, γ)}`` of the fixed one-hot runs recorded in ``summary["measured"]``."""
    m = summary["measured"].get("fixed_reduced_state_a_gamma")
    if not m:
        return {}
    names = names_by_pe(summary["settings"])["onehot"]
    return {n: tuple(v) for n, v in zip(names, m)}


def replay_results(out, name, blocks=None) -> dict:
    """``{run: ReplayResult}`` of figure ``name`` from ``<out>/<name>.json``,
    ``<out>/<name>.csv`` and ``<out>/blocks.csv`` (or ``blocks``, :func:`read_blocks`)."""
    summary = read_json(os.path.join(out, f"{name}.json"))
    blocks = read_blocks(os.path.join(out, FILE)) if blocks is None else blocks
    hist = _histories(os.path.join(out, f"{name}.csv"))
    states = _states(summary)
    res = {}
    for run, r in summary["runs"].items():
        ev = {"sets": blocks.get(run, {})}
        res[run] = ReplayResult(config=r["config"], history=hist.get(run, {}),
                                status=r["status"],
                                info={"evaluation": ev, "wall_time_s": r.get("wall_time_s")},
                                state=states.get(run))
    return res


def _compare(where, a, b, rtol, bad):
    """Append to ``bad`` every number of ``a`` (committed) that ``b`` (recomputed) does
    not reproduce to ``rtol`` (relative; NaN equals NaN; strings and booleans exactly)."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in set(a) | set(b):
            if k not in a or k not in b:
                bad.append((where + "." + str(k), a.get(k, "<absent>"), b.get(k, "<absent>")))
            else:
                _compare(f"{where}.{k}", a[k], b[k], rtol, bad)
    elif isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if len(a) != len(b):
            bad.append((where, f"{len(a)} items", f"{len(b)} items"))
        for i, (x, y) in enumerate(zip(a, b)):
            _compare(f"{where}[{i}]", x, y, rtol, bad)
    elif isinstance(a, bool) or isinstance(b, bool) or isinstance(a, str) or a is None:
        if a != b:
            bad.append((where, a, b))
    elif isinstance(a, (int, float)) and isinstance(b, (int, float)):
        x, y = float(a), float(b)
        if not ((math.isnan(x) and math.isnan(y)) or x == y
                or abs(x - y) <= rtol * max(abs(x), abs(y))):
            bad.append((where, a, b))
    else:
        bad.append((where, a, b))


def recheck(out, figures=REPLAYED, blocks=None) -> list:
    """Recompute from the committed files in ``out`` (module docstring) and return every
    number that does not reproduce, as ``(where, committed, recomputed)`` (empty: all
    reproduce). Checked: ``figures.json``'s ``evaluation`` summary over every run of
    every ``<fig>.json`` (:func:`.evaluate.evaluation_stats` on the block means), every
    run with a completed status having its blocks, and for each figure of ``figures``
    its ``measured`` numbers and its checks' ``measured``, ``se``, ``se_bootstrap``,
    ``margin_se``, ``critical`` (``measure`` of the figure's module on
    :func:`replay_results`; the stability label is not replayed: it needs the twins'
    trained parameters)."""
    blocks = read_blocks(os.path.join(out, FILE)) if blocks is None else blocks
    bad = []
    overview = read_json(os.path.join(out, "figures.json"))
    runs = {}
    for f in sorted(overview["checks"]):
        runs.update(read_json(os.path.join(out, f"{f}.json"))["runs"])
    for run, r in runs.items():
        if (r["status"] == "completed") != (run in blocks):
            bad.append((f"blocks.csv {run}", r["status"], "rows" if run in blocks else "none"))
    stats = evaluation_stats({n: {"sets": s} for n, s in blocks.items() if n in runs})
    _compare("figures.json evaluation", overview["evaluation"], stats, RTOL, bad)
    for f in figures:
        summary = read_json(os.path.join(out, f"{f}.json"))
        res = replay_results(out, f, blocks)
        measured, checks = figure_module(f).measure(summary["settings"], res)
        measured, checks = to_jsonable(measured), to_jsonable(checks)
        _compare(f"{f}.json measured", _drop_history(summary["measured"]),
                 _drop_history(measured), HISTORY_RTOL, bad)
        committed = {c["claim"]: c for c in summary["checks"]}
        if len(committed) != len(checks):
            bad.append((f"{f}.json checks", f"{len(committed)} checks", f"{len(checks)}"))
        for c in checks:
            k = committed.get(c["claim"])
            if k is None:
                bad.append((f"{f}.json check", "<absent>", c["claim"]))
                continue
            tol = HISTORY_RTOL if "tail of training" in c["claim"] else RTOL
            for key in ("measured", "se", "se_bootstrap", "margin_se", "critical", "df", "op",
                        "threshold"):
                if key in k or key in c:
                    _compare(f"{f}.json check {c['claim']!r} {key}", k.get(key), c.get(key),
                             _margin_rtol(c, tol) if key == "margin_se" else tol, bad)
    return bad


def _margin_rtol(check, rtol) -> float:
    """The relative tolerance of ``margin_se = ±(measured − threshold) / se`` when
    ``measured`` and ``se`` are reproduced to ``rtol``: near the threshold the margin is a
    small difference, so its relative error is ``rtol (|measured| / |measured − threshold|
    + 1)`` (the tail check of Fig. 4, read off 6-digit histories 3.3·10⁻⁴ below its 0.15,
    moved its margin by 4.5·10⁻⁴ relative when recomputed)."""
    m, t = check.get("measured"), check.get("threshold")
    try:
        gap = abs(float(m) - float(t))
        return rtol * (abs(float(m)) / gap + 1.0) if gap > 0 else math.inf
    except (TypeError, ValueError):
        return rtol


def _drop_history(measured):
    """``measured`` without the entries read off trained parameters or timings that the
    replay takes from the summary itself (``fixed_reduced_state_a_gamma``,
    ``sphere_wall_time_s``)."""
    return {k: v for k, v in measured.items()
            if k not in ("fixed_reduced_state_a_gamma", "sphere_wall_time_s")}
