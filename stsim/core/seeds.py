"""The random streams of a run — the one place their layout is written down.

``SeedSequence(seed)`` is split into independent children (``spawn_key = (i,)``), one per
purpose, so that changing one part of a run (``steps``, ``batch``, the validation sizes)
never shifts the numbers of another:

============  ==============  ====================================================
key           stream          draws
============  ==============  ====================================================
0             ``encoding``    the fixed near-orthogonal table (drawn once)
1             ``validation``  the in-distribution validation set ``val``
(1, 1, T)     ``validation``  the set ``val/T=<T>`` of test length ``T``
(1, 2, q)     ``validation``  the set ``val/q=<q>`` of subset size ``q``
2             ``init``        the initial parameters (``init="random"``; FCN hidden
                              layers)
3             ``train``       the training stream (fresh batches); its child
                              ``(3, 0)`` draws the fixed sample of
                              ``optimizer="gd"`` (``fixed_sample``)
4             ``population``  the Monte-Carlo configurations of the population
                              objective
(5, 0)        ``evaluation``  large in-distribution evaluation sets drawn after
                              training (the figures' final estimates)
(5, 1, T)     ``evaluation``  ... at test length ``T``
(5, 2, q)     ``evaluation``  ... at subset size ``q``
============  ==============  ====================================================

**One stream per validation set.** Each set of a kind (``"T"``: a test length, ``"q"``:
an unseen subset size) is drawn from its own child, keyed by the kind and the value
itself, so adding, removing or reordering a ``T_test`` or ``q_test`` leaves every other
set's numbers unchanged; the in-distribution set is the only draw of stream 1 (its
numbers are those of every earlier version, where all sets came from stream 1 in
sequence).

>>> a = Streams(0).validation("T", 250).standard_normal()
>>> bool(a == Streams(0).validation("T", 250).standard_normal())
True
>>> bool(a == Streams(0).validation("T", 300).standard_normal())
False

>>> s = Streams(0)
>>> float(s.init().standard_normal()) == float(Streams(0).init().standard_normal())
True

**The seed** (:func:`seed_record`) is what NumPy accepts: a non-negative int, a
``numpy.random.SeedSequence`` or a ``numpy.random.Generator``. The config records it as
JSON, so that the saved config reruns the same numbers: an int as itself; a SeedSequence as
``{"entropy", "spawn_key", "pool_size"}`` (an int when it is ``SeedSequence(n)``, the same
streams as ``n``); a Generator is *consumed*, as NumPy functions consume one: 16 bytes
are drawn from it and their value (an int below 2¹²⁸) is the recorded seed — so the run is
reproduced from its saved config, and the same Generator passed twice gives two different
runs.
"""
from __future__ import annotations

import numbers

import numpy as np

from stsim.util.validate import check_int

__all__ = ["Streams", "seed_record", "seed_sequence"]

ENCODING, VALIDATION, INIT, TRAIN, POPULATION, EVALUATION = range(6)
KINDS = {"T": 1, "q": 2}    # the validation / evaluation sets of one kind: child (key, kind)
_POOL = 4      # numpy's default SeedSequence pool size


def _whole(v) -> int:
    """``v`` as an int when it is a whole number >= 0 (not a bool, not a float: a record
    that says 1.5 or True was not written by stsim); ``TypeError`` otherwise."""
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Integral) or v < 0:
        raise TypeError(f"{v!r} is not a whole number >= 0")
    return int(v)


def seed_record(seed):
    """The JSON record of a seed (module docstring): an int, or a dict ``{"entropy": int
    or list of ints, "spawn_key": list of ints, "pool_size": int}``; ``ValueError`` naming
    ``seed`` for anything else.

    >>> seed_record(3), seed_record(np.random.SeedSequence(3)) == 3
    (3, True)
    >>> seed_record(np.random.SeedSequence(3).spawn(2)[1])
    {'entropy': 3, 'spawn_key': [1], 'pool_size': 4}
    >>> seed_record(np.random.default_rng(0))      # 16 bytes drawn from the Generator
    91803661523391550284602498432050037343
    """
    if isinstance(seed, np.random.Generator):
        return int.from_bytes(seed.bytes(16), "little")
    if isinstance(seed, np.random.SeedSequence):
        ent = seed.entropy
        entropy = int(ent) if isinstance(ent, numbers.Integral) else [int(e) for e in ent]
        if isinstance(entropy, int) and not seed.spawn_key and seed.pool_size == _POOL:
            return entropy
        return {"entropy": entropy, "spawn_key": [int(k) for k in seed.spawn_key],
                "pool_size": int(seed.pool_size)}
    if isinstance(seed, dict):
        if set(seed) - {"entropy", "spawn_key", "pool_size"} or "entropy" not in seed:
            raise ValueError(f"seed must be a non-negative int, a numpy SeedSequence or "
                             f"Generator, or a recorded {{'entropy', 'spawn_key', "
                             f"'pool_size'}} dict, got {seed!r}")
        try:
            ent = seed["entropy"]
            ent = _whole(ent) if not isinstance(ent, (list, tuple)) else [_whole(e) for e in ent]
            key = seed.get("spawn_key", ())
            if not isinstance(key, (list, tuple)):
                raise TypeError(f"spawn_key {key!r} is not a list of whole numbers")
            return seed_record(np.random.SeedSequence(
                ent, spawn_key=tuple(_whole(k) for k in key),
                pool_size=_whole(seed.get("pool_size", _POOL))))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"seed {seed!r} is not a valid SeedSequence record: {exc}") \
                from None
    try:
        return check_int("seed", seed, 0)
    except ValueError:
        raise ValueError(f"seed must be a non-negative int, a numpy.random.SeedSequence or a "
                         f"numpy.random.Generator, got {seed!r}") from None


def seed_sequence(seed) -> np.random.SeedSequence:
    """The ``SeedSequence`` of a seed or its record (:func:`seed_record`; a Generator is
    consumed)."""
    rec = seed_record(seed)
    if isinstance(rec, dict):
        return np.random.SeedSequence(rec["entropy"], spawn_key=tuple(rec["spawn_key"]),
                                      pool_size=rec["pool_size"])
    return np.random.SeedSequence(rec)


class Streams:
    """Generators of the streams of one run's ``seed`` (table in the module docstring).

    ``seed``: an int, a SeedSequence, a Generator (consumed) or a recorded seed
    (:func:`seed_record`); stream ``key`` is the ``SeedSequence`` with the seed's
    ``spawn_key`` extended by ``(key,)`` — for an int ``n``, ``SeedSequence(n,
    spawn_key=(key,))``. Each call returns a NEW generator at the start of its stream.
    """

    def __init__(self, seed):
        self.seed = seed_record(seed)
        self._root = seed_sequence(self.seed)

    def child(self, *key: int) -> np.random.SeedSequence:
        """The ``SeedSequence`` of stream ``key``: the seed's ``spawn_key`` extended by
        ``key`` (``child(1)``: stream 1; ``child(1, 1, T)``: a set of stream 1)."""
        r = self._root
        return np.random.SeedSequence(r.entropy, spawn_key=tuple(r.spawn_key) + key,
                                      pool_size=r.pool_size)

    def _rng(self, key):
        return np.random.default_rng(self.child(key))

    def encoding(self) -> np.random.Generator:
        """Generator of the fixed near-orthogonal table (stream 0)."""
        return self._rng(ENCODING)

    def _set(self, key, kind, value):
        if kind in (None, "val"):
            return self.child(key)
        if kind not in KINDS:
            raise ValueError(f"kind must be 'val', 'T' or 'q', got {kind!r}")
        return self.child(key, KINDS[kind], check_int(kind, value, 1))

    def validation(self, kind=None, value=None) -> np.random.Generator:
        """Generator of one validation set (module docstring): the in-distribution set
        (``kind`` None or ``"val"``: stream 1), or the set of test length ``value``
        (``kind="T"``: child ``(1, 1, value)``) or subset size ``value`` (``kind="q"``:
        child ``(1, 2, value)``)."""
        return np.random.default_rng(self._set(VALIDATION, kind, value))

    def evaluation(self, kind=None, value=None) -> np.random.Generator:
        """Generator of one large evaluation set drawn after training (module
        docstring): child ``(5, 0)`` in distribution, ``(5, 1, T)``, ``(5, 2, q)``."""
        if kind in (None, "val"):
            return np.random.default_rng(self.child(EVALUATION, 0))
        return np.random.default_rng(self._set(EVALUATION, kind, value))

    def init(self) -> np.random.Generator:
        """Generator of the initial parameters (stream 2)."""
        return self._rng(INIT)

    def train(self) -> np.random.Generator:
        """Generator of the training batches (stream 3)."""
        return self._rng(TRAIN)

    def fixed_sample(self) -> np.random.Generator:
        """The fixed training sample of ``optimizer="gd"``: child ``(3, 0)``."""
        return np.random.default_rng(self.child(TRAIN).spawn(1)[0])

    def population(self) -> np.random.Generator:
        """Generator of the population objective's Monte-Carlo configurations (stream 4)."""
        return self._rng(POPULATION)
