r"""Unstable settings, detected and labelled: their values may change on another machine,
so their verdicts are never held or failed (:func:`.verdicts.relabel`: inconclusive).

Three tests:

1. **A step above the derived stability bound** (:func:`step_bound`). For SGD the bound
   is that of the minibatch model, :func:`stsim.core.stability.eta_max` — ``min(2q,
   2n/(c²(q−1)(q+d)))`` for the theory model (``n`` the encoding's exact or approximate
   ``reduced_n``, ``c = 1`` for the sum query, ``1/q`` for the mean) — with, for the
   practical model with the mean query, the γ bound of its own reduced map: its selected
   tokens and the query token share the attention at the solution, ``|s|² → q/(q+1)²``,
   so the γ step ``1 − η|s|²`` is stable for ``η < 2(q+1)²/q`` (10.7 at q = 3), not 2q.
   The practical model with the sum query has no derived bound (the query token's own
   logit is q times a selected token's); the theory model's is used and the setting is
   always tested by its twin (3). Adam has no step bound.
2. **A period-2 or chaotic trajectory of the reduced map** (:func:`oscillating`): the
   γ-step ``γ ← γ − (η/d) ∂L/∂γ`` has the multiplier ``1 − η|s|²``, negative once
   ``η|s|² > 1``; below the bound a perturbation of γ dies out and the steps ``Δγ`` keep
   the sign of the slow drift of γ's fixed point; above it the perturbation (rounding)
   grows and ``Δγ`` alternates in sign. ``RUN = 10`` consecutive alternations, or a step
   where the loss rises, mark the trajectory as oscillating from then on.
3. **An outcome that changes under a rounding-level perturbation** (the *twin*): the run
   (or the reduced map) again with its learning rate moved by one unit in the last place,
   ``numpy.nextafter(lr, inf)`` — every update then differs at the rounding level, as on
   another machine with another summation order — and the check computed with the twin in
   place of the original; a verdict that changes labels the check unstable
   (:func:`needs_twin`: which runs get a twin).
"""
from __future__ import annotations

import numpy as np

from stsim.core.config import Config
from stsim.core.model import query_coef
from stsim.core.stability import eta_max
from stsim.theory.reduced import reduced_gd

__all__ = ["EDGE", "CHEAP_S", "TWIN", "step_bound", "above_bound", "needs_twin",
           "twin_options", "oscillating", "reduced_stability"]

EDGE = 0.9          # a setting with lr >= EDGE * bound is "at the edge": its twin is trained
CHEAP_S = 30.0      # a run estimated below this (one core) always gets its twin
TWIN = "-ulp"       # the twin's name: <name>-ulp
RUN = 10            # this many alternating steps of the reduced map: oscillating


def step_bound(options) -> tuple:
    """``(bound, why)`` of a run's options (module docstring, test 1); ``bound`` is None
    where nothing is derived (Adam; an encoding without a reduction)."""
    cfg = Config.from_options(**options)
    if cfg.optimizer != "sgd":
        return None, f"{cfg.optimizer}: no derived step bound"
    spec = cfg.resolved.encoding
    n = spec.reduced_n(cfg.T) or spec.approx_reduced_n(cfg.T)
    if n is None:
        return None, f"the {spec.label} encoding: no reduced dynamics"
    q, d = cfg.q, cfg.d
    c = query_coef(cfg.query, q)
    approx = "" if spec.reduced_n(cfg.T) else f" (approximate: the slots map with n = {n})"
    if cfg.model == "practical" and cfg.query == "mean":
        transverse = 2.0 * n / (c * c * (q - 1) * (q + d))
        b = min(2.0 * (q + 1) ** 2 / q, transverse)
        return b, f"min(2(q+1)²/q, 2n/(c²(q−1)(q+d))) = {b:.4g}, n = {n}{approx}"
    b = eta_max(q, d, n, c)
    extra = (" (practical/sum: not derived, the theory model's bound)"
             if cfg.model == "practical" else "")
    return b, f"eta_max = min(2q, 2n/(c²(q−1)(q+d))) = {b:.4g}, n = {n}{approx}{extra}"


def above_bound(options) -> str | None:
    """``"unstable: lr … above the stability bound …"`` if the run's lr exceeds its
    :func:`step_bound`, else None."""
    b, why = step_bound(options)
    lr = float(options["lr"])
    if b is not None and lr > b:
        return f"unstable: lr {lr:g} above the stability bound {why}"
    return None


def needs_twin(options, estimated_s) -> bool:
    """Whether a run gets a twin (module docstring, test 3): its seed is 0, it is not
    above its bound (already unstable), and it is at the edge (``lr >= EDGE * bound``),
    has no bound, or costs less than ``CHEAP_S`` seconds."""
    if options.get("seed", 0) != 0 or above_bound(options):
        return False
    b, _ = step_bound(options)
    return b is None or float(options["lr"]) >= EDGE * b or estimated_s < CHEAP_S


def twin_options(options) -> dict:
    """The twin's options: ``lr`` moved up by one unit in the last place."""
    return dict(options, lr=float(np.nextafter(float(options["lr"]), np.inf)))


def oscillating(gamma, run=RUN) -> np.ndarray:
    """Whether each row of ``gamma`` (K, steps) oscillates somewhere: ``run`` consecutive
    steps ``Δγ`` alternate in sign (module docstring). Measured on the reduced map at
    T = 200 (lr 0.5–7.5 by 0.5, 100 000 steps): below the bound 2q no two consecutive
    sign changes occur, above it runs of thousands."""
    g = np.asarray(gamma, dtype=float)
    dg = np.diff(g, axis=1)
    flips = (np.sign(dg[:, 1:]) * np.sign(dg[:, :-1]) < 0).astype(np.int8)
    if flips.shape[1] < run:
        return np.zeros(g.shape[0], dtype=bool)
    # a run of `run` flips: the moving sum over `run` steps reaches `run`
    c = np.cumsum(np.pad(flips, ((0, 0), (1, 0))), axis=1)
    return (c[:, run:] - c[:, :-run]).max(axis=1) >= run


def reduced_stability(T, q, d, lrs, steps, *, pe, d_e=None, record_every=100, chunk=1000):
    """Run the exact reduced map (:func:`stsim.theory.reduced.reduced_gd`) for every lr in
    ``lrs`` for ``steps`` steps, in chunks of ``chunk`` steps recorded at every step, and
    return ``(step, a, γ, loss, oscillated)`` at every ``record_every``-th step (``step``
    (n,), the others (len(lrs), n)); ``oscillated``: the trajectory oscillated
    (:func:`oscillating`) or its loss rose at some step up to then (module docstring,
    test 2). ``chunk`` must be a multiple of ``record_every``."""
    lrs = np.asarray(lrs, dtype=float)
    K = lrs.size
    rec = np.arange(0, steps + 1, record_every)
    A, G, L = (np.empty((K, rec.size)) for _ in range(3))
    osc = np.zeros((K, rec.size), dtype=bool)
    a, g, t = np.zeros(K), np.zeros(K), 0
    tail = np.zeros((K, 0))               # γ over the last RUN steps before the chunk
    seen = np.zeros(K, dtype=bool)
    while True:
        n = min(chunk, steps - t)
        tr = reduced_gd(T, q, d, lrs, n, pe=pe, d_e=d_e, a0=a, gamma0=g)
        seen |= oscillating(np.concatenate([tail, tr.gamma], axis=1))
        if n:
            seen |= tr.max_loss_increase > 0
        j = slice(t // record_every, (t + n) // record_every + 1)
        A[:, j], G[:, j] = tr.a[:, ::record_every], tr.gamma[:, ::record_every]
        L[:, j] = tr.loss[:, ::record_every]
        osc[:, j] = seen[:, None]
        t += n
        if t >= steps:
            break
        tail = tr.gamma[:, -(RUN + 1):-1]
        a, g = tr.a[:, -1], tr.gamma[:, -1]
    return rec, A, G, L, osc
