"""Positional encodings (docs/model.md, 'Positional encodings').

Each token is ``z_i = [x_i; p_i] ∈ R^D``, ``D = d + d_e``. Four families, one class each
(:class:`OneHot`, :class:`NearOrthogonal`, :class:`StochasticSlots`,
:class:`StochasticSphere`; their table: docs/model.md, "Positional encodings").

*Index* families are one-hot vectors at integer slots; they are carried as the slot
array ``idx`` ((T,) shared or (B, T) per sample) and never as a dense ``d_e × T`` matrix:
the model turns them into gathers and scatter-adds. *Dense* families carry ``P`` of shape
(T, d_e) (shared) or (B, T, d_e) (per sample).

The families by name — the registry, the resolution of a name and the builder — are
:mod:`stsim.core.families` (which imports this module, never the reverse).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from stsim.util.threads import map_threads
from stsim.util.validate import check_int

__all__ = [
    "PEBatch",
    "Encoding",
    "OneHot",
    "NearOrthogonal",
    "StochasticSlots",
    "StochasticSphere",
    "StochasticSinusoid",
    "PE_NAMES",
    "SAMPLERS",
    "coherence",
    "sorted_subsets",
    "check_batch",
    "sample_checked",
]

PE_NAMES = ("onehot", "near-orthogonal", "stochastic")
SAMPLERS = ("slots", "sphere", "sinusoid")
_ALIASES = {"one-hot": "onehot", "one_hot": "onehot", "near_orthogonal": "near-orthogonal",
            "nearorthogonal": "near-orthogonal"}


@dataclass(frozen=True)
class PEBatch:
    """Encodings of one batch. Exactly one of ``idx`` (index form) and ``P`` (dense) is set.

    Attributes
    ----------
    d_e : int
        The encoding width.
    idx : ndarray of int, shape (T,) or (B, T), or None
        Slot of each position: ``p_i = e_{idx[i]}``.
    P : ndarray, shape (T, d_e) or (B, T, d_e), or None
        The dense encodings.
    """

    d_e: int
    idx: np.ndarray | None = None
    P: np.ndarray | None = None

    @property
    def is_index(self) -> bool:
        """``True`` for the index form (``idx`` set), ``False`` for dense ``P``."""
        return self.idx is not None

    def dense(self) -> np.ndarray:
        """Dense encodings, (T, d_e) or (B, T, d_e). For tests and the reference path only."""
        if self.P is not None:
            return self.P
        return np.eye(self.d_e)[self.idx]


def check_batch(enc, pe, B: int, T: int) -> PEBatch:
    """``pe``, what ``enc.sample(rng, B, T)`` returned, checked where it enters the core:
    a :class:`PEBatch` of ``enc``'s ``d_e`` with exactly one of ``idx`` (a NumPy integer
    array of shape (T,) or (B, T), every slot in ``[0, d_e)`` — a negative slot is read
    from the end of an array, or outside it in compiled code — and distinct within a
    sample: the index kernels add at the slots with fancy indexing, where a slot given
    twice keeps one of its two terms) and ``P`` (a real
    float array of shape (T, d_e) or (B, T, d_e), finite). ``ValueError`` naming the encoding's class
    and the field otherwise, before the model uses it.

    >>> check_batch(OneHot(4), PEBatch(4, idx=np.array([0, -1])), 1, 2)
    Traceback (most recent call last):
    ...
    ValueError: encoding OneHot ('onehot'): sample(rng, B=1, T=2) returned idx with slot -1
    outside [0, d_e=4)
    """
    d_e = getattr(enc, "d_e", None)
    where = (f"encoding {type(enc).__name__} ({getattr(enc, 'label', '?')!r}): "
             f"sample(rng, B={B}, T={T}) returned")
    if not isinstance(pe, PEBatch):
        raise ValueError(f"{where} a {type(pe).__name__}, not a stsim.core.encodings.PEBatch")
    if isinstance(pe.d_e, bool) or not isinstance(pe.d_e, (int, np.integer)) or pe.d_e != d_e:
        raise ValueError(f"{where} d_e={pe.d_e!r}, the encoding's d_e is {d_e}")
    if (pe.idx is None) == (pe.P is None):
        raise ValueError(f"{where} {'both' if pe.P is not None else 'neither'} idx and P: "
                         f"exactly one must be set")
    name, arr = ("idx", pe.idx) if pe.idx is not None else ("P", pe.P)
    if not isinstance(arr, np.ndarray):
        raise ValueError(f"{where} {name} as a {type(arr).__name__}, not a NumPy array")
    if name == "idx":
        shapes = [(T,), (B, T)]
        if arr.dtype.kind not in "iu":
            raise ValueError(f"{where} idx of dtype {arr.dtype}, not an integer array")
    else:
        shapes = [(T, d_e), (B, T, d_e)]
        if arr.dtype.kind != "f":
            raise ValueError(f"{where} P of dtype {arr.dtype}, not a real float array")
    if arr.shape not in shapes:
        raise ValueError(f"{where} {name} of shape {arr.shape}, not "
                         f"{' or '.join(str(s) for s in shapes)}")
    if name == "idx" and arr.size:
        lo, hi = int(arr.min()), int(arr.max())
        if lo < 0 or hi >= d_e:
            raise ValueError(f"{where} idx with slot {lo if lo < 0 else hi} outside "
                             f"[0, d_e={d_e})")
        if not (np.diff(arr, axis=-1) > 0).all():       # increasing: distinct (cheap)
            srt = np.sort(arr.reshape(-1, T), axis=-1)
            same = np.nonzero(srt[:, 1:] == srt[:, :-1])
            if same[0].size:
                row, col = int(same[0][0]), int(same[1][0])
                raise ValueError(f"{where} idx with slot {int(srt[row, col])} twice in sample "
                                 f"{row}: each position of a sample needs a slot of its own")
    elif name == "P" and not np.isfinite(arr).all():
        raise ValueError(f"{where} P with non-finite entries ({np.isnan(arr).sum()} NaN, "
                         f"{np.isinf(arr).sum()} inf): a bad encoding, not a training failure")
    return pe


def sample_checked(enc, rng, B: int, T: int) -> PEBatch:
    """``enc.sample(rng, B, T)``, checked by :func:`check_batch`: how the core draws an
    encoding's batch (the training steps, the validation sets, the population)."""
    return check_batch(enc, enc.sample(rng, B, T), B, T)


def coherence(P: np.ndarray, block: int = 2048) -> float:
    """``δ = max_{i≠j} |<p_i, p_j>|`` of the rows of ``P`` (n, d_e), computed in blocks."""
    P = np.asarray(P, dtype=np.float64)
    n = P.shape[0]
    worst = 0.0
    for s in range(0, n, block):
        G = P[s:s + block] @ P.T
        rows = np.arange(G.shape[0])
        G[rows, s + rows] = 0.0
        worst = max(worst, float(np.abs(G).max(initial=0.0)))
    return worst


_CHUNK = 1 << 15      # elements normalised at once (256 KiB: stays in the L2 cache)
_BLOCK = 1 << 18      # elements per child stream of a large draw (2 MiB)


def _fill_unit_rows(rng: np.random.Generator, rows: np.ndarray) -> None:
    """Fill ``rows`` (n, m) in place with uniform unit vectors from ``rng``, in order:
    Gaussians drawn and normalised ``_CHUNK`` elements at a time, each block while it is in
    cache (the numbers of one ``rng.standard_normal(rows.shape)`` normalised at once)."""
    step = max(1, _CHUNK // rows.shape[1])
    for s in range(0, rows.shape[0], step):
        blk = rows[s:s + step]
        rng.standard_normal(out=blk)
        nrm = np.einsum("ij,ij->i", blk, blk)
        np.sqrt(nrm, out=nrm)
        blk /= nrm[:, None]


def _unit_rows(rng: np.random.Generator, shape) -> np.ndarray:
    """I.i.d. uniform unit vectors along the last axis (normalised Gaussians).

    A table (``shape`` of one sample, ``(n, m)`` or ``(1, n, m)``) and any draw of up to
    ``_BLOCK`` (2^18) elements: the numbers of one ``rng.standard_normal(shape)`` call
    normalised at once. A larger batch (``(B, T, m)``, ``B >= 2``; a training batch of the
    sphere encodings, 256 × 200 × 64 normals, took 36 ms from one generator) is cut into
    blocks of ``⌊_BLOCK / m⌋`` whole rows, each filled from its own child of a
    :class:`numpy.random.SeedSequence` built from four 63-bit words of ``rng`` (``rng``'s
    bit-generator type), on two threads when :func:`stsim.util.threads.parallel_default`
    allows: the same numbers on one thread or two, and ``rng`` moves by four words
    (docs/model.md, "Large sphere batches on two threads")."""
    G = np.empty(shape)
    m = shape[-1]
    rows = G.reshape(-1, m)
    per = max(1, _BLOCK // m)
    if len(shape) < 3 or shape[0] < 2 or rows.shape[0] <= per:
        _fill_unit_rows(rng, rows)
        return G
    starts = range(0, rows.shape[0], per)
    root = np.random.SeedSequence(rng.integers(0, 2 ** 63, size=4).tolist())
    make = type(rng.bit_generator)
    kids = [np.random.Generator(make(ss)) for ss in root.spawn(len(starts))]
    map_threads(lambda job: _fill_unit_rows(job[0], rows[job[1]:job[1] + per]),
                zip(kids, starts))
    return G


def sorted_subsets(rng: np.random.Generator, B: int, n: int, k: int) -> np.ndarray:
    """``B`` independent uniform k-subsets of ``{0..n-1}``, each row in increasing order,
    shape (B, k).

    Each row gets n i.i.d. uniform keys; its subset is the set of the k smallest keys (an
    O(n) selection, ``np.partition``), read off in increasing order from the mask
    ``keys <= k-th smallest`` — no permutation and no sort. The law of the keys is invariant
    under permuting the n coordinates, so the subset is uniform over the C(n, k) subsets. A
    row where the k-th and (k+1)-th smallest keys tie (probability < n²·2⁻⁵⁴) is drawn again;
    the tie event is itself permutation-invariant, so the law stays uniform.

    When ``n`` is large against ``k`` (``n >= 4k`` and ``n >= 2μ``, ``μ = k + 4√k + 8``:
    e.g. the slots of ``T`` tokens among ``d_e = 8T``) the draw is :func:`_sparse_subsets`
    instead, ``O(k)`` per row rather than ``O(n)``: the same law, another stream.
    """
    if k == n:
        return np.broadcast_to(np.arange(n), (B, n))
    if n >= 4 * k and n >= 2 * _sparse_mean(k):
        return _sparse_subsets(rng, B, n, k)
    keys = rng.random((B, n))
    mask = keys <= np.partition(keys, k - 1, axis=1)[:, k - 1:k]
    bad = np.flatnonzero(np.count_nonzero(mask, axis=1) != k)
    while bad.size:
        kb = rng.random((bad.size, n))
        mb = kb <= np.partition(kb, k - 1, axis=1)[:, k - 1:k]
        ok = np.count_nonzero(mb, axis=1) == k
        mask[bad[ok]] = mb[ok]
        bad = bad[~ok]
    # the column indices of the k set entries per row, row by row in increasing order: the
    # flat positions of the mask minus each row's offset (no row-index array is built)
    flat = np.flatnonzero(mask).reshape(B, k)
    flat -= (n * np.arange(B))[:, None]
    return flat


def _sparse_mean(k: int) -> float:
    """``μ = k + 4√k + 8``: the mean size of the Bernoulli set of :func:`_sparse_subsets`
    (fewer than ``k`` with probability about ``Φ(−4)``)."""
    return k + 4.0 * math.sqrt(k) + 8.0


def _sparse_subsets(rng: np.random.Generator, B: int, n: int, k: int) -> np.ndarray:
    """:func:`sorted_subsets` in ``O(B k)``, for ``n >= 2μ`` (:func:`_sparse_mean`).

    Per row: a Bernoulli(``p = μ/n``) subset ``S`` of ``{0..n-1}`` drawn as the partial
    sums of ``m`` geometric gaps (``⌊E/λ⌋ + 1``, ``E`` standard exponential,
    ``λ = −log(1 − p)``: the positions of the successes, increasing); then ``k`` of the
    ``|S|`` members kept by i.i.d. uniform keys (the k smallest, ``np.partition`` over the
    ``m`` draws, keys of positions ``>= n`` set above 1). ``S`` is exchangeable (its law
    depends on ``|S|`` only), so given ``|S| = N`` it is a uniform N-subset, and a uniform
    k-subset of it is a uniform k-subset of ``{0..n-1}``. A row with ``|S| < k``, with
    ``|S| >= m`` (the gaps may not reach ``n``; ``m = np + 6√(np) + 10``) or with tied keys
    is drawn again — events that depend on ``|S|`` (and the keys) only, so the law stays
    uniform.
    """
    p = _sparse_mean(k) / n
    if not 0 < p <= 0.5:
        raise ValueError(f"_sparse_subsets needs n >= 2 (k + 4 sqrt(k) + 8), got n={n}, k={k}")
    lam = -math.log1p(-p)
    m = int(math.ceil(n * p + 6.0 * math.sqrt(n * p) + 10.0))
    out = np.empty((B, k), dtype=np.int64)
    todo = np.arange(B)
    while todo.size:
        r = todo.size
        pos = (rng.standard_exponential((r, m)) / lam).astype(np.int64)   # gaps − 1
        np.cumsum(pos, axis=1, out=pos)
        pos += np.arange(m)                           # positions of the successes
        keys = rng.random((r, m))
        inside = pos < n
        size = np.count_nonzero(inside, axis=1)
        keys[~inside] = 2.0
        mask = keys <= np.partition(keys, k - 1, axis=1)[:, k - 1:k]
        ok = (size >= k) & (size < m) & (np.count_nonzero(mask, axis=1) == k)
        out[todo[ok]] = pos[ok][mask[ok]].reshape(-1, k)
        todo = todo[~ok]
    return out


def _check_width(d_e: int, label: str, T: int) -> None:
    """``ValueError`` unless an index family of width ``d_e`` can encode length ``T``."""
    if T > d_e:
        raise ValueError(f"d_e={d_e} is too small for the {label} encoding at sequence length "
                         f"T={T}: one-hot families need d_e >= T (the largest T or T_test used)")


class Encoding:
    """Base class: a family of positional encodings of width ``d_e``.

    Subclasses implement :meth:`sample` (encodings for a batch of ``B`` sequences of
    length ``T``) and state whether they are ``fixed`` (the same for every sample), in
    ``index`` form, and whether :meth:`sample` may fill a batch on two threads
    (``threaded``: the training loop then keeps BLAS to one thread).
    """

    name = "base"
    fixed = True
    index = True
    threaded = False

    def __init__(self, d_e: int):
        self.d_e = check_int("d_e", d_e, 1)

    def check_length(self, T: int) -> None:
        """Raise ``ValueError`` if sequences of length ``T`` cannot be encoded."""
        if self.index:
            _check_width(self.d_e, self.label, T)

    @property
    def label(self) -> str:
        """Name shown in results and messages (e.g. ``stochastic/slots``; a subclass may
        set it as a class attribute)."""
        return self.name

    def sample(self, rng: np.random.Generator, B: int, T: int) -> PEBatch:  # pragma: no cover
        """Encodings of ``B`` sequences of length ``T``.

        Parameters
        ----------
        rng : numpy.random.Generator
            Draws per-sample encodings (unused by fixed families).
        B : int
            Batch size.
        T : int
            Sequence length.

        Returns
        -------
        PEBatch
            Index form ``idx`` (T,) or (B, T), or dense ``P`` (T, d_e) or (B, T, d_e).

        >>> OneHot(5).sample(None, 2, 3).idx
        array([0, 1, 2])
        """
        raise NotImplementedError

    def describe(self) -> dict:
        """``{"pe": label, "d_e": width, ...}`` for :attr:`Result.info`."""
        return {"pe": self.label, "d_e": self.d_e}

    # ---- what the theory needs to know about a family (stsim.theory) ----------------
    # These may use ``d_e`` and class attributes only: they are also asked of the family
    # before anything is drawn (stsim.core.families.EncodingSpec).
    def reduced_n(self, T: int) -> int | None:
        """``n`` of the exact two-scalar reduction ``W_ee = a (I_n − J_n/n)`` that
        population GD keeps from zero init at training length ``T`` (its step divides by
        ``n − 1``), or ``None`` when the family has no exact reduction."""
        return None

    def approx_reduced_n(self, T: int) -> int | None:
        """``n`` of the reduced map that the default schedule (:mod:`stsim.core.schedule`)
        runs as an approximation: :meth:`reduced_n` where it exists, else ``None`` (no
        derived defaults: the stated fixed fallback). Near-orthogonal families use
        ``d_e`` (the slots map, as if their encodings were orthogonal)."""
        return self.reduced_n(T)

    def n_configurations(self, T: int, q: int) -> int | None:
        """Number of equally likely (subset, encoding) configurations the exact population
        expectation enumerates at length ``T``, or ``None`` (no finite enumeration)."""
        return None


class OneHot(Encoding):
    """Fixed one-hot encodings ``p_i = e_i`` (Def. 2); positions ``>= T_train`` are never
    seen in training when ``d_e > T``."""

    name = "onehot"

    def sample(self, rng, B, T):
        self.check_length(T)
        return PEBatch(d_e=self.d_e, idx=np.arange(T))

    def reduced_n(self, T):
        return T          # the trained block: positions >= T never move

    def n_configurations(self, T, q):
        return math.comb(T, q)


class StochasticSlots(Encoding):
    """Per-sample one-hot encodings at ``T`` distinct random slots of ``R^{d_e}``, in
    increasing order (a uniformly random ordered subset, Ruoss et al. 2023), drawn by
    :func:`sorted_subsets`."""

    name = "stochastic"
    fixed = False

    label = "stochastic/slots"

    def sample(self, rng, B, T):
        self.check_length(T)
        return PEBatch(d_e=self.d_e, idx=sorted_subsets(rng, B, self.d_e, T))

    def reduced_n(self, T):
        return self.d_e   # every slot is used: W_ee = a (I − J/d_e)

    def n_configurations(self, T, q):
        # selected slots S (|S| = q), then the unselected U ⊂ [d_e] \ S (|U| = T − q)
        return math.comb(self.d_e, q) * math.comb(self.d_e - q, T - q)


class StochasticSphere(Encoding):
    """Per-sample i.i.d. uniform unit vectors in ``R^{d_e}`` (near-orthogonal, dense)."""

    name = "stochastic"
    fixed = False
    index = False
    threaded = True      # large batches are filled on two threads (_unit_rows)

    label = "stochastic/sphere"

    def sample(self, rng, B, T):
        return PEBatch(d_e=self.d_e, P=_unit_rows(rng, (B, T, self.d_e)))

    def approx_reduced_n(self, T):
        return self.d_e   # near-orthogonal: approximated by the slots map with n = d_e


class StochasticSinusoid(Encoding):
    r"""A smooth randomised *ordered* encoding: per sample, ``T`` distinct indices drawn as
    a uniformly random ordered subset of ``[0, span)`` (:func:`sorted_subsets`, as the
    slots' law), each encoded by a fixed sinusoidal code of its index,

    ``p(k) = √(2/d_e) [sin(ω_j k), cos(ω_j k)]_{j < d_e/2}``,  ``ω_j = span^{−2j/d_e}``

    (the Transformer's sinusoids with base ``span``: wavelengths from 2π to about
    ``2π span``). Then ``|p(k)| = 1`` and
    ``⟨p(k), p(k')⟩ = (2/d_e) Σ_j cos(ω_j (k − k'))``: a function of the gap ``k − k'``
    alone, 1 at gap 0 and near 1 for nearby indices (the slots' codes are orthogonal at
    every gap). Order is kept and the absolute index is random, as with the slots; what is
    added is that "near" is one direction of the code. ``span`` defaults to ``2 T_max``
    (the slots' default width); ``d_e`` is even."""

    name = "stochastic"
    fixed = False
    index = False
    label = "stochastic/sinusoid"

    def __init__(self, d_e: int, span: int | None = None, T_max: int | None = None):
        super().__init__(d_e)
        if self.d_e % 2:
            raise ValueError(f"d_e must be even for the sinusoidal encoding (pairs of sin "
                             f"and cos), got {self.d_e}")
        if span is None:
            if T_max is None:
                raise ValueError("span (the index range) or T_max is required")
            span = 2 * check_int("T_max", T_max, 1)
        self.span = check_int("span", span, 1)
        k = np.arange(self.span, dtype=np.float64)[:, None]
        omega = float(self.span) ** (-2.0 * np.arange(self.d_e // 2) / self.d_e)
        table = np.empty((self.span, self.d_e))
        table[:, 0::2], table[:, 1::2] = np.sin(k * omega), np.cos(k * omega)
        self.table = table * math.sqrt(2.0 / self.d_e)
        self.table.flags.writeable = False

    def check_length(self, T):
        if T > self.span:
            raise ValueError(f"T={T} exceeds the index range span={self.span} of the "
                             f"sinusoidal encoding; give span >= the largest T or T_test")

    def sample(self, rng, B, T):
        self.check_length(T)
        return PEBatch(d_e=self.d_e, P=self.table[sorted_subsets(rng, B, self.span, T)])


class NearOrthogonal(Encoding):
    """Fixed near-orthogonal unit vectors (Def. 3): ``n_positions`` rows drawn once from
    ``rng`` (uniform on the sphere) and reused; :attr:`delta` is their coherence
    ``max_{i≠j} |<p_i,p_j>|`` (≈ sqrt(4 log n / d_e) for random vectors)."""

    name = "near-orthogonal"
    index = False

    def __init__(self, d_e: int, n_positions: int, rng: np.random.Generator):
        super().__init__(d_e)
        n_positions = check_int("n_positions", n_positions, 1)
        self.table = _unit_rows(rng, (n_positions, self.d_e))
        self.delta = coherence(self.table) if n_positions > 1 else 0.0

    def check_length(self, T):
        if T > self.table.shape[0]:
            raise ValueError(
                f"T={T} exceeds the {self.table.shape[0]} positions drawn for the near-orthogonal "
                f"encoding; draw it with n_positions >= the largest T or T_test"
            )

    def sample(self, rng, B, T):
        self.check_length(T)
        return PEBatch(d_e=self.d_e, P=self.table[:T])

    def describe(self):
        return {"pe": self.label, "d_e": self.d_e, "delta": self.delta}

    def n_configurations(self, T, q):
        return math.comb(T, q)

    def approx_reduced_n(self, T):
        return self.d_e   # approximated by the slots map with n = d_e
