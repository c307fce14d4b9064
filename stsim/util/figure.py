"""The figure of a run (:meth:`stsim.Result.plot`, ``stsim run``'s ``loss.png``), built
without pyplot: making it, showing it in a notebook or writing it never selects or
changes the process's matplotlib backend (a desktop script's later ``plt.show()`` works
as before)."""
from __future__ import annotations

import io
import os

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from stsim.util.io import atomic_write
from stsim.util.validate import Steps

__all__ = ["HistoryFigure", "history_figure", "attention_figure", "sweep_figure", "png_bytes",
           "save_figure"]


def png_bytes(fig, dpi=100) -> bytes:
    """``fig`` as PNG bytes (matplotlib's Agg renderer, whatever the backend)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    return buf.getvalue()


def save_figure(fig, path, dpi=120):
    """Write ``fig`` to ``path`` atomically (format from the extension, default PNG)."""
    ext = os.path.splitext(os.fspath(path))[1].lstrip(".") or "png"
    with atomic_write(path, "wb") as fh:
        fig.savefig(fh, format=ext, dpi=dpi, bbox_inches="tight")
    return path


class HistoryFigure(Figure):
    """A ``matplotlib.figure.Figure`` that a notebook shows as a PNG (``_repr_png_``) with
    no backend set up: IPython prints a plain ``Figure`` only once its inline backend is
    active. Where IPython has its own printer for figures, that one is used."""

    def _repr_png_(self):
        return png_bytes(self)


def _plottable(v, limit=1e100):
    """Values matplotlib can draw on a log axis: non-finite entries and magnitudes above
    ``limit`` (a diverging run reaches 1e299) become NaN, i.e. gaps."""
    v = np.asarray(v, dtype=float)
    with np.errstate(invalid="ignore"):
        return np.where(np.isfinite(v) & (np.abs(v) < limit), v, np.nan)


def title(res) -> str:
    """The figure's title in words: the problem, then what trained and how, and how it
    ended (``"STS_3: T = 50 tokens in d = 5, stochastic (slots) encodings of width 100"``;
    another target by its label, ``"variance of q = 3 tokens: ..."``
    over ``"softmax-attention transformer (theory model), SGD, a step per block (W 10,
    V 2.898), W_xx, W_xe held: completed"``)."""
    c = res.config
    if "T" not in c:
        return f"a run: {res.status}"
    pe = c.get("pe")
    pe = f"{pe} ({c.get('sampler')})" if pe == "stochastic" else pe
    target = c.get("target", "mean")      # the paper's task is STS_q, the others by name
    task = f"STS_{c.get('q')}" if target == "mean" else f"{target} of q = {c.get('q')} tokens"
    problem = f"{task}: T = {c.get('T')} tokens in d = {c.get('d')}"
    if res.transformer:
        problem += f", {pe} encodings of width {c.get('d_e')}"
        net = f"{c.get('attention', 'softmax')}-attention transformer ({c.get('model')} model"
        net += f", rank {c['rank']})" if c.get("rank") else ")"
    else:
        net = (f"fully-connected net (width {c.get('width')}, depth {c.get('depth')})"
               if c.get("arch") == "fcn" else f"{c.get('arch')}")
    lr = None if c.get("lr") is None else Steps(c["lr"], check=False)
    step = "" if lr is None else f"a step per block ({lr})" if lr.names else f"lr {lr}"
    held = f"{', '.join(c['freeze'])} held" if c.get("freeze") else ""
    how = ", ".join(x for x in (net, str(c.get("optimizer", "")).upper(), step, held) if x)
    return f"{problem}\n{how}: {res.status}"


def history_figure(res):
    """The figure of a run: three panels — training/validation loss (log), inverse
    training loss (linear growth = O(1/t) rate), and cosine similarity of W, V with
    W*, V*.

    Parameters
    ----------
    res : Result
        A run's result (anything with ``history``, ``config``, ``status`` and
        ``message``).

    Returns
    -------
    matplotlib.figure.Figure
        Not shown and not closed (:meth:`stsim.Result.plot` returns it;
        :func:`stsim.util.plotting.plot_history` saves and closes it).
    """
    h, cfg = res.history, res.config
    # a bare Figure (no pyplot state, no backend): a notebook shows the returned figure once
    fig = HistoryFigure(figsize=(14, 3.8))
    ax = fig.subplots(1, 3)
    if not len(h.get("step", ())):
        for a in ax:
            a.text(0.5, 0.5, f"no record\n{res.message}", ha="center", va="center",
                   transform=a.transAxes, fontsize=8, wrap=True)
        fig.suptitle(title(res), fontsize=10)
        return fig
    step = h["step"]
    for k, v in h.items():
        if k == "loss" or k.startswith("val"):
            ax[0].plot(step, _plottable(v), label=("train (window mean)" if k == "loss" else k),
                       lw=2 if k == "loss" else 1.2)
    ax[0].set(yscale="log", xlabel="step", ylabel="loss  ½‖f − target‖²", title="loss")
    ax[0].legend(fontsize=8)
    with np.errstate(divide="ignore", over="ignore"):
        ax[1].plot(step, _plottable(1.0 / _plottable(h["loss"])), color="C0")
    ax[1].set(xlabel="step", ylabel="1 / training loss", title="inverse loss (linear = O(1/t))")
    if "cos_W" in h:
        ax[2].plot(step, _plottable(h["cos_W"]), label="cos(W, W*)")
        if "cos_V" in h:                    # none where V* is not unique (NO_COS_V)
            ax[2].plot(step, _plottable(h["cos_V"]), label="cos(V, V*)")
        ax[2].set_ylim(-0.05, 1.05)
        ax[2].legend(fontsize=8)
    ax[2].set(xlabel="step", ylabel="cosine similarity", title="trained against the ground "
              "truth W*, V*")
    fig.suptitle(title(res), fontsize=10)
    fig.tight_layout()
    return fig


def attention_figure(s, y, title="attention weights of the trained model"):
    """The attention weights ``s`` (B, N) of B samples as an image, the selected positions
    ``y`` (B, q) of each sample marked (:meth:`stsim.Result.plot_attention`)."""
    fig = HistoryFigure(figsize=(9, 1.4 + 0.35 * len(s)))
    ax = fig.subplots()
    im = ax.imshow(s, aspect="auto", cmap="magma", interpolation="nearest")
    ax.plot(np.ravel(y), np.repeat(np.arange(len(s)), np.shape(y)[1]), "c+", ms=10)
    ax.set(xlabel="position (+: the selected ones, y)", ylabel="sample", title=title,
           yticks=range(len(s)))
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    fig.colorbar(im, ax=ax, label="weight")
    fig.tight_layout()
    return fig


def sweep_figure(rows, params, x, y):
    """``y`` against ``x`` over the ``ok`` rows of a sweep table: the mean over the seeds
    with their standard deviation as error bars, one line per value of the other
    parameters ``params`` (:meth:`stsim.sweeps.SweepResult.plot`)."""
    rows = [r for r in rows if r.get("status", "ok") == "ok" and r.get(y) is not None]
    if not rows:
        raise ValueError(f"no ok row of the table has a value of y={y!r}")
    others = [p for p in params if p != x]
    fig = HistoryFigure(figsize=(6, 4))
    ax = fig.subplots()
    keys = {tuple(r.get(p) for p in others) for r in rows}
    try:
        keys = sorted(keys)
    except TypeError:       # None beside numbers
        keys = sorted(keys, key=str)
    for key in keys:
        mine = [r for r in rows if tuple(r.get(p) for p in others) == key]
        xs = sorted({r[x] for r in mine})
        vals = [np.array([float(r[y]) for r in mine if r[x] == v]) for v in xs]
        ax.errorbar(xs, [v.mean() for v in vals], yerr=[v.std() for v in vals], capsize=3,
                    marker="o", label=", ".join(f"{p}={k}" for p, k in zip(others, key)) or None)
    ax.set(xlabel=x, ylabel=f"{y} (mean ± std over seeds)", title=f"{y} against {x}")
    if others:
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig
