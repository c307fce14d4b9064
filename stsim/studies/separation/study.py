r"""Transformer vs fully-connected net: width needed to learn STS_q as T grows (SPEC §7).

The paper's claim: a one-layer transformer learns STS_q with width ``O(d + q log T)``;
any fully-connected net needs first-layer width ``Ω(T d)``. This experiment measures,
for ``q = 2`` and each ``(d, T)``:

* ``w_FCN(T, d)`` — the smallest hidden width of a one-hidden-layer ReLU MLP
  (:mod:`stsim.baselines.fcn`) on ``[vec(X); 1_y]`` whose trained loss reaches the target;
* ``d_e(T, d)`` — the smallest PE width of the transformer (theory model, stochastic
  ``sphere`` encodings, ``query="sum"``, zero init) reaching the same target,

both within the same fixed budget: ``steps`` Adam steps on fresh batches of ``batch``
samples (the online stream of SPEC §1), learning rates ``lr_fcn`` and ``lr_tf``.

**Target.** Both models start from ``f ≡ 0`` (the FCN read-out and the transformer are
zero-initialised), whose loss is ``L0 = d/(2q)``. A run *reaches* the target when its
final validation loss (``n_val`` points drawn once before training) is at most
``target · L0`` (default ``target = 0.1``). A width *passes* when the median final
validation loss over the ``seeds`` replicates is at most ``target · L0`` (a majority of
seeds passes).

**Search.** Widths live on the grid ``round(2^{k/2})`` (ratio √2). For each
``(arch, d, T)`` a bracket search starts at a guess (``2 T d`` for the FCN, the width of
an exact ReLU construction of ``x_j · 1[j∈y]``; ``4 log2 T`` for the transformer), steps
by a factor 2 towards the boundary until it has a failing and a passing width, then
bisects the bracket down to adjacent grid widths. It assumes passing is monotone in the
width; a width above ``max_width`` is reported as censored (``>max_width``). Each probe
is a one-point :func:`stsim.sweep.sweep` (× seeds) into the shared table
``points.csv``; the searches advance independently (one driver thread each, all
submitting to one executor), so no search waits for another's slow probe, and the sweep
journal makes the whole experiment resumable (a rerun recomputes nothing finished).

**Fits.** FCN: ``w = a · T d + b`` (least squares over the uncensored points);
transformer: ``d_e = a · log2 T + b`` per ``d``. Each law is also fitted to the other
architecture, and the residuals of both are reported, so that the growth laws are
compared, not merely asserted.
"""
from __future__ import annotations

import concurrent.futures as cf
import math
import os
import threading
import time

import numpy as np

from stsim.util.io import atomic_write, write_csv, write_json
from stsim.util.stats import WidthSearch, compare_growth
from stsim.sweep import InlineExecutor, OneThreadProcessPool, read_table, sweep
from stsim.util.validate import check_int
from stsim.core.config import Config
from stsim.core.run import run

__all__ = ["train_point", "width_grid", "run_experiment", "fit_laws",
           "plot_separation", "markdown_report", "run_study", "QUICK", "FULL"]

ARCH_LABEL = {"fcn": "FCN hidden width", "transformer": "transformer PE width d_e"}

# documented configurations; every value can be overridden from the command line
FULL = dict(Ts=(8, 16, 32, 64, 128), ds=(1, 2), q=2, steps=2000, batch=256, seeds=3,
            lr_fcn=3e-3, lr_tf=0.03, target=0.1, n_val=512, max_width_fcn=2048,
            max_width_tf=128)
QUICK = dict(Ts=(4, 8, 16), ds=(1,), q=2, steps=300, batch=64, seeds=2, lr_fcn=1e-2,
             lr_tf=0.05, target=0.25, n_val=256, max_width_fcn=256, max_width_tf=32)


# --------------------------------------------------------------------------------------
# one training run = one table row
# --------------------------------------------------------------------------------------
def _options(arch, T, d, width, q, steps, batch, lr, n_val, seed):
    opts = dict(T=T, q=q, d=d, steps=steps, batch=batch, optimizer="adam", lr=lr,
                n_val=n_val, seed=seed, eval_every=max(1, steps))
    if arch == "fcn":
        opts.update(arch="fcn", width=width)
    elif arch == "transformer":
        opts.update(arch="transformer", pe="stochastic", sampler="sphere", d_e=width,
                    model="theory", query="sum", init="zero")
    else:
        raise ValueError(f"arch must be one of ('fcn', 'transformer'), got {arch!r}")
    return opts


def train_point(arch, T, d, width, q=2, steps=2000, batch=256, lr=3e-3, n_val=512,
                target=0.1, seed=0):
    """Train one model and report whether it reaches ``target · d/(2q)``.

    Parameters
    ----------
    arch : ``"fcn"`` (``width`` = hidden width) | ``"transformer"`` (``width`` = ``d_e``,
        stochastic sphere PE, theory model, zero init).
    T, d, q : task sizes;  steps, batch, lr : Adam budget;  n_val : validation points.
    target : float in (0, 1) — fraction of the zero-function loss ``d/(2q)``.
    seed : int — the run's seed (from :func:`stsim.sweep.spawn_seeds`).

    Returns
    -------
    dict: ``final_val``, ``init_val`` (validation loss at steps 0 and ``steps``),
    ``rel`` (``final_val / (d/(2q))``), ``reached`` (0/1), ``status``-like ``diverged``
    (0/1), ``wall_time_s`` and ``cpu_time_s`` (process CPU time: the cost on a dedicated
    core, insensitive to other jobs sharing the machine).
    """
    validate_point(dict(arch=arch, T=T, d=d, width=width, q=q, steps=steps, batch=batch,
                        lr=lr, n_val=n_val, target=target))
    t0, c0 = time.perf_counter(), time.process_time()
    res = run(**_options(arch, T, d, width, q, steps, batch, lr, n_val, seed))
    L0 = d / (2 * q)
    final = float(res.history["val"][-1]) if res.success else float("inf")
    return {"final_val": final if math.isfinite(final) else None,
            "init_val": float(res.history["val"][0]),
            "rel": final / L0 if math.isfinite(final) else None,
            "reached": int(final <= target * L0),
            "diverged": int(not res.success),
            "wall_time_s": time.perf_counter() - t0,
            "cpu_time_s": time.process_time() - c0}


def validate_point(point):
    """Reject a bad point before any work (``ValueError`` naming the parameter)."""
    p = dict(point)
    arch = p.get("arch", "fcn")
    check_int("width", p.get("width"), 1)
    tgt = float(p.get("target", 0.1))
    if not 0 < tgt < 1:
        raise ValueError(f"target must lie in (0, 1), got {tgt}")
    Config.from_options(**_options(arch, p["T"], p["d"], p["width"], p.get("q", 2),
                                   p.get("steps", 2000), p.get("batch", 256),
                                   p.get("lr", 3e-3), p.get("n_val", 512), 0))


train_point.validate = validate_point


# --------------------------------------------------------------------------------------
# the search
# --------------------------------------------------------------------------------------
def width_grid(max_width: int) -> list:
    """Integer widths ``round(2^{k/2})``, k = 0, 1, ..., up to ``max_width`` (ratio √2)."""
    max_width = check_int("max_width", max_width, 1)
    out, k = [], 0
    while round(2 ** (k / 2)) <= max_width:
        w = int(round(2 ** (k / 2)))
        if not out or w > out[-1]:
            out.append(w)
        k += 1
    return out


def _start_guess(arch, T, d, q):
    return 2 * T * d if arch == "fcn" else 4 * math.log2(T)


def run_experiment(*, Ts, ds, q=2, steps=2000, batch=256, seeds=3, lr_fcn=3e-3, lr_tf=0.03,
                   target=0.1, n_val=512, max_width_fcn=1024, max_width_tf=128, out="runs/sep",
                   executor=None, max_workers=2, archs=("fcn", "transformer"), log=None):
    """Run all bracket searches; write ``points.csv`` (+ journal) and return the results.

    Returns
    -------
    dict with ``searches`` (list of dicts: arch, d, T, width, censored, probes),
    ``wall_time_s``, ``n_runs`` (runs computed now), ``run_time_s`` (sum of their times),
    ``n_rows``, ``cpu_time_total_s``, ``wall_time_runs_total_s`` (over every run in the
    table, including those of earlier, resumed invocations).
    """
    Ts = [check_int("T", T, q) for T in Ts]
    ds = [check_int("d", d, 1) for d in ds]
    if not Ts or not ds:
        raise ValueError("Ts and ds must each hold at least one value")
    check_int("max_width_fcn", max_width_fcn, 1)
    check_int("max_width_tf", max_width_tf, 1)
    fixed = dict(q=q, steps=steps, batch=batch, n_val=n_val, target=target)
    lr = {"fcn": lr_fcn, "transformer": lr_tf}
    grids = {"fcn": width_grid(max_width_fcn), "transformer": width_grid(max_width_tf)}
    searches = {(a, d, T): WidthSearch(grids[a], _start_guess(a, T, d, q))
                for a in archs for d in ds for T in Ts}
    for (a, d, T), s in searches.items():  # validate every point up front
        for w in (s.grid[0], s.grid[-1]):
            validate_point(dict(arch=a, T=T, d=d, width=w, lr=lr[a], **fixed))
    os.makedirs(out, exist_ok=True)
    table = os.path.join(out, "points.csv")
    t0 = time.perf_counter()
    stats = {"n_runs": 0, "run_time": 0.0}
    guard = threading.Lock()

    def drive(key, ex):
        """Advance one search to its end; each probe is a one-point sweep (× seeds)."""
        a, d, T = key
        s = searches[key]
        while not s.done:
            w = s.propose()
            point = dict(arch=a, T=T, d=d, width=w, lr=lr[a], **fixed)
            res = sweep(train_point, [point], seeds=seeds, executor=ex, out=table)
            rows = res.select(**point)
            errs = [r["error"] for r in rows if r["status"] != "ok"]
            if errs:
                raise RuntimeError(f"run failed at arch={a} T={T} d={d} width={w}: {errs[0]}")
            vals = [r["final_val"] if r["final_val"] is not None else math.inf for r in rows]
            med = float(np.median(vals))
            passed = med <= target * d / (2 * q)
            s.update(w, passed)
            with guard:
                stats["n_runs"] += res.n_run
                stats["run_time"] += sum(t for t in res.times.values() if math.isfinite(t))
            if log is not None:
                log(f"{a} d={d} T={T} width={w}: {'pass' if passed else 'fail'} (median "
                    f"final val / L0 = {med / (d / (2 * q)):.3f}); {res.n_run} runs; "
                    f"{time.perf_counter() - t0:.0f}s elapsed")

    if isinstance(executor, InlineExecutor):  # in-process: one search after the other
        for key in searches:
            drive(key, executor)
    else:
        # every search advances on its own (no barrier between probes): one driver thread
        # per search submits to the shared executor, which does the work
        own = executor is None
        ex = OneThreadProcessPool(min(max_workers, os.cpu_count() or 1)) if own else executor
        try:
            with cf.ThreadPoolExecutor(len(searches)) as drivers:
                futs = [drivers.submit(drive, key, ex) for key in searches]
                errors = [f.exception() for f in futs]
        finally:
            if own:
                ex.shutdown(wait=True)
        for e in errors:
            if e is not None:
                raise e
    rows = [r for r in read_table(table) if r["status"] == "ok"]
    found = [dict(arch=a, d=d, T=T, width=s.result, censored=s.censored,
                  max_width=s.grid[-1], probes=s.probes)
             for (a, d, T), s in sorted(searches.items())]
    return {"searches": found, "wall_time_s": time.perf_counter() - t0,
            "n_runs": stats["n_runs"], "run_time_s": stats["run_time"],
            "probes": sum(len(s.probes) for s in searches.values()), "table": table,
            "n_rows": len(rows),
            "cpu_time_total_s": float(sum(r.get("cpu_time_s") or 0.0 for r in rows)),
            "wall_time_runs_total_s": float(sum(r.get("wall_time_s") or 0.0 for r in rows))}


# --------------------------------------------------------------------------------------
# growth laws
# --------------------------------------------------------------------------------------
def fit_laws(searches) -> dict:
    """Fit both growth laws to both architectures, per ``d``, on the uncensored points.

    ``linear_Td``: ``width = a · T d + b``;  ``log_T``: ``width = a · log2 T + b`` (each
    ``{a, b, residuals, rel_rms}``, residual = width − fit, rel_rms = rms of residual/width);
    ``power_Td``: ``log2 width = a · log2(T d) + b`` (``{a, b, residuals_ratio, rms_log2}``:
    the growth exponent ``a`` free, residuals as width / fit).
    Returns ``{arch: {d: {"T": [...], "width": [...], law: fit}}}``; a fit is None with
    fewer than two points.
    """
    out = {}
    for s in searches:
        if s["width"] is None:
            continue
        e = out.setdefault(s["arch"], {}).setdefault(str(s["d"]), {"T": [], "width": []})
        e["T"].append(s["T"])
        e["width"].append(s["width"])
    for arch, per_d in out.items():
        for d, e in per_d.items():
            laws = compare_growth(e["T"], e["width"], scale=int(d))
            e["linear_Td"], e["log_T"], e["power_Td"] = laws["linear"], laws["log"], laws["power"]
    return out


def plot_separation(searches, fits, path, title=""):
    """Width reaching the target against T (log-log), both architectures, fitted laws,
    the width ``2 T d`` of the exact ReLU construction (:func:`stsim.baselines.fcn.fcn_construction`)
    dotted; censored searches drawn as open triangles at their cap."""
    import matplotlib.pyplot as plt

    from stsim.util.plotting import savefig

    fig, ax = plt.subplots(figsize=(9.5, 5.0))
    markers = {"fcn": "s", "transformer": "o"}
    colors = {}
    Tall = sorted({s["T"] for s in searches})
    Tf = np.geomspace(min(Tall), max(Tall), 100)
    for i, key in enumerate(sorted({(s["arch"], s["d"]) for s in searches})):
        arch, d = key
        col = colors.setdefault(key, f"C{i}")
        pts = [s for s in searches if (s["arch"], s["d"]) == key]
        ok = [s for s in pts if s["width"] is not None]
        cen = [s for s in pts if s["censored"]]
        shift = 1.0 + 0.04 * (d - 1.5)  # d=1 and d=2 markers side by side (visibility)
        ax.plot([s["T"] * shift for s in ok], [s["width"] for s in ok], markers[arch], color=col,
                ms=7, label=f"{'FCN width' if arch == 'fcn' else 'transformer d_e'}, d={d}")
        if cen:
            ax.plot([s["T"] * shift for s in cen], [s["max_width"] for s in cen], "^", color=col,
                    mfc="none", ms=9, label=f"  > cap (not reached), d={d}")
        f = fits.get(arch, {}).get(str(d), {})
        law = f.get("linear_Td") if arch == "fcn" else f.get("log_T")
        if law is not None:
            x = Tf * d if arch == "fcn" else np.log2(Tf)
            y = law["a"] * x + law["b"]
            m = y > 0
            txt = (f"{law['a']:.2f}·Td{law['b']:+.1f}" if arch == "fcn"
                   else f"{law['a']:.2f}·log2 T{law['b']:+.1f}")
            ax.plot(Tf[m], y[m], "-" if arch == "fcn" else "--", color=col, lw=1.2,
                    label=f"  fit {txt}")
        pw = f.get("power_Td")
        if arch == "fcn" and pw is not None:
            ax.plot(Tf, 2.0 ** pw["b"] * (Tf * d) ** pw["a"], "-.", color=col, lw=0.9,
                    alpha=0.7, label=f"  fit {2.0 ** pw['b']:.3g}·(Td)^{pw['a']:.2f}")
    for d in sorted({s["d"] for s in searches if s["arch"] == "fcn"}):
        ax.plot(Tf, 2 * Tf * d, ":", color="0.5", lw=1)
        ax.annotate(f"2Td, d={d} (exact ReLU net)", (Tf[-1], 2 * Tf[-1] * d),
                    fontsize=6, color="0.4", ha="left", va="center")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xlabel("sequence length T")
    ax.set_ylabel("smallest width reaching the target")
    ax.set_title(title, fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.16, 1.0))
    return savefig(fig, path)


def markdown_report(searches, fits) -> str:
    """Markdown tables: the widths found (with the probes), then every fit with residuals."""
    lines = ["| arch | d | T | T·d | smallest width | probes (width, +pass/−fail) |",
             "|---|---|---|---|---|---|"]
    for s in searches:
        w = f">{s['max_width']}" if s["censored"] else str(s["width"])
        probes = ", ".join(f"{pw}{'+' if ok else '−'}" for pw, ok in s["probes"])
        lines.append(f"| {s['arch']} | {s['d']} | {s['T']} | {s['T'] * s['d']} | {w} | "
                     f"{probes} |")
    lines += ["", "| arch | d | law | a | b | residuals (width − fit), by T | rel. rms |",
              "|---|---|---|---|---|---|---|"]
    for arch, per_d in sorted(fits.items()):
        for d, e in sorted(per_d.items()):
            for law, name in (("linear_Td", "a·Td + b"), ("log_T", "a·log2 T + b")):
                f = e.get(law)
                if f is None:
                    lines.append(f"| {arch} | {d} | {name} | – | – | fewer than 2 points | – |")
                    continue
                res = ", ".join(f"T={T}: {r:+.1f}" for T, r in zip(e["T"], f["residuals"]))
                lines.append(f"| {arch} | {d} | {name} | {f['a']:.3f} | {f['b']:+.2f} | {res} "
                             f"| {f['rel_rms']:.3f} |")
            f = e.get("power_Td")
            if f is not None:
                res = ", ".join(f"T={T}: ×{r:.2f}" for T, r in zip(e["T"], f["residuals_ratio"]))
                lines.append(f"| {arch} | {d} | 2^b·(Td)^a | {f['a']:.3f} | {f['b']:+.2f} | "
                             f"{res} | {f['rms_log2']:.3f} (log2) |")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------
# the whole study (the command line is stsim.cli.separation)
# --------------------------------------------------------------------------------------
def run_study(cfg: dict, out: str, *, workers: int = 2, log=None, mode=None) -> dict:
    """The whole experiment for the settings ``cfg`` (``QUICK`` or ``FULL`` with any keys
    changed): the searches, then ``searches.csv``, ``fits.json``, ``report.md``,
    ``summary.json`` and ``separation.png`` in ``out``. ``workers <= 1`` runs in this
    process. Returns the summary (with ``fits``)."""
    workers = check_int("workers", workers, 0)
    executor = InlineExecutor() if workers <= 1 else None
    exp = run_experiment(**cfg, out=out, executor=executor, max_workers=max(workers, 1),
                         log=log)
    fits = fit_laws(exp["searches"])
    write_csv(os.path.join(out, "searches.csv"),
              ["arch", "d", "T", "width", "censored", "max_width", "probes"],
              [dict(s, censored=int(s["censored"]),
                    probes=" ".join(f"{w}{'+' if ok else '-'}" for w, ok in s["probes"]))
               for s in exp["searches"]])
    write_json(os.path.join(out, "fits.json"), fits)
    with atomic_write(os.path.join(out, "report.md"), "w") as fh:
        fh.write(markdown_report(exp["searches"], fits))
    summary = {"config": {k: list(v) if isinstance(v, tuple) else v for k, v in cfg.items()},
               "mode": mode, "workers": workers,
               "wall_time_s": exp["wall_time_s"], "n_runs": exp["n_runs"],
               "run_time_s": exp["run_time_s"], "probes": exp["probes"],
               "n_rows": exp["n_rows"], "cpu_time_total_s": exp["cpu_time_total_s"],
               "wall_time_runs_total_s": exp["wall_time_runs_total_s"],
               "searches": exp["searches"]}
    write_json(os.path.join(out, "summary.json"), summary)
    title = (f"STS_q, q={cfg['q']}: smallest width with median final val loss ≤ "
             f"{cfg['target']:g}·d/(2q) after {cfg['steps']} Adam steps "
             f"(batch {cfg['batch']}, {cfg['seeds']} seeds)")
    plot_separation(exp["searches"], fits, os.path.join(out, "separation.png"), title)
    return dict(summary, fits=fits)
