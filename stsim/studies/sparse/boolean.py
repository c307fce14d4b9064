r"""Sparse Boolean functions learned by one attention head (Edelman, Goel, Kakade & Zhang 2022).

The claim: a bounded-norm attention head represents s-sparse functions of a
length-T sequence with sample complexity growing only like ``log T``. This module holds
the task, the explicit head (:func:`construct`) and one training trial; the two models
(one attention head with an MLP readout, and an FCN on the flattened input) and their
analytic gradients are in :mod:`stsim.studies.sparse.models`; the (T, m) grid, fits and
figures are the study (:mod:`stsim.studies.sparse.study`).

Task: ``b ∈ {±1}^T`` with i.i.d. coordinates, ``P(b_t = +1) = p``; ``s`` hidden positions
drawn uniformly per trial; the label ``y = g(b_{i_1}, …, b_{i_s})`` for ``g`` one of
:data:`FUNCTIONS` (:class:`SparseFunction`; each with its class-balancing default ``p``,
docs/sparse-functions.md, "What is simulated"). Training and its norm control:
:func:`train_trial`.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
from scipy.special import log_expit

from stsim.core.optim import make_optimizer
from stsim.core.session import train_loop
from stsim.studies.sparse.models import (BOOL_MODELS, POSITIONS, VALUES, attention_weights,
                                         bool_forward_backward, init_bool_params, predict,
                                         project)
from stsim.util.validate import as_rng, check_int, check_lr, check_real

__all__ = ["FUNCTIONS", "BOOL_MODELS", "POSITIONS", "VALUES", "validate_trial", "validate_point",
           "SparseFunction", "sparse_function", "SparseTask", "make_task", "init_bool_params",
           "bool_forward_backward", "predict", "attention_weights", "project", "truth_table",
           "construct", "TrainedRun", "select_restart", "train_trial"]

FUNCTIONS = ("and", "parity", "majority", "table")


# --------------------------------------------------------------------------------------
# task
# --------------------------------------------------------------------------------------
class SparseFunction:
    """An s-sparse Boolean function ``g: {±1}^s → {±1}`` and its default input bias."""

    def __init__(self, kind: str, s: int, table=None):
        if kind not in FUNCTIONS:
            raise ValueError(f"fn must be one of {FUNCTIONS}, got {kind!r}")
        self.kind = kind
        self.s = check_int("s", s, 1)
        self.table = None
        if kind == "majority" and self.s % 2 == 0:
            raise ValueError(f"s must be odd for fn='majority' (a tie has no label), got {s}")
        if kind == "table":
            if table is None:
                raise ValueError("fn='table' needs table: 2**s entries in {-1, +1} or {0, 1}")
            if isinstance(table, str):  # "01101001", "-++--++-", "0,1,1,0" or "-1,1,1,-1"
                parts = table.split(",") if "," in table else list(table.strip())
                try:
                    table = [{"+": 1.0, "-": -1.0}.get(v.strip()) or float(v)
                             for v in parts if v.strip()]
                except ValueError:
                    raise ValueError(f"table must list 2**s entries in {{-1, +1}} or {{0, 1}} "
                                     f"(e.g. '01101001' or '-1,1,1,-1'), got {table!r}") from None
            tab = np.asarray(table, dtype=float).ravel()
            if tab.size != 2 ** self.s:
                raise ValueError(f"table must have 2**s = {2 ** self.s} entries for s={self.s}, "
                                 f"got {tab.size}")
            if np.all(np.isin(tab, (0.0, 1.0))):
                tab = 2.0 * tab - 1.0
            if not np.all(np.isin(tab, (-1.0, 1.0))):
                raise ValueError("table entries must all be in {-1, +1} or all in {0, 1}")
            self.table = tab
        elif table is not None:
            raise ValueError(f"table is only used with fn='table', not fn={kind!r}")

    @property
    def default_p(self) -> float:
        """``P(b_t = +1)`` balancing the classes: ``2^{-1/s}`` for AND, else 1/2."""
        return 2.0 ** (-1.0 / self.s) if self.kind == "and" else 0.5

    def __call__(self, bits: np.ndarray) -> np.ndarray:
        """Labels ``(n,)`` in {±1} of relevant bits ``(n, s)`` in {±1}."""
        bits = np.asarray(bits)
        if self.kind == "and":
            return np.where(np.all(bits > 0, axis=1), 1.0, -1.0)
        if self.kind == "parity":
            return np.prod(bits, axis=1).astype(float)
        if self.kind == "majority":
            return np.sign(bits.sum(axis=1)).astype(float)
        idx = (bits > 0).astype(np.int64) @ (1 << np.arange(self.s - 1, -1, -1))
        return self.table[idx]

    def table_string(self) -> str:
        """The truth table as a string of ``+``/``-`` (index order of :func:`truth_table`)."""
        return "".join("+" if v > 0 else "-" for v in truth_table(self))

    def __repr__(self):
        return f"SparseFunction({self.kind!r}, s={self.s})"


def sparse_function(fn="and", s: int = 3, table=None) -> SparseFunction:
    """A :class:`SparseFunction` from a name (or return ``fn`` if it already is one)."""
    return fn if isinstance(fn, SparseFunction) else SparseFunction(fn, s, table)


class SparseTask:
    """One trial's task: length ``T``, hidden positions, function and input bias ``p``."""

    def __init__(self, T: int, positions, fn: SparseFunction, p: float):
        self.T = check_int("T", T, 1)
        self.positions = np.asarray(positions, dtype=np.int64)
        self.fn = fn
        self.p = float(p)

    def sample(self, rng, n: int):
        """``n`` samples ``(b, y)``: ``b`` (n, T) in {±1} float, ``y`` (n,) in {±1}.

        Rows are drawn in order from ``rng``, so the first ``m`` rows of a sample of size
        ``m' > m`` are the sample of size ``m`` (nested training sets across ``m``)."""
        n = check_int("m", n, 1)
        b = np.where(as_rng(rng).random((n, self.T)) < self.p, 1.0, -1.0)
        return b, self.fn(b[:, self.positions])


def make_task(rng, T: int, s: int = 3, fn="and", table=None, p=None) -> SparseTask:
    """Draw the hidden positions (uniform s-subset of ``{0..T-1}``, sorted) for a trial.

    ``ValueError`` for ``s < 1``, ``s > T``, an unknown ``fn``, a wrong table length or
    ``p`` outside (0, 1)."""
    T = check_int("T", T, 1)
    s = check_int("s", s, 1, T)
    g = sparse_function(fn, s, table)
    if p is None:
        p = g.default_p
    p = float(p)
    if not (0.0 < p < 1.0):
        raise ValueError(f"p (the probability of a +1 bit) must lie in (0, 1), got {p}")
    positions = np.sort(as_rng(rng).choice(T, size=s, replace=False))
    return SparseTask(T, positions, g, p)


def _patterns(s: int) -> np.ndarray:
    """All ``2^s`` bit patterns (2^s, s) in ±1, row ``k`` = the binary digits of ``k``,
    most significant first (the truth-table index order)."""
    idx = np.arange(2 ** s)
    return np.where((idx[:, None] >> np.arange(s - 1, -1, -1)) & 1, 1.0, -1.0)


def truth_table(fn: SparseFunction) -> np.ndarray:
    """The ``2^s`` labels of ``fn``, index ``Σ_j [bit_j = +1] 2^{s-1-j}`` (MSB first)."""
    return fn(_patterns(fn.s))


def construct(task: SparseTask, leak: float = 1e-3) -> dict:
    """An explicit attention head (``pos="onehot"``, ``values="token"``, ``d_v = 1``)
    computing ``task``'s function: the representation claim made concrete.

    Attention: ``a_p[i_j] = G + j ln 2`` on the hidden positions and 0 elsewhere, so on the
    support ``α_{i_j} ∝ 2^j`` and the mass off the support is at most ``leak`` for
    ``G = ln((T − s)/leak)``; then ``S = Σ_j α_{i_j} b_{i_j}`` (± ``2 leak``) takes ``2^s``
    distinct levels ``ℓ_k`` spaced ``Δ = 2/(2^s − 1)`` apart, one per bit pattern.
    Readout (``v_b = 1``): ``f(S) = t_(0) + Σ_k (t_(k) − t_(k−1)) ρ_k(S)`` over the levels
    sorted, with the ramp ``ρ_k(S) = (relu(S − μ_k + w) − relu(S − μ_k − w)) / 2w`` at the
    midpoints ``μ_k`` and ``w = Δ/4``: two hidden units per level, ``f = ±1`` exactly (unit
    margin) whenever ``|S − ℓ| < w``, i.e. for ``leak < Δ/8``. Norm of ``a_p``:
    ``≈ √s · ln(T/leak)`` — logarithmic in ``T``, the bounded-norm regime of the claim.
    """
    T, s, pos = task.T, task.fn.s, task.positions
    leak = float(leak)
    if not 0 < leak < 1 / (4 * (2 ** s - 1)):
        raise ValueError(f"leak must lie in (0, {1 / (4 * (2 ** s - 1)):.3g}) for s={s}, got {leak}")
    G = math.log(max(T - s, 1) / leak)
    a_p = np.zeros(T)
    w_att = 2.0 ** np.arange(s)                   # α on the support ∝ 2^j, j = 0..s-1
    a_p[pos] = G + np.log(w_att)
    alpha = w_att / w_att.sum()
    levels = _patterns(s) @ alpha
    order = np.argsort(levels)
    lv, tv = levels[order], truth_table(task.fn)[order]
    mids = 0.5 * (lv[1:] + lv[:-1])
    w = 0.25 * float(np.min(np.diff(lv)))
    jumps = np.diff(tv) / (2 * w)
    W1 = np.ones((2 * len(mids), 1))
    b1 = np.concatenate([-mids + w, -mids - w])
    A = np.concatenate([jumps, -jumps])[None, :]
    return {"a_b": np.zeros(1), "v_b": np.ones(1), "a_p": a_p, "W1": W1, "b1": b1, "A": A,
            "c": np.array([tv[0]])}


# --------------------------------------------------------------------------------------
# one trial
# --------------------------------------------------------------------------------------
def validate_trial(T, m, s=3, fn="and", model="attention", pos="onehot", table=None, p=None,
                   k=None, **kw):
    """Check a trial's settings (``ValueError`` naming the parameter) without running it."""
    T = check_int("T", T, 1)
    check_int("m", m, 1)
    s = check_int("s", s, 1, T)
    g = sparse_function(fn, s, table)
    if p is not None and not (0.0 < float(p) < 1.0):
        raise ValueError(f"p (the probability of a +1 bit) must lie in (0, 1), got {p}")
    if model not in BOOL_MODELS:
        raise ValueError(f"model must be one of {BOOL_MODELS}, got {model!r}")
    if pos not in POSITIONS:
        raise ValueError(f"pos must be one of {POSITIONS}, got {pos!r}")
    if kw.get("values", "token") not in VALUES:
        raise ValueError(f"values must be one of {VALUES}, got {kw['values']!r}")
    if model == "attention" and pos == "onehot" and k not in (None, T):
        raise ValueError(f"k must equal T={T} for pos='onehot' (or be omitted), got {k}")
    for name in ("d_v", "hidden", "max_steps", "n_test", "restarts"):
        if name in kw:
            check_int(name, kw[name], 1)
    if "lr" in kw:
        check_lr(kw["lr"])
    if "threshold" in kw and not 0.5 <= float(kw["threshold"]) <= 1.0:
        raise ValueError(f"threshold (test accuracy) must lie in [0.5, 1], got {kw['threshold']}")
    check_real("max_norm", kw.get("max_norm"), lo=0.0, lo_open=True, allow_none=True)
    check_real("weight_decay", kw.get("weight_decay", 0.0), lo=0.0)
    check_real("margin", kw.get("margin"), lo=0.0, allow_none=True)
    return g


def validate_point(point: dict):
    """:func:`validate_trial` on a sweep point (the ``validate=`` of :func:`stsim.sweeps.sweep`)."""
    return validate_trial(**point)


@dataclass
class TrainedRun:
    """One training run of :func:`train_trial`: final ``params``, training scores ``f``
    (m,), ``fitted`` (the margin stop fired), ``steps``, ``diverged``, ``data_loss``
    (the unregularised training loss; ``inf`` if diverged)."""

    params: dict
    f: np.ndarray
    fitted: bool
    steps: int
    diverged: bool
    data_loss: float


def _train(params, b, y, lr, max_steps, max_norm, weight_decay, margin) -> TrainedRun:
    """Full-batch Adam with projection (in place) through the core loop
    (:func:`stsim.core.session.train_loop`): a non-finite loss diverges, the margin stop
    ends the run once every ``y f ≥ margin``."""
    stop = None if margin is None else (lambda step, out: np.min(y * out[2]) >= margin)
    end = train_loop(lambda p: bool_forward_backward(p, b, y, weight_decay),
                     make_optimizer("adam", lr), params, max_steps, stop=stop,
                     post_step=lambda p: project(p, max_norm),
                     finite=lambda loss, grads: math.isfinite(loss))
    f = end.out[2]
    diverged = end.status == "diverged"
    data_loss = -float(np.mean(log_expit(y * f))) if not diverged else math.inf
    return TrainedRun(params=params, f=f, fitted=end.status == "stopped", steps=end.step,
                      diverged=diverged, data_loss=data_loss)


def select_restart(runs, y) -> int:
    """Index of the kept run, from the training sample only: among the runs that fit it
    (accuracy ≥ 0.99, not diverged), the one of smallest largest-block norm; if none
    fits, the lowest training loss (a diverged run has loss ``inf``)."""
    fits = [i for i, r in enumerate(runs) if not r.diverged and np.mean(np.sign(r.f) == y) >= 0.99]
    if fits:
        return min(fits, key=lambda i: project(runs[i].params, None))
    return min(range(len(runs)), key=lambda i: runs[i].data_loss)


def train_trial(T: int, m: int, s: int = 3, fn: str = "and", model: str = "attention",
                seed: int = 0, *, pos: str = "onehot", k: int | None = None,
                values: str = "token", d_v: int = 4,
                hidden: int = 16, lr: float = 0.05, max_steps: int = 500,
                max_norm: float | None = 20.0, weight_decay: float = 3e-4,
                margin: float | None = None,
                n_test: int = 2000, threshold: float = 0.95, table=None, p=None,
                restarts: int = 1) -> dict:
    """Train one model on ``m`` samples of one sparse task; test on fresh samples.

    Random streams: ``SeedSequence(seed).spawn(4)`` → hidden positions, training sample,
    test sample, initialisation. The positions and test set depend only on ``(seed, T, s,
    fn)``, so the two models and every ``m`` of one seed see the same task (paired), and
    the training samples are nested in ``m``.

    Training: ``max_steps`` full-batch Adam steps (rate ``lr``) on the regularised loss
    (weight decay ``weight_decay``), each followed by the projection onto
    ``‖θ_block‖_F ≤ max_norm``; with ``margin`` set, training stops early once every
    training margin ``y f ≥ margin``. Defaults: 500 steps, lr 0.05, λ = 3e-4, R = 20, no
    early stop (docs/sparse-functions.md: stopping at the first fit memorises the sample).

    Returns a dict (one row of a sweep table): ``success`` (0/1: ``test_acc ≥ threshold``),
    ``test_acc``, ``train_acc``, ``train_loss`` (data term), ``fitted`` (0/1: the early
    stop fired), ``steps``, ``diverged`` (0/1), ``max_block_norm``, ``attn_on_support``
    (mean over test samples of ``Σ_{t∈S} α_t``; attention only, else ``None``),
    ``positions`` (the hidden positions, e.g. ``"3 17 40"``), ``p``, ``chosen`` (index of
    the kept restart), ``cpu_time_s``.

    ``restarts = k > 1`` trains ``k`` initialisations on the same sample (the first is the
    single-restart one) and keeps, using the training sample only, the run that fits it
    (accuracy ≥ 0.99) with the smallest largest-block norm (else the lowest training
    loss): a cheap stand-in for the norm-bounded empirical risk minimiser of the claim.
    """
    g = validate_trial(T, m, s, fn, model, pos, table, p, k, values=values, d_v=d_v, hidden=hidden, lr=lr,
                       max_steps=max_steps, n_test=n_test, threshold=threshold,
                       max_norm=max_norm, weight_decay=weight_decay, margin=margin,
                       restarts=restarts)
    c0 = time.process_time()
    r_task, r_train, r_test, r_init = np.random.SeedSequence(seed).spawn(4)
    task = make_task(np.random.default_rng(r_task), T, s, g, p=p)
    b, y = task.sample(np.random.default_rng(r_train), m)
    b_test, y_test = task.sample(np.random.default_rng(r_test), n_test)
    inits = [r_init] + (r_init.spawn(restarts - 1) if restarts > 1 else [])
    runs = [_train(init_bool_params(np.random.default_rng(r), T, model, d_v=d_v, hidden=hidden,
                                    pos=pos, k=k, values=values),
                   b, y, lr, max_steps, max_norm, weight_decay, margin) for r in inits]
    chosen = select_restart(runs, y)
    best = runs[chosen]
    params, f, diverged = best.params, best.f, best.diverged
    row = {"success": 0, "test_acc": None, "train_acc": float(np.mean(np.sign(f) == y)),
           "train_loss": None, "fitted": int(best.fitted), "steps": best.steps,
           "diverged": int(diverged), "max_block_norm": project(params, None),
           "attn_on_support": None,
           "positions": " ".join(str(int(i)) for i in task.positions), "p": task.p,
           "chosen": chosen}
    if not diverged:
        row["train_loss"] = best.data_loss
        f_test = predict(params, b_test)
        row["test_acc"] = float(np.mean(np.sign(f_test) == y_test))
        row["success"] = int(row["test_acc"] >= threshold)
        if model == "attention":
            alpha = attention_weights(params, b_test)
            row["attn_on_support"] = float(alpha[:, task.positions].sum(axis=1).mean())
    row["cpu_time_s"] = time.process_time() - c0
    return row
