"""What the parts of the expressivity study share: seeded generators keyed by sizes, exact
text for arrays in a table, the raw tables (sweep journals under ``<out>/raw/``), the run
record, the width-law fit of the JSON summaries, the writing of a part's outputs and
figures, and the checks of settings."""
from __future__ import annotations

import os

import numpy as np

from stsim.studies.contract import raw_path
from stsim.sweeps.grid import point_key
from stsim.sweeps.journal import journal_path, load_journal
from stsim.util.io import read_json, write_csv, write_json
from stsim.util.stats import compare_growth

__all__ = ["rng_of", "subplots", "save_tight", "write_part", "as_list", "array_text",
           "text_array", "raw_table", "design_results", "design_rows", "fit_law",
           "load_run_record", "update_run_record", "check_settings"]


def rng_of(*key):
    """The generator of a point: ``default_rng(SeedSequence([key...]))`` (the study seed
    first, then a stream number and the point's sizes)."""
    return np.random.default_rng(np.random.SeedSequence([int(k) for k in key]))


def subplots(*args, **kwargs):
    """``pyplot.subplots`` (pyplot imported on first use)."""
    from stsim.util.plotting import plt
    return plt.subplots(*args, **kwargs)


def save_tight(fig, path, dpi=120):
    """Lay ``fig`` out tightly, write it to ``path`` and close it."""
    from stsim.util.plotting import savefig
    fig.tight_layout()
    savefig(fig, path, dpi=dpi)


def write_part(out, name, cfg, summary, tables, plot, **extra) -> dict:
    """Write a part's outputs in ``out``: each ``(table, columns, rows)`` of ``tables`` as
    ``<table>.csv``, its figure ``<name>.png`` (``plot(path)``) and ``<name>.json``
    (``config``, ``summary``, then ``extra``). Returns ``summary``."""
    for table, cols, rows in tables:
        write_csv(os.path.join(out, f"{table}.csv"), cols, rows)
    plot(os.path.join(out, f"{name}.png"))
    write_json(os.path.join(out, f"{name}.json"), {"config": cfg, "summary": summary, **extra})
    return summary


def as_list(row: dict, cols) -> list:
    """A row as a list in column order (the JSON files keep the CSV layout)."""
    return [row[c] for c in cols]


def array_text(values) -> str:
    """Floats as space-separated ``repr`` text (exact: :func:`text_array` gives them back
    bit for bit) — how an array enters a sweep point or a table cell."""
    return " ".join(repr(float(v)) for v in np.ravel(values))


def text_array(text) -> np.ndarray:
    """The inverse of :func:`array_text` (an empty text gives an empty array)."""
    return np.array([float(v) for v in str(text or "").split()], dtype=np.float64)


def raw_table(out, name) -> str:
    """The raw table ``<out>/raw/<name>.csv`` of a part (its journal beside it)."""
    return raw_path(out, f"{name}.csv")


def design_results(out, name, points):
    """The results of the design ``points`` (in that order) from the journal of raw table
    ``name``, or ``None`` when some point is missing or failed (the part is incomplete)."""
    recs = load_journal(journal_path(raw_table(out, name)))
    got = []
    for p in points:
        rec = recs.get((point_key(p), 0))
        if rec is None or rec["status"] != "ok":
            return None
        got.append(rec["result"])
    return got


def design_rows(points, results, cols) -> list:
    """The output rows of a part: per design point, each column from the point's settings
    when it is one, else from its result."""
    return [{c: p[c] if c in p else r[c] for c in cols} for p, r in zip(points, results)]


def fit_law(x, y) -> dict | None:
    """A width law for the JSON summaries, from :func:`stsim.util.stats.compare_growth`:
    the affine least-squares fit ``y ≈ a x + b`` (``a, b, r2, residuals``,
    ``max_rel_residual``) and the fit through the origin ``y ≈ c x`` with its
    ``max_rel_residual_origin``; ``None`` with fewer than two points or a constant ``x``."""
    c = compare_growth(x, y, laws=("linear", "proportional"), min_points=2)
    lin, prop = c["fits"].get("linear"), c["fits"].get("proportional")
    if lin is None or prop is None:
        return None
    return {"a": lin["a"], "b": lin["b"], "r2": lin["r2"], "residuals": lin["residuals"],
            "max_rel_residual": lin["max_rel_residual"], "c": prop["a"],
            "max_rel_residual_origin": prop["max_rel_residual"]}


def _record_path(out):
    return raw_path(out, "run.json")


def load_run_record(out) -> dict:
    """The run record ``<out>/raw/run.json``: ``workers`` and, per part, ``wall_time_s``
    and ``n_run`` of the run that computed its points (``{}`` if none)."""
    path = _record_path(out)
    return read_json(path, "run record") if os.path.exists(path) else {}


def update_run_record(out, part, workers, seconds, n_run) -> None:
    """Record a part's run; a rerun that computed nothing keeps the record of the run that
    did (its wall time is the part's)."""
    rec = load_run_record(out)
    parts = rec.setdefault("parts", {})
    if n_run > 0 or part not in parts:
        parts[part] = {"wall_time_s": seconds, "n_run": n_run, "workers": workers}
    write_json(_record_path(out), rec)


# --------------------------------------------------------------------------------------
# checks of settings (ValueError naming the setting, before any work)
# --------------------------------------------------------------------------------------
def _values(v):
    return list(v) if isinstance(v, (list, tuple)) else [v]


def check_settings(part, cfg, *, ints=(), positive=(), unit=(), choices=None):
    """``ValueError`` unless every key of ``ints`` holds integers ≥ 1 (a list: each, and at
    least one), of ``positive`` finite numbers > 0, of ``unit`` numbers in (0, 1), and
    each key of ``choices`` (``{key: allowed}``) values from ``allowed``."""
    def bad(key, what, v):
        raise ValueError(f"{part}.{key} must be {what}, got {v!r}")
    for key in ints:
        vals = _values(cfg[key])
        if not vals:
            bad(key, "a non-empty list of integers >= 1", cfg[key])
        for v in vals:
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                bad(key, "an integer >= 1 (each)", v)
    for key in positive:
        for v in _values(cfg[key]):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v) \
                    or v <= 0:
                bad(key, "a finite number > 0 (each)", v)
    for key in unit:
        v = cfg[key]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < 1:
            bad(key, "a number in (0, 1)", v)
    for key, allowed in (choices or {}).items():
        vals = _values(cfg[key])
        if not vals or any(v not in allowed for v in vals):
            bad(key, f"a non-empty list from {tuple(allowed)}", cfg[key])
