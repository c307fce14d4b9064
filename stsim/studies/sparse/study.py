r"""Sample complexity of sparse Boolean functions against T: one attention head vs an FCN.

The claim probed (Edelman, Goel, Kakade & Zhang 2022; SPEC §8): a bounded-norm attention
head represents s-sparse functions of a length-T sequence with sample complexity growing
only like ``log T``. For every function class, model and ``T`` this experiment measures the
success probability over ``seeds`` independent trials (fresh hidden positions, training
sample, test sample and initialisation per seed, :func:`stsim.studies.sparse.boolean.train_trial`) on a
geometric grid of training-set sizes ``m``, and from it

* ``m*(T)`` — the smallest ``m`` whose success probability is ≥ ``target`` (0.9),
  interpolated linearly in ``log m`` between the last grid size below ``target`` and the
  first at or above it (``censored="above"`` if no size reaches it, ``"below"`` if the
  smallest size already does); the same at success probability 1/2 (the typical trial),
  which separates the sample size a typical trial needs from the tail of unlucky ones;
* least-squares fits ``m* = a log2 T + b`` and ``m* = a T + b`` (residuals and relative
  rms), and the free power law ``m* = c T^γ``, for each (function, model), on the
  uncensored points.

**Paired design.** Replicate ``r`` uses the same seed for every cell, so both models and
every ``m`` of replicate ``r`` see the same hidden positions and test set, and the training
samples are nested in ``m``.

**Ladder.** The ``m`` grid is climbed level by level: each level is one
:func:`stsim.sweep.sweep` of the still-active (function, model, T) series × seeds into
the shared table ``trials.csv`` (resumable through its journal). A series retires after
``stop_after`` consecutive levels with success probability ≥ ``target``; its larger ``m``
cells are *not run* (drawn hatched in the heat map, never imputed). This assumes success
is monotone in ``m`` above the threshold; set ``stop_after=0`` to run every cell.

**Restarts.** ``--restarts k`` trains ``k`` initialisations per trial and keeps the fit
of smallest norm (:func:`stsim.studies.sparse.boolean.train_trial`), a stand-in for the norm-bounded
empirical risk minimiser the claim is about.

**Top-up.** With ``topup = n`` (> ``seeds``), every cell whose success rate on the
``seeds`` ladder trials lies in ``topup_range`` (default [0.2, 0.95]: where 10 trials
cannot tell 0.5 from 0.8 or 0.9 from 0.7) gets replicates ``seeds … n − 1`` more (the
first ``seeds`` replicates are the ladder's, resumed from the table). The ladder's
retirement decisions are the ``seeds``-trial ones; rates, intervals and m* use every
trial of a cell. Each cell's rate carries a 95% Wilson interval (``ci_lo``, ``ci_hi``),
and m* a 95% bootstrap interval ``[m_star_lo, m_star_hi]`` (every cell's count redrawn
from its binomial, :func:`estimate_mstar`).

**Failure kinds.** A failed trial with training accuracy < ``fit_acc`` (0.99) did not fit
its own sample (an optimisation failure); one that fits but tests below ``threshold`` is
a statistical failure. Both are counted per cell.
"""
from __future__ import annotations

import math
import os
import time

import numpy as np

from stsim.studies.sparse.boolean import SparseFunction, train_trial, validate_point, validate_trial
from stsim.util.io import atomic_write, write_csv, write_json
from stsim.util.stats import compare_growth, wilson_interval
from stsim.sweep import InlineExecutor, OneThreadProcessPool, read_table, spawn_seeds, sweep
from stsim.util.validate import check_int

__all__ = ["FULL", "QUICK", "m_grid", "parse_fns", "run_experiment", "cell_stats",
           "estimate_mstar", "fit_mstar", "plot_heatmaps", "plot_mstar", "markdown_report",
           "run_study", "format_fit"]

# documented configurations; every value can be overridden from the command line
FULL = dict(Ts=(16, 32, 64, 128, 256, 512), m_min=16, m_max=2048, ratio=math.sqrt(2),
            fns="and:3,majority:3,parity:2", models="attention,fcn", seeds=10,
            threshold=0.95, target=0.9, stop_after=2, max_steps=500, lr=0.05,
            weight_decay=3e-4, max_norm=20.0, d_v=4, hidden=16, n_test=2000, pos="onehot",
            topup=30)
QUICK = dict(Ts=(8, 16, 32), m_min=8, m_max=256, ratio=2.0, fns="and:3,majority:3",
             models="attention,fcn", seeds=4, threshold=0.95, target=0.9, stop_after=2,
             max_steps=200, lr=0.05, weight_decay=3e-4, max_norm=20.0, d_v=4, hidden=16,
             n_test=500, pos="onehot", topup=0)
TRIAL_KEYS = ("max_steps", "lr", "weight_decay", "max_norm", "d_v", "hidden", "n_test",
              "threshold", "pos")
OPTIONAL_KEYS = ("restarts", "table")  # passed to the trials only when set (else their default)
TOPUP_RANGE = (0.2, 0.95)   # success rates (on the ladder's trials) that get topped up
FIT_ACC = 0.99
MEDIAN = 0.5  # m* is also reported at success probability 1/2 (the typical trial)


def m_grid(m_min: int, m_max: int, ratio: float = math.sqrt(2)) -> list:
    """Geometric grid ``round(m_min · ratio^j) ≤ m_max`` (duplicates dropped)."""
    m_min = check_int("m_min", m_min, 1)
    m_max = check_int("m_max", m_max, m_min)
    ratio = float(ratio)
    if not (math.isfinite(ratio) and ratio > 1):
        raise ValueError(f"ratio must be a finite number > 1, got {ratio}")
    n = int(math.floor(math.log(m_max / m_min) / math.log(ratio) + 1e-9))
    return sorted({int(round(m_min * ratio ** j)) for j in range(n + 1)})


def parse_fns(text) -> list:
    """``"and:3,majority:3"`` → ``[("and", 3), ("majority", 3)]`` (s defaults to 3)."""
    out = []
    for item in (text.split(",") if isinstance(text, str) else text):
        if isinstance(item, (tuple, list)):
            out.append((str(item[0]), int(item[1])))
            continue
        item = item.strip()
        if not item:
            continue
        name, _, s = item.partition(":")
        try:
            out.append((name.strip(), int(s) if s else 3))
        except ValueError:
            raise ValueError(f"fns entries look like 'and:3', got {item!r}") from None
    if not out:
        raise ValueError("fns must name at least one function, e.g. 'and:3,majority:3'")
    return out


def _models(text) -> list:
    models = [m.strip() for m in text.split(",") if m.strip()] if isinstance(text, str) \
        else list(text)
    if not models:
        raise ValueError("models must name at least one of ('attention', 'fcn')")
    return models


# --------------------------------------------------------------------------------------
# the experiment
# --------------------------------------------------------------------------------------
def run_experiment(cfg: dict, out: str, *, executor=None, workers: int = 2, log=None) -> dict:
    """Climb the m ladder for every (function, model, T); return the table and timings.

    Returns dict with ``rows`` (every ``ok`` row of ``trials.csv``), ``grid`` (the m
    values), ``wall_time_s``, ``n_run`` (trials computed now), ``levels`` (per level: m,
    active series, trials, seconds; the top-up last, as m ``"topup"``), ``seeds`` (the
    replicate seeds of this design: ``spawn_seeds(max(seeds, topup))``).
    """
    Ts = [check_int("T", T, 1) for T in cfg["Ts"]]
    if not Ts:
        raise ValueError("Ts must hold at least one sequence length")
    fns, models = parse_fns(cfg["fns"]), _models(cfg["models"])
    ms = m_grid(cfg["m_min"], cfg["m_max"], cfg["ratio"])
    seeds = check_int("seeds", cfg["seeds"], 1)
    target = float(cfg["target"])
    if not 0 < target <= 1:
        raise ValueError(f"target (success probability) must lie in (0, 1], got {target}")
    stop_after = check_int("stop_after", cfg["stop_after"], 0)
    topup = check_int("topup", cfg.get("topup") or 0, 0)
    lo, hi = (float(v) for v in cfg.get("topup_range", TOPUP_RANGE))
    if not 0 <= lo <= hi <= 1:
        raise ValueError(f"topup_range must be 0 <= lo <= hi <= 1, got ({lo}, {hi})")
    fixed = {k: cfg[k] for k in TRIAL_KEYS}
    fixed.update({k: cfg[k] for k in OPTIONAL_KEYS if cfg.get(k) is not None})
    table = fixed.pop("table", None)
    series = [(fn, s, model, T) for fn, s in fns for model in models for T in Ts]
    extra = {}
    for fn, s in fns:  # the truth table goes to fn="table" only, as a +/- string
        if fn == "table":
            extra[fn, s] = {"table": SparseFunction("table", s, table).table_string()}
        elif table is not None and not any(f == "table" for f, _ in fns):
            raise ValueError("table is only used with fns entries 'table:s'")
    for fn, s, model, T in series:  # every bad setting fails here, before any work
        validate_trial(T=T, m=ms[0], s=s, fn=fn, model=model, **fixed, **extra.get((fn, s), {}))
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "trials.csv")
    own = executor is None
    ex = (InlineExecutor() if workers == 0 else OneThreadProcessPool(workers)) if own else executor
    t0 = time.perf_counter()

    def run_cells(cells, n_seeds):
        """Sweep the cells ``(fn, s, model, T, m)`` × ``n_seeds`` replicates into the
        table; a failed trial stops the experiment."""
        keys = set(cells)
        points = [dict(fn=fn, s=s, model=model, T=T, m=m, **fixed, **extra.get((fn, s), {}))
                  for fn, s, model, T, m in cells]
        res = sweep(train_trial, points, seeds=n_seeds, executor=ex, out=path,
                    validate=validate_point)
        errs = [r for r in res.rows if r["status"] != "ok"
                and (r["fn"], r["s"], r["model"], r["T"], r["m"]) in keys]
        if errs:
            raise RuntimeError(f"trial failed at {({k: errs[0][k] for k in ('fn', 'model', 'T', 'm')})}: "
                               f"{errs[0]['error']}")
        return res

    streak = {key: 0 for key in series}
    # the ladder decides on its own replicates only: after a top-up the table holds more
    # trials of some cells, and a resumed run must retire the same series as the first
    ladder_seeds = set(spawn_seeds(seeds))
    levels, n_run = [], 0
    try:
        for m in ms:
            active = [key for key in series if stop_after == 0 or streak[key] < stop_after]
            if not active:
                break
            tl = time.perf_counter()
            res = run_cells([key + (m,) for key in active], seeds)
            n_run += res.n_run
            for fn, s, model, T in active:
                rows = [r for r in res.select(fn=fn, s=s, model=model, T=T, m=m)
                        if r["seed"] in ladder_seeds]
                rate = float(np.mean([r["success"] for r in rows]))
                streak[(fn, s, model, T)] = streak[(fn, s, model, T)] + 1 if rate >= target else 0
            levels.append({"m": m, "series": len(active), "trials": len(active) * seeds,
                           "run_now": res.n_run, "seconds": time.perf_counter() - tl})
            if log is not None:
                log(f"m={m}: {len(active)} series × {seeds} seeds, {res.n_run} run now, "
                    f"{time.perf_counter() - tl:.1f}s (total {time.perf_counter() - t0:.0f}s)")
        if topup > seeds:
            tl = time.perf_counter()
            rows = [r for r in read_table(path) if r["status"] == "ok"]
            stats = cell_stats(rows, ladder_seeds)
            in_design = set(series)
            cells = sorted(k for k, c in stats.items() if lo <= c["rate"] <= hi
                           and k[:4] in in_design and k[4] in ms)
            if cells:
                res = run_cells(cells, topup)
                n_run += res.n_run
                levels.append({"m": "topup", "series": len(cells), "trials": len(cells) * topup,
                               "run_now": res.n_run, "seconds": time.perf_counter() - tl})
                if log is not None:
                    log(f"top-up: {len(cells)} cells with rate in [{lo:g}, {hi:g}] to {topup} "
                        f"trials, {res.n_run} run now, {time.perf_counter() - tl:.1f}s")
    finally:
        if own and not isinstance(ex, InlineExecutor):
            ex.shutdown(wait=True)
    rows = [r for r in read_table(path) if r["status"] == "ok"]
    return {"rows": rows, "grid": ms, "wall_time_s": time.perf_counter() - t0,
            "n_run": n_run, "levels": levels, "table": path,
            "seeds": spawn_seeds(max(seeds, topup))}


def _mean(values):
    values = [v for v in values if v is not None]
    return float(np.mean(values)) if values else None


def cell_stats(rows, seeds=None) -> dict:
    """``{(fn, s, model, T, m): {rate, n, ci_lo, ci_hi, opt_fail, stat_fail, test_acc,
    attn, ...}}`` over the rows (restricted to the replicate seeds in ``seeds`` if given);
    ``ci_lo, ci_hi``: the 95% Wilson interval of the success probability."""
    cells = {}
    for r in rows:
        if seeds is not None and r["seed"] not in seeds:
            continue
        cells.setdefault((r["fn"], r["s"], r["model"], r["T"], r["m"]), []).append(r)
    out = {}
    for key, rs in cells.items():
        fit = [r["train_acc"] is not None and r["train_acc"] >= FIT_ACC for r in rs]
        ok = [bool(r["success"]) for r in rs]
        attn = [r["attn_on_support"] for r in rs if r.get("attn_on_support") is not None]
        ci_lo, ci_hi = wilson_interval(int(sum(ok)), len(rs))
        out[key] = {"rate": float(np.mean(ok)), "n": len(rs), "ci_lo": ci_lo, "ci_hi": ci_hi,
                    "opt_fail": int(sum((not o) and (not f) for o, f in zip(ok, fit))),
                    "stat_fail": int(sum((not o) and f for o, f in zip(ok, fit))),
                    "test_acc": float(np.mean([r["test_acc"] or 0.0 for r in rs])),
                    "attn": float(np.mean(attn)) if attn else None,
                    "norm_success": _mean([r["max_block_norm"] for r in rs if r["success"]]),
                    "norm_fail": _mean([r["max_block_norm"] for r in rs if not r["success"]]),
                    "cpu_s": float(sum(r.get("cpu_time_s") or 0.0 for r in rs))}
    return out


def _crossing(ms, rates, target):
    """(m*, first grid m at target, censored) by the module's crossing rule."""
    first = next((i for i, r in enumerate(rates) if r >= target), None)
    if first is None:
        return None, None, "above"
    if first == 0:
        return float(ms[0]), ms[0], "below"
    m0, m1, r0, r1 = ms[first - 1], ms[first], rates[first - 1], rates[first]
    frac = (target - r0) / (r1 - r0)
    return float(math.exp(math.log(m0) + frac * math.log(m1 / m0))), m1, None


def estimate_mstar(stats: dict, grid, target: float = 0.9, *, n_boot: int = 2000,
                   seed: int = 0) -> list:
    """m* per (fn, s, model, T) from the per-cell success rates (module docstring).

    ``m_star_lo`` / ``m_star_hi``: a 95% percentile-bootstrap interval of m* — each cell's
    count is redrawn ``Binomial(n, rate)`` (``n_boot`` times, generator seeded by
    ``seed``) and the crossing recomputed; a draw that never reaches ``target`` counts as
    m* = +∞, and the ends are the 2.5% and 97.5% quantiles of all draws taken as order
    statistics (``method="inverted_cdf"``: each end is a crossing some draw has, never an
    interpolation between two); ``m_star_hi`` is None when more than 2.5% of the draws
    never reach ``target`` (the interval is open above ``m_max``). A cell at
    0/n or n/n does not vary in the bootstrap; its Wilson interval (``cell_stats``) says
    how far it may be off. ``n`` lists the trials per cell, ``m_max`` the largest m run."""
    series = sorted({k[:4] for k in stats})
    rng = np.random.default_rng(seed)
    out = []
    for key in series:
        ms = [m for m in grid if key + (m,) in stats]
        cells = [stats[key + (m,)] for m in ms]
        rates = [c["rate"] for c in cells]
        row = dict(zip(("fn", "s", "model", "T"), key), target=target, m_star=None, m_grid=None,
                   censored=None, m_star_lo=None, m_star_hi=None,
                   rates=" ".join(f"{m}:{r:.2f}" if c.get("n", 0) > 10 else f"{m}:{r:.1f}"
                                  for m, r, c in zip(ms, rates, cells)),
                   n=" ".join(str(c.get("n", "")) for c in cells))
        m_star, m_grid, censored = _crossing(ms, rates, target)
        row.update(m_star=m_star, m_grid=m_grid, censored=censored)
        row["m_max"] = ms[-1] if ms else None   # the largest m run in the series
        if cells and n_boot and all("n" in c for c in cells):
            n = np.array([c["n"] for c in cells])
            draws = rng.binomial(n, np.asarray(rates), size=(n_boot, len(cells))) / n
            boot = [_crossing(ms, d, target)[0] for d in draws]
            boot = np.array([np.inf if b is None else b for b in boot])
            lo, hi = np.quantile(boot, [0.025, 0.975], method="inverted_cdf")
            row["m_star_lo"] = float(lo) if np.isfinite(lo) else None
            row["m_star_hi"] = float(hi) if np.isfinite(hi) else None
        out.append(row)
    return out


def fit_mstar(mstar: list) -> dict:
    """Per ``"fn:s/model"``: fits of ``m*`` against ``log2 T`` and ``T`` (``{a, b,
    residuals, rel_rms}``) and the power law ``log2 m* = γ log2 T + b`` (``{a=γ, b,
    residuals_ratio, rms_log2}``), on the points with ``censored != "above"`` (points
    censored below enter at the smallest grid size: an upper bound)."""
    out = {}
    for r in mstar:
        e = out.setdefault(f"{r['fn']}:{r['s']}/{r['model']}", {"T": [], "m_star": [],
                                                                "censored_above": []})
        if r["m_star"] is None:
            e["censored_above"].append(r["T"])
            continue
        e["T"].append(r["T"])
        e["m_star"].append(r["m_star"])
    for e in out.values():
        laws = compare_growth(e["T"], e["m_star"], min_points=3)
        e["log_T"], e["linear_T"], e["power_T"] = laws["log"], laws["linear"], laws["power"]
        if "better" in laws:
            e["better"] = laws["better"] + "_T"
    return out


# --------------------------------------------------------------------------------------
# figures and report
# --------------------------------------------------------------------------------------
def plot_heatmaps(stats, grid, Ts, fns, models, path, title=""):
    """Success probability over (T, m): one panel per (function, model); hatched cells
    were not run (the ladder retired the series); each cell reads successes/trials."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    from stsim.util.plotting import savefig

    nr, nc = len(fns), len(models)
    fig, axes = plt.subplots(nr, nc, figsize=(4.2 * nc + 1.2, 0.36 * len(grid) * nr + 1.4),
                             squeeze=False, constrained_layout=True)
    im = None
    for i, (fn, s) in enumerate(fns):
        for j, model in enumerate(models):
            ax = axes[i][j]
            Z = np.full((len(grid), len(Ts)), np.nan)
            label = {}
            for a, m in enumerate(grid):
                for b, T in enumerate(Ts):
                    c = stats.get((fn, s, model, T, m))
                    if c is not None:
                        Z[a, b] = c["rate"]
                        label[a, b] = f"{round(c['rate'] * c['n'])}/{c['n']}"
            im = ax.imshow(Z, origin="lower", aspect="auto", cmap="viridis", vmin=0, vmax=1)
            for a in range(len(grid)):
                for b in range(len(Ts)):
                    if np.isnan(Z[a, b]):
                        ax.add_patch(Rectangle((b - 0.5, a - 0.5), 1, 1, fill=False,
                                               hatch="///", ec="0.75", lw=0))
                    else:
                        ax.text(b, a, label[a, b], ha="center", va="center", fontsize=6,
                                color="w" if Z[a, b] < 0.6 else "k")
            ax.set_xticks(range(len(Ts)), [str(T) for T in Ts], fontsize=7)
            ax.set_yticks(range(len(grid)), [str(m) for m in grid], fontsize=7)
            ax.set_xlabel("sequence length T", fontsize=8)
            ax.set_ylabel("training samples m", fontsize=8)
            ax.set_title(f"{fn} (s={s}), {model}", fontsize=9)
    fig.colorbar(im, ax=axes, shrink=0.6, label="success probability")
    if title:
        fig.suptitle(title, fontsize=9)
    return savefig(fig, path)


def _draw_mstar(ax, mstar, fits):
    keys = sorted({(r["fn"], r["s"]) for r in mstar})
    ys = []
    for i, (fn, s) in enumerate(keys):
        for model, ls, mk, shift in (("attention", "-", "o", 0.96), ("fcn", "--", "s", 1.04)):
            rs = sorted((r for r in mstar if (r["fn"], r["s"], r["model"]) == (fn, s, model)),
                        key=lambda r: r["T"])
            if not rs:
                continue
            ok = [r for r in rs if r["m_star"] is not None]
            ax.plot([r["T"] for r in ok], [r["m_star"] for r in ok], ls, marker=mk,
                    color=f"C{i}", label=f"{fn} s={s}, {model}")
            for r in ok:   # the bootstrap interval; an open upper end runs to m_max
                lo = r.get("m_star_lo")
                hi = r.get("m_star_hi") if r.get("m_star_hi") is not None else r.get("m_max")
                if lo is not None and hi is not None:
                    x = r["T"] * (0.97 if model == "attention" else 1.03)
                    ax.plot([x, x], [lo, hi], "-", color=f"C{i}", lw=0.8, alpha=0.6)
            cen = [r for r in rs if r["m_star"] is None]
            if cen:  # side by side per model, so censored markers do not hide each other
                ax.plot([r["T"] * shift for r in cen], [r["m_max"] for r in cen], mk,
                        mfc="none", color=f"C{i}", ms=9)
            f = fits.get(f"{fn}:{s}/{model}", {}).get("log_T")
            if model == "attention" and f is not None and len(ok) >= 3:
                Tf = np.geomspace(ok[0]["T"], ok[-1]["T"], 50)
                yf = f["a"] * np.log2(Tf) + f["b"]
                pos = yf > 0
                ax.plot(Tf[pos], yf[pos], ":", color=f"C{i}", lw=1)
            ys += [r["m_star"] for r in ok] + [r["m_max"] for r in cen]
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xlabel("sequence length T")
    ax.grid(True, which="both", alpha=0.3)
    return ys


def plot_mstar(panels, path, title=""):
    """m* against T (log2 axes) for both models, one panel per success target
    (``panels``: list of ``(target, mstar, fits)``); attention solid, FCN dashed, the
    attention's log-T fit dotted, thin vertical bars the 95% bootstrap intervals of m*
    (to m_max where open above); open markers at m_max: no grid size reached the target."""
    import matplotlib.pyplot as plt

    from stsim.util.plotting import savefig

    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels) + 2.2, 5.0),
                             squeeze=False, sharey=True)
    ys = []
    for ax, (target, mstar, fits) in zip(axes[0], panels):
        ys += _draw_mstar(ax, mstar, fits)
        ax.set_title(f"smallest m with success probability ≥ {target:g}", fontsize=9)
    axes[0][0].set_ylabel("m* (training samples)")
    axes[0][-1].plot([], [], ":", color="0.4", lw=1, label="attention: fit m* = a·log2 T + b")
    axes[0][-1].plot([], [], "-", color="0.4", lw=0.8, alpha=0.6,
                     label="95% bootstrap interval of m*")
    axes[0][-1].plot([], [], "o", mfc="none", color="0.4", ms=9,
                     label="open marker at m_max:\nno m ≤ m_max reached the target")
    if ys:
        axes[0][0].set_ylim(min(ys) / 1.5, max(ys) * 1.5)
    axes[0][-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    if title:
        fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    return savefig(fig, path)


def _fmt_fit(f, kind):
    """One fit of ``fit_mstar`` as text for reports (``kind``: ``"log_T"``, ``"linear_T"``
    or ``"power_T"``; ``"—"`` for no fit)."""
    if f is None:
        return "—"
    if kind == "power_T":
        return f"{2.0 ** f['b']:.3g}·T^{f['a']:.2f} (rms log2 {f['rms_log2']:.2f})"
    x = "log2 T" if kind == "log_T" else "T"
    return f"{f['a']:.3g}·{x} {f['b']:+.3g} (rel rms {f['rel_rms']:.3f})"


def markdown_report(mstar, fits, stats, target=0.9) -> str:
    """m* table (with its bootstrap interval), fits with residuals, and failure kinds per
    series."""
    lines = [f"### Success probability ≥ {target:g}", "",
             "m* [interval]: 95% bootstrap interval (each cell's count redrawn from its "
             "binomial; '> m_max': more than 2.5% of the draws never reach the target).", "",
             "| function | model | T | m* [interval] | first grid m ≥ target | failures below m* (opt / stat) |",
             "|---|---|---|---|---|---|"]
    for r in mstar:
        key = (r["fn"], r["s"], r["model"], r["T"])
        below = [c for k, c in stats.items() if k[:4] == key
                 and (r["m_grid"] is None or k[4] < r["m_grid"])]
        of, sf = sum(c["opt_fail"] for c in below), sum(c["stat_fail"] for c in below)
        ms = (f"> {r['m_max']}" if r["censored"] == "above" else
              f"≤ {r['m_star']:.0f}" if r["censored"] == "below" else f"{r['m_star']:.0f}")
        if r.get("m_star_lo") is not None or r.get("m_star_hi") is not None:
            lo_ = f"{r['m_star_lo']:.0f}" if r.get("m_star_lo") is not None else "?"
            hi_ = f"{r['m_star_hi']:.0f}" if r.get("m_star_hi") is not None else f"> {r['m_max']}"
            ms += f" [{lo_}, {hi_}]"
        lines.append(f"| {r['fn']} s={r['s']} | {r['model']} | {r['T']} | {ms} | "
                     f"{r['m_grid'] or '—'} | {of} / {sf} |")
    lines += ["", "| series | m* = a·log2 T + b | m* = a·T + b | power law | better |",
              "|---|---|---|---|---|"]
    for key, e in fits.items():
        lines.append(f"| {key} | {_fmt_fit(e['log_T'], 'log_T')} | "
                     f"{_fmt_fit(e['linear_T'], 'linear_T')} | {_fmt_fit(e['power_T'], 'power_T')} "
                     f"| {e.get('better', '—')} |")
    lines += ["", "Residuals (m* − fit) per T:", ""]
    for key, e in fits.items():
        for kind in ("log_T", "linear_T"):
            if e[kind] is not None:
                res = ", ".join(f"T={T}: {v:+.1f}" for T, v in zip(e["T"], e[kind]["residuals"]))
                lines.append(f"- {key} {kind}: {res}")
    return "\n".join(lines) + "\n"


def write_mstar_csv(path, mstar):
    """Write the m* rows of :func:`estimate_mstar` (dicts; rows of several targets may be
    concatenated) to the CSV file ``path``: columns ``target, fn, s, model, T, m_star,
    m_star_lo, m_star_hi, m_grid, censored, m_max, rates, n`` (``m_max``: the largest m run
    in the series; ``n``: trials per cell), floats with two decimals."""
    cols = ["target", "fn", "s", "model", "T", "m_star", "m_star_lo", "m_star_hi", "m_grid",
            "censored", "m_max", "rates", "n"]
    write_csv(path, cols, mstar, float_format=".2f")


# --------------------------------------------------------------------------------------
# the whole study (the command line is stsim.cli.sparse)
# --------------------------------------------------------------------------------------
def run_study(cfg: dict, out: str, *, workers: int = 2, log=None, mode=None) -> dict:
    """The whole experiment for the settings ``cfg`` (``QUICK`` or ``FULL`` with any keys
    changed, plus ``restarts`` / ``table`` when wanted): the trials, then ``mstar.csv``,
    ``fits.json``, ``report.md``, ``summary.json``, ``sparse_heatmap.png`` and
    ``sparse_mstar.png`` in ``out``. ``workers <= 1`` runs in this process. Returns the
    summary (with ``fits`` at the first target)."""
    workers = check_int("workers", workers, 0)
    exp = run_experiment(cfg, out, workers=0 if workers <= 1 else workers, log=log)
    fns, models = parse_fns(cfg["fns"]), _models(cfg["models"])
    seeds = set(exp["seeds"])
    stats = cell_stats(exp["rows"], seeds)
    targets = [float(cfg["target"])] + ([MEDIAN] if float(cfg["target"]) != MEDIAN else [])
    panels = []
    for tg in targets:
        ms_ = estimate_mstar(stats, exp["grid"], tg)
        panels.append((tg, ms_, fit_mstar(ms_)))
    _, mstar, fits = panels[0]
    write_mstar_csv(os.path.join(out, "mstar.csv"), [r for _, ms_, _ in panels for r in ms_])
    write_json(os.path.join(out, "fits.json"), {f"{tg:g}": f for tg, _, f in panels})
    with atomic_write(os.path.join(out, "report.md"), "w") as fh:
        fh.write("\n".join(markdown_report(ms_, f, stats, tg) for tg, ms_, f in panels))
    cpu = sum(c["cpu_s"] for c in stats.values())
    summary = {"config": {k: list(v) if isinstance(v, tuple) else v for k, v in cfg.items()},
               "mode": mode, "workers": workers,
               "wall_time_s": exp["wall_time_s"], "n_run": exp["n_run"],
               "n_trials": sum(c["n"] for c in stats.values()), "cpu_time_trials_s": cpu,
               "levels": exp["levels"],
               "m_star": {f"{tg:g}": ms_ for tg, ms_, _ in panels},
               "cells": [dict(zip(("fn", "s", "model", "T", "m"), k), **c)
                         for k, c in sorted(stats.items())]}
    write_json(os.path.join(out, "summary.json"), summary)
    desc = (f"success = test accuracy ≥ {cfg['threshold']:g} on {cfg['n_test']} fresh samples; "
            f"{cfg['seeds']} trials per cell"
            + (f" ({cfg['topup']} where the rate is in "
               f"[{cfg.get('topup_range', TOPUP_RANGE)[0]:g}, {cfg.get('topup_range', TOPUP_RANGE)[1]:g}])"
               if (cfg.get("topup") or 0) > cfg["seeds"] else "")
            + f"; {cfg['max_steps']} full-batch Adam steps, "
            f"λ={cfg['weight_decay']:g}, ‖block‖ ≤ {cfg['max_norm']:g}")
    if cfg.get("restarts") not in (None, 1):
        desc += f"; min-norm fit of {cfg['restarts']} restarts"
    plot_heatmaps(stats, exp["grid"], [int(T) for T in cfg["Ts"]], fns, models,
                  os.path.join(out, "sparse_heatmap.png"), desc)
    plot_mstar(panels, os.path.join(out, "sparse_mstar.png"), desc)
    return dict(summary, fits=fits, mstar=mstar)


format_fit = _fmt_fit  # one fit of fit_mstar as text (kind: "log_T" or "linear_T")
