r"""What the masked character costs without attention (docs/text.md, "Baselines"): two
predictors fitted on a corpus's training part (:mod:`stsim.core.corpus`) and scored by
their cross entropy, in bits per character, on its held-out part — the numbers a trained
masked model (:class:`stsim.core.targets.MaskedChar`) is compared with.

- **Unigram**: ``p(b)``, the character frequencies of the training part with one added
  count per symbol; its cross entropy on the held part.
- **Neighbours**: ``p(b | a, c)`` from the counts of ``(x_{m−1}, x_m, x_{m+1}) = (a, b,
  c)`` in the training part, smoothed towards the unigram,
  ``p(b | a, c) = (N_{abc} + β p(b)) / (N_{a·c} + β)``, ``β`` chosen among
  :data:`BETAS` by the cross entropy on the last 10% of the training part (fitted on the
  rest), then refitted on the whole training part. In a window of ``T`` characters the
  masked position is uniform, so it is the first or the last with probability ``1/T``
  each, where one neighbour is missing; the same smoothing on the one-sided counts
  (``(x_m, x_{m+1})``, ``(x_{m−1}, x_m)``) scores those, and the baseline is
  ``(CE_right + CE_left + (T − 2) CE_both) / T``.
"""
from __future__ import annotations

import math

import numpy as np

from stsim.core.corpus import load_corpus
from stsim.util.validate import check_int

__all__ = ["BETAS", "unigram", "unigram_bits", "neighbour_bits"]

BETAS = (0.1, 0.3, 1.0, 3.0, 10.0, 30.0)
_LN2 = math.log(2.0)


def unigram(ids: np.ndarray, V: int) -> np.ndarray:
    """Character frequencies of ``ids`` with one added count per symbol, (V,)."""
    n = np.bincount(ids, minlength=V).astype(np.float64) + 1.0
    return n / n.sum()


def unigram_bits(corpus="tinyshakespeare") -> float:
    """The training part's unigram's cross entropy on the held part, bits per character."""
    c = load_corpus(corpus)
    p = unigram(c.part("train"), len(c.vocab))
    return float(-np.mean(np.log(p[c.part("held")])) / _LN2)


def _context_ce(fit, score, V, beta, p_uni, context):
    """Mean cross entropy (nats) on ``score`` of ``p(b | context)`` counted on ``fit``:
    ``context(ids) -> (key, target)`` pairs (int arrays), smoothed towards ``p_uni``."""
    k_fit, b_fit = context(fit)
    k_sc, b_sc = context(score)
    K = int(max(k_fit.max(initial=0), k_sc.max(initial=0))) + 1
    joint = np.bincount(k_fit * V + b_fit, minlength=K * V).astype(np.float64)
    n_ctx = np.bincount(k_fit, minlength=K).astype(np.float64)
    p = (joint[k_sc * V + b_sc] + beta * p_uni[b_sc]) / (n_ctx[k_sc] + beta)
    return float(-np.mean(np.log(p)))


def neighbour_bits(corpus="tinyshakespeare", T: int = 64) -> dict:
    """The neighbours baseline of the masked character in a window of ``T`` (module
    docstring): ``{"bits", "both", "left", "right", "beta"}`` (bits per character; each
    side's on its own; the smoothing chosen on the training part alone)."""
    c = load_corpus(corpus)
    T = check_int("T", T, 2)
    V = len(c.vocab)
    train, held = c.part("train").astype(np.int64), c.part("held").astype(np.int64)
    contexts = {
        "both": lambda x: (x[:-2] * V + x[2:], x[1:-1]),
        "left": lambda x: (x[:-1], x[1:]),          # the left neighbour only (m = T − 1)
        "right": lambda x: (x[1:], x[:-1]),         # the right neighbour only (m = 0)
    }
    cut = int(0.9 * train.size)
    fit, dev = train[:cut], train[cut:]
    p_fit = unigram(fit, V)
    beta = min(BETAS, key=lambda b: _context_ce(fit, dev, V, b, p_fit, contexts["both"]))
    p = unigram(train, V)
    ce = {k: _context_ce(train, held, V, beta, p, f) / _LN2 for k, f in contexts.items()}
    bits = (ce["right"] + ce["left"] + (T - 2) * ce["both"]) / T
    return {"bits": bits, **ce, "beta": beta}
