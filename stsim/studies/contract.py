"""The study contract: one shape for every study (figures, separation, expressivity, sparse,
attention, targets, text). A *study* is a module with the members ``NAME``, ``PRESETS``
(``{"quick": {...}, "full": {...}}``; every key but the reserved ``mode`` can be
overridden, :func:`apply_overrides`), ``check``, ``run``, ``analyse`` and ``report``; what each must
do, how a study reports diverged runs (:func:`divergence`, :func:`publish_divergence`) and
a complete toy study: docs/architecture.md, "The study contract". stsim's own studies keep
these members in the same rooms: ``design`` (presets, ``HELP``, ``EPILOG``, ``check``),
``runs`` (``run``), ``analysis`` (``analyse``), ``outputs`` (``report``, ``console``), with
``study`` as the face.

:func:`run_study` is the one driver: resolve the preset with the overrides, ``check``,
``run`` (unless ``analyse_only``), ``analyse``, ``report``; the command line
(:mod:`stsim.cli.common`) builds the executor once and calls it.
"""
from __future__ import annotations

import ast
import copy
import os
import time

from stsim.sweeps.pool import InlineExecutor
from stsim.util.io import atomic_write, read_json, write_json

__all__ = ["MODES", "STUDY_MEMBERS", "RAW", "raw_path", "apply_overrides", "resolve_config",
           "run_study", "check_study", "divergence", "publish_divergence", "divergence_markdown"]

MODES = ("quick", "full")
#: the subfolder of a study's folder where its raw tables, their journals and its run
#: record live (where a study keeps them there)
RAW = "raw"


def raw_path(out, name) -> str:
    """The raw table (or record) ``name`` of the study folder ``out``: ``<out>/raw/<name>``."""
    return os.path.join(out, RAW, name)


STUDY_MEMBERS = ("NAME", "PRESETS", "HELP", "EPILOG", "check", "run", "analyse", "report",
                 "console")


def check_study(study) -> None:
    """``TypeError`` if ``study`` lacks a member of the contract (module docstring)."""
    missing = [m for m in STUDY_MEMBERS if not hasattr(study, m)]
    if missing:
        raise TypeError(f"{getattr(study, '__name__', study)!r} is not a study: it lacks "
                        f"{missing} (see stsim.studies.contract)")
    if set(study.PRESETS) != set(MODES):
        raise TypeError(f"{study.NAME}: PRESETS must have exactly the keys {MODES}")
    wrong = [m for m in MODES if study.PRESETS[m].get("mode") != m]
    if wrong:
        raise TypeError(f"{study.NAME}: each preset must name itself (the reserved key "
                        f"'mode'), PRESETS[{wrong[0]!r}]['mode'] is "
                        f"{study.PRESETS[wrong[0]].get('mode')!r}")


def _coerce(name, value, like):
    """``value`` (a given override, maybe text) as the type of the preset's ``like``;
    ``ValueError`` naming the key when it cannot be."""
    if isinstance(value, str) and not isinstance(like, str):
        try:
            value = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            pass                     # still text: the type checks below name the key
    if like is None or value is None:
        return value
    if isinstance(like, bool):
        if not isinstance(value, bool):
            raise ValueError(f"{name} must be True or False, got {value!r}")
        return value
    if isinstance(like, int) and not isinstance(like, bool):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
            raise ValueError(f"{name} must be an integer, got {value!r}")
        return int(value)
    if isinstance(like, float):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{name} must be a number, got {value!r}")
        return float(value)
    if isinstance(like, (tuple, list)):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            value = (value,)
        if not isinstance(value, (tuple, list)):
            raise ValueError(f"{name} must be a list like {list(like)!r}, got {value!r}")
        if like and not isinstance(like[0], (tuple, list, dict)):
            value = [_coerce(name, v, like[0]) for v in value]
        return type(like)(value)
    if isinstance(like, dict):
        if not isinstance(value, dict):
            raise ValueError(f"{name} must be a dict like {like!r}, got {value!r}")
        return value
    if isinstance(like, str) and isinstance(value, (bool, int, float, list, tuple, dict)):
        raise ValueError(f"{name} must be text, got {value!r}")  # an object: study.check's
    return value


def apply_overrides(preset: dict, overrides: dict | None) -> dict:
    """A deep copy of ``preset`` with ``overrides`` applied: ``{"key": value}`` or, for
    nested settings, ``{"group.key": value}``. Each value is coerced to the type of the
    preset's value (text such as ``"0.5"`` or ``"[0, 1]"`` is parsed); an unknown key or a
    value of the wrong type raises ``ValueError`` naming the key, before any work.

    >>> apply_overrides({"lr": 0.1, "fig1": {"steps": 10}}, {"lr": "0.5", "fig1.steps": 20})
    {'lr': 0.5, 'fig1': {'steps': 20}}
    """
    cfg = copy.deepcopy(dict(preset))
    for key, value in (overrides or {}).items():
        parts = str(key).split(".")
        node = cfg
        for i, p in enumerate(parts):
            if not isinstance(node, dict) or p not in node:
                where = ".".join(parts[:i]) or "the settings"
                allowed = sorted(node) if isinstance(node, dict) else []
                raise ValueError(f"unknown setting {key!r}: {where} has no key {p!r}; "
                                 f"allowed: {allowed}")
            if i == len(parts) - 1:
                node[p] = _coerce(key, value, node[p])
            else:
                node = node[p]
    return cfg


def resolve_config(study, mode: str = "quick", overrides: dict | None = None) -> dict:
    """``study.check(apply_overrides(study.PRESETS[mode], overrides))``; the key ``mode``
    is the preset's own and cannot be overridden."""
    check_study(study)
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if "mode" in (overrides or {}):
        raise ValueError("mode is chosen by the preset (--quick / --full), not by an "
                         "override")
    return study.check(apply_overrides(study.PRESETS[mode], overrides))


def run_study(study, out: str, *, mode: str = "quick", overrides: dict | None = None,
              executor=None, analyse_only: bool = False, log=None) -> dict:
    """Run a study the one way: resolve and check its config, ``run`` it (unless
    ``analyse_only``) on ``executor`` (default: in this process), ``analyse`` the raw
    tables, ``report``. Returns the summary with ``mode``, ``analyse_only``,
    ``wall_time_s``, ``diverged`` and ``unmeasured`` (:func:`divergence`; both also written
    into the outputs, :func:`publish_divergence`)."""
    config = resolve_config(study, mode, overrides)
    t0 = time.perf_counter()
    if not analyse_only:
        study.run(config, out, executor if executor is not None else InlineExecutor(), log)
    results = study.analyse(config, out)
    summary = study.report(config, out, results)
    summary = dict(summary or {})
    summary.setdefault("diverged", divergence([], 0)["diverged"])
    summary.setdefault("unmeasured", [])
    publish_divergence(out, study.NAME, summary)
    summary.update(mode=mode, analyse_only=analyse_only,
                   wall_time_s=time.perf_counter() - t0)
    return summary


def divergence(where, total: int, unmeasured=(), examples: int = 8) -> dict:
    """The summary entries of a study about diverged runs (docs/architecture.md, "The study
    contract"; the command line prints them and exits 1 when something is unmeasured):
    ``{"diverged": {"runs", "of", "where"}, "unmeasured": [...]}`` from ``where`` (one
    description per diverged run, e.g. ``"fcn q=2 T=8 width 4 lr 1e+06"``; the first
    ``examples`` distinct ones are kept), ``total`` (the runs they are out of) and
    ``unmeasured`` (each quantity that could not be measured, with its cause: runs that
    diverged or raised).

    >>> divergence(["fcn T=4", "fcn T=4", "tf T=8"], 10, ["width of fcn at T=4"])
    {'diverged': {'runs': 3, 'of': 10, 'where': ['fcn T=4', 'tf T=8']},
     'unmeasured': ['width of fcn at T=4']}
    """
    where = list(where)
    return {"diverged": {"runs": len(where), "of": int(total),
                         "where": list(dict.fromkeys(where))[:examples]},
            "unmeasured": list(unmeasured)}


def divergence_markdown(summary) -> str:
    """The ``report.md`` section of the ``diverged`` and ``unmeasured`` entries (``""``
    when both are empty)."""
    d, un = summary.get("diverged") or {}, summary.get("unmeasured") or []
    if not d.get("runs") and not un:
        return ""
    lines = ["", "## Diverged runs", "",
             f"{d.get('runs', 0)} of {d.get('of')} runs diverged"
             + (f" (e.g. {'; '.join(d['where'])})." if d.get("where") else ".")]
    if un:
        lines += ["", "Not measured (each with its cause):", ""]
        lines += [f"- {u}" for u in un]
    return "\n".join(lines) + "\n"


def publish_divergence(out, name, summary) -> None:
    """Write ``summary``'s ``diverged`` and ``unmeasured`` entries into the study's JSON
    summary (``<out>/summary.json``, else ``<out>/<name>.json``, if there is one; always,
    also when both are empty) and, when either is not empty, as a section at the end of
    ``<out>/report.md`` (if there is one)."""
    entries = {k: summary[k] for k in ("diverged", "unmeasured")}
    for fname in ("summary.json", f"{name}.json"):
        path = os.path.join(out, fname)
        if os.path.isfile(path):
            data = read_json(path, "study summary")
            if isinstance(data, dict) and any(data.get(k) != v for k, v in entries.items()):
                write_json(path, dict(data, **entries))
            break
    path = os.path.join(out, "report.md")
    if divergence_markdown(entries) and os.path.isfile(path):
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
        with atomic_write(path, "w") as fh:
            fh.write(text.rstrip("\n") + "\n" + divergence_markdown(entries))
