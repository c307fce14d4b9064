"""Scaling of one online-SGD step with the sequence length T: step time, peak
memory and the memory estimate, for T = 100, 200, 400, ..., 6400.

Configurations: stochastic/slots with d_e = 2T and stochastic/sphere with d_e = 64;
q = 3, d = 5, batch 256, theory model, query "sum", zero init, SGD lr 0.5, float64.

Three modes.

Table (default): each (sampler, T) in its own subprocess (a clean peak RSS). There
``stsim.run`` is called twice, with n1 and n2 steps (metrics recorded at the first and last
step only), and the *marginal cost of a step* is (wall(n2) − wall(n1)) / (n2 − n1), from
``Result.info["wall_time_s"]`` — the path of ``stsim.run`` with its defaults (batches
drawn ahead on a second thread when two CPUs are free). n2 is large enough that a zero
initialised W has been touched in ≥ 95% of its columns (its pages are mapped when first
written), so the peak RSS (``ru_maxrss``) is the steady state that
``Config.memory_estimate`` predicts. Prints one row per T and the log-log slope of the
step time against T (least squares, with its standard error, 95% interval and residuals).

    python benchmarks/bench_scaling.py [--samplers slots sphere] [--T 100,200,...]
        [--seconds 20] [--json PATH]

Ratio (``--ratio 200,3200``): the marginal cost at two lengths measured in ONE process,
interleaved (``--repeats`` times), and the ratio per repeat — the issue's criterion
(slots: T = 3200 at most 25× T = 200). Under load from other processes prefer this to
ratios of the table's rows. Printed twice: from the loop's wall time, and from the
process's CPU time (``time.process_time``, both threads: the drawing ahead included) over
the same two runs — the cost of a step, less sensitive to the other processes' load.

Parts (``--parts 200,3200``): the step's parts in a direct loop in one process — drawing
the batch (tokens, subset, encodings), forward + backward, the optimiser update
(``--optimizer sgd|adam``) — as medians over ``--steps`` steps, serially (no drawing
ahead), BLAS on one thread. For the sphere encodings a last column, ``normals``, times
``rng.standard_normal`` filling a preallocated (B, T, d_e) array on one thread: the B·T·d_e
normal draws that a fresh dense encoding per sample cannot avoid (the floor of the step).

Traced (``--traced 1600,3200,6400``): the peak RSS of a run against the peak of the arrays
``tracemalloc`` traces, each T in its own process: what the allocator holds beyond them.
"""
import argparse
import json
import math
import os
import resource
import subprocess
import sys
import time
import warnings

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SIZES = dict(q=3, d=5, batch=256)
T_GRID = (100, 200, 400, 800, 1600, 3200, 6400)


def config(sampler, T, steps, **extra):
    """The benchmark's :class:`stsim.core.config.Config` at length ``T``."""
    from stsim.core.config import Config
    d_e = 2 * T if sampler == "slots" else 64
    opts = dict(T=T, pe="stochastic", sampler=sampler, d_e=d_e, lr=0.5, steps=steps,
                eval_every=max(1, steps), **SIZES)
    opts.update(extra)
    return Config.from_options(**opts)


def wall(sampler, T, steps):
    """``stsim.run``'s loop time (s) for ``steps`` steps."""
    import stsim
    cfg = config(sampler, T, steps)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = stsim.run(**{k: v for k, v in cfg.to_dict().items() if v is not None})
    assert res.status == "completed", res.message
    return res.info["wall_time_s"]


def child_env():
    """The environment of a measuring subprocess: this one, with the repository importable."""
    return dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))


def touch_steps(sampler, T):
    """Steps after which a zero-initialised W has >= 95% of its query columns written
    (slots: B q of the d_e columns per step, uniformly: (1 − Bq/d_e)^n <= 0.05)."""
    if sampler != "slots":
        return 1
    p = min(1.0, SIZES["batch"] * SIZES["q"] / (2 * T))
    return 1 if p >= 1 else int(math.ceil(math.log(0.05) / math.log(1 - p)))


def one(sampler, T, seconds):
    """One (sampler, T) in this process: prints a JSON line (marginal ms/step, the steps
    used, peak RSS, the memory estimate and its parts)."""
    n0 = 2
    wall(sampler, T, n0)                          # warm-up
    per = wall(sampler, T, n0 + 3) / (n0 + 3)     # an upper bound of the step (records incl.)
    n1 = n0
    n2 = max(n1 + 5, touch_steps(sampler, T), n1 + int(seconds / per))
    w1 = wall(sampler, T, n1)
    w2 = wall(sampler, T, n2)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    est = config(sampler, T, n2).memory_estimate()
    print(json.dumps(dict(sampler=sampler, T=T, d_e=config(sampler, T, 1).d_e,
                          ms_step=1e3 * (w2 - w1) / (n2 - n1), steps=[n1, n2],
                          peak_rss=peak, estimate=est["total"], estimate_parts=est)))


def loglog_slope(T, ms):
    """Least-squares slope of log(ms) on log(T): (slope, standard error, 95% interval,
    residuals in log units)."""
    from scipy import stats
    x, y = np.log(np.asarray(T, float)), np.log(np.asarray(ms, float))
    fit = stats.linregress(x, y)
    t = stats.t.ppf(0.975, len(x) - 2) if len(x) > 2 else float("nan")
    res = y - (fit.intercept + fit.slope * x)
    return fit.slope, fit.stderr, (fit.slope - t * fit.stderr, fit.slope + t * fit.stderr), res


def table(args):
    Ts = [int(t) for t in args.T.split(",")]
    load = os.getloadavg()[0]
    print(f"one online-SGD step in stsim.run: q=3 d=5 batch=256 theory/sum SGD lr 0.5, zero "
          f"init; {os.cpu_count()} cores, load average {load:.2f} at start; each T in its "
          f"own process; marginal cost from two runs of n1 < n2 steps")
    rows = []
    for sampler in args.samplers:
        print(f"  {'sampler':7s} {'T':>5s} {'d_e':>6s} {'ms/step':>9s} {'steps':>9s} "
              f"{'peak RSS':>9s} {'estimate':>9s} {'est/peak':>8s}")
        for T in Ts:
            cmd = [sys.executable, os.path.abspath(__file__), "--one", sampler, str(T),
                   "--seconds", str(args.seconds)]
            out = subprocess.run(cmd, capture_output=True, text=True, env=child_env())
            if out.returncode != 0:
                print(f"  {sampler:7s} {T:5d}  failed: {out.stderr.strip().splitlines()[-1]}")
                continue
            row = json.loads(out.stdout.strip().splitlines()[-1])
            rows.append(row)
            print(f"  {sampler:7s} {T:5d} {row['d_e']:6d} {row['ms_step']:9.2f} "
                  f"{row['steps'][0]:4d}-{row['steps'][1]:<4d} {row['peak_rss'] / 2**20:8.0f}M "
                  f"{row['estimate'] / 2**20:8.0f}M {row['estimate'] / row['peak_rss']:8.2f}",
                  flush=True)
        sel = [r for r in rows if r["sampler"] == sampler]
        if len(sel) >= 3:
            slope, se, ci, res = loglog_slope([r["T"] for r in sel], [r["ms_step"] for r in sel])
            print(f"  {sampler}: log-log slope of ms/step on T = {slope:.3f} ± {se:.3f} (s.e.), "
                  f"95% interval [{ci[0]:.3f}, {ci[1]:.3f}]; residuals (log) "
                  + " ".join(f"{r:+.2f}" for r in res))
    print(f"load average {os.getloadavg()[0]:.2f} at the end")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(load_start=load, load_end=os.getloadavg()[0], rows=rows), f, indent=1)


def ratio(args):
    lo, hi = (int(t) for t in args.ratio.split(","))
    sampler = args.samplers[0]
    print(f"marginal cost of a {sampler} step in stsim.run, T={lo} and T={hi} in one process, "
          f"interleaved, {args.repeats} repeats; load average {os.getloadavg()[0]:.2f} at start")
    n = {T: None for T in (lo, hi)}
    for T in n:                                  # steps for ~args.seconds per measurement
        wall(sampler, T, 2)
        per = wall(sampler, T, 5) / 5            # an upper bound of the step
        n[T] = (2, max(7, 2 + int(args.seconds / per)))
    ms = {T: [] for T in n}
    cpu = {T: [] for T in n}

    def timed(T, steps):                          # (loop wall time, process CPU time) in s
        c0 = time.process_time()
        w = wall(sampler, T, steps)
        return w, time.process_time() - c0

    for r in range(args.repeats):
        for T in (n if r % 2 == 0 else list(n)[::-1]):
            n1, n2 = n[T]
            (w2, c2), (w1, c1) = timed(T, n2), timed(T, n1)
            ms[T].append(1e3 * (w2 - w1) / (n2 - n1))
            cpu[T].append(1e3 * (c2 - c1) / (n2 - n1))
        print(f"  repeat {r + 1}: T={lo} {ms[lo][-1]:8.2f} ms  T={hi} {ms[hi][-1]:8.2f} ms  "
              f"ratio {ms[hi][-1] / ms[lo][-1]:6.2f}   CPU: {cpu[lo][-1]:8.2f} ms "
              f"{cpu[hi][-1]:8.2f} ms  ratio {cpu[hi][-1] / cpu[lo][-1]:6.2f}", flush=True)
    for what, x in (("wall", ms), ("CPU", cpu)):
        rr = np.array(x[hi]) / np.array(x[lo])
        print(f"median ({what}): T={lo} {np.median(x[lo]):.2f} ms, T={hi} {np.median(x[hi]):.2f} "
              f"ms; ratio of medians {np.median(x[hi]) / np.median(x[lo]):.2f}, median of "
              f"per-repeat ratios {np.median(rr):.2f} (range {rr.min():.2f}-{rr.max():.2f}), "
              f"mean {rr.mean():.2f} ± {rr.std(ddof=1) / math.sqrt(rr.size):.2f} (s.e.) for "
              f"{hi / lo:g}x the tokens")
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


def parts(args):
    from stsim.core.optim import make_optimizer
    from stsim.core.problem import make_problem
    from stsim.util.malloc import keep_freed_memory
    from stsim.util.threads import one_blas_thread
    keep_freed_memory()
    sampler = args.samplers[0]
    print(f"parts of a {sampler} {args.optimizer} step, direct loop, serial, BLAS on one "
          f"thread; median of {args.steps} steps; load average {os.getloadavg()[0]:.2f}")
    floor = sampler == "sphere"
    print(f"  {'T':>5s} {'d_e':>6s} {'draw':>8s} {'fwd+bwd':>8s} {'update':>8s} {'total':>8s}"
          + (f" {'normals':>8s} {'total/normals':>13s}" if floor else "") + "  ms")
    for T in (int(t) for t in args.parts.split(",")):
        cfg = config(sampler, T, 10)
        prob = make_problem(cfg)
        rng = np.random.default_rng(0)
        params = prob.init_params(rng)
        opt = make_optimizer(args.optimizer, 0.01 if args.optimizer == "adam" else cfg.lr)
        t = []
        with one_blas_thread(True):
            for i in range(args.steps + 2):
                t0 = time.perf_counter()
                data = prob.draw_step(rng)
                t1 = time.perf_counter()
                _, grads = prob.loss_grad(params, rng, data)
                t2 = time.perf_counter()
                opt.step(params, grads)
                t3 = time.perf_counter()
                if i >= 2:
                    t.append((t1 - t0, t2 - t1, t3 - t2))
        m = 1e3 * np.median(np.array(t), axis=0)
        line = f"  {T:5d} {cfg.d_e:6d} {m[0]:8.2f} {m[1]:8.2f} {m[2]:8.2f} {m.sum():8.2f}"
        if floor:                     # the B·T·d_e normals alone, one generator, one thread
            buf = np.empty((SIZES["batch"], T, cfg.d_e))
            tn = []
            for i in range(args.steps + 2):
                t0 = time.perf_counter()
                rng.standard_normal(out=buf)
                if i >= 2:
                    tn.append(time.perf_counter() - t0)
            fn = 1e3 * np.median(tn)
            line += f" {fn:8.2f} {m.sum() / fn:13.2f}"
        print(line, flush=True)


def traced(args):
    """For each length, in its own process: ``stsim.run`` under ``tracemalloc`` (the
    first sampler, ``touch_steps`` steps, drawing ahead as by default) — the RSS after
    import, the peak RSS, the peak of the arrays ``tracemalloc`` traces, and the excess of
    the peak RSS over both, which is what the allocator holds beyond the arrays alive
    (``Config.memory_estimate``'s allocator terms)."""
    for T in (int(t) for t in args.traced.split(",")):
        cmd = [sys.executable, os.path.abspath(__file__), "--traced-one", args.samplers[0],
               str(T)]
        out = subprocess.run(cmd, capture_output=True, text=True, env=child_env())
        print(out.stdout.strip() if out.returncode == 0 else
              f"T={T} failed: {out.stderr.strip().splitlines()[-1]}", flush=True)


def traced_one(sampler, T):
    import tracemalloc
    import stsim
    steps = max(5, touch_steps(sampler, T))
    cfg = config(sampler, T, steps)
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    tracemalloc.start()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = stsim.run(**{k: v for k, v in cfg.to_dict().items() if v is not None})
    assert res.status == "completed", res.message
    tm = tracemalloc.get_traced_memory()[1] / 2 ** 20
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    est = cfg.memory_estimate()
    kept = est.get("freed batches kept by the allocator", 0) / 2 ** 20
    print(f"{sampler} T={T} d_e={cfg.d_e} steps={steps}: RSS after import {rss0:.0f} MiB, "
          f"peak RSS {peak:.0f} MiB, tracemalloc peak {tm:.0f} MiB, excess "
          f"{peak - rss0 - tm:.0f} MiB (estimate {est['total'] / 2 ** 20:.0f} MiB, of which "
          f"freed batches kept {kept:.1f} MiB)")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samplers", nargs="+", default=["slots", "sphere"],
                    choices=["slots", "sphere"])
    ap.add_argument("--T", default=",".join(map(str, T_GRID)), help="comma list of lengths")
    ap.add_argument("--seconds", type=float, default=20.0,
                    help="rough time of the n2 − n1 measured steps per point")
    ap.add_argument("--json", help="write the table's rows to this JSON file")
    ap.add_argument("--ratio", help="LO,HI: marginal cost at two lengths in one process")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--parts", help="comma list of lengths: the step's parts")
    ap.add_argument("--steps", type=int, default=10, help="steps per length for --parts")
    ap.add_argument("--optimizer", default="sgd", choices=["sgd", "adam"],
                    help="the optimiser of --parts")
    ap.add_argument("--traced", help="comma list of lengths: the peak RSS against the "
                    "arrays traced by tracemalloc")
    ap.add_argument("--one", nargs=2, metavar=("SAMPLER", "T"), help=argparse.SUPPRESS)
    ap.add_argument("--traced-one", nargs=2, metavar=("SAMPLER", "T"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one:
        one(args.one[0], int(args.one[1]), args.seconds)
    elif args.traced_one:
        traced_one(args.traced_one[0], int(args.traced_one[1]))
    elif args.traced:
        traced(args)
    elif args.ratio:
        ratio(args)
    elif args.parts:
        parts(args)
    else:
        table(args)


if __name__ == "__main__":
    main()
