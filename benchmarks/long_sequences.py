"""Long sequences (issue 24): train the stochastic model (slots) at T = 1000, q = 3 to
<= 2% of L(0), then evaluate it at T_test = 2000, 4000, 8000 against the reduced
dynamics' prediction at the trained (a, γ).

Setting: theory model, query "sum", d = 5, batch 256, zero init, online SGD, seed 0,
``d_e = 8000 = max T_test`` (the smallest width that encodes the longest test sequence; the
plateau of the slots dynamics grows like ``d_e``, see ``plateau``), constant step ``--lr``
(default 5.5 = 0.92 η_max: in the stable range, and the plateau is ∝ d_e/lr) for ``--steps``
steps (default: 1.4 × the step where the reduced map at that lr reaches 2% of L(0); a run
that has not reached 2% can be continued with more ``--steps`` from its checkpoint).

Subcommands (each writes into ``--out``, default ``docs/figures/long``):

* ``train``: ``stsim.run`` with a checkpoint (``--checkpoint``; an interrupted run resumes
  from it), saves the Result (with W: 512 MB at d_e = 8000, so to ``--result``, outside
  the repository) and ``history.csv``, ``run.json`` (config, wall time, status).
* ``evaluate``: reads ``(a, γ)`` off the trained ``W, V`` (``W_ee ≈ a (I − J/d_e)`` on the
  whole d_e × d_e block: ``a`` = mean diagonal − mean off-diagonal entry; ``V_x ≈ γ I``:
  ``γ`` = mean diagonal), measures the loss at each T_test on ``--n-test`` fresh points
  (per-point losses: mean and standard error) and writes ``length.csv`` with the
  prediction ``stsim.theory.reduced.reduced_loss(a, γ, T_test, q, d)`` beside it.
* ``plateau``: the reduced map's steps to 50% and 2% of L(0) at T = 1000 against the step
  size (η_max/4 … 0.99 η_max) for n = d_e = 2000 (the default width) and 8000:
  ``plateau.csv``.
* ``figure``: ``long.png`` from the three CSV files (training curve with the reduced
  map's at the same lr; loss against T_test with the prediction).
* ``all``: the four in order.

``--quick``: T = 50, d_e = 400, T_test = 100, 200, 400, a few thousand steps (a smoke
test, seconds; written to ``--out`` as well).

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

FULL = dict(T=1000, d_e=8000, T_test=(2000, 4000, 8000), lr=5.5, n_test=1024, eval_every=1000)
QUICK = dict(T=50, d_e=400, T_test=(100, 200, 400), lr=5.5, n_test=256, eval_every=20)
FIXED = dict(q=3, d=5, batch=256, pe="stochastic", sampler="slots", model="theory",
             query="sum", seed=0)
TARGET = 0.02


def settings(args):
    s = dict(QUICK if args.quick else FULL)
    if args.lr is not None:
        s["lr"] = args.lr
    s.update(FIXED)
    from stsim.core.schedule import reduced_map_steps
    esc, tgt = reduced_map_steps(s["T"], s["q"], s["d"], s["lr"], s["d_e"],
                                 max_steps=3_000_000)
    s["reduced_escape"], s["reduced_target"] = esc, tgt
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
    import stsim
    opts = {k: s[k] for k in ("T", "q", "d", "d_e", "batch", "pe", "sampler", "model",
                              "query", "seed", "lr", "steps")}
    opts.update(T_test=s["T_test"], n_val=256, eval_every=s["eval_every"], lr_decay="none")
    t0 = time.time()

    def progress(step, total, row):
        print(f"  step {step:7d}/{total}  val {row['val']:.5f}  "
              + "  ".join(f"T={t}: {row[f'val/T={t}']:.5f}" for t in s["T_test"])
              + f"  ({time.time() - t0:.0f} s)", flush=True)

    res = stsim.run(**opts, checkpoint=args.checkpoint,
                    checkpoint_every=max(1, s["steps"] // 40) if args.checkpoint else None,
                    progress=progress)
    res.save(args.result)
    keys = list(res.history)
    write_csv(os.path.join(args.out, "history.csv"), keys,
              np.column_stack([res.history[k] for k in keys]).tolist())
    info = {k: v for k, v in res.info.items() if isinstance(v, (int, float, str))}
    with open(os.path.join(args.out, "run.json"), "w") as f:
        json.dump(dict(settings=s, config=res.config, status=res.status, message=res.message,
                       info=info, wall_time_s_this_call=time.time() - t0), f, indent=1)
    print(f"{res.status}: {res.message}; loop wall time {res.info['wall_time_s']:.0f} s")


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
    from stsim.core.result import load
    from stsim.theory.reduced import reduced_loss
    res = load(args.result)
    W, V = res.W, res.V
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
    from stsim.core.schedule import eta_max, reduced_map_steps
    rows = []
    for n in sorted({2 * s["T"], s["d_e"]}):
        em = eta_max(s["q"], s["d"], n)
        for frac in (0.25, 0.5, 0.75, 0.9, 0.99):
            esc, tgt = reduced_map_steps(s["T"], s["q"], s["d"], frac * em, n,
                                         max_steps=5_000_000)
            rows.append([n, frac * em, frac, esc, tgt])
            print(f"  n = d_e = {n:5d}: lr {frac * em:.3f} = {frac:.2f} η_max -> 50% of L(0) "
                  f"at step {esc}, 2% at step {tgt}", flush=True)
    write_csv(os.path.join(args.out, "plateau.csv"),
              ["n", "lr", "lr_over_eta_max", "steps_to_50pct", "steps_to_2pct"], rows)


def figure(args, s):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from stsim.core.schedule import reduced_map_losses
    keys, h = read_csv(os.path.join(args.out, "history.csv"))
    col = {k: i for i, k in enumerate(keys)}
    _, lg = read_csv(os.path.join(args.out, "length.csv"))
    L0 = s["d"] / (2 * s["q"])
    fig, ax = plt.subplots(1, 2, figsize=(11, 4.2))
    step = h[:, col["step"]]
    ax[0].semilogy(step, h[:, col["val"]] / L0, label=f"SGD, validation, T = {s['T']}")
    for t in s["T_test"]:
        ax[0].semilogy(step, h[:, col[f"val/T={t}"]] / L0, lw=0.8, label=f"T_test = {t}")
    red = reduced_map_losses(s["T"], s["q"], s["d"], s["lr"], s["d_e"], int(step[-1]))
    ax[0].semilogy(np.arange(len(red)), np.array(red) / L0, "k--", lw=1,
                   label="reduced population map, same lr")
    ax[0].axhline(TARGET, color="gray", lw=0.6, ls=":")
    ax[0].set(xlabel="step", ylabel="loss / L(0)", title=f"training: slots, T = {s['T']}, "
              f"d_e = {s['d_e']}, lr = {s['lr']:g}")
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
                    help="where the trained Result (with W) is saved / read")
    ap.add_argument("--checkpoint", default=None, help="checkpoint file (resumable)")
    ap.add_argument("--lr", type=float, default=None)
    ap.add_argument("--steps", type=int, default=None)
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
