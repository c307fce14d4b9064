r"""The design of ``stsim targets``: its constants, its presets (:data:`QUICK`, :data:`FULL`,
the width parts' merged in) with ``HELP`` and ``EPILOG``, :func:`check` (every setting
validated, and each run checked to fit, before any work) and the ``settings`` stamp of each
table's rows (:data:`MADE_BY`, :func:`made_by`).

The settings that make a row of each of the study's tables (its ``settings`` cell,
:func:`stsim.studies.cells.settings_text`): a rerun with others computes other rows, an
analysis refuses settings no row was made with. The FCN tables' rows carry every argument
of their run in their point instead. The width parts' own presets, help, check and family
tables' settings are in :mod:`~stsim.studies.targets.widths`, merged in here.
"""
from __future__ import annotations

import math

from stsim.core.config import Config
from stsim.core.reduced import LEARNED
from stsim.core.targets import make_target
from stsim.studies.targets import widths
from stsim.util.validate import check_int, check_real

__all__ = ["QUICK", "FULL", "HELP", "EPILOG", "TUNE_ROOT", "EXACT_LOSS", "MADE_BY",
           "check", "made_by"]

TUNE_ROOT = 1          # root seed of the tuning replicate (the reported seeds: root 0)
EXACT_LOSS = 1e-20     # the construction's loss is below it
_COMMON = dict(targets=("mean", "moment:2", "moment:3", "variance"), q=3, d=5, batch=256,
               mults=(0.25, 0.5, 1.0, 2.0), ratio=LEARNED, rep_T=8, n_batches=3,
               floor_tol=0.02)
QUICK = dict(_COMMON, mode="quick", T=20, steps=300, seeds=2,
             T_test=(25, 30, 40), n_fit=50_000, **widths.QUICK)
FULL = dict(_COMMON, mode="full", T=200, steps=0, seeds=3,
            T_test=(250, 300, 400), n_fit=200_000, **widths.FULL)

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

MADE_BY = {"represents": ("rep_T", "q", "d", "n_batches", "n_fit"),
           "tune": ("T", "q", "d", "batch", "steps", "T_test"),
           "runs": ("T", "q", "d", "batch", "steps", "T_test"),
           **widths.MADE_BY}


def made_by(cfg, name) -> str:
    """The ``settings`` cell of the rows of table ``name`` made with ``cfg``."""
    return widths.made_by(cfg, name, MADE_BY)


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
