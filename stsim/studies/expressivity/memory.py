"""Memory estimates of the expressivity parts: the largest arrays of each part's largest
point (float64, by name: :func:`part_memory`), for the study's ``check``
(:func:`stsim.util.validate.check_memory`), made before anything is allocated; the trained
part's run checks itself (:meth:`stsim.core.config.Config.memory_estimate`).
"""
from __future__ import annotations

import warnings

from stsim.core.config import Config
from stsim.util.validate import check_memory

__all__ = ["part_memory", "check_part_memory"]

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
