"""Long sequences: train the stochastic model (slots) at T = 1000, q = 3 to
<= 2% of L(0), then evaluate it at T_test = 2000, 4000, 8000 against the reduced
dynamics' prediction at the trained (a, γ).

Setting: theory model, query "sum", d = 5, batch 256, zero init, online SGD, seed 0,
``d_e = 8000 = max T_test`` (the smallest width that encodes the longest test sequence; the
plateau of the slots dynamics grows like ``d_e``, see ``plateau``).

The step. In the reduced dynamics the logit margin ``θ = c a`` moves at ``η_W c²/(n−1)``
times its gradient (the gradient of W is spread over the ``n = d_e`` slots) and ``γ`` at
``η_V/d``; the plateau lasts ``≈ 104 (n−1)/η_W`` steps at T = 1000. One step for both
(``stsim.run``'s SGD) must stay below ``η_max = 2q = 6``, a bound set by V (``γ``'s
curvature ``S₂ = |s|² → 1/q`` at the solution), not by W: W's own directions are stable up
to about ``2n/(c²(q−1)(q+d))`` (the transverse ``W_xe`` curvature at the solution; 1000 at
n = 8000). So the run takes a step per block: ``--lr-W`` (default 200) for W and
``--lr-V`` (default 5.5 = 0.92 η_max) for V (``stsim.run(lr={"W": ..., "V": ...})``), for
``--steps`` steps
(default: 2 × the step where the reduced map with the same two steps reaches 2% of L(0)).
With one step for both, the best of those tried (0.99 η_max) needs 162 538 steps in the
reduced map (``plateau.csv``); with these two, 5430.

W's token rows. Minibatch SGD lags the population map, more the longer the sequence: the
minibatch gradient of ``W_xe`` (zero in the population, from zero init) makes it diffuse to
a stationary spread (entries of s.d. 0.05–0.06 at T = 200, d_e = 1600, lr 5.5, batch 256:
``trace_200_free.csv``), which tilts the attention towards the tokens along the random
direction ``m_x = W_xe p_q``; the value fit ``γ`` then stays far below its population value
(there: γ 0.30–0.39 against the map's 1.0–1.4, and ``a`` after 3000 steps 0.090 against
0.341), because ``|m_x|²`` competes with the ``d/T`` of a uniform average. With W's token rows
(``W_xx``, ``W_xe``: the first d rows) held at 0, their population value, the same SGD
follows the map step for step (``a`` 0.342 against 0.341 after 3000 steps). The run holds
them at 0 (``freeze=("W_xx", "W_xe")``; ``--free-x``: plain SGD). Both are now what the
default call derives by itself (``stsim.core.schedule``, a step per block).

Subcommands (each writes into ``--out``, default ``docs/figures/long``):

* ``train``: the run, one ``stsim.run`` call (batches drawn ahead), checkpointed to
  ``--checkpoint`` (the same call resumes it); saves ``W, V`` to
  ``--result`` (512 MB at d_e = 8000: outside the repository) and writes ``history.csv``
  and ``run.json`` (settings, config, wall time).
* ``evaluate``: reads ``(a, γ)`` off the trained ``W, V`` (``W_ee ≈ a (I − J/d_e)`` on the
  whole d_e × d_e block: ``a`` = mean diagonal − mean off-diagonal entry; ``V_x ≈ γ I``:
  ``γ`` = mean diagonal), measures the loss at each T_test on ``n_test`` fresh points
  (per-point losses: mean and standard error) and writes ``length.csv`` with the
  prediction ``stsim.theory.reduced.reduced_loss(a, γ, T_test, q, d)`` beside it.
* ``plateau``: the reduced map's steps to 50% and 2% of L(0) at T = 1000 for n = d_e = 2000
  (the default width) and 8000: one step η_max/4 … 0.99 η_max for both blocks, and a step
  per block: ``plateau.csv``.
* ``figure``: ``long.png`` from the CSV files (training curve with the reduced map's under
  the same steps; loss against T_test with the prediction).
* ``all``: the four in order.
* ``default`` (not in ``all``): the default call at T = 1000 — ``stsim run --T 1000
  --q 3`` (``default_T1000.json`` holds the run of the previous default, one step
  lr 3 = η_max/2 on every parameter, 162 800 steps; today's default takes a step per
  block: ``benchmarks/bench_long_default.py``), run by the CLI
  into ``--default-run`` (default ``../default_T1000``, outside the repository: its
  ``result.npz`` is 32 MB; checkpointed every 4000 steps and resumed), then its trained
  ``(a, γ)`` and the s.d. of ``W_xe`` against the reduced map's ``(a, γ, L)`` after the
  same steps at the same lr: ``default_T1000.json``, and the run's ``history.csv``,
  ``config.json``, ``loss.png`` and this call's output (``call.log``) copied to
  ``default_T1000/``. About 55 min on the idle
  2-core machine.
* ``trace`` (not in ``all``): SGD's ``(a, γ)`` against the reduced map's, step by step, with
  W's token rows held at 0 or free (``--free-x``): ``trace_<T>_<held|free>.csv`` — the
  evidence for holding them (below). E.g. ``trace --T 200 --d-e 1600 --lr-W 5.5 --steps
  3000 --eval-every 300 [--free-x]``.

``--quick``: T = 50, d_e = 400, T_test = 100, 200, 400 (a smoke test; written to ``--out``
as well). ``--T``, ``--d-e``, ``--T-test``: other sizes (e.g. the T = 200 pilot).

    nice -n 5 python benchmarks/long_sequences.py all --result /work/long/wv.npz \
        --checkpoint /work/long/ckpt.npz
"""
import argparse
import itertools
import json
import math
import os
import sys
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from stsim.core.reduced import (LEARNED, loss_grad_scalar, reduced_map,  # noqa: E402
                                reduced_map_losses, reduced_map_steps)
from stsim.core.schedule import FROZEN  # noqa: E402
from stsim.util.io import read_csv, write_csv, write_json  # noqa: E402

FULL = dict(T=1000, d_e=8000, T_test=(2000, 4000, 8000), lr_W=200.0, lr_V=5.5, n_test=1024,
            eval_every=100, hold_x=True)
QUICK = dict(T=50, d_e=400, T_test=(100, 200, 400), lr_W=10.0, lr_V=5.5, n_test=256,
             eval_every=10, hold_x=True)
FIXED = dict(q=3, d=5, batch=256, pe="stochastic", sampler="slots", model="theory",
             query="sum", seed=0)
TARGET = LEARNED        # the learned level, 2% of L(0)
MARGIN = 2.0            # steps = MARGIN × the reduced map's step to 2% of L(0)
CHECKPOINT_EVERY = 1000


def settings(args):
    s = dict(QUICK if args.quick else FULL)
    for k in ("lr_W", "lr_V", "T", "d_e", "eval_every"):
        if getattr(args, k) is not None:
            s[k] = getattr(args, k)
    if args.free_x:
        s["hold_x"] = False
    if args.T_test:
        s["T_test"] = tuple(int(t) for t in args.T_test.split(","))
    s.update(FIXED)
    s["reduced_escape"], s["reduced_target"] = reduced_map_steps(   # the one reduced update
        s["T"], s["q"], s["d"], {"W": s["lr_W"], "V": s["lr_V"]}, s["d_e"],
        max_steps=3_000_000, extrapolate=False)
    s["steps"] = args.steps or int(math.ceil(MARGIN * s["reduced_target"] / 100.0)) * 100
    return s


def _run_options(s, **extra):
    """The options of :func:`stsim.run` for the settings ``s``: a step per block, W's token
    rows held at 0 unless ``--free-x``."""
    opts = {k: s[k] for k in ("T", "q", "d", "d_e", "batch", "pe", "sampler", "model",
                              "query", "seed", "steps")}
    opts.update(lr={"W": s["lr_W"], "V": s["lr_V"]}, lr_decay="none",
                freeze=FROZEN if s["hold_x"] else ())
    opts.update(extra)
    return opts


def train(args, s):
    """The run: ``stsim.run`` with a step per block and W's token rows held (the
    settings), validation at every length of ``T_test``, checkpointed every
    ``CHECKPOINT_EVERY`` steps to ``--checkpoint`` (the same call resumes it)."""
    import stsim
    res = stsim.run(checkpoint=args.checkpoint, checkpoint_every=CHECKPOINT_EVERY
                    if args.checkpoint else None,
                    **_run_options(s, T_test=s["T_test"], n_val=256, eval_every=s["eval_every"]))
    np.savez(args.result, W=res.params["W"], V=res.params["V"])
    keys = list(res.history)
    write_csv(os.path.join(args.out, "history.csv"), keys,
              np.column_stack([res.history[k] for k in keys]).tolist())
    write_json(os.path.join(args.out, "run.json"),
               dict(settings=s, config=res.config, status=res.status,
                    step=int(res.history["step"][-1]), wall_time_s=res.info["wall_time_s"],
                    load_average_at_end=os.getloadavg()[0]))
    print(f"{res.status} at step {int(res.history['step'][-1])}; wall time "
          f"{res.info['wall_time_s']:.0f} s (this call)")


def reduced_state(W, V, d):
    """``(a, γ)`` of the slots reduction read off trained ``W, V`` (module docstring)."""
    Wee = W[d:, d:]
    n = Wee.shape[0]
    tr = float(np.trace(Wee))
    off = (float(Wee.sum()) - tr) / (n * (n - 1))
    return tr / n - off, float(np.trace(V[:, :d]) / d)


def point_losses(W, V, s, T_test, n, rng, chunk=1):
    """Loss of each of ``n`` fresh points at length ``T_test`` (one point per call)."""
    import stsim
    from stsim.core.families import make_encoding
    from stsim.core.model import forward_backward
    enc = make_encoding("stochastic", T_max=T_test, d_e=s["d_e"], sampler="slots")
    out = np.empty(n)
    for i in range(n):
        b = stsim.sample_batch(rng, 1, T_test, s["q"], s["d"])
        out[i] = forward_backward(W, V, b.X, b.y, enc.sample(rng, 1, T_test),
                                  need_grad=False)[0]
    return out


def evaluate(args, s):
    from stsim.theory.reduced import reduced_loss
    with np.load(args.result) as f:          # ours, or a stsim Result file
        W, V = (f["W"], f["V"]) if "W" in f.files else (f["param/W"], f["param/V"])
    a, g = reduced_state(W, V, s["d"])
    rng = np.random.default_rng(np.random.SeedSequence([s["seed"], 24]))
    rows = []
    for Tt in (s["T"],) + tuple(s["T_test"]):
        t0 = time.time()
        loss = point_losses(W, V, s, Tt, s["n_test"], rng)
        pred = float(reduced_loss(a, g, Tt, s["q"], s["d"]))
        m, se = float(loss.mean()), float(loss.std(ddof=1) / math.sqrt(loss.size))
        rows.append([Tt, m, se, loss.size, pred, (m - pred) / se if se > 0 else float("nan")])
        print(f"  T_test={Tt:5d}: measured {m:.5f} ± {se:.5f} (s.e., n={loss.size}), reduced "
              f"prediction {pred:.5f}, (measured − predicted)/s.e. = {rows[-1][-1]:+.2f} "
              f"({time.time() - t0:.0f} s)", flush=True)
    write_csv(os.path.join(args.out, "length.csv"),
              ["T_test", "measured_mean", "measured_se", "n_points", "reduced_prediction",
               "z"], rows)
    with open(os.path.join(args.out, "state.json"), "w") as f:
        json.dump(dict(a=a, gamma=g, L0=s["d"] / (2 * s["q"]), T=s["T"], d_e=s["d_e"]), f,
                  indent=1)
    print(f"(a, γ) = ({a:.4f}, {g:.4f})")


def plateau(args, s):
    from stsim.core.stability import eta_max
    rows = []
    T, q, d = s["T"], s["q"], s["d"]
    for n in sorted({2 * T, s["d_e"]}):
        em = eta_max(q, d, n)
        for frac in (0.25, 0.5, 0.75, 0.9, 0.99):
            esc, tgt = reduced_map_steps(T, q, d, frac * em, n, max_steps=5_000_000)
            rows.append([n, frac * em, frac * em, esc, tgt])
            print(f"  n = d_e = {n:5d}: one step {frac * em:.3f} = {frac:.2f} η_max -> 50% of "
                  f"L(0) at step {esc}, 2% at step {tgt}", flush=True)
        xe = 2 * n / ((q - 1) * (q + d))    # the transverse W_xe bound at the solution
        for lr_W in (50.0, 200.0, 500.0, xe):
            esc, tgt = reduced_map_steps(T, q, d, {"W": lr_W, "V": s["lr_V"]}, n,
                                         max_steps=3_000_000, extrapolate=False)
            rows.append([n, lr_W, s["lr_V"], esc, tgt])
            print(f"  n = d_e = {n:5d}: lr_W {lr_W:g}, lr_V {s['lr_V']:g} -> 50% of L(0) at "
                  f"step {esc}, 2% at step {tgt}", flush=True)
    write_csv(os.path.join(args.out, "plateau.csv"),
              ["n", "lr_W", "lr_V", "steps_to_50pct", "steps_to_2pct"], rows)


def trace(args, s):
    """SGD (a step per block, W's token rows held at 0 or not: ``--free-x``) and the reduced
    block map side by side: every ``eval_every`` steps the SGD state's ``(a, γ)`` (as read
    by :func:`reduced_state`), the reduced loss at them, the mean training loss since the
    last record, the s.d. of ``W_xe``, and the map's ``(a, γ, L)`` at the same step:
    ``trace_<T>_<held or free>.csv``. One ``stsim.run`` call per record, each resuming the
    last from its checkpoint (bit for bit, as one call), serial."""
    import tempfile

    import stsim
    T, q, d, n, every = s["T"], s["q"], s["d"], s["d_e"], s["eval_every"]
    L0, rows = d / (2 * q), []
    states = reduced_map(T, q, d, {"W": s["lr_W"], "V": s["lr_V"]}, n)
    with tempfile.TemporaryDirectory() as tmp:
        ck = os.path.join(tmp, "ck.npz")
        for t in range(0, s["steps"] + 1, every):
            L_r, a_r, _, g_r = next(states)
            for _ in range(every - 1 if t < s["steps"] else 0):
                next(states)
            res = stsim.run(checkpoint=ck, progress=False, prefetch=False,
                            **_run_options(s, steps=t, n_val=16, eval_every=every))
            W, V = res.params["W"], res.params["V"]
            a, g = reduced_state(W, V, d)
            loss = float(res.history["loss"][-1]) if t > 0 else L0
            rows.append([t, loss / L0, a, g, loss_grad_scalar(a, 0.0, g, T, q, d)[0] / L0,
                         float(W[:d, d:].std()), a_r, g_r, L_r / L0])
            print("  " + "  ".join(f"{h}={v:.4g}" for h, v in zip(TRACE_COLS, rows[-1])),
                  flush=True)
    name = f"trace_{T}_{'held' if s['hold_x'] else 'free'}.csv"
    write_csv(os.path.join(args.out, name), TRACE_COLS, rows)
    print(f"wrote {name}")


def default(args, s):
    """The plain default call at T = 1000 (module docstring, ``default``)."""
    import shutil
    import subprocess
    run_dir = os.path.abspath(args.default_run)
    cmd = [sys.executable, "-m", "stsim", "run", "--T", "1000", "--q", "3", "--out", run_dir,
           "--checkpoint_every", "4000"]
    t0 = time.time()
    out = subprocess.run(cmd, capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=REPO))
    wall = time.time() - t0
    if out.returncode != 0:
        raise SystemExit(f"stsim run failed ({out.returncode}): {out.stderr[-2000:]}")
    summary = json.loads(out.stdout[out.stdout.index("{"):])
    cfg = json.load(open(os.path.join(run_dir, "config.json")))
    cfg = cfg.get("config", cfg)
    T, q, d, n, lr, steps = (cfg[k] for k in ("T", "q", "d", "d_e", "lr", "steps"))
    with np.load(os.path.join(run_dir, "result.npz")) as z:
        W = z["param/W"] if "param/W" in z.files else z["W"]
        V = z["param/V"] if "param/V" in z.files else z["V"]
    a, g = reduced_state(W, V, d)
    # the reduced map after the same steps at the same lr (stsim.run's SGD: one lr)
    L_r, a_r, _, g_r = next(itertools.islice(reduced_map(T, q, d, lr, n), steps, None))
    L0 = d / (2 * q)
    rec = dict(command=" ".join(["stsim"] + cmd[3:4] + cmd[4:8]), T=T, q=q, d=d, d_e=n,
               lr=lr, steps=steps, this_call_wall_s=round(wall, 1),
               this_call_run_wall_time_s=summary.get("wall_time_s"), status=summary["status"],
               assessment=summary.get("assessment"), message=summary["message"],
               final_loss_over_L0=summary["final_loss"] / L0,
               final_val_over_L0=summary["final_val"]["val"] / L0,
               cos_W=summary["cos_W"], cos_V=summary["cos_V"],
               sgd_a=a, sgd_gamma=g, sgd_W_xe_sd=float(W[:d, d:].std()),
               sgd_reduced_loss_over_L0=loss_grad_scalar(a, 0.0, g, T, q, d)[0] / L0,
               map_a=a_r, map_gamma=g_r, map_loss_over_L0=L_r / L0,
               load_end=os.getloadavg()[0])
    with open(os.path.join(args.out, "default_T1000.json"), "w") as f:
        json.dump(rec, f, indent=1)
    dst = os.path.join(args.out, "default_T1000")
    os.makedirs(dst, exist_ok=True)
    for name in ("history.csv", "config.json", "loss.png"):
        shutil.copy(os.path.join(run_dir, name), os.path.join(dst, name))
    with open(os.path.join(dst, "call.log"), "w") as f:    # this call's output (a call that
        f.write(out.stderr + out.stdout)                    # resumed shows only its part)
    print(json.dumps(rec, indent=1))


def _table(path):
    """``(header, float array)`` of a CSV file written by :func:`write_csv`."""
    rows = read_csv(path)
    keys = list(rows[0])
    return keys, np.array([[r[k] for k in keys] for r in rows], dtype=float)


TRACE_COLS = ["step", "train_loss_over_L0", "a", "gamma", "reduced_loss_at_a_gamma_over_L0",
              "W_xe_sd", "map_a", "map_gamma", "map_loss_over_L0"]


def figure(args, s):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    keys, h = _table(os.path.join(args.out, "history.csv"))
    col = {k: i for i, k in enumerate(keys)}
    _, lg = _table(os.path.join(args.out, "length.csv"))
    L0 = s["d"] / (2 * s["q"])
    fig, ax = plt.subplots(1, 2, figsize=(11, 4.2))
    step = h[:, col["step"]]
    ax[0].semilogy(step, h[:, col["val"]] / L0, label=f"SGD, validation, T = {s['T']}")
    for t in s["T_test"]:
        ax[0].semilogy(step, h[:, col[f"val/T={t}"]] / L0, lw=0.8, label=f"T_test = {t}")
    red = reduced_map_losses(s["T"], s["q"], s["d"], {"W": s["lr_W"], "V": s["lr_V"]},
                             s["d_e"], int(step[-1]))
    red_a = np.array(red) / L0
    val = h[:, col["val"]] / L0
    for level in (0.5, TARGET):                  # SGD: the first record at or below the level
        hit = step[val <= level]
        rhit = np.flatnonzero(red_a <= level)
        print(f"  {level:.0%} of L(0): SGD's validation at record step "
              f"{int(hit[0]) if hit.size else 'not reached'} (records every "
              f"{int(step[1] - step[0])} steps), the reduced map at step "
              f"{int(rhit[0]) if rhit.size else 'not reached'}")
    print(f"  at step {int(step[-1])}: SGD's validation {val[-1]:.4%} of L(0), the reduced map "
          f"{red_a[-1]:.4%}")
    ax[0].semilogy(np.arange(len(red)), red_a, "k--", lw=1,
                   label="reduced population map, same steps")
    ax[0].axhline(TARGET, color="gray", lw=0.6, ls=":")
    ax[0].set(xlabel="step", ylabel="loss / L(0)", title=f"training: slots, T = {s['T']}, "
              f"d_e = {s['d_e']}, SGD lr_W {s['lr_W']:g}, lr_V {s['lr_V']:g}")
    ax[0].legend(fontsize=7)
    Tt, m, se, pred = lg[:, 0], lg[:, 1], lg[:, 2], lg[:, 4]
    ax[1].errorbar(Tt, m / L0, yerr=2 * se / L0, fmt="o", capsize=3,
                   label="trained model (mean ± 2 s.e.)")
    ax[1].plot(Tt, pred / L0, "k--x", label="reduced dynamics at the trained (a, γ)")
    ax[1].set(xscale="log", yscale="log", xlabel="test length T_test", ylabel="loss / L(0)",
              title="length generalisation")
    ax[1].set_xticks(Tt, [str(int(t)) for t in Tt])
    ax[1].xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax[1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(args.out, "long.png"), dpi=120)
    print(f"wrote {os.path.join(args.out, 'long.png')}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=["train", "evaluate", "plateau", "figure", "all", "trace",
                                     "default"])
    ap.add_argument("--out", default=os.path.join(REPO, "docs", "figures", "long"))
    ap.add_argument("--result", default=os.path.join(REPO, "..", "long_result.npz"),
                    help="where the trained W, V are saved / read (npz)")
    ap.add_argument("--checkpoint", default=None, help="checkpoint file (resumable)")
    ap.add_argument("--default-run", dest="default_run",
                    default=os.path.join(REPO, "..", "default_T1000"),
                    help="the default run's output folder (subcommand default)")
    ap.add_argument("--lr-W", dest="lr_W", type=float, default=None, help="W's step")
    ap.add_argument("--lr-V", dest="lr_V", type=float, default=None, help="V's step")
    ap.add_argument("--eval-every", dest="eval_every", type=int, default=None)
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--T", type=int, default=None, help="another training length")
    ap.add_argument("--d-e", dest="d_e", type=int, default=None, help="another width")
    ap.add_argument("--T-test", dest="T_test", default=None, help="comma list of test lengths")
    ap.add_argument("--quick", action="store_true", help="small setting (smoke test)")
    ap.add_argument("--free-x", dest="free_x", action="store_true",
                    help="train W's token rows too (plain SGD; default: held at 0)")
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    s = settings(args)
    print(f"settings: {s}", flush=True)
    if args.what == "trace":
        trace(args, s)
    if args.what == "default":
        default(args, s)
    for name, fn in (("train", train), ("evaluate", evaluate), ("plateau", plateau),
                     ("figure", figure)):
        if args.what in (name, "all"):
            fn(args, s)


if __name__ == "__main__":
    main()
