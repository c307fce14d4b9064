"""Finite-difference checks of analytic gradients (float64), usable on any variant.

For a scalar function ``f(θ)`` with claimed gradient ``G`` and a random unit direction
``u``, the central difference ``(f(θ+hu) − f(θ−hu)) / 2h`` equals ``<G, u> + O(h²)``.
A few evaluations check a gradient of any shape (cf. autograd's ``test_util``).
"""
from __future__ import annotations

import numpy as np

__all__ = ["directional_check", "check_grad"]


def directional_check(f, params, grads, rng, n_dirs=4, h=1e-5) -> tuple:
    """Compare analytic and central-difference directional derivatives.

    Parameters
    ----------
    f : callable
        ``f(params) -> float`` on a list of arrays.
    params : list of arrays
        The point.
    grads : list of arrays
        The analytic gradient at ``params`` (shapes of ``params``).
    rng : numpy.random.Generator
        Draws the directions.
    n_dirs : int
        Number of random directions.
    h : float
        Finite-difference step.

    Returns
    -------
    worst : float
        The worst relative error ``|num − ana| / max(|num|, |ana|, 1e-12)`` over the
        directions.
    pairs : list of tuple
        The (numeric, analytic) pairs.
    """
    pairs, worst = [], 0.0
    for _ in range(n_dirs):
        dirs = [rng.standard_normal(p.shape) for p in params]
        norm = np.sqrt(sum(float(np.sum(u * u)) for u in dirs))
        dirs = [u / norm for u in dirs]
        plus = f([p + h * u for p, u in zip(params, dirs)])
        minus = f([p - h * u for p, u in zip(params, dirs)])
        num = (plus - minus) / (2 * h)
        ana = sum(float(np.sum(g * u)) for g, u in zip(grads, dirs))
        pairs.append((num, ana))
        worst = max(worst, abs(num - ana) / max(abs(num), abs(ana), 1e-12))
    return worst, pairs


def check_grad(f_and_grad, params, rng, n_dirs=4, h=1e-5, rtol=1e-6) -> float:
    """Assert that ``f_and_grad(params) -> (value, grads)`` has correct gradients.

    Raises ``AssertionError`` with the worst relative error if it exceeds ``rtol``.
    Returns the worst relative error.
    """
    _, grads = f_and_grad(params)
    worst, pairs = directional_check(lambda ps: f_and_grad(ps)[0], params, grads, rng, n_dirs, h)
    if worst > rtol:
        raise AssertionError(f"gradient check failed: worst relative error {worst:.3e} > {rtol:.1e}; "
                             f"(numeric, analytic) = {pairs}")
    return worst
