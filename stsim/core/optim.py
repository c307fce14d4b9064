"""Optimisers acting in place on a dict of parameter arrays.

* ``sgd`` / ``gd``: ``θ ← θ − η ∇`` (the two differ only in the data the gradient comes
  from: fresh batches or a fixed sample / the population; see :mod:`stsim.core.run`).
* ``adam`` (Kingma & Ba 2015): ``m ← β₁m + (1−β₁)∇``, ``v ← β₂v + (1−β₂)∇²``,
  ``θ ← θ − η m̂ / (√v̂ + ε)`` with bias-corrected ``m̂ = m/(1−β₁ᵗ)``, ``v̂ = v/(1−β₂ᵗ)``.

Optimiser state is a dict of arrays plus a step count, so it can be checkpointed.
"""
from __future__ import annotations

import numpy as np

from stsim.util.validate import check_choice, check_lr

__all__ = ["SGD", "Adam", "make_optimizer", "OPTIMIZERS"]

OPTIMIZERS = ("sgd", "gd", "adam")


class SGD:
    """Plain (stochastic) gradient descent ``θ ← θ − η g``."""

    def __init__(self, lr):
        self.lr = check_lr(lr)
        self.t = 0

    def step(self, params: dict, grads: dict) -> None:
        """Update ``params`` in place: ``p ← p − lr · g`` for every ``grads`` entry."""
        self.t += 1
        for k, g in grads.items():
            params[k] -= self.lr * g

    def state_dict(self) -> dict:
        """The optimiser's state as a dict of arrays (for checkpoints)."""
        return {"t": np.array(self.t)}

    def load_state_dict(self, state: dict) -> None:
        """Restore a state written by :meth:`state_dict`."""
        self.t = int(state["t"])


class Adam(SGD):
    """Adam with bias correction; ``betas=(0.9, 0.999)``, ``eps=1e-8`` by default."""

    def __init__(self, lr, betas=(0.9, 0.999), eps=1e-8):
        super().__init__(lr)
        self.b1, self.b2 = (float(b) for b in betas)
        if not (0 <= self.b1 < 1 and 0 <= self.b2 < 1):
            raise ValueError(f"betas must lie in [0, 1), got {betas!r}")
        self.eps = check_lr(eps, "eps")
        self.m: dict = {}
        self.v: dict = {}

    def step(self, params, grads):
        self.t += 1
        c1 = 1 - self.b1 ** self.t
        c2 = 1 - self.b2 ** self.t
        for k, g in grads.items():
            if k not in self.m:
                self.m[k] = np.zeros_like(g)
                self.v[k] = np.zeros_like(g)
            m, v = self.m[k], self.v[k]
            m *= self.b1
            m += (1 - self.b1) * g
            v *= self.b2
            v += (1 - self.b2) * g * g
            params[k] -= self.lr * (m / c1) / (np.sqrt(v / c2) + self.eps)

    def state_dict(self):
        out = {"t": np.array(self.t)}
        out.update({f"m/{k}": v for k, v in self.m.items()})
        out.update({f"v/{k}": v for k, v in self.v.items()})
        return out

    def load_state_dict(self, state):
        self.t = int(state["t"])
        self.m = {k[2:]: np.array(v) for k, v in state.items() if k.startswith("m/")}
        self.v = {k[2:]: np.array(v) for k, v in state.items() if k.startswith("v/")}


def make_optimizer(name: str, lr) -> SGD:
    """``"sgd"``, ``"gd"`` -> :class:`SGD`; ``"adam"`` -> :class:`Adam`."""
    check_choice("optimizer", name, OPTIMIZERS)
    return Adam(lr) if name == "adam" else SGD(lr)
