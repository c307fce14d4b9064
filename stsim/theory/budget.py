r"""What a theorem check costs, known before it runs (:func:`stsim.theory.checks.check_theorem`).

**Step budget.** The reduced map is run ``steps = ⌈2 (t_pred + t_plat)⌉ + 10`` steps:
``t_pred = (n−1)/(4ηc²ε)`` is the rate law (``docs/theory.md`` §4) and ``t_plat`` the
initial plateau, which the rate law leaves out (:func:`plateau_steps`; without it the
budget ran out on the plateau at T = 1000: docs/theory.md §6, "The step budget").

**Cost.** CPU seconds and bytes of every part, from the sizes alone (rough constants,
measured on the project machine, 2 cores shared; a bound on the order of magnitude, not
a benchmark), so that what this machine cannot do is refused before anything is
allocated, with one ``ValueError`` naming the parameter (:func:`check_cost`).
"""
from __future__ import annotations

import math

from stsim.util.validate import MEMORY_FRACTION, physical_memory

__all__ = ["plateau_steps", "step_budget", "estimate_cost", "check_cost"]

SECONDS_PER_REDUCED_STEP = 1.0e-6   # reduced_gd_scalar: 0.35–0.8 µs here, ~1.7x on main (core/reduced)
SECONDS_PER_ENUM_UNIT = 5.0e-8      # full-matrix population GD, per configuration·T·q·step
SECONDS_PER_FULL_STEP = 5.0e-4      # ... and its overhead per step
SECONDS_PER_SAMPLE_ENTRY = 2.0e-7   # forward(+backward) per sample and token / width entry
N_BATCHES = 40                      # batches of the block-gradient estimate
MAX_RECORDS = 20000                 # records kept of a reduced trajectory


def plateau_steps(T, q, d, lr, n, c) -> float:
    r"""Length of the initial plateau of the reduced map from zero, in steps (an upper
    estimate): ``t_plat = T/η + (n−1)(T−q)/(η c² d)``.

    Derivation (gradient-flow time ``τ = η·step``, ``r = T − q``). At ``a ≈ 0`` the
    attention is uniform, ``s₊ = S₂ = 1/T``, so ``dγ/dτ = (1 − γ)/T``: γ rises in ``T/η``
    steps. Then, with ``γ ≈ 1``, ``dθ/dτ = −c²/(n−1) ∂L/∂θ = c² d r T e^θ/((n−1)(q e^θ +
    r)³)`` (``1 − qγ(s₊ − s₋) = T/(q e^θ + r)``), so the escape to ``q e^θ = r`` takes
    ``τ = (n−1)/(c² d r T) ∫_1^{r/q} (qu + r)³ u^{−2} du ≈ (n−1) r²/(c² d T)`` — the
    ``r³/u²`` term, i.e. the slow start at θ ≈ 0, dominates — ``(n−1)(T−q)/(ηc²d)`` steps.
    Measured first step with ``L <= L(0)/2`` over this estimate (q = 2, d = 3, η = 1/180):
    T = 12: 0.90; 50: 0.70; 200: 0.57; 1000: 0.52; slots T = 9, d_e = 24: 0.88; T = 100,
    d_e = 200: 0.60; q = 3, d = 5, η = 0.5, T = 200: 0.60.
    """
    return T / lr + (n - 1.0) * (T - q) / (lr * c * c * d)


def step_budget(t_pred, t_plat) -> int:
    """Default reduced steps: ``⌈2 (t_pred + t_plat)⌉ + 10`` (``inf`` arguments give an
    ``OverflowError``-free huge int via the float)."""
    total = 2.0 * (t_pred + t_plat)
    return int(math.ceil(total)) + 10 if math.isfinite(total) and total < 1e300 else 10 ** 300


def estimate_cost(*, T, q, d, d_e_train, d_e_test, steps, steps_small, T_test, n_mc,
                  full_units, full_steps, grad_points, grad_samples) -> dict:
    """CPU seconds and bytes of each part of a theorem check.

    Parameters
    ----------
    T, q, d : int
        Sizes.
    d_e_train, d_e_test : int
        Widths of the trained model (block gradients) and of the tested one (Monte-Carlo).
    steps, steps_small : int
        Reduced steps of the run to ε and of the run to ε/8.
    T_test : tuple of int
        OOD lengths.
    n_mc : int
        Monte-Carlo samples per OOD length.
    full_units, full_steps : float, int
        Enumerated configurations × T of the full-matrix run (0: not run) and its steps.
    grad_points, grad_samples : int
        Points and samples per point of the block gradients.

    Returns
    -------
    dict
        ``{"seconds": {part: s}, "bytes": {part: bytes}, "total_seconds", "peak_bytes"}``
        (parts run one after the other: the peak is the largest part).
    """
    f8 = 8.0
    sec, mem = {}, {}
    sec["reduced map"] = SECONDS_PER_REDUCED_STEP * (steps + steps_small)
    # records (a Python float and a float64 each, 3 quantities) and one stride refined
    mem["reduced map"] = 3 * 40.0 * (MAX_RECORDS + steps_small / MAX_RECORDS)
    if full_units:
        sec["full-matrix population GD"] = full_steps * (
            SECONDS_PER_ENUM_UNIT * full_units * q + SECONDS_PER_FULL_STEP)
        mem["full-matrix population GD"] = f8 * 4 * full_units
    if grad_points:
        D = d + d_e_train
        B = max(1, grad_samples // N_BATCHES)
        sec["block gradients"] = grad_points * SECONDS_PER_SAMPLE_ENTRY * (
            grad_samples * (T * d + D) + N_BATCHES * D * D)
        mem["block gradients"] = f8 * (6 * D * D + 3 * B * (T * (d + 3) + D))
    if T_test:
        D = d + d_e_test
        B = max(1, min(2000, n_mc // 10))
        sec["Monte-Carlo OOD"] = sum(SECONDS_PER_SAMPLE_ENTRY * n_mc * (t * d + D)
                                     for t in T_test)
        mem["Monte-Carlo OOD"] = f8 * (D * D + d * D + 3 * B * (max(T_test) * (d + 3) + D))
    return {"seconds": sec, "bytes": mem, "total_seconds": float(sum(sec.values())),
            "peak_bytes": float(max(mem.values()))}


def _amount(seconds) -> str:
    for unit, size in (("days", 86400.0), ("h", 3600.0), ("min", 60.0)):
        if seconds >= size:
            return f"{seconds / size:.3g} {unit}"
    return f"{seconds:.3g} s"


def check_cost(est, *, sizes, max_seconds, max_bytes=None) -> None:
    """Raise one ``ValueError`` when ``est`` (:func:`estimate_cost`) exceeds
    ``max_seconds`` of CPU or ``max_bytes`` of memory (default 80% of this machine's:
    :func:`stsim.util.validate.physical_memory`).

    The message names the parameter that drives the largest part first (``sizes``: the
    ``{name: value}`` of the settings, largest size first), both estimates itemised, the
    limits and what to change.
    """
    limit = MEMORY_FRACTION * physical_memory() if max_bytes is None else float(max_bytes)
    over_t = est["total_seconds"] > max_seconds
    over_m = est["peak_bytes"] > limit
    if not (over_t or over_m):
        return
    lead = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
                     for k, v in sizes.items())
    secs = "; ".join(f"{k} {_amount(v)}" for k, v in est["seconds"].items() if v >= 0.01)
    mems = "; ".join(f"{k} {v / 2 ** 30:.3g} GiB" for k, v in est["bytes"].items()
                     if v >= 2 ** 20)
    limits = ([f"max_seconds={max_seconds:g}"] if over_t else []) + (
        [f"the {limit / 2 ** 30:.3g} GiB allowed (80% of this machine's memory)"] if over_m else [])
    raise ValueError(
        f"{lead}: the theorem check would take about {_amount(est['total_seconds'])} of CPU "
        f"({secs}) and need about {est['peak_bytes'] / 2 ** 30:.3g} GiB of memory "
        f"({mems or 'small'}), more than {' and '.join(limits)}; lower the sizes (or set "
        "grad_points=0, full_steps=0, fewer n_mc), or raise max_seconds")
