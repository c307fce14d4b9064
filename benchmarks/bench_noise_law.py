"""The parts of W and V outside the reduced form during a default run, against the step.

The reduced population dynamics keep ``W_ee = a I − b J`` and ``V_x = γ I`` (every other
block 0). Online SGD with a step per block and W's token rows held at 0 (the default for
SGD, ``stsim.core.schedule``) adds minibatch noise off that form. This script runs the
default call ``stsim.run(T=T, q=3)`` (or with ``--ratio``, η_W = ratio · n) piece by piece
(:class:`stsim.core.session.Session`) and at every ``--every`` steps measures

* ``a_sgd, gamma_sgd``: the reduced coordinates read off W and V (diagonal minus
  off-diagonal mean of ``W_ee``; mean diagonal of ``V_x``), beside the reduced map's
  ``a_map, gamma_map`` at the same step and the same two steps;
* ``sig2_sel``: the noise of a selected token's logit relative to the other selected
  tokens — over 4 000 random sets ``S`` of q slots, the variance within ``S`` of
  ``c Σ_{s∈S} R[s', s]`` (``R = W_ee − (a I − b J)``); this unevenness of the selected
  weights is what a noise costs once the attention sits on ``S``;
* ``sig2_dec``: the variance of an unselected token's logit noise ``c Σ_{s∈S} R[j, s]``;
* ``sig2_add``: the additive plateau law for both, ``c⁴ q d η_W² Σ_τ γ_map(τ)² / (n² T B)``
  (a sample's gradient on ``W_ee`` has variance ``c² γ² d/(q T²)`` on each of its ``T q``
  entries; ``stsim.core.schedule``, *A step per block*);
* ``rho``: ``η_W κ_W/B``, ``κ_W`` the curvature one sample puts on its own output through
  ``W_ee`` (:func:`stsim.core.stability.kappa_W`, at the SGD's ``a, γ``): the multiplicative
  noise of the step, mean-square stable while ``ρ < 2``;
* ``V_off``: ``‖V − γ[I 0]‖_F / ‖γ[I 0]‖_F``; ``val_over_L0``: the last validation loss.

    python benchmarks/bench_noise_law.py --T 200 --steps 1200 --every 60
    python benchmarks/bench_noise_law.py --T 500 --n 4000 --lr-W 400 --steps 2800 --every 100

Writes ``docs/figures/long/noise_law.csv`` (``--out``; rows of other (T, ratio) kept) and
prints the rows. Stochastic/slots, q = 3, d = 5, batch 256, seed 0; ``--n`` sets
``d_e = n`` (default 2T) and ``--lr-W`` W's step (η_V stays the default's).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from stsim.core.config import Config  # noqa: E402
from stsim.core.reduced import reduced_map  # noqa: E402
from stsim.util.validate import Steps  # noqa: E402
from stsim.core.stability import kappa_W  # noqa: E402
from stsim.core.session import Session  # noqa: E402
from stsim.util.io import read_csv, write_csv  # noqa: E402

COLUMNS = ["T", "n", "lr_W", "lr_V", "step", "val_over_L0", "a_sgd", "a_map", "gamma_sgd",
           "gamma_map", "resid_rms", "sig2_sel", "sig2_dec", "sig2_add", "rho", "V_off",
           "seconds", "load"]


def logit_noise(R, q, c, rng, k=4000):
    """``(σ²_sel, σ²_dec)`` of the residual ``R`` (module docstring), from ``k`` random
    sets of q slots."""
    n = R.shape[0]
    S = np.array([rng.choice(n, q + 1, replace=False) for _ in range(k)])
    sel, dec = S[:, :q], S[:, q]
    Ls = c * R[sel[:, :, None], sel[:, None, :]].sum(axis=2)       # (k, q)
    Ld = c * R[dec[:, None], sel].sum(axis=1)                      # (k,)
    return float(Ls.var(axis=1, ddof=1).mean()), float(Ld.var())


def measure(T, steps, every, ratio=None, q=3, d=5, seed=0, n=None, lr_W=None, save=None):
    opts = dict(T=T, q=q, d=d, seed=seed, steps=steps, eval_every=every)
    if n is not None:
        opts["d_e"] = n
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        base = Config.from_options(T=T, q=q, d=d, seed=seed, d_e=n)
        lr = dict(base.lr)
        if ratio is not None:
            lr["W"] = ratio * base.d_e
        if lr_W is not None:
            lr["W"] = lr_W
        cfg = Config.from_options(lr=lr, freeze=base.freeze, **opts)
    n, B = cfg.d_e, cfg.batch
    c = 1.0 if cfg.query == "sum" else 1.0 / q
    lr_W, lr_V = Steps(cfg.lr).pair()
    maps = reduced_map(T, q, d, cfg.lr, n, c=c)
    L0 = 0.5 * d / q
    rng = np.random.default_rng(12345)
    sess = Session(cfg, progress=None)
    rows, sum_g2, t_map = [], 0.0, 0
    Lm, am, bm, gm = next(maps)
    t0 = time.perf_counter()
    for step in range(0, steps + 1, every):
        if step > 0:
            sess.advance(every)
        while t_map < step:
            sum_g2 += gm * gm
            Lm, am, bm, gm = next(maps)
            t_map += 1
        W, V = sess.state.params["W"], sess.state.params["V"]
        Wee = W[d:, d:]
        dg = np.diag(Wee)
        off = (Wee.sum() - dg.sum()) / (n * (n - 1))
        a = float(dg.mean() - off)
        R = Wee - off
        R[np.diag_indices(n)] -= a
        s_sel, s_dec = logit_noise(R, q, c, rng)
        g = float(np.diag(V[:, :d]).mean())
        Vs = np.zeros_like(V)
        Vs[:, :d] = g * np.eye(d)
        hist = sess.state.history
        rows.append({
            "T": T, "n": n, "lr_W": lr_W, "lr_V": lr_V, "step": step,
            "val_over_L0": round(hist["val"][-1] / L0, 5) if hist.get("val") else None,
            "a_sgd": round(a, 5), "a_map": round(am, 5), "gamma_sgd": round(g, 5),
            "gamma_map": round(gm, 5), "resid_rms": float(np.sqrt((R * R).mean())),
            "sig2_sel": s_sel, "sig2_dec": s_dec,
            "sig2_add": c ** 4 * q * d * lr_W ** 2 * sum_g2 / (n * n * T * B),
            "rho": lr_W * kappa_W(a, g, T, q, c) / B,
            "V_off": float(np.linalg.norm(V - Vs) / max(np.linalg.norm(Vs), 1e-300)),
            "seconds": round(time.perf_counter() - t0, 1), "load": round(os.getloadavg()[0], 2)})
        print({k: (f"{v:.4g}" if isinstance(v, float) else v) for k, v in rows[-1].items()},
              flush=True)
        if save is not None:
            save(rows)
        if sess.done:
            break
    sess.finish()
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--T", default="1000")
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--every", type=int, default=250)
    p.add_argument("--ratio", type=float, default=None, help="η_W / n (default: the derived)")
    p.add_argument("--n", type=int, default=None, help="d_e = n (default 2T)")
    p.add_argument("--lr-W", dest="lr_W", type=float, default=None, help="W's step")
    p.add_argument("--out", default=os.path.join("docs", "figures", "long", "noise_law.csv"))
    args = p.parse_args(argv)
    for T in (int(t) for t in args.T.split(",")):
        old = read_csv(args.out) if os.path.exists(args.out) else []

        def save(rows):             # after every row: a stopped run keeps what it measured
            keep = [r for r in old if not (int(r["T"]) == T and int(r["n"]) == rows[0]["n"]
                                           and float(r["lr_W"]) == rows[0]["lr_W"])]
            write_csv(args.out, COLUMNS, keep + rows)

        measure(T, args.steps, args.every, args.ratio, n=args.n, lr_W=args.lr_W, save=save)


if __name__ == "__main__":
    main()
