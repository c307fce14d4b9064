"""The sparse index path: how far it is from the dense reference, and what W's memory
order costs.

Accuracy (default): the loss and gradients of ``forward_backward(..., sparse_grad=True)``
against ``loss_and_grad`` (dense encodings), over one-hot (d_e = T and d_e > T) and slots,
both models, both queries, x_q zero and random, 10 seeds, weights of scale 0.1, 0.7 and 3;
prints the largest normwise difference ``max|Δ| / max|ref|`` per quantity and scale.

    python benchmarks/bench_index_path.py [--seeds 10]

Order (``--order``): at T = 3200, d_e = 6400 (W of 328 MB), the forward's gathers
``W_ee[k_i, κ_j]`` (B q T of them) and the update of the touched columns (the SGD step of
one batch) with W in C order and in Fortran order, in this process (best of 3).

    python benchmarks/bench_index_path.py --order

Draw (``--draw``): the slots draw of a batch at B = 256, T = 1000, d_e = 8000 (the long
run's), ``encodings.sorted_subsets`` by its sparse route (``_sparse_subsets``, O(B T)) and
by the keys (O(B d_e): the route forced by making ``_sparse_mean`` infinite), best of 5.

    python benchmarks/bench_index_path.py --draw

Against another tree (``--against PATH``, e.g. a checkout from before the index path): the
loss and gradients of ``forward_backward`` here and there, on the same inputs (slots and
one-hot, both models, both queries, d_e = 2T, 8T, T), compared bit for bit (dW made dense).

    python benchmarks/bench_index_path.py --against ../main
"""
import argparse
import itertools
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

FAMILIES = [("onehot", 40, 40), ("slots", 80, 40), ("onehot", 90, 40), ("slots", 13, 9)]


def accuracy(seeds):
    from stsim.core.encodings import PEBatch
    from stsim.core.model import forward_backward, loss_and_grad
    worst, n = {}, 0
    for (pe, d_e, T), model, query, xq, seed in itertools.product(
            FAMILIES, ("theory", "practical"), ("sum", "mean"), (False, True), range(seeds)):
        rng = np.random.default_rng(seed)
        B, q, d = 16, 3, 5
        X = rng.standard_normal((B, T, d))
        y = np.array([rng.choice(T, q, replace=False) for _ in range(B)])
        idx = (np.sort([rng.choice(d_e, T, replace=False) for _ in range(B)], axis=1)
               if pe == "slots" else np.arange(T))
        peb = PEBatch(d_e=d_e, idx=idx)
        D = d + d_e
        for scale in (0.1, 0.7, 3.0):
            W = scale * rng.standard_normal((D, D))
            V = scale * rng.standard_normal((d, D))
            x_q = rng.standard_normal((B, d)) if xq else None
            got = forward_backward(W, V, X, y, peb, model=model, query=query, x_query=x_q,
                                   sparse_grad=True)
            ref = loss_and_grad(W, V, X, y, peb.dense(), model=model, query=query, x_query=x_q)
            n += 1
            for name, a, b in zip(("loss", "dW", "dV"), got, ref):
                a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
                rel = float(np.max(np.abs(a - b)) / np.max(np.abs(b)))
                worst[name, scale] = max(worst.get((name, scale), 0.0), rel)
    print(f"index path (sparse dW) against the dense reference, {n} cases; largest normwise "
          f"difference max|Δ|/max|ref|:")
    for name in ("loss", "dW", "dV"):
        print(f"  {name:4s} " + "  ".join(f"scale {s:g}: {worst[name, s]:.2e}"
                                           for s in (0.1, 0.7, 3.0)))


def best(f, n=3):
    f()
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        f()
        out.append(time.perf_counter() - t0)
    return 1e3 * min(out)


def order():
    from stsim.core.encodings import sorted_subsets
    from stsim.core.sparse_grad import flat_view
    rng = np.random.default_rng(0)
    T, d, B, q = 3200, 5, 256, 3
    d_e = 2 * T
    D = d + d_e
    idx = sorted_subsets(rng, B, d_e, T)
    ky = np.take_along_axis(idx, np.sort(rng.random((B, T)).argsort(axis=1)[:, :q], axis=1),
                            axis=1)
    cols = d + np.unique(ky)
    print(f"T={T} d_e={d_e} (W {D * D * 8 / 2**20:.0f} MiB), B={B}, q={q}; load average "
          f"{os.getloadavg()[0]:.2f}")
    for o in "CF":
        W = np.asarray(rng.standard_normal((D, D)), order=o)
        flat, sr, sc = flat_view(W)
        pos = ((d + idx) * sr)[:, None, :] + ((d + ky) * sc)[:, :, None]     # (B, q, T)
        blk = rng.standard_normal((cols.size, D))
        t_g = best(lambda: np.take(flat, pos))

        def update():
            W[:, cols] -= 0.5 * blk.T
        print(f"  {o} order: gathers {t_g:7.1f} ms, update of {cols.size} columns "
              f"{best(update):7.1f} ms")


def draw():
    import stsim.core.encodings as E
    B, T, d_e = 256, 1000, 8000
    rng = np.random.default_rng(0)
    sparse = best(lambda: E.sorted_subsets(rng, B, d_e, T), 5)
    real = E._sparse_mean
    E._sparse_mean = lambda k: float("inf")          # the keys' route at the same sizes
    try:
        keys = best(lambda: E.sorted_subsets(rng, B, d_e, T), 5)
    finally:
        E._sparse_mean = real
    print(f"slots draw, B={B} T={T} d_e={d_e}: sparse route {sparse:.1f} ms, keys {keys:.1f} ms "
          f"(best of 5; load average {os.getloadavg()[0]:.2f})")


def _load(path):
    for k in [k for k in sys.modules if k == "stsim" or k.startswith("stsim.")]:
        del sys.modules[k]
    sys.path.insert(0, os.path.abspath(path))
    try:
        import stsim.core.model as model
        from stsim.core.encodings import PEBatch
        return model.forward_backward, PEBatch
    finally:
        sys.path.pop(0)


def against(path):
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    fns = {"here": _load(here), "there": _load(path)}
    rows = []
    for T, d_e, B, pe in ((200, 400, 256, "slots"), (50, 400, 256, "slots"),
                          (700, 1400, 300, "slots"), (60, 60, 64, "onehot"),
                          (60, 240, 64, "onehot"), (1000, 8000, 64, "slots")):
        same = total = 0
        for model, query in itertools.product(("theory", "practical"), ("sum", "mean")):
            rng = np.random.default_rng(T + B)
            X = rng.standard_normal((B, T, 5))
            y = np.sort(rng.random((B, T)).argsort(axis=1)[:, :3], axis=1)
            idx = (np.sort(rng.random((B, d_e)).argsort(axis=1)[:, :T], axis=1)
                   if pe == "slots" else np.arange(T))
            D = 5 + d_e
            W = np.asfortranarray(0.3 * rng.standard_normal((D, D)))
            V = 0.3 * rng.standard_normal((5, D))
            outs = [np.asarray(a, dtype=float) for fb, PB in fns.values()
                    for a in fb(W, V, X, y, PB(d_e=d_e, idx=idx), model=model, query=query)]
            for a, b in zip(outs[:3], outs[3:]):
                total += 1
                same += bool(np.array_equal(a, b))
        rows.append(f"  {pe:6s} T={T:5d} d_e={d_e:5d} (d_e/T = {d_e / T:g}): {same}/{total} "
                    f"of loss, dW, dV bit-identical")
    print(f"forward_backward here ({here}) and in {os.path.abspath(path)}:")
    print("\n".join(rows))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--order", action="store_true")
    ap.add_argument("--draw", action="store_true")
    ap.add_argument("--against", metavar="PATH", help="another stsim tree to compare with")
    args = ap.parse_args(argv)
    if args.against:
        against(args.against)
    elif args.order:
        order()
    elif args.draw:
        draw()
    else:
        accuracy(args.seeds)


if __name__ == "__main__":
    main()
