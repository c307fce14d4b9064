"""Training problems: where a run's loss and gradients come from.

A *problem* is the model plus its data. It exposes

* ``init_params(rng) -> dict of arrays``,
* ``loss_grad(params, rng, data=None) -> (loss, grads)`` (one step's minibatch, fixed-sample
  or population gradient),
* ``draws`` (bool) and ``draw_step(rng)`` -> the data of one step's fresh minibatch, or ``None`` when a step
  draws nothing (fixed sample, population); ``loss_grad(params, rng, data)`` then uses
  ``data`` instead of drawing — what lets :func:`stsim.core.run.run` draw one step ahead
  (:class:`stsim.util.prefetch.Prefetch`) with the same numbers,
* ``evaluate(params) -> {metric: value}`` (validation sets drawn once, cosines, ...),
* ``info() -> dict`` (encoding description, parameter count, ...).

:class:`TransformerProblem` is the attention model of SPEC §3. Other layers add
architectures and gradient sources without the core importing them: the FCN baseline
registers ``arch="fcn"`` (:func:`register_arch`) and the theory registers
``objective="population"`` (:func:`register_objective`); importing :mod:`stsim` does both.
"""
from __future__ import annotations

import numpy as np

from stsim.core.encodings import make_encoding
from stsim.core.model import cosine_to_target, forward_backward
from stsim.core.seeds import Streams
from stsim.core.task import sample_batch

__all__ = ["TransformerProblem", "make_problem", "register_arch", "register_objective",
           "val_key"]

_ARCHS: dict = {}
_OBJECTIVES: dict = {}


def register_arch(name: str, factory) -> None:
    """Make ``arch=name`` build ``factory(cfg, streams)`` (an object with the problem
    interface of the module docstring)."""
    _ARCHS[name] = factory


def register_objective(name: str, factory) -> None:
    """Make ``objective=name`` use ``factory(cfg, enc)`` for the transformer's gradients:
    an object with ``loss_grad(W, V) -> (loss, dW, dV)`` and ``metrics(W, V) -> dict``."""
    _OBJECTIVES[name] = factory


def val_key(kind, value):
    """History key of a validation set: ``val_key("T", 60) == "val/T=60"``."""
    return f"val/{kind}={value}"


class TransformerProblem:
    """The attention model of SPEC §3 on the online stream, a fixed sample, or the
    population (``objective="population"``, provided by :mod:`stsim.theory.population`)."""

    def __init__(self, cfg, streams: Streams):
        self.cfg = cfg
        self.enc = make_encoding(cfg.pe, T_max=cfg.T_max, d_e=cfg.d_e,
                                 sampler=cfg.sampler, rng=streams.encoding())
        vrng = streams.validation()
        # validation sets, drawn once before training: in-distribution, then OOD
        self.val = {"val": self._draw(vrng, cfg.n_val, cfg.T, cfg.q)}
        for Tt in cfg.T_test:
            self.val[val_key("T", Tt)] = self._draw(vrng, cfg.n_val, Tt, cfg.q)
        for qt in cfg.q_test:
            self.val[val_key("q", qt)] = self._draw(vrng, cfg.n_val, cfg.T, qt)
        self.fixed = None
        self.population = None
        if cfg.objective != "online":
            if cfg.objective not in _OBJECTIVES:
                raise ValueError(f"objective={cfg.objective!r} is not available: import stsim "
                                 f"(registered: {sorted(_OBJECTIVES)})")
            self.population = _OBJECTIVES[cfg.objective](cfg, self.enc)
        elif cfg.optimizer == "gd":
            self.fixed = self._draw(streams.fixed_sample(), cfg.n_train, cfg.T, cfg.q)

    def _draw(self, rng, B, T, q):
        return sample_batch(rng, B, T, q, self.cfg.d), self.enc.sample(rng, B, T)

    @property
    def D(self):
        """Token width ``D = d + d_e``."""
        return self.cfg.d + self.enc.d_e

    def init_params(self, rng):
        """``{"W": (D, D), "V": (d, D)}``: zeros, or ``init_scale`` times Gaussians from ``rng``.
        ``W`` is kept in Fortran (column) order: the index encodings' step reads and updates
        ``W`` column by column (:mod:`stsim.core.sparse_grad`)."""
        c, D = self.cfg, self.D
        if c.init == "zero":
            return {"W": np.zeros((D, D), order="F"), "V": np.zeros((c.d, D))}
        return {"W": np.asfortranarray(c.init_scale * rng.standard_normal((D, D))),
                "V": c.init_scale * rng.standard_normal((c.d, D))}

    def _fb(self, params, data, need_grad=True):
        b, pe = data
        return forward_backward(params["W"], params["V"], b.X, b.y, pe, model=self.cfg.model,
                                query=self.cfg.query, target=b.target, need_grad=need_grad,
                                sparse_grad=True)

    @property
    def draws(self) -> bool:
        """Whether each step draws a fresh minibatch (not the population, not a fixed sample)."""
        return self.population is None and self.fixed is None

    def draw_step(self, rng):
        """One step's fresh minibatch ``(Batch, PEBatch)`` from ``rng``; ``None`` when the
        step draws nothing (:attr:`draws` is false)."""
        return self._draw(rng, self.cfg.batch, self.cfg.T, self.cfg.q) if self.draws else None

    def loss_grad(self, params, rng, data=None):
        """``(loss, {"W": dW, "V": dV})`` of one step: a fresh minibatch (``data`` if given,
        else drawn from ``rng``), the fixed sample (``optimizer="gd"``) or the population
        objective."""
        if self.population is not None:
            loss, dW, dV = self.population.loss_grad(params["W"], params["V"])
        else:
            if data is None:
                data = self.fixed if self.fixed is not None else self.draw_step(rng)
            loss, dW, dV = self._fb(params, data)
        return loss, {"W": dW, "V": dV}

    def evaluate(self, params):
        """Metrics of ``params``: the validation losses (``val``, ``val/T=…``,
        ``val/q=…``), ``cos_W``, ``cos_V`` and the objective's own metrics."""
        out = {k: self._fb(params, data, need_grad=False)[0] for k, data in self.val.items()}
        out["cos_W"], out["cos_V"] = cosine_to_target(params["W"], params["V"], self.cfg.d)
        if self.population is not None:
            out.update(self.population.metrics(params["W"], params["V"]))
        return out

    def info(self):
        """``{"encoding": …}``: the encoding's description (e.g. the near-orthogonal δ)."""
        return {"encoding": self.enc.describe()}


register_arch("transformer", TransformerProblem)


def make_problem(cfg, streams: Streams | None = None):
    """The problem object for a resolved config's ``arch`` (interface: module docstring);
    ``streams`` defaults to ``Streams(cfg.seed)``."""
    if cfg.arch not in _ARCHS:
        raise ValueError(f"arch={cfg.arch!r} is not available: import stsim "
                         f"(registered: {sorted(_ARCHS)})")
    return _ARCHS[cfg.arch](cfg, Streams(cfg.seed) if streams is None else streams)
