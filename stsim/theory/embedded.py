"""The reduced state ``(a, γ)`` embedded in full matrices and evaluated with the minibatch
model :func:`stsim.forward_backward` — an independent code path: the population gradient of
every block (:func:`block_gradients`) and the Monte-Carlo OOD loss (:func:`mc_ood`), for
:func:`stsim.theory.checks.check_theorem`."""
from __future__ import annotations

import math

import numpy as np

from stsim.core.model import forward_backward
from stsim.core.task import sample_batch
from stsim.theory.reduced import reduced_loss_grad

__all__ = ["embed_reduced", "block_gradients", "mc_ood"]


def embed_reduced(a, gamma, d, d_e, n):
    """Full ``(W, V)`` of the reduced state: ``W_ee = a (I_n − J_n/n)`` on the first n
    slots (n = T for onehot, d_e for slots), ``V_x = γ I``, all other blocks 0."""
    D = d + d_e
    W = np.zeros((D, D))
    W[d:d + n, d:d + n] = a * (np.eye(n) - 1.0 / n)
    V = np.zeros((d, D))
    V[:, :d] = gamma * np.eye(d)
    return W, V


def mc_ood(a, gamma, n, enc, T_test, q, d, n_mc, rng, query):
    """Monte-Carlo loss at length T_test of the trained model (the reduced state with
    structure size ``n`` embedded in width ``enc.d_e``), on encodings ``enc``: mean, s.e."""
    W, V = embed_reduced(a, gamma, d, enc.d_e, n)
    B = max(1, min(2000, n_mc // 10))
    vals = []
    for _ in range(max(2, n_mc // B)):
        b = sample_batch(rng, B, T_test, q, d)
        vals.append(forward_backward(W, V, b.X, b.y, enc.sample(rng, B, T_test), query=query,
                                     target=b.target, need_grad=False)[0])
    return float(np.mean(vals)), float(np.std(vals, ddof=1) / math.sqrt(len(vals)))


def block_gradients(T, q, d, enc, query, points, traj, *, n_samples=20000, n_batches=40,
                    alpha=1e-3, seed=0):
    r"""The population gradient of EVERY block at points of the trajectory.

    At each step ``t`` in ``points`` the state ``(W, V)`` = ``embed_reduced(a(t), γ(t))`` of
    the reduced trajectory (equal to full-matrix population GD; ``traj``: the states
    ``(a, γ)`` at the points, in order) is evaluated with the minibatch model
    :func:`stsim.forward_backward` (an independent code path) on ``n_samples`` fresh samples
    of X, y and the encoding, in ``n_batches`` batches; the batch means give a mean and a
    standard error per entry (accumulated batch by batch, Welford: a few ``(d + d_e)²``
    arrays, whatever ``n_batches``).

    * ``W_xx``, ``W_ex``: exactly 0 for every sample (``x_query = 0``) — checked ``== 0``.
    * ``W_xe``, ``V_e`` (the off-set blocks; no closed form is used, their expectation is
      0 by an odd-moment argument, docs/theory.md §2): ``|mean| <= k s.e.`` per entry.
    * ``W_ee``, ``V_x``: exact closed form ``∂L/∂a/(n−1)·(I − J/n)`` and ``∂L/∂γ/d · I``
      (:func:`~stsim.theory.reduced.reduced_loss_grad`); ``|mean − exact| <= k s.e.`` per
      entry — the positive control (the same estimator finds the live gradient).

    ``rms_z``: per block, the root mean square of ``(mean − expected)/s.e.`` over its
    entries with a spread — about ``√(39/37) ≈ 1.03`` for a calibrated s.e. (t with 39
    d.o.f.); a spread that is the batches' SD instead of the SE of their mean gives
    ``1/√n_batches`` of that.

    ``k`` is the two-sided Student-t quantile (``n_batches − 1`` d.o.f.) at family-wise
    false-alarm ``alpha`` over all tested entries (Bonferroni).
    """
    from scipy.stats import t as student_t
    rng = np.random.default_rng(np.random.SeedSequence([seed, 13]))
    d_e = enc.d_e
    n = enc.reduced_n(T)
    B = max(1, n_samples // n_batches)
    n_entries = len(points) * (d * d_e + d * d_e + d_e * d_e + d * d)
    k = float(student_t.isf(alpha / (2 * n_entries), n_batches - 1))
    max_zero, z_off, z_on, live = 0.0, 0.0, 0.0, 0.0
    sq = {k: [0.0, 0] for k in ("W_xe", "V_e", "W_ee", "V_x")}    # Σ z², entries
    for a, g in traj:
        a, g = float(a), float(g)
        W, V = embed_reduced(a, g, d, d_e, n)
        mW, mV = np.zeros_like(W), np.zeros_like(V)
        sW, sV = np.zeros_like(W), np.zeros_like(V)        # sums of squared deviations
        for i in range(n_batches):
            b = sample_batch(rng, B, T, q, d)
            _, dW, dV = forward_backward(W, V, b.X, b.y, enc.sample(rng, B, T), query=query,
                                         target=b.target)
            max_zero = max(max_zero, float(np.abs(dW[:, :d]).max()))   # W_xx, W_ex
            for x, m, s in ((dW, mW, sW), (dV, mV, sV)):
                delta = x - m
                m += delta / (i + 1)
                s += delta * (x - m)
        sW, sV = (np.sqrt(x / (n_batches - 1) / n_batches) for x in (sW, sV))
        _, da, dg = reduced_loss_grad(a, g, T, q, d, query=query)
        exW = np.zeros((d_e, d_e))
        exW[:n, :n] = float(da) / (n - 1) * (np.eye(n) - 1.0 / n)
        exV = float(dg) / d * np.eye(d)

        def z(m, s, ref=0.0, key=None):
            diff = np.abs(m - ref)
            zz = np.where(s > 0, diff / np.where(s > 0, s, 1.0),
                          np.where(diff > 0, np.inf, 0.0))
            live = zz[s > 0]
            sq[key][0] += float(np.sum(live * live))
            sq[key][1] += live.size
            return float(np.max(zz, initial=0.0))
        z_off = max(z_off, z(mW[:d, d:], sW[:d, d:], key="W_xe"),
                    z(mV[:, d:], sV[:, d:], key="V_e"))
        z_on = max(z_on, z(mW[d:, d:], sW[d:, d:], exW, key="W_ee"),
                   z(mV[:, :d], sV[:, :d], exV, key="V_x"))
        se = max(float(sW[d:, d:].max()), float(sV[:, :d].max()), 1e-300)
        live = max(live, max(float(np.abs(exW).max()), float(np.abs(exV).max())) / se)
    return {"ran": True, "points": [int(p) for p in points], "n_samples": B * n_batches,
            "n_batches": n_batches, "k": k, "alpha": alpha, "entries": n_entries,
            "max_W_xx_W_ex": max_zero, "max_z_offset": z_off, "max_z_onset": z_on,
            "live_over_se": live,
            "rms_z": {k: (float(np.sqrt(v / c)) if c else float("nan"))
                      for k, (v, c) in sq.items()}}
