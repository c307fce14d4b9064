"""Speed and memory of each figure's training configuration (``--full`` settings).

For every distinct configuration used by ``stsim figures --full`` (one seed), trains
``--steps`` steps in a fresh process and prints steps/s (eval excluded: ``eval_every`` is
set beyond the run), the seconds of the final evaluation on large fresh sets
(:func:`stsim.studies.figures.evaluate.evaluate_run` with the job's settings; ``--no-eval``
skips it) and the process's peak resident memory. No timed asserts.

Usage: OMP_NUM_THREADS=1 python benchmarks/bench_figures.py [--steps 50] [--mode full]
"""
import argparse
import concurrent.futures as cf
import sys
import time


def _bench(options, steps, evaluate):
    import stsim
    from stsim.studies.figures.common import peak_rss_mb
    from stsim.studies.figures.evaluate import evaluate_run
    opts = dict(options, steps=steps, eval_every=10 * steps)
    t0 = time.perf_counter()
    res = stsim.run(**opts)
    wall = time.perf_counter() - t0
    t1 = time.perf_counter()
    if evaluate:
        evaluate_run(res, evaluate)
    return steps / wall, time.perf_counter() - t1, peak_rss_mb(), res.status


def configurations(mode):
    """One representative job per distinct configuration (seed and PE kept, seed 0)."""
    from stsim.studies import figures
    from stsim.studies.contract import resolve_config
    from stsim.studies.figures.common import figure_jobs
    seen, out = set(), []
    for name, jobs in figure_jobs(resolve_config(figures, mode)).items():
        for job in jobs:
            o = dict(job.options)
            if o.get("seed", 0) != 0 or job.name.endswith("-ulp"):
                continue
            key = tuple(sorted((k, str(v)) for k, v in o.items()))
            if key not in seen:
                seen.add(key)
                out.append((name, job.name, o, job.evaluate))
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--mode", default="full", choices=("quick", "full"))
    p.add_argument("--no-eval", action="store_true", help="skip the final evaluation")
    args = p.parse_args(argv)
    print(f"{'figure':7s} {'run':44s} {'steps/s':>8s} {'ms/step':>8s} {'eval s':>7s} "
          f"{'peak MB':>8s}")
    for fig, name, opts, evaluate in configurations(args.mode):
        with cf.ProcessPoolExecutor(max_workers=1, max_tasks_per_child=1) as ex:
            sps, ev_s, rss, status = ex.submit(_bench, opts, args.steps,
                                               None if args.no_eval else evaluate).result()
        print(f"{fig:7s} {name:44s} {sps:8.1f} {1000 / sps:8.1f} {ev_s:7.1f} {rss:8.0f}  "
              f"{status}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
