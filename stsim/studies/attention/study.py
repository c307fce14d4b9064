r"""``stsim attention``: which attention mechanisms learn sparse token selection, and at
what width (docs/attention.md).

Three parts, each check carrying its standard error, the critical value right for its
sample size and a verdict (:func:`check`):

* **runs** — every mechanism of ``mechanisms`` (names of :data:`stsim.core.attention.
  ATTENTIONS`, ``rank=r`` for the key/query pair, ``tau=τ`` for softmax at a temperature)
  trained by :func:`stsim.run` with its default schedule and initialisation, ``seeds``
  seeds; per mechanism: **learns** (the final validation loss ≤ ``target`` · L(0)) and
  **length generalisation** (the loss at each ``T_test`` ≤ ``ood_target`` · L(0), slots
  encodings, so that the longer sequences use slots seen in training).
* **width** — the smallest ``d_e`` reaching ``width_target`` · L(0) against T with sphere
  encodings: linear attention's exact law ``⌈(T − 1)(1/ε − 1)⌉`` (docs/attention.md §5)
  and softmax's family widths (the committed docs/figures/separation/summary.json, q = 3),
  each fitted with the interval-censored growth laws of docs/separation.md.
* **temperature** — the reduced softmax map's step to 2% of L(0) against τ at one step
  ``η``, and the same map at τ = 1 with step ``η/τ²`` on W and ``η`` on V (the derived
  equivalence; deterministic, ``se = 0``).

Verdict: with ``n`` seeds, ``se`` the standard error of the seed mean and ``critical`` the
0.975 quantile of Student's t with ``n − 1`` degrees of freedom (4.30 for 3 seeds),
``held`` when the mean is on the claimed side of the threshold by more than
``critical · se``, ``failed`` when on the other side by more, else ``inconclusive``; a
deterministic value (``se = 0``, ``critical = 0``) is held or failed as written.
"""
from __future__ import annotations

import json
import math
import os
import time

import numpy as np
from scipy.stats import t as student_t

from stsim.core.attention import ATTENTIONS
from stsim.util.io import write_csv, write_json
from stsim.util.validate import check_int, check_real

__all__ = ["NAME", "PRESETS", "check", "run", "analyse", "report", "verdict",
           "parse_mechanism", "run_one"]

NAME = "attention"
MECHS = list(ATTENTIONS) + ["rank=4", "tau=0.5"]
PRESETS = {
    "quick": {"mode": "quick", "T": 12, "q": 2, "d": 5, "seeds": 3, "mechanisms": MECHS,
              "steps": 300, "batch": 64, "T_test": [16, 20], "target": 0.02,
              "ood_target": 0.05, "width_target": 0.25, "width_T": [8, 64, 512, 4096],
              "taus": [0.5, 1.0, 2.0], "tau_T": 50},
    "full": {"mode": "full", "T": 200, "q": 3, "d": 5, "seeds": 3, "mechanisms": MECHS,
             "steps": 0, "batch": 256, "T_test": [250, 300, 400], "target": 0.02,
             "ood_target": 0.05, "width_target": 0.25,
             "width_T": [8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096],
             "taus": [0.25, 0.5, 1.0, 2.0, 4.0], "tau_T": 200},
}
SEPARATION = os.path.join(os.path.dirname(__file__), "..", "..", "..", "docs", "figures",
                          "separation", "summary.json")


def parse_mechanism(label: str) -> dict:
    """``"linear"`` -> ``{"attention": "linear"}``, ``"rank=4"`` -> ``{"rank": 4}``,
    ``"tau=0.5"`` -> ``{"temperature": 0.5}``; ``ValueError`` naming ``mechanisms``."""
    if label in ATTENTIONS:
        return {"attention": label}
    key, _, val = str(label).partition("=")
    try:
        if key == "rank":
            return {"rank": check_int("rank", int(val), 1)}
        if key == "tau":
            return {"temperature": check_real("tau", float(val), lo=0.0, lo_open=True)}
    except ValueError:
        pass
    raise ValueError(f"mechanisms must hold names of {ATTENTIONS}, rank=r or tau=t, got "
                     f"{label!r}")


def check(cfg: dict) -> dict:
    """Validate every setting (``ValueError`` naming it) before any work."""
    cfg = dict(cfg)
    cfg["T"] = check_int("T", cfg["T"], 2)
    cfg["q"] = check_int("q", cfg["q"], 1, cfg["T"] - 1)
    cfg["d"] = check_int("d", cfg["d"], 1)
    cfg["seeds"] = check_int("seeds", cfg["seeds"], 2)
    cfg["steps"] = check_int("steps", cfg["steps"], 0)
    cfg["batch"] = check_int("batch", cfg["batch"], 1)
    cfg["tau_T"] = check_int("tau_T", cfg["tau_T"], 3)
    if not cfg["mechanisms"]:
        raise ValueError("mechanisms must hold at least one mechanism, got []")
    for m in cfg["mechanisms"]:
        parse_mechanism(m)
    for name in ("target", "ood_target", "width_target"):
        cfg[name] = check_real(name, cfg[name], lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    cfg["T_test"] = [check_int("T_test", t, cfg["T"] + 1) for t in cfg["T_test"]]
    cfg["width_T"] = [check_int("width_T", t, 2) for t in cfg["width_T"]]
    cfg["taus"] = [check_real("taus", t, lo=0.0, lo_open=True) for t in cfg["taus"]]
    return cfg


def run_one(mechanism, T, q, d, steps, batch, T_test, seed):
    """One training run (a row of ``raw/runs.csv``): the final validation losses over L(0),
    the run's status, lr, steps, CPU time and its validation curve (JSON)."""
    opts = dict(T=T, q=q, d=d, batch=batch, T_test=tuple(T_test), seed=seed,
                **parse_mechanism(mechanism))
    if steps:
        opts["steps"] = steps
    import stsim
    t0 = time.process_time()
    res = stsim.run(**opts)
    L0 = 0.5 * d / q
    h = res.history
    row = {"run_status": res.status, "lr": float(res.config["lr"]) if not isinstance(
        res.config["lr"], dict) else float("nan"), "steps": int(res.config["steps"]),
        "init": res.config["init"], "rel": res.final("val") / L0,
        "cpu_time_s": time.process_time() - t0,
        "curve": json.dumps({"step": [int(s) for s in h["step"]],
                             "rel": [float(v) / L0 for v in h["val"]]})}
    for Tt in T_test:
        row[f"rel_T{Tt}"] = res.final(f"val/T={Tt}") / L0
    return row


def run(cfg, out, executor, log):
    """The training runs, through :func:`stsim.sweep` into ``raw/runs.csv`` (resumable)."""
    from stsim.sweep import sweep
    os.makedirs(os.path.join(out, "raw"), exist_ok=True)
    t0 = time.time()

    def fn(mechanism, seed):
        return run_one(mechanism, cfg["T"], cfg["q"], cfg["d"], cfg["steps"], cfg["batch"],
                       cfg["T_test"], seed)

    sweep(fn, {"mechanism": cfg["mechanisms"]}, seeds=cfg["seeds"], executor=executor,
          out=os.path.join(out, "raw", "runs.csv"))
    write_json(os.path.join(out, "raw", "run.json"), {"wall_time_s": time.time() - t0})


def verdict(values, op, threshold, claim, note=""):
    """A check of the seed mean of ``values`` (module docstring): ``claim``, ``measured``,
    ``se``, ``n``, ``critical``, ``op``, ``threshold``, ``verdict``, ``note``. One value or
    all equal and exact: pass ``se`` 0 by giving one value."""
    v = np.asarray(values, dtype=np.float64)
    n = int(v.size)
    m = float(np.mean(v)) if n else float("nan")
    se = float(np.std(v, ddof=1) / math.sqrt(n)) if n > 1 else 0.0
    crit = float(student_t.ppf(0.975, n - 1)) if n > 1 else 0.0
    diff = (m - threshold) if op in (">=", ">") else (threshold - m)
    if not np.isfinite(m):
        verd = "inconclusive"
    elif se == 0:
        verd = "held" if diff >= 0 else "failed"
    else:
        verd = "held" if diff > crit * se else "failed" if diff < -crit * se else "inconclusive"
    return {"claim": claim, "measured": m, "se": se, "n": n, "critical": crit, "op": op,
            "threshold": float(threshold), "verdict": verd, "note": note}


def _temperature(cfg):
    """Reduced softmax map at each τ (step η = the τ = 1 default) against the τ = 1 map with
    steps (η/τ², η): the step to 2% of L(0) of each."""
    from stsim.core.attention_dynamics import reduced_gd, softmax_eta_max
    T, q, d = cfg["tau_T"], cfg["q"], cfg["d"]
    n = 2 * T
    eta = 0.5 * softmax_eta_max(q, d, n, 1.0, 1.0)
    horizon = 20 * T
    rows = []
    for tau in cfg["taus"]:
        from stsim.core.attention import make_attention
        hot = reduced_gd(make_attention("softmax", tau), T, q, d, eta, n, horizon)
        cold = reduced_gd("softmax", T, q, d, eta / tau ** 2, n, horizon, lr_gamma=eta)
        L0 = 0.5 * d / q

        def first(L):
            hit = np.flatnonzero(L <= cfg["target"] * L0)
            return int(hit[0]) if hit.size else None
        rows.append({"tau": tau, "lr": eta, "t2_tau": first(hot["loss"]),
                     "t2_equivalent": first(cold["loss"]),
                     "max_rel_diff": float(np.nanmax(np.abs(hot["loss"] - cold["loss"])
                                                     / cold["loss"][0]))})
    return rows


def _width(cfg):
    """Linear attention's exact smallest d_e and softmax's family widths (q = 3), with the
    interval-censored fits."""
    from stsim.theory.attention import linear_sphere_width
    from stsim.util.stats import compare_growth
    eps = cfg["width_target"]
    Ts = cfg["width_T"]
    lin = [int(w) for w in linear_sphere_width(Ts, eps)]
    rows = [{"series": "linear (exact)", "T": T, "width": w, "below": w - 1}
            for T, w in zip(Ts, lin)]
    fam = []
    if os.path.exists(SEPARATION) and eps == 0.25:
        with open(SEPARATION) as f:
            fam = [e for e in json.load(f)["family"] if e["q"] == 3 and e["target"] == 0.25]
        rows += [{"series": "softmax (family, q=3)", "T": e["T"], "width": e["width"],
                  "below": e["below"]} for e in fam]
    fits = {}
    for series in sorted({r["series"] for r in rows}):
        pts = [r for r in rows if r["series"] == series]
        if len(pts) >= 3:
            c = compare_growth([p["T"] for p in pts], [p["width"] for p in pts],
                               lower=[p["below"] for p in pts], min_points=3, what="d_e")
            fits[series] = {"ranking": c.get("ranking", []),
                            "fits": {k: {kk: v for kk, v in f.items()
                                         if isinstance(v, (int, float, str, list))}
                                     for k, f in c.get("fits", {}).items()}}
    return rows, fits


def analyse(cfg, out) -> dict:
    """Every check, from ``raw/runs.csv`` and the exact computations."""
    from stsim.sweep import read_table
    table = read_table(os.path.join(out, "raw", "runs.csv"))
    checks, per = [], {}
    for mech in cfg["mechanisms"]:
        rows = [r for r in table if r["mechanism"] == mech]
        ok = [r for r in rows if r["run_status"] == "completed"]
        per[mech] = {"runs": len(rows), "completed": len(ok),
                     "lr": rows[0]["lr"] if rows else None,
                     "steps": rows[0]["steps"] if rows else None,
                     "init": rows[0]["init"] if rows else None}
        rel = [float(r["rel"]) if r["run_status"] == "completed" else float("nan")
               for r in rows]
        checks.append(verdict(rel, "<=", cfg["target"], f"{mech} learns: final loss <= "
                              f"{cfg['target']:g} L(0) (T={cfg['T']}, q={cfg['q']})",
                              note=f"{len(ok)}/{len(rows)} runs completed"))
        for Tt in cfg["T_test"]:
            vals = [float(r[f"rel_T{Tt}"]) if r["run_status"] == "completed"
                    else float("nan") for r in rows]
            checks.append(verdict(vals, "<=", cfg["ood_target"], f"{mech} generalises to "
                                  f"T_test={Tt}: loss <= {cfg['ood_target']:g} L(0)"))
    temp = _temperature(cfg)
    for r in temp:
        same = r["t2_tau"] == r["t2_equivalent"] and r["max_rel_diff"] < 1e-9
        checks.append(verdict([r["max_rel_diff"]], "<=", 1e-9, f"temperature {r['tau']:g} "
                              f"equals W step / tau^2 (reduced map, T={cfg['tau_T']})",
                              note=f"steps to {cfg['target']:g} L(0): {r['t2_tau']} at tau, "
                                   f"{r['t2_equivalent']} equivalent; same: {same}"))
    width_rows, fits = _width(cfg)
    lin = fits.get("linear (exact)", {})
    if lin.get("ranking"):
        checks.append(verdict([1.0 if lin["ranking"][0] == "linear" else 0.0], ">=", 1.0,
                              "linear attention's width law is linear in T (best-ranked law)",
                              note=f"ranking {lin['ranking']}"))
    return {"config": cfg, "mechanisms": per, "checks": checks, "temperature": temp,
            "width": width_rows, "fits": fits}


def report(cfg, out, results) -> dict:
    """``attention.json`` (every check), ``width.csv``, ``temperature.csv``,
    ``curves.png`` (loss curves per mechanism, CSV beside), ``width.png`` and
    ``report.md``."""
    from stsim.sweep import read_table
    from stsim.util.plotting import plt, savefig
    write_json(os.path.join(out, "attention.json"), results)
    write_csv(os.path.join(out, "width.csv"), ["series", "T", "width", "below"],
              [[r["series"], r["T"], r["width"], r["below"]] for r in results["width"]])
    temp = results["temperature"]
    write_csv(os.path.join(out, "temperature.csv"), list(temp[0]) if temp else ["tau"],
              [list(r.values()) for r in temp])
    table = read_table(os.path.join(out, "raw", "runs.csv"))
    fig, ax = plt.subplots(1, 1, figsize=(6, 4))
    curve_rows = []
    for mech in cfg["mechanisms"]:
        rows = [r for r in table if r["mechanism"] == mech]
        if not rows:
            continue
        c = json.loads(rows[0]["curve"])
        ax.plot(c["step"], c["rel"], label=mech)
        curve_rows += [[mech, s, v] for s, v in zip(c["step"], c["rel"])]
    write_csv(os.path.join(out, "curves.csv"), ["mechanism", "step", "rel"], curve_rows)
    ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("validation loss / L(0) (first seed)")
    ax.legend(fontsize=7)
    savefig(fig, os.path.join(out, "curves.png"))
    fig, ax = plt.subplots(1, 1, figsize=(6, 4))
    for series in sorted({r["series"] for r in results["width"]}):
        pts = [r for r in results["width"] if r["series"] == series]
        ax.plot([p["T"] for p in pts], [p["width"] for p in pts], "o-", label=series)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("T")
    ax.set_ylabel(f"smallest d_e reaching {cfg['width_target']:g} L(0)")
    ax.legend(fontsize=7)
    savefig(fig, os.path.join(out, "width.png"))
    lines = [f"# stsim attention ({cfg['mode']})", "",
             "| check | measured | se | n | critical | verdict | note |", "|---|---|---|---|---|---|---|"]
    for c in results["checks"]:
        lines.append(f"| {c['claim']} | {c['measured']:.4g} | {c['se']:.2g} | {c['n']} | "
                     f"{c['critical']:.3g} | {c['verdict']} | {c['note']} |")
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    counts = {v: sum(c["verdict"] == v for c in results["checks"])
              for v in ("held", "failed", "inconclusive")}
    return {"checks": len(results["checks"]), **counts, "out": out}
