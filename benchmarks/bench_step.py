"""Time one online-SGD step: draw a batch and its encodings, forward + analytic backward,
update W and V. T=200, q=3, d=5, batch 256, float64 (the project's speed targets).

Two modes.

Table (default): stsim's configurations in this process, median and 10–90 % range of the
per-step times; also the dense reference path on the slots encodings (``loss_and_grad``
with the one-hot matrix built), to show what the gather path saves.

    python benchmarks/bench_step.py [--steps N]

Against the peers: stsim's step and the PyTorch / JAX peers of
``../shared/peers`` (see its README) run as separate processes, interleaved, several
repeats; each process prints ms/step = wall time of its timed steps / steps (after warm-up;
JAX's compile is excluded by the peer itself). stsim runs the same step as the peers: theory
model, ``query="sum"``, zero init, SGD lr 0.5, a fresh batch and fresh encodings every
step. Every process gets the same malloc thresholds (those of :mod:`stsim.util.malloc`, as
``MALLOC_MMAP_THRESHOLD_`` / ``MALLOC_TRIM_THRESHOLD_``) and the same thread pinning: ``OMP_NUM_THREADS``,
``OPENBLAS_NUM_THREADS``, ``MKL_NUM_THREADS`` = ``--threads`` (default 2, the count the
PyTorch peer sets itself with ``torch.set_num_threads(2)``) and, for JAX,
``XLA_FLAGS=--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1`` when
``--threads 1``. With ``--threads 1`` the PyTorch peer is started through a wrapper that
makes its ``torch.set_num_threads(2)`` set 1 instead (said in the output).

    python benchmarks/bench_step.py --peers --peer-python /work/peervenv/bin/python \
        [--peers-dir ../shared/peers] [--repeats 5] [--threads 2] [--also before=PATH]

Prints the medians (ms/step) per implementation and the ratios peer/stsim (how many
times faster stsim is), both as ratio of medians and as the median of per-repeat ratios.

``--one slots|sphere --steps N`` (internal): time stsim's step in this process and print one
line in the peers' format.
"""
import argparse
import os
import subprocess
import sys
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TORCH_MS = {("stochastic", "slots", 400): 257.0, ("stochastic", "sphere", 64): 114.0}

# configuration -> (stsim sampler, d_e, torch kind, jax kind, steps: stsim, torch, jax)
PEER_CONFIGS = {
    "slots": ("slots", 400, "onehot-stochastic", "slots-index", (200, 15, 60)),
    "sphere": ("sphere", 64, "sphere", "sphere", (60, 15, 30)),
}


def time_steps(pe, sampler, d_e, model, n, dense=False, T=200, q=3, d=5, B=256):
    import stsim
    from stsim.core.encodings import PEBatch
    from stsim.core.families import make_encoding
    from stsim.core.model import forward_backward
    from stsim.core.optim import SGD
    from stsim.core.run import uses_second_thread
    from stsim.util.malloc import keep_freed_memory
    from stsim.util.threads import one_blas_thread
    keep_freed_memory()                        # as train_loop does
    rng = np.random.default_rng(0)
    enc = make_encoding(pe, T_max=T, d_e=d_e, sampler=sampler, rng=rng)
    D = d + d_e
    params = {"W": 1e-2 * rng.standard_normal((D, D)), "V": 1e-2 * rng.standard_normal((d, D))}
    opt = SGD(0.1)
    times = []
    with one_blas_thread(uses_second_thread(enc, False)):     # as stsim.run does
        for i in range(n + 3):
            t0 = time.perf_counter()
            b = stsim.sample_batch(rng, B, T, q, d)
            peb = enc.sample(rng, B, T)
            if dense:
                peb = PEBatch(d_e=d_e, P=peb.dense())
            _, dW, dV = forward_backward(params["W"], params["V"], b.X, b.y, peb, model=model,
                                         query="mean", target=b.target)
            opt.step(params, {"W": dW, "V": dV})
            if i >= 3:
                times.append(time.perf_counter() - t0)
    t = 1e3 * np.array(times)
    return np.median(t), np.percentile(t, 10), np.percentile(t, 90)


def one(kind, steps, warmup=5, T=200, q=3, d=5, B=256, lr=0.5, prefetch=None):
    """stsim's step as the peers run it, through the path of ``stsim.run`` (the problem's
    ``draw_step``/``loss_grad``, the minibatch drawn one step ahead on a second thread when
    ``prefetch`` — default :func:`stsim.util.prefetch.prefetch_default`); prints
    '<kind>: <steps/s> steps/s  (<ms> ms/step) ...'."""
    from stsim.core.config import Config
    from stsim.core.optim import SGD
    from stsim.core.problem import make_problem
    from stsim.util.malloc import keep_freed_memory
    from stsim.util.prefetch import Prefetch, prefetch_default
    from stsim.util.threads import one_blas_thread
    kept = keep_freed_memory()                 # as train_loop does
    sampler, d_e = PEER_CONFIGS[kind][:2]
    cfg = Config.from_options(T=T, q=q, d=d, pe="stochastic", sampler=sampler, d_e=d_e,
                              batch=B, lr=lr, optimizer="sgd", model="theory", query="sum",
                              steps=steps, n_val=16)
    problem = make_problem(cfg)
    rng = np.random.default_rng(0)
    params = problem.init_params(rng)          # zeros, in the tree's memory order of W
    opt = SGD(lr)
    prefetch = prefetch_default() if prefetch is None else prefetch
    src = Prefetch(problem.draw_step, rng) if prefetch else None

    def step():
        data = src.next() if src is not None else problem.draw_step(rng)
        loss, grads = problem.loss_grad(params, rng, data)
        opt.step(params, grads)
        return loss

    try:
        with one_blas_thread(src is not None) as pinned:      # as stsim.run does
            for _ in range(warmup):
                step()
            t0 = time.perf_counter()
            for _ in range(steps):
                loss = step()
            dt = time.perf_counter() - t0
    finally:
        if src is not None:
            src.close()
    print(f"{kind}: {steps / dt:.1f} steps/s  ({1e3 * dt / steps:.1f} ms/step) final loss {loss:.4f}"
          f" prefetch={'on' if prefetch else 'off'} blas-pinned={'yes' if pinned else 'no'}"
          f" malloc-kept={'yes' if kept else 'no'}")


_TORCH_WRAP = ("import sys, runpy, torch; _s = torch.set_num_threads; "
               "torch.set_num_threads = lambda n: _s({n}); sys.argv = sys.argv[1:]; "
               "runpy.run_path(sys.argv[0], run_name='__main__')")


def _env(threads):
    from stsim.util.malloc import MMAP_THRESHOLD, TRIM_THRESHOLD
    from stsim.util.threads import THREAD_VARS
    env = dict(os.environ)
    for k in THREAD_VARS:
        env[k] = str(threads)
    # every process, the peers included, gets the malloc thresholds stsim sets for itself
    # (util.malloc); the peers' times do not move with them (measured, docs/model.md)
    env["MALLOC_MMAP_THRESHOLD_"] = str(MMAP_THRESHOLD)
    env["MALLOC_TRIM_THRESHOLD_"] = str(TRIM_THRESHOLD)
    if threads == 1:
        env["XLA_FLAGS"] = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
    return env


def _ms(cmd, env):
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{out.stderr[-2000:]}")
    line = out.stdout.strip().splitlines()[-1]
    return float(line.split("(")[1].split(" ms/step")[0])


def peers(args):
    env = _env(args.threads)
    pdir = args.peers_dir
    torch_cmd = [args.peer_python, os.path.join(pdir, "torch_peer.py")]
    if args.threads != 2:
        torch_cmd = [args.peer_python, "-c", _TORCH_WRAP.format(n=args.threads),
                     os.path.join(pdir, "torch_peer.py")]
    impls = {
        "stsim": lambda c: [sys.executable, os.path.abspath(__file__), "--one", c,
                            "--steps", str(PEER_CONFIGS[c][4][0])],
        "torch": lambda c: torch_cmd + [PEER_CONFIGS[c][2], str(PEER_CONFIGS[c][4][1])],
        "jax": lambda c: [args.peer_python, os.path.join(pdir, "jax_peer.py"),
                          PEER_CONFIGS[c][3], str(PEER_CONFIGS[c][4][2])],
    }
    for spec in args.also:                                # other stsim trees, same step
        label, path = spec.split("=", 1)
        impls[label] = (lambda p: lambda c: ["env", f"PYTHONPATH={os.path.abspath(p)}"]
                        + impls["stsim"](c))(path)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"one online-SGD step, T=200 q=3 d=5 batch=256 float64, theory model, zero init, SGD "
          f"lr 0.5; {os.cpu_count()} cores, load average {load:.2f} at start; every process "
          f"pinned to {args.threads} thread(s) (OMP/OPENBLAS/MKL_NUM_THREADS"
          f"{', XLA single-threaded, torch.set_num_threads forced to 1' if args.threads == 1 else ', torch.set_num_threads(2) by the peer, XLA default'}) "
          f"and given stsim's malloc thresholds; "
          f"{args.repeats} repeats, interleaved")
    ms = {(c, i): [] for c in args.configs for i in impls}
    names = list(impls)
    for r in range(args.repeats):
        for c in args.configs:
            order = names[r % len(names):] + names[:r % len(names)]   # rotate who goes first
            for i in order:
                ms[c, i].append(_ms(impls[i](c), env))
            print(f"  repeat {r + 1}: {c:6s} " + "  ".join(f"{i} {ms[c, i][-1]:7.1f}" for i in names)
                  + " ms/step", flush=True)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"medians (load average {load:.2f} at the end):")
    print(f"  {'config':26s} {'stsim':>8s} {'torch':>8s} {'jax':>8s}   torch/stsim   jax/stsim"
          f"   (median of per-repeat ratios)" + "".join(f"  {x:>8s}" for x in names[3:]))
    for c in args.configs:
        sampler, d_e = PEER_CONFIGS[c][:2]
        med = {i: float(np.median(ms[c, i])) for i in names}
        rr = {i: float(np.median(np.array(ms[c, i]) / np.array(ms[c, "stsim"])))
              for i in ("torch", "jax")}
        print(f"  stochastic/{sampler:6s} d_e={d_e:3d}  {med['stsim']:8.2f} {med['torch']:8.1f} "
              f"{med['jax']:8.1f}   {med['torch'] / med['stsim']:10.1f}x {med['jax'] / med['stsim']:10.2f}x"
              f"   ({rr['torch']:.1f}x, {rr['jax']:.2f}x)"
              + "".join(f"  {med[x]:8.2f}" for x in names[3:]))


def table(args):
    threads = os.environ.get("OMP_NUM_THREADS", "default")
    print(f"one online-SGD step, T=200 q=3 d=5 batch=256 float64; {os.cpu_count()} cores, "
          f"OMP_NUM_THREADS={threads}; {args.steps} steps each")
    rows = [("stochastic", "slots", 400, "theory", False),
            ("stochastic", "slots", 400, "practical", False),
            ("stochastic", "slots", 400, "practical", True),
            ("stochastic", "sphere", 64, "theory", False),
            ("stochastic", "sphere", 64, "practical", False)]
    for pe, sampler, d_e, model, dense in rows:
        n = max(10, args.steps // 5) if dense else args.steps
        med, lo, hi = time_steps(pe, sampler, d_e, model, n, dense=dense)
        ref = TORCH_MS.get((pe, sampler, d_e))
        path = "dense reference path" if dense else "production path"
        extra = (f"  (PyTorch dense autograd {ref:.0f} ms: ratio {ref / med:4.1f}x)"
                 if ref and not dense else "")
        print(f"  {pe}/{sampler:6s} d_e={d_e:3d} {model:9s} {path:21s} "
              f"{med:7.2f} ms/step [10-90%: {lo:.2f}-{hi:.2f}]{extra}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--peers", action="store_true", help="measure against the peers")
    ap.add_argument("--peer-python", default=os.path.join(REPO, "..", "shared", "peers",
                                                          ".peervenv", "bin", "python"),
                    help="python of the peers' virtual environment (numpy, jax[cpu], torch)")
    ap.add_argument("--peers-dir", default=os.path.join(REPO, "..", "shared", "peers"))
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--configs", nargs="+", default=list(PEER_CONFIGS), choices=list(PEER_CONFIGS))
    ap.add_argument("--also", nargs="*", default=[], metavar="LABEL=PATH",
                    help="also time the stsim package found at PATH (e.g. an older checkout)")
    ap.add_argument("--one", choices=list(PEER_CONFIGS), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one:
        one(args.one, args.steps)
    elif args.peers:
        peers(args)
    else:
        table(args)


if __name__ == "__main__":
    main()
