"""stsim — simulate a one-layer softmax-attention transformer learning sparse token selection.

Wang, Wei, Hsu & Lee, *Transformers Provably Learn Sparse Token Selection While
Fully-Connected Nets Cannot* (ICML 2024). Layout follows the paper's flow:
task → encodings → model (+ gradients) → optimisers/training → theory checks → experiments.

>>> import stsim
>>> res = stsim.run(T=20, q=2, pe="stochastic", steps=20, batch=16)
>>> res.status
'completed'
"""
__version__ = "0.1.0"

from stsim.core.task import Batch, sample_batch, sample_subsets, sts_target
from stsim.core.encodings import (PEBatch, Encoding, OneHot, NearOrthogonal, StochasticSlots,
                        StochasticSphere, make_encoding, coherence)
from stsim.core.model import loss_and_grad, forward_backward, target_params, cosine_to_target
from stsim.core.gradcheck import check_grad, directional_check
from stsim.core.optim import SGD, Adam, make_optimizer
from stsim.core.run import Config, Result, run, load
from stsim.sweep import sweep

__all__ = [
    "__version__", "Batch", "sample_batch", "sample_subsets", "sts_target",
    "PEBatch", "Encoding", "OneHot", "NearOrthogonal", "StochasticSlots", "StochasticSphere",
    "make_encoding", "coherence", "loss_and_grad", "forward_backward", "target_params",
    "cosine_to_target", "check_grad", "directional_check", "SGD", "Adam", "make_optimizer",
    "Config", "Result", "run", "load", "sweep",
]
