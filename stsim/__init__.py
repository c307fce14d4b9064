"""stsim — simulate a one-layer softmax-attention transformer learning sparse token selection.

Wang, Wei, Hsu & Lee, *Transformers Provably Learn Sparse Token Selection While
Fully-Connected Nets Cannot* (ICML 2024). The package is layered; data flows one way
(what each layer holds: ``docs/architecture.md``)::

    util  →  core  →  theory  →  baselines  →  sweeps  →  studies  →  cli

>>> import stsim
>>> res = stsim.run(T=20, q=2, pe="stochastic", steps=20, batch=16)
>>> res.status
'completed'
"""
__version__ = "0.6.2"

from stsim.util.signals import guard_cli_imports as _guard_cli_imports
_guard_cli_imports()    # the stsim command: Ctrl-C during these imports is one line, exit 130

from stsim.core.task import Batch, sample_batch, sample_subsets, sts_target
from stsim.core.targets import Target
from stsim.core.attention import Attention
from stsim.core.encodings import (PEBatch, Encoding, OneHot, NearOrthogonal, StochasticSlots,
                                  StochasticSphere, coherence)
from stsim.core.families import make_encoding, register_encoding
from stsim.core.model import loss_and_grad, forward_backward
from stsim.core.constructions import cosine_to_target, target_params
from stsim.core.gradcheck import check_grad, directional_check
from stsim.core.optim import SGD, Adam, make_optimizer, register_optimizer
from stsim.core.problem import register_arch
from stsim.core.config import Config
from stsim.core.result import Result, load
from stsim.core.run import run
from stsim.core.session import Session
# the layers above the core register what they add to ``run`` (arch="fcn",
# objective="population") when imported
from stsim.theory.population import make_population_objective
from stsim.theory.reduced import (reduced_gd, reduced_loss, gradient_flow, ood_loss_onehot,
                                  ood_floor_onehot)
from stsim.theory.checks import check_theorem
from stsim.baselines.fcn import FCNProblem  # registers arch="fcn"
from stsim.sweeps import sweep  # the function; its parts are the package stsim.sweeps

__all__ = [
    "__version__", "Batch", "sample_batch", "sample_subsets", "sts_target", "Target", "Attention",
    "PEBatch", "Encoding", "OneHot", "NearOrthogonal", "StochasticSlots", "StochasticSphere",
    "make_encoding", "register_encoding", "coherence", "loss_and_grad", "forward_backward", "target_params",
    "cosine_to_target", "check_grad", "directional_check", "SGD", "Adam", "make_optimizer",
    "register_optimizer", "register_arch",
    "Config", "Result", "run", "Session", "load", "sweep", "make_population_objective", "reduced_gd",
    "reduced_loss", "gradient_flow", "ood_loss_onehot", "ood_floor_onehot", "check_theorem",
    "FCNProblem",
]
