"""Fig. 3 — heat maps of W and V at random initialisation and after training (practical
model, stochastic PE): only the PE block of W and the token block of V survive, each
proportional to the identity.

Chosen size: ``T = 20``, ``d_e = 32`` (``D = 37``), so that every entry of the heat map is
visible; the block-mass check is also reported for the ``T = 200`` runs of Fig. 1.
Note: with ``x_query = 0`` the columns ``W[:, :d]`` (query side, token part) get exactly
zero gradient, so they keep their initial values; the share of W outside its PE block
therefore depends on ``init_scale``.
"""
from __future__ import annotations

import numpy as np

from stsim.core.config import Config
from stsim.core.problem import make_problem
from stsim.core.seeds import Streams
from stsim.studies.figures.common import Job, save_png
from stsim.studies.figures.evaluate import EVALUATE, QUICK_EVALUATE, scalar_sample
from stsim.studies.figures.ood import block_mass
from stsim.studies.figures.verdicts import Boot, boot_check

NAME = "fig3"

SETTINGS = {
    "quick": dict(T=20, q=3, d=5, d_e=32, pe="stochastic", sampler="slots", model="practical",
                  query="mean", optimizer="sgd", lr=5.0, steps=400, batch=128, init="random",
                  init_scale=0.05, seeds=[0, 1], evaluate=QUICK_EVALUATE),
    "full": dict(T=20, q=3, d=5, d_e=32, pe="stochastic", sampler="slots", model="practical",
                 query="mean", optimizer="sgd", lr=5.0, steps=6000, batch=256, init="random",
                 init_scale=0.05, seeds=[0, 1, 2], evaluate=EVALUATE),
}
RUN_KEYS = ("T", "q", "d", "d_e", "pe", "sampler", "model", "query", "optimizer", "lr",
            "steps", "batch", "init", "init_scale")


def jobs(s):
    """One randomly initialised run (``s["init_scale"]``) per seed in ``s["seeds"]``, named
    ``fig3/<model>-<query>-T<T>-s<seed>``."""
    return [Job(f"fig3/{s['model']}-{s['query']}-T{s['T']}-s{seed}",
                dict({k: s[k] for k in RUN_KEYS}, seed=seed), s.get("evaluate"))
            for seed in s["seeds"]]


def initial_params(res):
    """Re-create the initial ``(W, V)`` of a run from its seed (the init stream of
    :class:`stsim.core.seeds.Streams`)."""
    cfg = Config.from_options(**{k: v for k, v in res.config.items()})
    p = make_problem(cfg).init_params(Streams(cfg.seed).init())
    return p["W"], p["V"]


def _heat(ax, M, d, title, fig):
    v = np.abs(M).max() or 1.0
    im = ax.imshow(M, cmap="RdBu_r", vmin=-v, vmax=v, interpolation="nearest")
    ax.axvline(d - 0.5, color="k", lw=0.6)
    if M.shape[0] > d:
        ax.axhline(d - 0.5, color="k", lw=0.6)
    ax.set_title(title, fontsize=9)
    ax.set_xticks([])
    ax.set_yticks([])
    fig.colorbar(im, ax=ax, fraction=0.046, pad=0.02)


def draw(s, results, measured, out):
    """Draw ``fig3.png``: W and V at initialisation (re-created by :func:`initial_params`)
    and after training, first seed."""
    from stsim.util.plotting import plt   # on drawing only
    r0 = results[jobs(s)[0].name]
    W0, V0 = initial_params(r0)
    d = s["d"]
    fig = plt.figure(figsize=(10, 6.6))
    # rows in proportion to the matrices' heights (D and d), V's with room for its title
    gs = fig.add_gridspec(2, 2, height_ratios=[W0.shape[0], V0.shape[0] + 4])
    for i, (M, start, end) in enumerate((("W", W0, r0.W), ("V", V0, r0.V))):
        _heat(fig.add_subplot(gs[i, 0]), start, d, f"{M} at initialisation", fig)
        _heat(fig.add_subplot(gs[i, 1]), end, d, f"{M} after {s['steps']} steps", fig)
    fig.suptitle(f"Fig. 3  practical model, query={s['query']}, stochastic/{s['sampler']} PE, "
                 f"T={s['T']} q={s['q']} d={d} d_e={s['d_e']}; lines split token (first {d}) "
                 f"and PE coordinates; seed {r0.config['seed']}", fontsize=9)
    save_png(fig, out, NAME, tight=False)


def measure(s, results):
    """Measure and check Fig. 3; returns ``(measured, checks)``.

    ``measured`` (per seed): :func:`.ood.block_mass` at initialisation and at the end, the
    diagonal's Frobenius share and mean of ``W_ee``, the mean diagonal of ``V_x``, final loss
    and cosines. Checks (worst seed; standard error over the seeds): the shares of W outside its PE block and of V outside
    its token block are ≤ 5 % after training and fall during training."""
    runs = [results[j.name] for j in jobs(s)]
    d = s["d"]
    m_init = [block_mass(*initial_params(r), d) for r in runs]
    m_end = [block_mass(r.W, r.V, d) for r in runs]
    Wee = [r.W[d:, d:] for r in runs]
    diag_share = [float(np.linalg.norm(np.diag(np.diag(M))) / np.linalg.norm(M)) for M in Wee]
    measured = {"block_mass_init": m_init, "block_mass_final": m_end,
                "W_ee_diagonal_share": diag_share,
                "W_ee_diag_mean": [float(np.diag(M).mean()) for M in Wee],
                "V_x_diag_mean": [float(np.diag(r.V[:, :d]).mean()) for r in runs],
                "final_loss": [r.final("loss") for r in runs],
                "cos_W": [r.final("cos_W") for r in runs],
                "cos_V": [r.final("cos_V") for r in runs]}
    ns, boot = [j.name for j in jobs(s)], Boot()
    worst = lambda x: x.max(-1)          # noqa: E731
    checks, falls = [], []
    for M, b, k in (("W", "PE", "W_outside_pe_block"), ("V", "token", "V_outside_token_block")):
        end = scalar_sample(boot, ns, [m[k] for m in m_end])
        fall = scalar_sample(boot, ns, [e[k] / i[k] for e, i in zip(m_end, m_init)])
        checks.append(boot_check(f"{M} mass outside {b} block after training (Frobenius "
                                 "share, worst seed)", worst, [end], "<=", 0.05))
        falls.append(boot_check(f"{M} outside-{b} share falls during training (worst seed, "
                                "final/initial)", worst, [fall], "<", 1.0))
    return measured, checks + falls
