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
"""
from __future__ import annotations

import argparse
import json
import os
import resource
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


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--T", default="200,500,1000,2000", help="comma list of lengths")
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
    if args.table:
        print(table([r for f in args.table.split(",") for r in read_csv(f)]))
        return
    rows = read_csv(args.out) if os.path.exists(args.out) else []
    for T in (int(t) for t in args.T.split(",")):
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
