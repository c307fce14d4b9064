"""The random streams of a run — the one place their layout is written down.

``SeedSequence(seed)`` is split into independent children (``spawn_key = (i,)``), one per
purpose, so that changing one part of a run (``steps``, ``batch``, the validation sizes)
never shifts the numbers of another:

====  ==============  ============================================================
key   stream          draws
====  ==============  ============================================================
0     ``encoding``    the fixed near-orthogonal table (drawn once)
1     ``validation``  the validation sets (in-distribution, ``T_test``, ``q_test``)
2     ``init``        the initial parameters (``init="random"``; FCN hidden layers)
3     ``train``       the training stream (fresh batches); its child ``(3, 0)`` draws
                      the fixed sample of ``optimizer="gd"`` (``fixed_sample``)
4     ``population``  the Monte-Carlo configurations of the population objective
====  ==============  ============================================================

>>> s = Streams(0)
>>> float(s.init().standard_normal()) == float(Streams(0).init().standard_normal())
True
"""
from __future__ import annotations

import numpy as np

from stsim.util.validate import check_int

__all__ = ["Streams"]

ENCODING, VALIDATION, INIT, TRAIN, POPULATION = range(5)


class Streams:
    """Generators of the streams of one run's ``seed`` (table in the module docstring).

    Each call returns a NEW generator at the start of its stream.
    """

    def __init__(self, seed: int):
        self.seed = check_int("seed", seed, 0)

    def child(self, key: int) -> np.random.SeedSequence:
        """The ``SeedSequence`` of stream ``key`` (``spawn_key=(key,)``)."""
        return np.random.SeedSequence(self.seed, spawn_key=(key,))

    def _rng(self, key):
        return np.random.default_rng(self.child(key))

    def encoding(self) -> np.random.Generator:
        """Generator of the fixed near-orthogonal table (stream 0)."""
        return self._rng(ENCODING)

    def validation(self) -> np.random.Generator:
        """Generator of the validation sets (stream 1)."""
        return self._rng(VALIDATION)

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
