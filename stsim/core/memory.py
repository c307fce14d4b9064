"""Memory a run will need, estimated before anything is allocated:
:func:`run_memory` (what :meth:`stsim.core.config.Config.memory_estimate` returns and
:meth:`~stsim.core.config.Config.check_memory` checks against 80% of physical memory)."""
from __future__ import annotations

from stsim.core.targets import target_of
from stsim.util.malloc import MMAP_THRESHOLD

__all__ = ["run_memory"]


def run_memory(cfg) -> dict:
    """Bytes of the largest arrays a run of the resolved config ``cfg`` allocates, by name,
    and their ``total`` — an estimate made before anything is allocated: parameters
    (+ gradient and optimiser state), one training batch with its encodings and the
    forward/backward temporaries, the batches drawn ahead (``stsim.util.prefetch``: up
    to 2 more while one is computed, counted whenever each step draws a fresh batch),
    and the validation sets."""
    f8 = 8
    B, T, d = cfg.batch, cfg.T, target_of(cfg).feature_dim(cfg.d)   # a token's φ(x)
    val_T = [T] * (1 + len(cfg.q_test)) + list(cfg.T_test)
    nb = cfg.n_train if cfg.objective != "online" else B
    out = {}
    own = cfg.resolved.arch.memory     # an architecture's own estimate (the FCN's)
    if own is not None:
        out.update(own(cfg))
    else:   # the transformer's (also for a registered architecture that gives none)
        # transformer (calibrated against the peak RSS measured by
        # benchmarks/bench_scaling.py and tracemalloc of one step, docs/model.md
        # "Scaling"): index encodings keep the gradient of W sparse (core/sparse_grad),
        # so SGD/GD hold W once; the per-step arrays are linear in the batch's tokens
        d_e = cfg.d_e
        D = d + d_e
        spec = cfg.resolved.encoding
        dense = spec.dense
        per_sample = not spec.fixed              # a fixed family's encodings are shared
        draws = cfg.objective == "online"
        sparse = not dense and cfg.objective in ("online", "sample")
        # each token's encoding drawn per sample: a slot (one int64) or a d_e-vector
        per_enc = (d_e if dense else 1) if per_sample else 0
        per_tok = d + per_enc                    # with the token itself (d floats)
        out["interpreter and libraries (measured)"] = 100 * 2**20
        out["W, V"] = (D * D + d * D) * f8
        if cfg.init != "zero":
            out["W while drawn at random (once)"] = D * D * f8
        if cfg.optimizer == "adam":
            out["Adam moments and update temporaries (4 x W)"] = 4 * D * D * f8
        if not sparse:
            out["dense gradient of W and its update (2 x W)"] = 2 * D * D * f8
        else:
            bq = nb * cfg.q
            out["sparse gradient: shared columns, update chunks"] = (
                2 * min(d_e * D, bq * bq) + 3 * 2**17) * f8
        out["batch tokens and encodings"] = nb * T * per_tok * f8
        if spec.fixed and dense:                 # a fixed dense table (near-orthogonal)
            out["fixed encoding table"] = cfg.T_max * d_e * f8
        if draws:
            # the prefetch queue holds 2 and a third waits when drawing is the faster
            # part (index encodings); a dense per-sample draw (B·T·d_e normals) is the
            # slower part, so only the batch being drawn is alive besides the one in use
            ahead = 1 if dense and per_sample else 3
            out[f"batches drawn ahead (x{ahead})"] = ahead * nb * T * per_tok * f8
            if not dense and per_sample:      # slots: keys, their partition, a mask
                # (d_e keys per row, or about 1.3 T when d_e >= 4T: encodings.
                # _sparse_subsets); an upper bound of both
                out["slots draw temporaries"] = 5 * nb * min(d_e, 2 * T) * f8
        n_tmp = 4 if dense else 12
        T_big = max(val_T)
        tmp = n_tmp * max(nb * T, cfg.n_val * T_big) * f8
        if dense:
            tmp += 6 * max(nb, cfg.n_val) * D * f8
        out["forward/backward temporaries"] = tmp
        out["validation sets"] = sum(cfg.n_val * t * per_tok for t in val_T) * f8
        # freed memory the allocator keeps (stsim.util.malloc): a batch's arrays under
        # the mmap threshold come from the heap and, once freed, stay resident for the
        # next batch; with batches drawn ahead the drawing thread's arena keeps one
        # too (a fixed training set frees none). Measured at slots T = 3200
        # (benchmarks/bench_scaling.py --traced): the peak RSS exceeds the arrays
        # traced by tracemalloc by 86 MiB, about two batches of 37.5 MiB
        heap = sum(a for a in (nb * T * d * f8, nb * T * per_enc * f8) if a < MMAP_THRESHOLD)
        out["freed batches kept by the allocator"] = (2 if draws else 0) * heap
        arrays = sum(v for k, v in out.items() if not k.startswith("interpreter"))
        # heap fragmentation beyond that: the rest of the excess measured at T = 6400
        # (1.8% of the arrays), rounded up
        out["allocator fragmentation (2% of the arrays)"] = int(0.02 * arrays)
    out["total"] = int(sum(out.values()))
    return out
