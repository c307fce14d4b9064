"""Long sequences (issue 24): train the stochastic model (slots) at T = 1000, q = 3 to
<= 2% of L(0), then evaluate it at T_test = 2000, 4000, 8000 against the reduced
dynamics' prediction at the trained (a, γ).

Setting: theory model, query "sum", d = 5, batch 256, zero init, online SGD, seed 0,
``d_e = 8000 = max T_test`` (the smallest width that encodes the longest test sequence; the
plateau of the slots dynamics grows like ``d_e``, see ``plateau``).

The step. A constant step must stay below ``η_max = 2q = 6`` (the curvature of V at the
solution, ``S₂ = |s|² → 1/q``), and the plateau of the reduced map lasts ``≈ 104 d_e / η``
steps at T = 1000 — 139 000 steps even at 0.99 η_max. The run uses ``lr1 = lr2 = 5.5``
(0.92 η_max) for ``--steps`` (default 1.4 × the step where the reduced map at that step
reaches 2% of L(0): 246 000). With ``lr1 > lr2`` the trainer takes ``lr1`` until the mean
training loss of the last 200 steps is <= 90% of L(0), then ``lr2``: on the plateau
``S₂ ≈ 1/T`` and the reduced map is stable for steps up to ``≈ 2/S₂ = 2T``, and with
``lr1 = 100`` it reaches 2% 4.5 times sooner — but minibatch SGD does not follow it
(docs/model.md, "Long sequences": at T = 200, d_e = 1600, ``lr1 = 20`` kept the loss above
L(0) for 6500 steps).

Subcommands (each writes into ``--out``, default ``docs/figures/long``):

* ``train``: the run (stsim's problem, optimiser, loop and run state, batches drawn ahead),
  checkpointed to ``--checkpoint`` (resumed from it if it exists); saves ``W, V`` to
  ``--result`` (512 MB at d_e = 8000: outside the repository) and writes ``history.csv``
  and ``run.json`` (config, switch step, wall time).
* ``evaluate``: reads ``(a, γ)`` off the trained ``W, V`` (``W_ee ≈ a (I − J/d_e)`` on the
  whole d_e × d_e block: ``a`` = mean diagonal − mean off-diagonal entry; ``V_x ≈ γ I``:
  ``γ`` = mean diagonal), measures the loss at each T_test on ``n_test`` fresh points
  (per-point losses: mean and standard error) and writes ``length.csv`` with the
  prediction ``stsim.theory.reduced.reduced_loss(a, γ, T_test, q, d)`` beside it.
* ``plateau``: the reduced map's steps to 50% and 2% of L(0) at T = 1000 for n = d_e = 2000
  (the default width) and 8000: constant steps η_max/4 … 0.99 η_max, the two-step rule
  above, and the state-dependent step ``min(1/S₂(t), cap)``: ``plateau.csv``.
* ``figure``: ``long.png`` from the CSV files (training curve with the reduced map's under
  the same two steps; loss against T_test with the prediction).
* ``all``: the four in order.

``--quick``: T = 50, d_e = 400, T_test = 100, 200, 400 (a smoke test, a minute; written to
``--out`` as well).

    nice -n 5 python benchmarks/long_sequences.py all --result /work/long/result.npz \
        --checkpoint /work/long/ckpt.npz
"""
import argparse
import csv
import json
import math
import os
import sys
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

FULL = dict(T=1000, d_e=8000, T_test=(2000, 4000, 8000), lr1=5.5, lr2=5.5, n_test=1024,
            eval_every=1000)
QUICK = dict(T=50, d_e=400, T_test=(100, 200, 400), lr1=5.0, lr2=5.5, n_test=256,
             eval_every=20)
FIXED = dict(q=3, d=5, batch=256, pe="stochastic", sampler="slots", model="theory",
             query="sum", seed=0)
TARGET = 0.02
SWITCH = 0.9            # lr1 -> lr2 once the training loss is <= 90% of L(0)
WINDOW = 200            # ... as the mean of the last 200 steps
CHECKPOINT_EVERY = 2000


def two_phase_steps(T, q, d, n, lr1, lr2, switch=SWITCH, max_steps=3_000_000, losses=None):
    """The reduced map (theory model, c = 1) with the step ``lr1`` until ``L <= switch ·
    L(0)``, then ``lr2``: ``(switch step, step to 50%, step to 2% of L(0))`` (None: not
    reached; ``"diverged"``). ``losses``: a list to append ``L(t)`` to (then the map runs
    the whole ``max_steps``)."""
    from stsim.core.reduced import loss_grad_scalar
    a = b = g = 0.0
    L0 = d / (2 * q)
    eta, out = lr1, [None, None, None]
    for t in range(max_steps + 1):
        L, da, db, dg = loss_grad_scalar(a, b, g, T, q, d)
        if losses is not None:
            losses.append(L)
        if not math.isfinite(L) or L > 10 * L0:
            return ["diverged"] * 3
        for i, hit in enumerate((L <= switch * L0, L <= 0.5 * L0, L <= TARGET * L0)):
            if hit and out[i] is None:
                out[i] = t
        if out[0] is not None:
            eta = lr2
        if out[2] is not None and losses is None:
            break
        beta = (-db / n - da / n) / (n - 1)
        a -= eta * (da / n - beta)
        b += eta * beta
        g -= eta / d * dg
    return out


def settings(args):
    s = dict(QUICK if args.quick else FULL)
    for k in ("lr1", "lr2", "T", "d_e"):
        if getattr(args, k) is not None:
            s[k] = getattr(args, k)
    if args.T_test:
        s["T_test"] = tuple(int(t) for t in args.T_test.split(","))
    s.update(FIXED)
    sw, esc, tgt = two_phase_steps(s["T"], s["q"], s["d"], s["d_e"], s["lr1"], s["lr2"])
    s["reduced_switch"], s["reduced_escape"], s["reduced_target"] = sw, esc, tgt
    s["steps"] = args.steps or int(math.ceil(1.4 * tgt / 1000.0)) * 1000
    return s


def write_csv(path, header, rows):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


def read_csv(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    return rows[0], np.array(rows[1:], dtype=float)


def train(args, s):
    """Online SGD (stsim's problem, optimiser, loop and run state; batches drawn ahead) with
    the step ``lr1`` until the mean training loss of the last ``WINDOW`` steps is
    <= ``SWITCH`` × L(0), then ``lr2`` (module docstring); checkpointed every
    ``CHECKPOINT_EVERY`` steps (resumed from ``--checkpoint`` if it exists)."""
    from stsim.core.config import Config
    from stsim.core.optim import SGD
    from stsim.core.problem import make_problem
    from stsim.core.run import train_loop, uses_second_thread
    from stsim.core.seeds import Streams
    from stsim.core.state import RunState
    from stsim.util.prefetch import Prefetch, prefetch_default
    from stsim.util.threads import one_blas_thread
    cfg = Config.from_options(**{k: s[k] for k in (
        "T", "q", "d", "d_e", "batch", "pe", "sampler", "model", "query", "seed", "steps")},
        lr=s["lr1"], lr_decay="none", T_test=s["T_test"], n_val=256, eval_every=s["eval_every"])
    streams = Streams(cfg.seed)
    problem = make_problem(cfg, streams)
    opt, rng = SGD(s["lr1"]), streams.train()
    side = (args.checkpoint + ".json") if args.checkpoint else None
    if args.checkpoint and os.path.exists(args.checkpoint):
        state, cfg = RunState.load(args.checkpoint, cfg, opt, rng)
        phase = {"switch_step": None, "wall_s": 0.0}      # (a stsim.run checkpoint has none)
        if os.path.exists(side):
            with open(side) as f:
                phase = json.load(f)
    else:
        state = RunState(problem.init_params(streams.init()), opt, rng)
        phase = {"switch_step": None, "wall_s": 0.0}
    if phase["switch_step"] is not None:
        opt.base_lr = s["lr2"]
    L0 = s["d"] / (2 * s["q"])
    recent = []
    t0 = time.time()

    def save():
        state.save(args.checkpoint, cfg)
        with open(side, "w") as f:
            json.dump(dict(phase, wall_s=phase["wall_s"] + time.time() - t0), f)

    def at_top(step):
        state.step = step
        if args.checkpoint and step > 0 and step % CHECKPOINT_EVERY == 0:
            save()

    def observe(step, out):
        state.accumulate(out[0])
        recent.append(out[0])
        del recent[:-WINDOW]
        if (phase["switch_step"] is None and len(recent) == WINDOW
                and sum(recent) / WINDOW <= SWITCH * L0):
            phase["switch_step"] = step
            opt.base_lr = s["lr2"]
            print(f"  step {step}: mean training loss of the last {WINDOW} steps <= "
                  f"{SWITCH} L(0): lr {s['lr1']:g} -> {s['lr2']:g}", flush=True)
        if step % cfg.eval_every == 0 or step == cfg.steps:
            row = state.record(step, problem.evaluate(state.params))
            print(f"  step {step:7d}/{cfg.steps}  val {row['val']:.5f}  "
                  + "  ".join(f"T={t}: {row[f'val/T={t}']:.5f}" for t in s["T_test"])
                  + f"  ({phase['wall_s'] + time.time() - t0:.0f} s)", flush=True)

    if prefetch_default():
        state.attach(Prefetch(problem.draw_step, rng))
    try:
        with one_blas_thread(uses_second_thread(problem.enc, state.source is not None)):
            end = train_loop(lambda p: state.loss_grad(problem, p), opt, state.params,
                             cfg.steps, start=state.step, at_top=at_top, observe=observe)
    finally:
        if state.source is not None:
            state.source.close()
    wall = phase["wall_s"] + time.time() - t0
    np.savez(args.result, W=state.params["W"], V=state.params["V"])
    keys = list(state.history)
    write_csv(os.path.join(args.out, "history.csv"), keys,
              np.column_stack([state.history[k] for k in keys]).tolist())
    with open(os.path.join(args.out, "run.json"), "w") as f:
        json.dump(dict(settings=s, config=cfg.to_dict(), status=end.status, step=end.step,
                       switch_step=phase["switch_step"], wall_time_s=wall), f, indent=1)
    print(f"{end.status} at step {end.step}; switch at {phase['switch_step']}; wall {wall:.0f} s")


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
    from stsim.core.encodings import make_encoding
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


def adaptive_steps(T, q, d, n, cap, max_steps=3_000_000):
    """Steps to 50% and 2% of L(0) of the reduced map (theory model, c = 1) with the
    state-dependent step ``η_t = min(1/S₂(t), cap)``: half the local stability bound of γ
    (``γ ← γ − η (S₂ γ − s₊)`` is stable for ``η < 2/S₂``; ``S₂ = |s|²`` is ``≈ 1/T`` on the
    plateau and ``1/q`` at the solution)."""
    from stsim.core.reduced import loss_grad_scalar
    a = b = g = 0.0
    L0 = d / (2 * q)
    hit = [None, None]
    for t in range(max_steps + 1):
        L, da, db, dg = loss_grad_scalar(a, b, g, T, q, d)
        for i, level in enumerate((0.5, TARGET)):
            if hit[i] is None and L <= level * L0:
                hit[i] = t
        if hit[1] is not None:
            break
        es = math.exp(min(a, 700.0))
        Z = q * es + (T - q)
        S2 = q * (es / Z) ** 2 + (T - q) / Z ** 2
        eta = min(1.0 / S2, cap)
        beta = (-db / n - da / n) / (n - 1)
        a -= eta * (da / n - beta)
        b += eta * beta
        g -= eta / d * dg
    return hit


def plateau(args, s):
    from stsim.core.reduced import reduced_map_steps
    from stsim.core.schedule import eta_max
    rows = []
    T, q, d = s["T"], s["q"], s["d"]
    for n in sorted({2 * T, s["d_e"]}):
        em = eta_max(q, d, n)
        for frac in (0.25, 0.5, 0.75, 0.9, 0.99):
            esc, tgt = reduced_map_steps(T, q, d, frac * em, n, max_steps=5_000_000)
            rows.append([n, "constant", frac * em, frac, esc, tgt])
            print(f"  n = d_e = {n:5d}: lr {frac * em:.3f} = {frac:.2f} η_max -> 50% of L(0) "
                  f"at step {esc}, 2% at step {tgt}", flush=True)
        xe = n / ((q - 1) * (q + d))        # half the transverse W_xe bound at the solution
        for cap in (em, 100.0, xe):
            esc, tgt = adaptive_steps(T, q, d, n, cap)
            rows.append([n, "min(1/S2, cap)", cap, cap / em, esc, tgt])
            print(f"  n = d_e = {n:5d}: lr_t = min(1/S2(t), {cap:.4g}) -> 50% of L(0) at step "
                  f"{esc}, 2% at step {tgt}", flush=True)
        for lr1 in (20.0, 50.0, 100.0, 200.0):
            sw, esc, tgt = two_phase_steps(T, q, d, n, lr1, s["lr2"])
            rows.append([n, f"{lr1:g} until {SWITCH:g} L(0), then {s['lr2']:g}", lr1,
                         lr1 / em, esc, tgt])
            print(f"  n = d_e = {n:5d}: lr {lr1:g} until {SWITCH:g} L(0) (step {sw}), then "
                  f"{s['lr2']:g} -> 50% of L(0) at step {esc}, 2% at step {tgt}", flush=True)
    write_csv(os.path.join(args.out, "plateau.csv"),
              ["n", "rule", "lr_or_cap", "over_eta_max", "steps_to_50pct", "steps_to_2pct"],
              rows)


def figure(args, s):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    keys, h = read_csv(os.path.join(args.out, "history.csv"))
    col = {k: i for i, k in enumerate(keys)}
    _, lg = read_csv(os.path.join(args.out, "length.csv"))
    L0 = s["d"] / (2 * s["q"])
    fig, ax = plt.subplots(1, 2, figsize=(11, 4.2))
    step = h[:, col["step"]]
    ax[0].semilogy(step, h[:, col["val"]] / L0, label=f"SGD, validation, T = {s['T']}")
    for t in s["T_test"]:
        ax[0].semilogy(step, h[:, col[f"val/T={t}"]] / L0, lw=0.8, label=f"T_test = {t}")
    red = []
    two_phase_steps(s["T"], s["q"], s["d"], s["d_e"], s["lr1"], s["lr2"],
                    max_steps=int(step[-1]), losses=red)
    ax[0].semilogy(np.arange(len(red)), np.array(red) / L0, "k--", lw=1,
                   label=f"reduced population map, lr {s['lr1']:g} -> {s['lr2']:g} at "
                         f"{SWITCH:g} L(0)")
    with open(os.path.join(args.out, "run.json")) as f:
        sw = json.load(f)["switch_step"]
    if sw is not None:
        ax[0].axvline(sw, color="gray", lw=0.6, ls="--")
    ax[0].axhline(TARGET, color="gray", lw=0.6, ls=":")
    ax[0].set(xlabel="step", ylabel="loss / L(0)", title=f"training: slots, T = {s['T']}, "
              f"d_e = {s['d_e']}, SGD lr {s['lr1']:g} then {s['lr2']:g}")
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
    ap.add_argument("what", choices=["train", "evaluate", "plateau", "figure", "all"])
    ap.add_argument("--out", default=os.path.join(REPO, "docs", "figures", "long"))
    ap.add_argument("--result", default=os.path.join(REPO, "..", "long_result.npz"),
                    help="where the trained W, V are saved / read (npz)")
    ap.add_argument("--checkpoint", default=None, help="checkpoint file (resumable)")
    ap.add_argument("--lr1", type=float, default=None, help="the step on the plateau")
    ap.add_argument("--lr2", type=float, default=None, help="the step after the switch")
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--T", type=int, default=None, help="another training length")
    ap.add_argument("--d-e", dest="d_e", type=int, default=None, help="another width")
    ap.add_argument("--T-test", dest="T_test", default=None, help="comma list of test lengths")
    ap.add_argument("--quick", action="store_true", help="small setting (smoke test)")
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    s = settings(args)
    print(f"settings: {s}", flush=True)
    for name, fn in (("train", train), ("evaluate", evaluate), ("plateau", plateau),
                     ("figure", figure)):
        if args.what in (name, "all"):
            fn(args, s)


if __name__ == "__main__":
    main()
