"""Optimisers acting in place on a dict of parameter arrays.

* ``sgd`` / ``gd``: ``θ ← θ − η ∇`` (the two differ only in the data the gradient comes
  from: fresh batches or a fixed sample / the population; see :mod:`stsim.core.run`).
* ``adam`` (Kingma & Ba 2015): ``m ← β₁m + (1−β₁)∇``, ``v ← β₂v + (1−β₂)∇²``,
  ``θ ← θ − η m̂ / (√v̂ + ε)`` with bias-corrected ``m̂ = m/(1−β₁ᵗ)``, ``v̂ = v/(1−β₂ᵗ)``.

Step-size schedule (``decay``): ``"none"`` keeps ``η`` constant; ``"linear"`` keeps it for
the first half of the ``total`` steps and then decays it linearly towards 0 (update number
``k = 0, 1, …`` uses ``η · min(1, (total − k)/(total − ⌊total/2⌋))``). With a constant step
a stochastic optimiser settles into a stationary cloud whose spread grows with ``η``;
annealing shrinks it (measured for Adam on STS: see :mod:`stsim.core.schedule`).

Optimiser state is a dict of arrays plus a step count, so it can be checkpointed.
"""
from __future__ import annotations

import numpy as np

from stsim.util.validate import check_choice, check_lr

__all__ = ["SGD", "Adam", "make_optimizer", "all_finite", "OPTIMIZERS", "LR_DECAYS"]

OPTIMIZERS = ("sgd", "gd", "adam")
LR_DECAYS = ("none", "linear")


def all_finite(g) -> bool:
    """Whether every entry of the gradient ``g`` is finite: ``np.all(np.isfinite(g))``
    for an array, ``g.all_finite()`` for a sparse gradient
    (:class:`stsim.core.sparse_grad.SparseGradW`), which is not made dense for it."""
    check = getattr(g, "all_finite", None)
    return bool(check()) if check is not None else bool(np.all(np.isfinite(g)))


class SGD:
    """Plain (stochastic) gradient descent ``θ ← θ − η_k g`` (``η_k``: module docstring)."""

    def __init__(self, lr, decay="none", total=None):
        self.base_lr = check_lr(lr)
        self.decay = check_choice("decay", decay, LR_DECAYS)
        if self.decay != "none":
            if total is None or int(total) < 1:
                raise ValueError(f"decay={decay!r} needs total >= 1 steps, got {total!r}")
            total = int(total)
        self.total = total
        self.t = 0

    @property
    def lr(self) -> float:
        """The step size of the next update (update number ``self.t``)."""
        if self.decay == "none":
            return self.base_lr
        start = self.total // 2
        return self.base_lr * min(1.0, max(self.total - self.t, 0) / (self.total - start))

    def step(self, params: dict, grads: dict) -> None:
        """Update ``params`` in place: ``p ← p − lr · g`` for every ``grads`` entry."""
        lr = self.lr
        self.t += 1
        for k, g in grads.items():
            if hasattr(g, "axpy"):         # a sparse gradient: only its support moves
                g.axpy(params[k], -lr)     # p + (−lr)·g: the roundings of p − lr·g
            else:
                params[k] -= lr * g

    def state_dict(self) -> dict:
        """The optimiser's state as a dict of arrays (for checkpoints)."""
        return {"t": np.array(self.t)}

    def load_state_dict(self, state: dict) -> None:
        """Restore a state written by :meth:`state_dict`."""
        self.t = int(state["t"])


class Adam(SGD):
    """Adam with bias correction; ``betas=(0.9, 0.999)``, ``eps=1e-8`` by default."""

    def __init__(self, lr, betas=(0.9, 0.999), eps=1e-8, decay="none", total=None):
        super().__init__(lr, decay, total)
        self.b1, self.b2 = (float(b) for b in betas)
        if not (0 <= self.b1 < 1 and 0 <= self.b2 < 1):
            raise ValueError(f"betas must lie in [0, 1), got {betas!r}")
        self.eps = check_lr(eps, "eps")
        self.m: dict = {}
        self.v: dict = {}

    def step(self, params, grads):
        lr = self.lr
        self.t += 1
        c1 = 1 - self.b1 ** self.t
        c2 = 1 - self.b2 ** self.t
        for k, g in grads.items():
            p = params[k]
            if k not in self.m:
                self.m[k] = np.zeros_like(p)           # the parameter's memory order
                self.v[k] = np.zeros_like(p)
            m, v = self.m[k], self.v[k]
            m *= self.b1
            v *= self.b2
            if hasattr(g, "axpy"):                     # a sparse gradient (dense moments)
                g.axpy(m, 1 - self.b1)
                g.axpy(v, 1 - self.b2, square=True)
            else:
                m += (1 - self.b1) * g
                v += (1 - self.b2) * g * g
            # p −= lr (m/c1) / (√(v/c2) + eps), with two temporaries
            step = m / c1
            step *= lr
            den = v / c2
            np.sqrt(den, out=den)
            den += self.eps
            step /= den
            p -= step

    def state_dict(self):
        out = {"t": np.array(self.t)}
        out.update({f"m/{k}": v for k, v in self.m.items()})
        out.update({f"v/{k}": v for k, v in self.v.items()})
        return out

    def load_state_dict(self, state):
        self.t = int(state["t"])
        self.m = {k[2:]: np.array(v) for k, v in state.items() if k.startswith("m/")}
        self.v = {k[2:]: np.array(v) for k, v in state.items() if k.startswith("v/")}


def make_optimizer(name: str, lr, decay="none", total=None) -> SGD:
    """``"sgd"``, ``"gd"`` -> :class:`SGD`; ``"adam"`` -> :class:`Adam`; ``decay`` /
    ``total``: the step-size schedule (module docstring)."""
    check_choice("optimizer", name, OPTIMIZERS)
    cls = Adam if name == "adam" else SGD
    return cls(lr, decay=decay, total=total)
