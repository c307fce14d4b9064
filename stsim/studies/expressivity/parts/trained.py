"""Part ``trained``: a trained ``W`` against the construction — ``stsim.run`` with
stochastic/sphere PE (theory model, sum query, zero init) at each ``d_e``; share of
``‖W‖²`` in the PE block, cosine with ``I``, the learned scale against the construction's
``λ``, and the losses of the construction ``λ W*`` on the same fresh samples.

One sweep point per ``d_e``: :func:`trained_point` (raw table ``raw/trained.csv``; the
loss-vs-λ curves and, for the first ``d_e``, the trained ``W`` as exact text); outputs
``trained.csv``, ``trained.png``, ``trained.json``."""
from __future__ import annotations

import math
import time

import numpy as np

from stsim.core.encodings import StochasticSphere
from stsim.core.model import forward_backward
from stsim.core.run import run
from stsim.core.targets import make_target
from stsim.core.task import sample_batch
from stsim.studies.expressivity import qsa
from stsim.studies.expressivity.common import (array_text, check_settings, rng_of, save_tight,
                                               subplots, text_array, write_part)

__all__ = ["NAME", "COLS", "check", "design", "trained_point", "describe", "analyse", "write",
           "structure_of", "construction_loss", "plot_trained"]

NAME = "trained"
COLS = ["d_e", "W_share_ee", "cos_Wee_I", "c_learned", "gamma_learned", "V_share_x",
        "offdiag_rms_over_c", "trained_loss", "projected_loss", "lam_match", "lam_opt",
        "construction_loss_opt"]
STRUCTURE = ("W_share_ee", "cos_Wee_I", "c", "offdiag_rms_over_c", "V_share_x", "gamma")
SCALARS = ("val_loss", "trained_loss", "projected_loss", "lam_opt", "loss_opt", "gamma_opt",
           "lam_match", "initial_loss", "wall_time_s")


def structure_of(W, V, d):
    """Structure of trained parameters: share of ``‖W‖_F²`` in the PE block ``W_ee``,
    cosine of ``W_ee`` with ``I``, learned scale ``c = tr W_ee / d_e``, the same for ``V``
    (``γ = tr V_x / d``, share of ``‖V‖²`` in ``V_x``)."""
    Wee, Vx = W[d:, d:], V[:, :d]
    d_e = Wee.shape[0]
    return {"W_share_ee": float((Wee ** 2).sum() / (W ** 2).sum()),
            "cos_Wee_I": float(np.trace(Wee) / (np.linalg.norm(Wee) * math.sqrt(d_e))),
            "c": float(np.trace(Wee) / d_e),
            "offdiag_rms_over_c": float(np.sqrt(((Wee - np.diag(np.diag(Wee))) ** 2).sum()
                                                / (d_e * (d_e - 1))) / (np.trace(Wee) / d_e)),
            "V_share_x": float((Vx ** 2).sum() / (V ** 2).sum()),
            "gamma": float(np.trace(Vx) / d)}


def construction_loss(lams, T, q, d, d_e, n, rng):
    """Loss of the construction ``W = λ W*``, ``V = γ V*`` on ``n`` fresh STS_q samples with
    stochastic/sphere PE (sum query), for each λ: with ``γ = 1`` and with the
    least-squares ``γ*(λ) = Σ<h,t>/Σ‖h‖²``. Returns (loss_gamma1, loss_gamma_opt, gamma_opt).
    """
    b = sample_batch(rng, n, T, q, d)
    P = StochasticSphere(d_e).sample(rng, n, T).P
    pq = np.take_along_axis(P, b.y[:, :, None], axis=1).sum(axis=1)
    g = np.einsum("bte,be->bt", P, pq)
    out1, outg, gam = [], [], []
    for lam in lams:
        a = lam * g
        s = np.exp(a - a.max(axis=1, keepdims=True))
        s /= s.sum(axis=1, keepdims=True)
        h = (s[:, None, :] @ b.X)[:, 0, :]
        t = b.target
        gs = float((h * t).sum() / (h * h).sum())
        out1.append(0.5 * float(((h - t) ** 2).sum()) / n)
        outg.append(0.5 * float(((gs * h - t) ** 2).sum()) / n)
        gam.append(gs)
    return np.array(out1), np.array(outg), np.array(gam)


def check(cfg):
    """``ValueError`` for a bad setting of this part."""
    check_settings(NAME, cfg, ints=("T", "q", "d", "d_es", "steps", "batch", "n_val"),
                   positive=("lr", "lams"))


def design(cfg, seed):
    """The sweep points (one per ``d_e``, in the order of ``d_es``)."""
    lams = array_text(cfg["lams"])
    return {NAME: [dict(d_e=int(d_e), T=int(cfg["T"]), q=int(cfg["q"]), d=int(cfg["d"]),
                        steps=int(cfg["steps"]), batch=int(cfg["batch"]), lr=float(cfg["lr"]),
                        n_val=int(cfg["n_val"]), lams=lams, keep_W=i == 0,
                        study_seed=int(seed))
                   for i, d_e in enumerate(cfg["d_es"])]}


def trained_point(d_e, T, q, d, steps, batch, lr, n_val, lams, keep_W, study_seed, seed=None):
    """Train with stochastic/sphere PE (theory model, x_query = 0, sum query, zero init;
    SGD at ``lr``, seed ``study_seed``) and compare the learned ``W`` with the
    construction ``λ W*``: the structure (:func:`structure_of`), the trained and the
    projected model's loss and the construction's at every λ of ``lams`` on the same
    ``n_val`` fresh samples (``curve_l1``: ``V = V*``; ``curve_lg``: ``V = γ*(λ) V*``,
    ``curve_gamma``: ``γ*(λ)``), ``lam_opt``, ``lam_match`` (the smallest λ whose
    construction is at least as good as the trained model); with ``keep_W`` the trained
    ``W`` (``W``, ``W_dim``); ``run_status`` (``"completed"`` or ``"diverged"``: then the
    structure and losses are not measured). The sweep's ``seed`` is not used."""
    grid = text_array(lams)
    t1 = time.perf_counter()
    res = run(T=T, q=q, pe="stochastic", sampler="sphere", d_e=d_e, d=d, model="theory",
              query="sum", optimizer="sgd", lr=lr, steps=steps, batch=batch, seed=study_seed,
              n_val=n_val, eval_every=max(1, steps // 20))
    # diverged: its numbers are nan, said by run_status
    with np.errstate(all=None if res.status == "completed" else "ignore"):
        st = structure_of(res.W, res.V, d)
    val = res.final("val")
    l1, lg, gam = construction_loss(grid, T, q, d, d_e, n_val, rng_of(study_seed, 20, T, d_e))
    # the trained model's loss on the same fresh samples as the construction
    r2 = rng_of(study_seed, 20, T, d_e)
    b = sample_batch(r2, n_val, T, q, d)
    pe = StochasticSphere(d_e).sample(r2, n_val, T)
    trained_loss = forward_backward(res.W, res.V, b.X, b.y, pe, need_grad=False)[0]
    # the trained model projected onto the construction: W = c W*, V = γ V*
    Wp, Vp = qsa.qsa_params(d, d_e, st["c"])
    proj_loss = forward_backward(Wp, st["gamma"] * Vp, b.X, b.y, pe, need_grad=False)[0]
    iopt = int(np.argmin(lg))
    below = np.flatnonzero(lg <= trained_loss)
    out = dict(st, val_loss=val, trained_loss=float(trained_loss),
               projected_loss=float(proj_loss), lam_opt=float(grid[iopt]),
               loss_opt=float(lg[iopt]), gamma_opt=float(gam[iopt]),
               lam_match=float(grid[below[0]]) if below.size else None,
               initial_loss=res.target.zero_loss(d, q),
               wall_time_s=time.perf_counter() - t1,
               curve_l1=array_text(l1), curve_lg=array_text(lg), curve_gamma=array_text(gam),
               run_status=res.status)
    if keep_W:
        out.update(W=array_text(res.W), W_dim=int(res.W.shape[0]))
    return out


def describe(point, result) -> str:
    """One progress line."""
    return (f"d_e={point['d_e']} c={result.get('c', math.nan):.3g} "
            f"share={result.get('W_share_ee', math.nan):.4f} "
            f"loss={result.get('trained_loss', math.nan):.4g}")


def analyse(cfg, seed, design_points, results) -> dict:
    """Per ``d_e`` (keys as text): the structure and the losses; the curves and the first
    ``W`` for the figure; the rows of ``trained.csv`` (JSON-ready)."""
    per, rows, W0 = {}, [], None
    for p, r in zip(design_points[NAME], results[NAME]):
        st = {k: r[k] for k in STRUCTURE}
        per[str(p["d_e"])] = dict(structure=st, **{k: r[k] for k in SCALARS})
        per[str(p["d_e"])]["curves"] = [text_array(r[k]).tolist()
                                       for k in ("curve_l1", "curve_lg", "curve_gamma")]
        if p["keep_W"]:
            W0 = text_array(r["W"]).reshape(r["W_dim"], r["W_dim"]).tolist()
        rows.append(dict(zip(COLS, [
            p["d_e"], st["W_share_ee"], st["cos_Wee_I"], st["c"], st["gamma"], st["V_share_x"],
            st["offdiag_rms_over_c"], r["trained_loss"], r["projected_loss"], r["lam_match"],
            r["lam_opt"], r["loss_opt"]])))
    return {"per": per, "rows": rows, "W0": W0}


def write(cfg, seed, out, A, wall_time_s=None) -> dict:
    """Write ``trained.csv``, ``trained.png``, ``trained.json``; return the summary."""
    summary = {k: {kk: vv for kk, vv in v.items() if kk != "curves"}
               for k, v in A["per"].items()}
    return write_part(out, NAME, cfg, summary, [(NAME, COLS, A["rows"])],
                      lambda path: plot_trained(A, cfg, path))


def plot_trained(A, cfg, path):
    """(a) the trained ``W`` at the first ``d_e``; then per ``d_e`` the construction's loss
    against λ beside the trained model's loss, its learned scale and ``λ_opt``."""
    T, q, d = cfg["T"], cfg["q"], cfg["d"]
    lams = np.asarray(cfg["lams"])
    per = {int(k): dict(v, curves=tuple(np.asarray(c) for c in v["curves"]))
           for k, v in A["per"].items()}
    n = len(cfg["d_es"])
    fig, ax = subplots(1, n + 1, figsize=(5.2 * (n + 1), 4.2))
    d_e0, W0 = cfg["d_es"][0], np.asarray(A["W0"])
    vm = float(np.abs(W0).max())
    im = ax[0].imshow(W0, cmap="RdBu_r", vmin=-vm, vmax=vm)
    ax[0].axhline(d - 0.5, color="k", lw=0.5)
    ax[0].axvline(d - 0.5, color="k", lw=0.5)
    fig.colorbar(im, ax=ax[0], fraction=0.046)
    st0 = per[d_e0]["structure"]
    ax[0].set_title(f"(a) trained W, d_e={d_e0} (first {d} rows/cols = token block)\n"
                    f"PE-block share {st0['W_share_ee']:.4f}, cos(W_ee, I) "
                    f"{st0['cos_Wee_I']:.4f}", fontsize=9)
    for i, d_e in enumerate(cfg["d_es"]):
        p = per[d_e]
        l1, lg, _ = p["curves"]
        a = ax[i + 1]
        a.plot(lams, l1, "-", color="C0", label="construction λW*, V*")
        a.plot(lams, lg, "-", color="C1", label="construction λW*, γ*(λ)V*")
        a.axhline(p["trained_loss"], color="C2", ls="--",
                  label=f"trained model: {p['trained_loss']:.3g}")
        a.axvline(p["structure"]["c"], color="C2", lw=0.8,
                  label=f"learned scale c = tr W_ee/d_e = {p['structure']['c']:.2f}")
        a.axvline(p["lam_opt"], color="C1", lw=0.8, ls=":",
                  label=f"λ_opt = {p['lam_opt']:.2f} (loss {p['loss_opt']:.3g})")
        a.set(xscale="log", yscale="log", xlabel="λ", ylabel="loss ½‖f − STS_q‖² (fresh samples)",
              title=f"({chr(98 + i)}) d_e={d_e}, T={T}, q={q}: {cfg['steps']} SGD steps, "
                    f"lr={cfg['lr']}",
              ylim=(None, 2 * make_target("mean").zero_loss(d, q)))
        a.legend(fontsize=7)
    save_tight(fig, path)
