"""The softmax sphere family's crossing of 0.25 L(0) (q = 3) by an independent estimator,
against the widths library's located crossing (docs/widths.md, "An independent check").

The library (:func:`stsim.studies.widths.locate`) bisects each replicate's own best-(a, γ)
loss. This script shares none of that path but the score sampler: one ``a`` fitted on a
separate sample (``--n-fit`` draws at the library's crossing), then at ``--points`` integer
widths around the crossing the family's ``L/L0 = 1 − q E[s·u]²/E|s|²`` at that ``a`` with
the closed-form γ, on ``--n`` fresh draws in chunks (the ratio of the chunk sums; its SE
by the delta method over ``--batches`` batch means); a line through the points gives the
crossing and its SE. A fixed ``a`` can only raise the loss above the best-``a`` loss, so
the independent crossing is an upper estimate; its bias at the fitted ``a`` is second
order (the loss is flat in ``a`` at its minimum).

    python benchmarks/bench_family_crossing.py --T 256,1024,4096 \\
        --library docs/figures/widths/softmax_q3.csv --out docs/figures/widths/independent.csv

``--bias`` instead prints the best-``(a, γ)`` loss of one replicate at ``T = 4096``,
``d_e = 150`` over 8 seeds at n = 256, 1024, 4096 (why the precision rule grows n until the
crossing stops moving: the estimate falls with n, not only its spread).

``--reruns K`` also locates the crossing K more times by the library's own rule on other
seeds (the family's key with ``|check=k``): the spread of those independent crossings
against the stated SE (ratio of their standard deviation to the root-mean-square SE).

``--library`` is a CSV with columns ``T, d_e, se`` (the library's crossings, e.g. one study's
rows); without it the library's crossing is located here (the full precision rule).
Prints the table and writes ``--out`` (CSV, atomically).
"""
from __future__ import annotations

import argparse
import csv
import math
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from stsim.studies import widths as wl  # noqa: E402
from stsim.theory.family import (best_family_loss, best_softmax_family,  # noqa: E402
                                 sample_scores)
from stsim.util.io import write_csv  # noqa: E402


def moments(a, T, q, d_e, n, rng, chunk):
    """Per-batch sums of s·1_y and |s|² at fixed a (the batches of ``n // chunk`` draws)."""
    S, Q = [], []
    for _ in range(n // chunk):
        g = a * sample_scores(T, q, d_e, chunk, rng)
        s = np.exp(g - g.max(axis=1, keepdims=True))
        s /= s.sum(axis=1, keepdims=True)
        S.append(s[:, :q].sum(axis=1).mean())
        Q.append(np.einsum("nt,nt->n", s, s).mean())
    return np.array(S), np.array(Q)


def rel_and_se(S, Q, q):
    """``1 − (E S)²/(q E Q)`` and its delta-method SE over the batch means."""
    m, v = len(S), np.cov(np.vstack([S, Q]), ddof=1) / len(S)
    es, eq = S.mean(), Q.mean()
    f = 1 - es * es / (q * eq)
    grad = np.array([-2 * es / (q * eq), es * es / (q * eq * eq)])
    return float(f), float(math.sqrt(grad @ v @ grad)) if m > 1 else math.nan


def independent(T, q, level, x0, n, n_fit, points, chunk, seed):
    rng = np.random.default_rng(seed)
    a = best_family_loss(T, q, 1, int(round(x0)), n_mc=n_fit, rng=rng)["a"]
    step = max(1, int(round(0.02 * x0)))
    ws = [int(round(x0)) + k * step for k in range(-(points // 2), points // 2 + 1)]
    rows = []
    for w in ws:
        S, Q = moments(a, T, q, w, n, rng, chunk)
        rows.append((w, *rel_and_se(S, Q, q)))
    w, r, s = map(np.array, zip(*rows))
    W = np.column_stack([np.ones_like(w, dtype=float), w - x0])
    cov = np.linalg.inv(W.T @ (W / (s ** 2)[:, None]))
    b0, b1 = cov @ (W.T @ (r / s ** 2))
    x = x0 + (level - b0) / b1
    # the crossing's SE by the delta method on (b0, b1)
    g = np.array([-1 / b1, -(level - b0) / b1 ** 2])
    return {"T": T, "a": a, "x": float(x), "se": float(math.sqrt(g @ cov @ g)),
            "points": " ".join(f"{int(wi)}:{ri:.5f}+-{si:.5f}" for wi, ri, si in rows)}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--T", default="256,1024,4096")
    p.add_argument("--q", type=int, default=3)
    p.add_argument("--level", type=float, default=0.25)
    p.add_argument("--n", type=int, default=2 ** 17, help="draws per width")
    p.add_argument("--n-fit", type=int, default=2 ** 14, help="draws of the fit of a")
    p.add_argument("--points", type=int, default=5)
    p.add_argument("--chunk", type=int, default=2048)
    p.add_argument("--seed", type=int, default=12345)
    p.add_argument("--library", default=None)
    p.add_argument("--out", default=None)
    p.add_argument("--bias", action="store_true")
    p.add_argument("--reruns", type=int, default=0)
    a = p.parse_args(argv)
    if a.bias:
        for n in (256, 1024, 4096):
            v = [best_softmax_family(sample_scores(4096, 3, 150, n, s), 3)[0] for s in range(8)]
            print(f"n = {n}: mean {np.mean(v):.4f}, sd {np.std(v, ddof=1):.4f} (8 seeds)",
                  flush=True)
        return
    Ts = [int(t) for t in a.T.split(",")]
    lib = {}
    if a.library:
        with open(a.library, newline="") as f:
            lib = {int(r["T"]): (float(r["d_e"]), float(r["se"])) for r in csv.DictReader(f)}
    out = []
    print("T, library d_e* +- se, independent d_e* +- se, z, [reruns: crossings, "
          "sd/rms se], seconds")
    for T in Ts:
        t0 = time.process_time()
        if T not in lib:
            r = wl.locate(wl.mechanism_loss("softmax", T, a.q), [a.level], T,
                          wl.family_key("softmax", T, a.q), q=a.q)[a.level]
            lib[T] = (r["d_e"], r["se"])
        x0, se0 = lib[T]
        ind = independent(T, a.q, a.level, x0, a.n, a.n_fit, a.points, a.chunk, a.seed + T)
        z = (x0 - ind["x"]) / math.hypot(se0, ind["se"])
        reruns = [wl.locate(wl.mechanism_loss("softmax", T, a.q), [a.level], T,
                            wl.family_key("softmax", T, a.q) + f"|check={k}",
                            q=a.q)[a.level] for k in range(1, a.reruns + 1)]
        xs = [x0] + [r["d_e"] for r in reruns]
        ses = [se0] + [r["se"] for r in reruns]
        ratio = (float(np.std(xs, ddof=1) / math.sqrt(np.mean(np.square(ses))))
                 if reruns else math.nan)
        dt = time.process_time() - t0
        print(f"{T}, {x0:.2f} +- {se0:.2f}, {ind['x']:.2f} +- {ind['se']:.2f}, {z:+.2f}, "
              f"[{' '.join(f'{x:.2f}' for x in xs[1:])}, {ratio:.2f}], {dt:.0f}", flush=True)
        out.append([T, a.q, a.level, x0, se0, ind["x"], ind["se"], z, ind["a"], a.n,
                    ind["points"], " ".join(f"{x:.4f}+-{e:.4f}" for x, e in
                                            zip(xs[1:], ses[1:])), ratio, round(dt, 1)])
    if a.out:
        os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
        write_csv(a.out, ["T", "q", "level", "library", "library_se", "independent",
                          "independent_se", "z", "a", "n", "points", "reruns",
                          "sd_over_rms_se", "cpu_s"], out)


if __name__ == "__main__":
    main()
