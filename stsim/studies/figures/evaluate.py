"""The figures' final estimates: every trained run is evaluated, after training, on large
fresh sets drawn from its own evaluation streams, and every reported loss is the mean over
such a set, with its standard error (docs/reproduction.md, "How every number is judged";
the paper's 128-point validation sets, drawn once, only draw the curves).

Each set (in-distribution, each ``T_test``, each ``q_test``) is drawn from its own stream
``Streams(seed).evaluation(kind, value)`` in blocks of ``block`` points until the standard
error of the mean is at most ``rel_se`` of it (at least ``n_min``, at most ``n_max``
points; deterministic). Measured at T = 200 (one-hot and slots, SGD lr 5, 8 000 steps):
the per-point coefficient of variation is 0.5–0.9, 1.6 for the one-hot model at
T_test = 250, so 2 048–11 000 points. The standard error is the batch-means one,
``std(block means) / sqrt(blocks)``; the block means are stored for the bootstrap of
:mod:`.verdicts`. A random initialisation is evaluated on the same blocks (final / initial
paired); from zero initialisation the initial loss is the exact ``d / (2 q)``.
"""
from __future__ import annotations

import zlib

import numpy as np

from stsim.core.config import Config
from stsim.core.problem import make_problem, val_key
from stsim.core.seeds import Streams
from stsim.core.targets import make_target
from stsim.util.stats import fit_linear

__all__ = ["EVALUATE", "QUICK_EVALUATE", "evaluate_run", "set_keys", "block_size",
           "block_estimate", "evaluation_stats",
           "initial_loss_of", "run_estimate", "eval_sample", "scalar_sample",
           "r2_sample"]

#: the final evaluation of the ``--full`` runs (module docstring)
EVALUATE = dict(block=64, n_min=2048, n_max=32768, rel_se=0.018)
#: the same for ``--quick`` (seconds-long smoke runs)
QUICK_EVALUATE = dict(block=64, n_min=512, n_max=2048, rel_se=0.03)
_DENSE_FLOATS = 2 ** 22          # at most this many encoding entries in one dense block


def set_keys(cfg) -> list:
    """``[(history key, kind, value, T, q)]`` of the sets a run of ``cfg`` is evaluated
    on: in-distribution, each ``T_test``, each ``q_test`` (``q_test`` only where the
    architecture has ``val/q=…`` sets, i.e. all of them)."""
    out = [("val", "val", None, cfg.T, cfg.q)]
    out += [(val_key("T", t), "T", t, t, cfg.q) for t in cfg.T_test]
    out += [(val_key("q", qt), "q", qt, cfg.T, qt) for qt in cfg.q_test]
    return out


def block_size(ev, cfg, T) -> int:
    """Points per block: ``ev["block"]``, fewer for a dense per-sample encoding (sphere)
    so that one block holds at most ``_DENSE_FLOATS`` encoding entries."""
    b = int(ev["block"])
    spec = cfg.resolved.encoding
    if spec.dense and not spec.fixed:
        b = max(8, min(b, _DENSE_FLOATS // (T * cfg.d_e)))
    return b


def block_estimate(block_means) -> tuple:
    """``(mean, se)`` of a set from its block means ``x`` (``k`` blocks): ``mean(x)`` and
    the batch-means standard error ``std(x, ddof=1) / √k`` (module docstring) — the one
    formula of every final estimate, of the sequential stopping rule and of
    :mod:`.blocks`.

    >>> block_estimate([1.0, 2.0, 3.0])
    (2.0, 0.5773502691896258)
    """
    f = np.asarray(block_means, dtype=float)
    return float(f.mean()), float(f.std(ddof=1) / np.sqrt(f.size))


def evaluation_stats(evaluations, limit=0.02) -> dict:
    """Over every set of every run's final evaluation (``{run: {"sets": {key: {"mean",
    "se", "n", …}}}}``, :func:`evaluate_run`): how many, the largest relative standard
    error ``se / mean`` and the sets above ``limit`` (the target: each reported loss to
    2 %; sorted), the points per set (smallest, largest)."""
    rel, n, over = [], [], []
    for name in evaluations:
        for key, e in evaluations[name].get("sets", {}).items():
            x = e["se"] / e["mean"] if e["mean"] > 0 else float("nan")
            rel.append(x)
            n.append(e["n"])
            if not x <= limit:
                over.append(f"{name} {key}: {x:.3%} ({e['n']} points)")
    return {"n_sets": len(rel), "rel_se_max": float(np.nanmax(rel)) if rel else None,
            "limit": limit, "over_limit": sorted(over), "points_min": min(n, default=None),
            "points_max": max(n, default=None)}


def evaluate_run(res, ev) -> dict:
    """The final evaluation of the finished run ``res`` with settings ``ev`` (``block``,
    ``n_min``, ``n_max``, ``rel_se``; module docstring): ``{"settings": ev, "sets": {key:
    {"final": [block means], "initial": [block means] or None, "n": points, "mean", "se"}}}``
    (JSON-ready). A run that did not complete gets ``{"settings": ev, "sets": {}}``."""
    out = {"settings": dict(ev), "sets": {}}
    if res.status != "completed":
        return out
    cfg = Config.from_options(**res.config)
    problem = make_problem(cfg)
    streams = Streams(cfg.seed)
    init = None
    if cfg.init != "zero":
        init = problem.init_params(streams.init())
    for key, kind, value, T, q in set_keys(cfg):
        rng = streams.evaluation(kind, value)
        b = block_size(ev, cfg, T)
        fin, ini = [], []
        while True:
            data = problem._draw(rng, b, T, q)
            fin.append(problem.batch_loss_grad(res.params, data, need_grad=False)[0])
            if init is not None:
                ini.append(problem.batch_loss_grad(init, data, need_grad=False)[0])
            n = b * len(fin)
            if n >= ev["n_max"]:
                break
            if n >= ev["n_min"]:
                m, s = block_estimate(fin)
                if not np.isfinite(m) or s <= ev["rel_se"] * abs(m):
                    break
        m, s = block_estimate(fin)
        out["sets"][key] = {"final": np.asarray(fin, dtype=float).tolist(),
                            "initial": ini or None, "n": n, "mean": m, "se": s}
    return out


# --------------------------------------------------------------------------------------
# the estimates of a setting's runs, as bootstrap samples (stsim.studies.figures.verdicts)
# --------------------------------------------------------------------------------------
def _set_q(cfg, key) -> int:
    return int(key.split("=")[1]) if key.startswith("val/q=") else int(cfg["q"])


def run_estimate(res, key) -> dict | None:
    """The stored final evaluation of set ``key`` of the run ``res`` (:func:`evaluate_run`),
    or None (not evaluated: the run diverged)."""
    return res.info.get("evaluation", {}).get("sets", {}).get(key)


def eval_sample(boot, results, names, key, relative=False):
    """The :class:`.verdicts.Sample` of the final loss on set ``key`` over the runs
    ``names`` (their seeds), from the stored block means: the mean per run, and its
    bootstrap replicates over the blocks (:meth:`.verdicts.Boot.blocks`). ``relative``:
    divided by the initial loss — the exact ``d/(2q)`` from zero initialisation, else the
    initial parameters' loss on the same blocks (paired). NaN for a run without an
    estimate (diverged)."""
    nan = np.full(boot.n_boot, np.nan)
    values, within = [], []
    for n in names:
        r = results[n]
        e = run_estimate(r, key)
        if e is None:
            values.append(np.nan)
            within.append(nan)
            continue
        f = np.asarray(e["final"], dtype=float)
        den = None
        if relative:
            L0 = initial_loss_of(r.config, key)
            if L0 is None:
                den = np.asarray(e["initial"], dtype=float)
            else:
                f = f / L0
        values.append(f.mean() / (den.mean() if den is not None else 1.0))
        within.append(boot.blocks(n, key, f, den))
    return boot.sample(values, np.array(within), runs=names)


def initial_loss_of(config, key) -> float | None:
    """The exact initial population loss of a zero-initialised run, its target's L(0)
    (:meth:`~stsim.core.targets.Target.zero_loss`, ``d / (2 q)`` for the mean), from its
    recorded ``config``, for its set ``key`` (``q``: the set's subset size), or None
    (random initialisation)."""
    if config.get("init", "zero") != "zero":
        return None
    return make_target(config.get("target", "mean")).zero_loss(float(config["d"]),
                                                               _set_q(config, key))


def scalar_sample(boot, names, values):
    """A :class:`.verdicts.Sample` of a per-run quantity without sampling error of its
    own (a cosine, a block mass): it varies only with the seeds."""
    return boot.sample(np.asarray(values, dtype=float), runs=names)


def r2_sample(boot, names, xs, ys):
    """The :class:`.verdicts.Sample` of the R² of a straight line through each run's
    points ``(xs[i], ys[i])``, the points resampled with replacement within each run."""
    values, within = [], []
    for n, x, y in zip(names, xs, ys):
        x, y = np.asarray(x, float), np.asarray(y, float)
        values.append(fit_linear(x, y).r2 if x.size > 2 and np.all(np.isfinite(y))
                      else np.nan)
        rng = np.random.default_rng([boot.seed, zlib.crc32(f"r2|{n}".encode())])
        idx = rng.integers(x.size, size=(boot.n_boot, x.size))
        X, Y = x[idx], y[idx]
        Xc, Yc = X - X.mean(1, keepdims=True), Y - Y.mean(1, keepdims=True)
        with np.errstate(all="ignore"):
            r = (Xc * Yc).sum(1) / np.sqrt((Xc * Xc).sum(1) * (Yc * Yc).sum(1))
        within.append(r * r)
    return boot.sample(values, np.array(within), runs=names)
