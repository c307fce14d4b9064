r"""The expressivity study's design: the parts and their presets (``QUICK`` / ``FULL``),
``HELP``, ``EPILOG``, the part modules (:func:`part_module`) and :func:`check`, with the
memory estimates of each part's largest point (:func:`part_memory`).

Every random number comes from ``SeedSequence((seed, …))`` keyed by the point's sizes,
so a part's numbers do not depend on which other parts ran, nor on the executor or the
order of the points (the sweep's own replicate seed is not used).

Memory estimates of the expressivity parts: the largest arrays of each part's largest
point (float64, by name: :func:`part_memory`), for the study's ``check``
(:func:`stsim.util.validate.check_memory`), made before anything is allocated; the trained
part's run checks itself (:meth:`stsim.core.config.Config.memory_estimate`).
"""
from __future__ import annotations

import warnings

import numpy as np

from stsim.core.config import Config
from stsim.studies.expressivity import patterns as pt
from stsim.studies.expressivity.common import rng_of
from stsim.studies.expressivity.parts import curves, jl, patterns, seq2seq, trained, width
from stsim.util.validate import check_int, check_memory

__all__ = ["PARTS", "QUICK", "FULL", "HELP", "EPILOG", "WORKERS_HELP", "part_module",
           "PART_MODULES", "check", "part_memory", "check_part_memory"]

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

PART_MODULES = dict(zip(PARTS, (curves, width, seq2seq, trained, patterns, jl)))
_rng = rng_of   # the generator of a point (tests build the same targets)


def part_module(name):
    """The module of part ``name`` (``ValueError`` naming the parts otherwise)."""
    if name not in PART_MODULES:
        raise ValueError(f"only must name parts from {PARTS}, got {name!r}")
    return PART_MODULES[name]


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


# --------------------------------------------------------------------------------------
# memory estimates (ValueError naming the settings, before anything is allocated)
# --------------------------------------------------------------------------------------
F8 = 8


def _mx(values):
    return max(int(v) for v in (values if isinstance(values, (list, tuple)) else [values]))


def part_memory(name, cfg):
    """``(parts, what)``: the estimate of part ``name`` with settings ``cfg`` (bytes by
    array) and the text naming the point and its settings; ``None`` for the trained part
    (its run checks itself, :func:`check_part_memory`)."""
    if name == "curves":
        B, N, m, d = int(cfg["n_inputs"]), int(cfg["N"]), _mx(cfg["ms"]), int(cfg["d"])
        return ({"logits and softmax temporaries (n_inputs x N, x5)": 5 * B * N * F8,
                 "tokens (n_inputs x N x d)": B * N * d * F8,
                 "position table (N x m)": N * m * F8},
                f"expressivity: a curves point at N={N} (curves.N), n_inputs={B}, m={m} "
                f"(curves.ms)")
    if name == "width":
        B = max(int(cfg["n_inputs"]), int(cfg.get("sum_n_inputs", 0)))
        N, m = _mx(cfg["Ns"]), max(int(cfg["m_max"]), int(cfg["sum_m_max"]))
        return ({"logits and softmax temporaries (n_inputs x N, x5)": 5 * B * N * F8,
                 "a table chunk (2048 x m)": 2048 * m * F8},
                f"expressivity: a width point at N={N} (width.Ns), n_inputs={B}, m={m} "
                f"(width.m_max)")
    if name == "seq2seq":
        N, m, d = _mx(cfg["Ns"]), _mx(cfg["ms"]), int(cfg["d"])
        return ({"logit blocks (512 x N, x5)": 5 * min(512, N) * N * F8,
                 "position table (N x m)": N * m * F8, "tokens (N x d)": N * d * F8},
                f"expressivity: a seq2seq point at N={N} (seq2seq.Ns), m={m} (seq2seq.ms)")
    if name in ("patterns", "jl"):
        Ls = list(cfg["Ls"]) + list(cfg.get("ratio_Ls", ()))
        L, d = _mx(Ls), int(cfg["d_max"])
        return ({"queries and keys (L x d_max, x3)": 3 * L * d * F8,
                 "logit blocks (512 x L, x4)": 4 * min(512, L) * L * F8},
                f"expressivity: a {name} point at L={L} ({name}.Ls), d_max={d} "
                f"({name}.d_max)")
    return None


def check_part_memory(name, cfg) -> None:
    """``ValueError`` naming the part's settings when its largest point would not fit in
    this machine's memory (the trained part: its run's :class:`stsim.core.config.Config`
    refuses, prefixed with the part)."""
    if name == "trained":
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")          # the long-run warning
                Config.from_options(T=int(cfg["T"]), q=int(cfg["q"]), d=int(cfg["d"]),
                                    pe="stochastic", sampler="sphere", d_e=_mx(cfg["d_es"]),
                                    model="theory", query="sum", lr=float(cfg["lr"]),
                                    steps=int(cfg["steps"]), batch=int(cfg["batch"]),
                                    n_val=int(cfg["n_val"]))
        except ValueError as exc:
            raise ValueError(f"expressivity: the trained part (trained.T, trained.d_es, "
                             f"trained.batch, ...): {exc}") from None
        return
    est = part_memory(name, cfg)
    if est is not None:
        check_memory(*est)
