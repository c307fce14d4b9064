"""Figures of the population dynamics (``docs/theory.md``); command line:
``stsim theory --figures DIR [--full]``.

1. ``theory_loss.png`` — population loss (log) and inverse loss of the exact reduced GD map
   for several T, with the rate-law lines ``1/L = 4ηt/(T−1)`` (dashed).
2. ``theory_a_gamma.png`` — a(t) and γ(t), with the overshoot law ``γ ≈ 1 + (T−q)/(q eᵃ)``
   (dotted).
3. ``theory_invariants.png`` — full-matrix population GD (enumeration): running maxima of
   the blocks that must stay 0, of the distances from span{I − J/T} and span{I}, and of
   the relative deviation from the reduced map, on a log scale; exact zeros at 1e-20.

Each function prints (through ``log``) the measured rate and invariants; ``quick`` draws a
small version in seconds.
"""
from __future__ import annotations

import os

import numpy as np

from stsim.core.run import run
from stsim.theory.reduced import reduced_gd
from stsim.util.plotting import plt, savefig

__all__ = ["draw_theory_figures", "fig_loss_and_a_gamma", "fig_invariants"]

ZERO = 1e-20


def _save(fig, ax, title, path):
    for x in ax:
        x.ticklabel_format(style="sci", axis="x", scilimits=(0, 0))
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    return savefig(fig, path)


def fig_loss_and_a_gamma(out, quick=True, log=print):
    """Figure: the reduced dynamics' loss (with the O(1/t) line) and the scalars ``a``,
    ``γ`` against the step, for three T; written into the folder ``out`` (``quick``: fewer
    steps; ``log``: progress printer)."""
    Ts = np.array([20, 50, 200] if quick else [50, 200, 1000])
    q, d, lr = 3, 5, 0.5
    steps = 20_000 if quick else 400_000
    tr = reduced_gd(Ts, q, d, lr, steps, record_every=max(1, steps // 2000))
    t = tr.step
    fig, ax = plt.subplots(1, 2, figsize=(11, 4))
    for k, T in enumerate(Ts):
        ax[0].plot(t, tr.loss[k], color=f"C{k}", label=f"T={T}")
        ax[1].plot(t, 1.0 / tr.loss[k], color=f"C{k}", label=f"1/L, T={T}")
        ax[1].plot(t, 4 * lr * t / (T - 1), color=f"C{k}", ls="--", lw=1,
                   label=f"4ηt/(T−1), T={T}")
        half = t.size // 2
        slope = np.polyfit(t[half:], 1.0 / tr.loss[k, half:], 1)[0]
        log(f"T={T}: fitted slope of 1/L on the 2nd half / (4η/(T−1)) = "
              f"{slope / (4 * lr / (T - 1)):.4f}")
    ax[0].set(yscale="log", xlabel="GD step", ylabel="population loss L",
              title="loss (exact reduced map = full-matrix GD)")
    ax[0].legend(fontsize=8)
    ax[1].set(xlabel="GD step", ylabel="1 / L",
              title="inverse loss vs rate law 4ηt/(T−1) (dashed)")
    ax[1].legend(fontsize=7, ncol=2)
    p1 = _save(fig, ax, f"onehot, q={q}, d={d}, η={lr}", os.path.join(out, "theory_loss.png"))

    fig, ax = plt.subplots(1, 2, figsize=(11, 4))
    for k, T in enumerate(Ts):
        ax[0].plot(t, tr.a[k], color=f"C{k}", label=f"T={T}")
        ax[1].plot(t, tr.gamma[k], color=f"C{k}", label=f"γ, T={T}")
        pred = 1 + (T - q) / (q * np.exp(tr.a[k]))
        late = tr.a[k] > 4.0          # the law is an a → ∞ asymptote
        ax[1].plot(t[late], pred[late], color=f"C{k}", ls=":", lw=1.5,
                   label=f"1+(T−q)/(q eᵃ), T={T}")
    ax[0].set(xlabel="GD step", ylabel="a  (W_ee = a(I − J/T))",
              title="a(t): increasing, ~log t")
    ax[0].legend(fontsize=8)
    ax[1].axhline(1.0, color="k", lw=0.8)
    ax[1].set(xlabel="GD step", ylabel="γ  (V_x = γ I)",
              title="γ(t): overshoots 1, returns slowly")
    ax[1].legend(fontsize=7)
    ax[1].set_ylim(0, None)
    p2 = _save(fig, ax, f"onehot, q={q}, d={d}, η={lr}", os.path.join(out, "theory_a_gamma.png"))
    return [p1, p2]


def fig_invariants(out, quick=True, log=print):
    """Figure: a full-matrix population-GD run beside the reduced dynamics, with the
    invariant blocks staying at zero; written into the folder ``out``."""
    T, q, d, lr = 8, 2, 3, 0.5
    steps = 300 if quick else 3000
    res = run(T=T, q=q, pe="onehot", d=d, objective="population", optimizer="gd", lr=lr,
                    steps=steps, eval_every=1)
    h = res.history
    ref = reduced_gd(T, q, d, lr, steps)
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for k in ("inv/W_xx", "inv/W_xe", "inv/W_ex", "inv/V_e", "inv/W_ee_offspan",
              "inv/V_x_offspan"):
        v = np.maximum(np.maximum.accumulate(h[k]), ZERO)
        ax.plot(h["step"], v, label=k + (" (exactly 0)" if not np.any(h[k]) else ""))
    rel = np.abs(h["loss"] - ref.loss[0]) / ref.loss[0]
    ax.plot(h["step"], np.maximum(np.maximum.accumulate(rel), ZERO), color="k", lw=1,
            label="|L_full − L_reduced| / L")
    ax.set(yscale="log", ylim=(ZERO / 3, 1.0), xlabel="GD step",
           ylabel="running max of residual\n(exact zeros drawn at 1e-20)")
    ax.set_title(f"full-matrix population GD, onehot T={T} q={q} d={d} η={lr}", fontsize=9)
    ax.legend(fontsize=7, loc="center right")
    fig.tight_layout()
    log(f"invariants over {steps} full-matrix steps: max W_ee off-span "
          f"{h['inv/W_ee_offspan'].max():.2e}, max V_x off-span {h['inv/V_x_offspan'].max():.2e}, "
          f"max rel. loss deviation from reduced map {rel.max():.2e}")
    return [savefig(fig, os.path.join(out, "theory_invariants.png"))]


def draw_theory_figures(out, quick: bool = True, log=print) -> list:
    """Draw the three figures into ``out``; return their paths."""
    os.makedirs(out, exist_ok=True)
    return fig_loss_and_a_gamma(out, quick, log) + fig_invariants(out, quick, log)
