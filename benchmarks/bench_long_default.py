"""Time to 2% of L(0) at long T: the default call against plain single-step SGD.

For each T (stochastic/slots, q = 3, d = 5, batch 256, seed 0):

* **default**: ``stsim.run(T=T, q=3)``, only the problem named. For SGD with minibatches
  the derived step is a step per block (W: ``min(NOISE_W · B n/(c² q d), B/c²)``, V: half
  its mean-square bound) with W's token rows ``W_xx, W_xe`` held at 0 (``stsim.core.schedule``,
  ``docs/model.md``, "A step per block"); run to its end.
* **plain**: the paper's single step on every parameter — ``lr`` = the derived single
  step ``eta_max(B)/2``, ``freeze=()``, records every ``--plain-every`` steps — stopped by a
  callback at its first record at or below 2% of L(0), or once ``--cap-s`` seconds have
  passed: then the time to 2% is censored, "> cap", never an observation.

Per run: the step of the first record with validation loss <= 2% of the record at step 0,
the wall time from the call to that record (the callback's clock), the whole call's wall
and CPU time (``resource``: both threads), the up-front estimate the schedule makes
(``Plan.estimated_s``, the number the long-run warning quotes), the final validation
loss over L(0), ``cos(V, V*)`` and the load average at the start and end. Other jobs on
the machine change the times: read them with the load.

    nice -n 5 python benchmarks/bench_long_default.py --T 200,500,1000,2000 --cap-s 900

Writes ``docs/figures/long/default_vs_plain.csv`` (one row per run; ``--out``; rows of
other lengths and arms already there are kept) with ``stsim.util.io.write_csv`` and prints
the table; ``--table a.csv,b.csv`` prints the table of committed rows; ``--log`` appends
every record as it is made (JSON lines), so a long run can be followed.

**Long defaults in minutes** (``--minutes``): the default call as it is today — the stop
rule (``stop="auto"``, :mod:`stsim.core.stopping`) and the tokens drawn through their
statistics (``draws="auto"``, :mod:`stsim.core.token_stats`) — per T and seed: the step of
the first record at or below 2% of L(0), the step where the run stopped (and the rule's
step, or the planned end), the final validation loss over L(0), the wall time with the load
at its start and end, the peak resident memory of the process (``ru_maxrss``, which only
grows: run the largest T last, or alone) against ``Config.memory_estimate``; then, per T,
the time of a bare step (30 steps after 3, no records) beside the JAX-jit peer's
(``../shared/peers/jax_peer.py slots-index``, the same T, batch 256 and d_e = 2T, slots as
indices, float64; its own venv, ``--peer-python``), measured one after the other in the
same run, and their ratios: to the default step (a step per block, W's token rows held,
the tokens drawn through their statistics) and to stsim's step of the peer's own
computation (:data:`PEER_STEP`: lr 0.5 on every parameter, every token drawn)::

    python benchmarks/bench_long_default.py --minutes --T 1000 2000 4000 --seeds 0 1 2 \
        --peer-python PATH/TO/peervenv/bin/python

writes ``docs/figures/long/long_default_minutes.csv`` (``--out``; rows of other (T, seed)
kept) and ``long_default_peer.csv``, and prints both tables. ``--profile --T 2000 4000``
prints where a bare default step goes (``cProfile`` of 30 steps, the main thread).
``--seeds`` with no seed measures only the step against the peer (on an idle machine,
after the long runs).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import stsim  # noqa: E402
from stsim.core.config import Config  # noqa: E402
from stsim.core.schedule import predict  # noqa: E402
from stsim.util.io import read_csv, write_csv  # noqa: E402

COLUMNS = ["T", "arm", "lr", "freeze", "steps_planned", "estimated_s", "steps_to_2pct",
           "seconds_to_2pct", "censored", "status", "steps_run", "wall_s", "cpu_s",
           "final_val_over_L0", "cos_V", "load_start", "load_end"]


def _cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def measure(T, arm, cap_s, plain_every, q=3, stop=False, log=None):
    """One run (module docstring); a dict with :data:`COLUMNS`."""
    if arm == "default":
        opts = dict(T=T, q=q)
    else:
        single = Config.from_options(T=T, q=q, freeze=(), steps=1).lr
        opts = dict(T=T, q=q, lr=single, freeze=(), eval_every=plain_every)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cfg = Config.from_options(**opts)
    est = predict(cfg, lr=cfg.lr, steps=cfg.steps).estimated_s
    hit = {}
    load0 = os.getloadavg()[0]
    t0, c0 = time.perf_counter(), _cpu()

    def callback(row):
        now = time.perf_counter() - t0
        if log is not None:
            with open(log, "a", encoding="utf-8") as fh:
                fh.write(json.dumps({"T": T, "arm": arm, "s": round(now, 1), **{
                    k: float(v) for k, v in row.items()}}) + "\n")
        if "v0" not in hit:
            hit["v0"] = row["val"]
        if "step" not in hit and row["val"] <= 0.02 * hit["v0"]:
            hit["step"], hit["s"] = int(row["step"]), now
        if arm == "plain":
            return "step" in hit or now > cap_s
        return stop and "step" in hit

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = stsim.run(progress=False, callback=callback, **opts)
    wall, cpu = time.perf_counter() - t0, _cpu() - c0
    h = res.history
    return {"T": T, "arm": arm, "lr": res.config["lr"], "freeze": list(cfg.freeze),
            "steps_planned": cfg.steps, "estimated_s": round(est, 1),
            "steps_to_2pct": hit.get("step"), "seconds_to_2pct":
                round(hit["s"], 1) if "s" in hit else None,
            "censored": int("step" not in hit), "status": res.status,
            "steps_run": int(h["step"][-1]), "wall_s": round(wall, 1), "cpu_s": round(cpu, 1),
            "final_val_over_L0": float(h["val"][-1] / h["val"][0]),
            "cos_V": float(h["cos_V"][-1]), "load_start": round(load0, 1),
            "load_end": round(os.getloadavg()[0], 1)}


def table(rows):
    """The printed table: time to 2% per T, default and plain side by side."""
    lines = [f"{'T':>5} | {'default: steps':>14} {'s to 2%':>8} {'wall s':>7} {'est s':>6} "
             f"{'final':>7} | {'plain: steps':>12} {'s to 2%':>10} | load"]
    for T in sorted({r["T"] for r in rows}):
        d = next((r for r in rows if r["T"] == T and r["arm"] == "default"), None)
        p = next((r for r in rows if r["T"] == T and r["arm"] == "plain"), None)
        left = (f"{d['steps_to_2pct'] or '-':>14} {d['seconds_to_2pct'] or '-':>8} "
                f"{d['wall_s']:>7} {d['estimated_s']:>6} {d['final_val_over_L0']:>7.2%}"
                if d else f"{'':>46}")
        if p is None:
            right = f"{'':>23}"
        elif p["censored"]:
            right = f"{'> ' + str(p['steps_run']):>12} {'> ' + str(p['wall_s']):>10}"
        else:
            right = f"{p['steps_to_2pct']:>12} {p['seconds_to_2pct']:>10}"
        loads = ", ".join(f"{r['load_start']}-{r['load_end']}" for r in (d, p) if r)
        lines.append(f"{T:>5} | {left} | {right} | {loads}")
    return "\n".join(lines)


MINUTES = ["T", "seed", "draws", "stop", "steps_planned", "steps_to_2pct", "steps_run",
           "settled_at_step", "status", "final_val_over_L0", "cos_V", "wall_s",
           "s_per_step", "peak_rss_mb", "estimated_mb", "load_start", "load_end"]
PEER = ["T", "d_e", "stsim_ms_per_step", "stsim_tokens_ms", "stsim_peer_step_ms",
        "peer_ms_per_step", "peer_over_stsim", "peer_over_stsim_same_step", "load_start",
        "load_end"]
REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def long_default(T, seed, q=3, log=None):
    """One default call ``stsim.run(T=T, q=q, seed=seed)`` (module docstring, *Long
    defaults in minutes*); a dict with :data:`MINUTES`."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cfg = Config.from_options(T=T, q=q, seed=seed)
    hit, load0 = {}, os.getloadavg()[0]
    t0 = time.perf_counter()

    def callback(row):
        if log is not None:
            with open(log, "a", encoding="utf-8") as fh:
                fh.write(json.dumps({"T": T, "seed": seed, "s": round(time.perf_counter() - t0, 1),
                                     **{k: float(v) for k, v in row.items()}}) + "\n")
        hit.setdefault("v0", row["val"])
        if "step" not in hit and row["val"] <= 0.02 * hit["v0"]:
            hit["step"] = int(row["step"])

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = stsim.run(T=T, q=q, seed=seed, progress=False, callback=callback)
    wall = time.perf_counter() - t0
    h = res.history
    return {"T": T, "seed": seed, "draws": res.config.get("draws", "tokens"),
            "stop": json.dumps(res.config.get("stop", "none")), "steps_planned": cfg.steps,
            "steps_to_2pct": hit.get("step"), "steps_run": int(h["step"][-1]),
            "settled_at_step": res.info.get("settled_at_step"), "status": res.status,
            "final_val_over_L0": float(h["val"][-1] / h["val"][0]),
            "cos_V": float(h["cos_V"][-1]), "wall_s": round(wall, 1),
            "s_per_step": round(wall / max(int(h["step"][-1]), 1), 4),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "estimated_mb": round(cfg.memory_estimate()["total"] / 2 ** 20, 1),
            "load_start": round(load0, 1), "load_end": round(os.getloadavg()[0], 1)}


#: the peer's own step in stsim: one lr on every parameter, W's token rows free, every
#: token drawn (the JAX peer's computation; query "sum", zero init, as the default's)
PEER_STEP = dict(lr=0.5, freeze=(), draws="tokens")


def bare_steps(T, n, q=3, around=None, **opts):
    """Seconds of ``n`` bare steps at ``T`` (after 3, no records) of the default call, or
    of the run with the options ``opts``; ``around``: a (start, stop) pair of callables
    run just around them (a profiler's)."""
    from stsim.core.session import Session
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        s = Session(T=T, q=q, seed=0, steps=10 ** 9, eval_every=10 ** 9, progress=False,
                    **opts)
        try:
            s.advance(3)
            if around:
                around[0]()
            t0 = time.perf_counter()
            s.advance(n)
            dt = time.perf_counter() - t0
            if around:
                around[1]()
        finally:
            s.close()
    return dt


def bare_step_ms(T, n=30, q=3, **opts):
    """Milliseconds of one default step at ``T`` (:func:`bare_steps`); ``opts``: other
    options of the run (:data:`PEER_STEP`: the peer's step)."""
    return 1000 * bare_steps(T, n, q, **opts) / n


def peer_ms(T, python, peers_dir, n=30):
    """Milliseconds of the JAX peer's step at ``T``, batch 256, d_e = 2T (slots as
    indices; its compile excluded by the peer), or None when it cannot run."""
    cmd = [python, os.path.join(peers_dir, "jax_peer.py"), "slots-index", str(n), str(T),
           str(2 * T)]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=3600)
    except (OSError, subprocess.SubprocessError) as exc:
        print(f"the peer did not run: {exc}", file=sys.stderr)
        return None
    # '<kind>: <steps/s> steps/s  (<ms> ms/step) final loss <loss>'
    return float(out.stdout.split("(")[1].split(" ms/step")[0])


def profile(T, n=30, top=12, q=3):
    """Where a bare default step at ``T`` goes: ``n`` steps after 3 under ``cProfile``
    (the main thread only: the next batch is drawn on the second), the functions with the
    most own time, printed with their share of the profiled time."""
    import cProfile
    import pstats

    prof = cProfile.Profile()
    bare_steps(T, n, q, around=(prof.enable, prof.disable))
    st = pstats.Stats(prof)
    total = st.total_tt
    rows = sorted(st.stats.items(), key=lambda kv: -kv[1][2])[:top]
    print(f"T = {T}: {1000 * total / n:.1f} ms a step under the profiler (main thread)")
    for (file, line, name), (_, calls, own, cum, _) in rows:
        where = f"{os.path.basename(file)}:{line}({name})" if line else name
        print(f"  {100 * own / total:5.1f}%  {1000 * own / n:6.2f} ms own  "
              f"{1000 * cum / n:6.2f} ms with callees  {where}")


def minutes(args):
    rows = read_csv(args.out) if os.path.exists(args.out) else []
    for T in args.T:
        for seed in args.seeds:
            rows = [r for r in rows if (int(r["T"]), int(r["seed"])) != (T, seed)]
            rows.append(long_default(T, seed, log=args.log))
            print(rows[-1], flush=True)
            rows.sort(key=lambda r: (int(r["T"]), int(r["seed"])))
            write_csv(args.out, MINUTES, rows)
    peer_rows = []
    if args.peer_python:
        out = os.path.join(os.path.dirname(args.out), "long_default_peer.csv")
        peer_rows = read_csv(out) if os.path.exists(out) else []
        for T in args.T:
            load0 = os.getloadavg()[0]
            ours, same = bare_step_ms(T), bare_step_ms(T, **PEER_STEP)
            tokens = bare_step_ms(T, draws="tokens")
            theirs = peer_ms(T, args.peer_python, args.peers_dir)
            peer_rows = [r for r in peer_rows if int(r["T"]) != T] + [{
                "T": T, "d_e": 2 * T, "stsim_ms_per_step": round(ours, 1),
                "stsim_tokens_ms": round(tokens, 1),
                "stsim_peer_step_ms": round(same, 1), "peer_ms_per_step": theirs,
                "peer_over_stsim": None if theirs is None else round(theirs / ours, 2),
                "peer_over_stsim_same_step": None if theirs is None else round(theirs / same, 2),
                "load_start": round(load0, 1), "load_end": round(os.getloadavg()[0], 1)}]
            print(peer_rows[-1], flush=True)
            write_csv(out, PEER, sorted(peer_rows, key=lambda r: int(r["T"])))
    print(minutes_table(rows, peer_rows))


def minutes_table(rows, peer_rows=()):
    """The printed tables of :func:`minutes`."""
    lines = [f"{'T':>5} {'seed':>4} | {'2% at':>6} {'stopped':>7} {'of':>6} {'final':>6} | "
             f"{'wall':>7} {'s/step':>7} {'peak MB':>8} {'est MB':>7} | load"]
    for r in rows:
        lines.append(f"{int(r['T']):>5} {int(r['seed']):>4} | {r['steps_to_2pct'] or '-':>6} "
                     f"{r['steps_run']:>7} {r['steps_planned']:>6} "
                     f"{float(r['final_val_over_L0']):>6.2%} | {float(r['wall_s']):>6.1f}"
                     f"s {float(r['s_per_step']):>7.4f} {r['peak_rss_mb']:>8} "
                     f"{r['estimated_mb']:>7} | {r['load_start']}-{r['load_end']}")
    for r in peer_rows:
        lines.append(f"step at T = {r['T']} (d_e {r['d_e']}): stsim's default "
                     f"{r['stsim_ms_per_step']} ms ({r.get('stsim_tokens_ms')} ms with every "
                     f"token drawn), stsim's plain step (the peer's) "
                     f"{r['stsim_peer_step_ms']} ms, JAX peer {r['peer_ms_per_step']} ms; "
                     f"peer/stsim {r['peer_over_stsim']} (default), "
                     f"{r['peer_over_stsim_same_step']} (the same step) "
                     f"(load {r['load_start']}-{r['load_end']})")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--minutes", action="store_true",
                   help="the long defaults of today (stop rule, statistics): module docstring")
    p.add_argument("--profile", action="store_true",
                   help="where a bare default step at each T goes (cProfile, 30 steps)")
    p.add_argument("--seeds", nargs="*", type=int, default=[0],
                   help="--minutes: seeds (none given: only the peer's ratio)")
    p.add_argument("--peer-python", dest="peer_python", default=None,
                   help="--minutes: python of the JAX peer's venv (omit: no peer)")
    p.add_argument("--peers-dir", dest="peers_dir",
                   default=os.path.join(REPO, "..", "shared", "peers"))
    p.add_argument("--T", nargs="+", default=["200,500,1000,2000"],
                   help="lengths (a comma list, or several)")
    p.add_argument("--arms", default="default,plain", help="default, plain or both")
    p.add_argument("--cap-s", dest="cap_s", type=float, default=900.0,
                   help="plain SGD: stop after this many seconds (censored)")
    p.add_argument("--plain-every", dest="plain_every", type=int, default=200,
                   help="plain SGD: steps between records")
    p.add_argument("--stop-at-2", dest="stop", action="store_true",
                   help="default: stop at the first record at or below 2%% (time to 2%% only)")
    p.add_argument("--log", default=None,
                   help="append every record (JSON lines: T, arm, seconds, the history row)")
    p.add_argument("--out", default=os.path.join("docs", "figures", "long",
                                                 "default_vs_plain.csv"))
    p.add_argument("--table", default=None,
                   help="only print the table of these CSV files (comma list)")
    args = p.parse_args(argv)
    args.T = [int(t) for arg in args.T for t in str(arg).split(",")]
    if args.profile:
        for T in args.T:
            profile(T)
        return
    if args.minutes:
        if args.out == p.get_default("out"):
            args.out = os.path.join("docs", "figures", "long", "long_default_minutes.csv")
        minutes(args)
        return
    if args.table:
        print(table([r for f in args.table.split(",") for r in read_csv(f)]))
        return
    rows = read_csv(args.out) if os.path.exists(args.out) else []
    for T in args.T:
        for arm in args.arms.split(","):
            rows = [r for r in rows if (int(r["T"]), r["arm"]) != (T, arm)]
            rows.append(measure(T, arm, args.cap_s, args.plain_every, stop=args.stop,
                                log=args.log))
            print(rows[-1], flush=True)
            rows.sort(key=lambda r: (int(r["T"]), r["arm"]))
            write_csv(args.out, COLUMNS, rows)
    print(table(rows))


if __name__ == "__main__":
    main()
