"""Beyond the paper — (a) the length-generalisation experiment with ``stochastic/sphere``
encodings (i.i.d. uniform unit vectors, redrawn per sample) for several widths ``d_e``:
the loss has a floor that falls as ``d_e`` grows (docs/theory.md §8: with ``W_ee = cI`` the
selected tokens' logits differ by ``O(c √(q/d_e))``); (b) the theory model beside the
practical one on the same stochastic-slots setting, both trained with SGD (the runs of
Figs. 2 and 1; their learning rates differ, see the panel title).

The sphere runs use a smaller batch than the paper's 256 because a dense ``(B, T, d_e)``
encoding must be drawn at every step (cost ∝ ``B T d_e``).
"""
from __future__ import annotations

import numpy as np

from stsim.studies.figures.common import Job, save_png, seed_band
from stsim.studies.figures import fig1, fig2
from stsim.studies.figures.evaluate import EVALUATE, QUICK_EVALUATE, eval_sample
from stsim.studies.figures.ood import final_estimates, ood_jobs
from stsim.studies.figures.verdicts import Boot, boot_check

NAME = "beyond"
LINKS = {"practical": "fig1", "theory": "fig2"}   # settings taken from these figures

SPHERE_KEYS = ("T", "q", "d", "model", "query", "optimizer", "lr", "steps", "batch", "init",
               "T_test", "n_val", "eval_every", "q_test")

SETTINGS = {
    "quick": dict(T=20, q=3, d=5, model="theory", query="sum", optimizer="adam", lr=0.03,
                  steps=300, batch=64, init="zero", T_test=[40], q_test=[], n_val=128,
                  eval_every=None, d_e_list=[4, 16, 64], seeds=[0, 1],
                  evaluate=QUICK_EVALUATE,
                  practical=fig1.SETTINGS["quick"], theory=fig2.SETTINGS["quick"]),
    "full": dict(T=200, q=3, d=5, model="theory", query="sum", optimizer="adam", lr=0.01,
                 steps=1000, batch=64, init="zero", T_test=[300, 400], q_test=[], n_val=128,
                 eval_every=None, d_e_list=[16, 32, 64, 128], seeds=[0, 1, 2],
                 evaluate=EVALUATE,
                 practical=fig1.SETTINGS["full"], theory=fig2.SETTINGS["full"]),
}


def sphere_jobs(s):
    """The sphere-PE runs of panel (a): one ``stochastic/sphere`` run per width in
    ``s["d_e_list"]`` and seed in ``s["seeds"]`` (the other options: ``SPHERE_KEYS`` of ``s``),
    named ``beyond/sphere-de<d_e>-<optimizer>-s<seed>``."""
    return [Job(f"beyond/sphere-de{de}-{s['optimizer']}-s{seed}",
                dict({k: s[k] for k in SPHERE_KEYS}, pe="stochastic", sampler="sphere",
                     d_e=de, seed=seed), s.get("evaluate"))
            for de in s["d_e_list"] for seed in s["seeds"]]


def jobs(s):
    """All runs of the figure: :func:`sphere_jobs`, Fig. 1's runs at ``s["practical"]`` and
    the stochastic-PE OOD runs at ``s["theory"]`` (Fig. 2's settings, see ``LINKS``; the runs
    shared with those figures are trained once)."""
    return sphere_jobs(s) + fig1.jobs(s["practical"]) + ood_jobs(s["theory"], ("stochastic",))


def _final(runs, key):
    return final_estimates(runs, key)[0]


def _at(runs, key, step):
    """Values of ``history[key]`` at the last record ``<= step`` (one per run)."""
    return np.array([r.history[key][np.searchsorted(r.history["step"], step, "right") - 1]
                     for r in runs])


def _runs(s, results):
    """``(d_e list, {d_e: sphere runs}, practical runs, theory runs)``."""
    des = list(s["d_e_list"])
    sph = {de: [results[j.name] for j in sphere_jobs(s) if j.options["d_e"] == de]
           for de in des}
    prac = [results[j.name] for j in fig1.jobs(s["practical"])]
    theo = [results[j.name] for j in ood_jobs(s["theory"], ("stochastic",))]
    return des, sph, prac, theo


def _val_keys(s):
    keys = ["val"] + [f"val/T={t}" for t in s["T_test"]]
    labels = [f"T = {s['T']} (in-distribution)"] + [f"T_test = {t}" for t in s["T_test"]]
    return keys, labels


def _largest_shared_T(s):
    """The largest test length both models were evaluated at (None: in-distribution only)."""
    shared = set(s["theory"]["T_test"]) & set(s["practical"].get("T_test") or ())
    return max(shared) if shared else None


def draw(s, results, measured, out):
    """Draw ``beyond.png``: (a) final validation loss against ``d_e`` in-distribution and at
    each ``T_test`` (seed mean, min–max bars), (a') the sphere runs' in-distribution curves,
    (b) theory vs practical model in-distribution and at the largest ``T_test`` both were
    evaluated at."""
    from stsim.util.plotting import plt   # on drawing only
    des, sph, prac, theo = _runs(s, results)
    keys, labels = _val_keys(s)
    fig, ax = plt.subplots(1, 3, figsize=(14, 3.9))
    for key, lab in zip(keys, labels):
        v = np.array([_final(sph[de], key) for de in des])          # (n_de, seeds)
        ax[0].errorbar(des, v.mean(1), yerr=[v.mean(1) - v.min(1), v.max(1) - v.mean(1)],
                       marker="o", capsize=3, label=lab)
    ax[0].set_xscale("log", base=2)
    ax[0].set(yscale="log", xlabel="sphere PE width d_e",
              ylabel=f"final validation loss (step {s['steps']})")
    ax[0].set_title(f"(a) stochastic/sphere PE: loss floor vs d_e\n{s['optimizer']} "
                    f"lr={s['lr']}, batch {s['batch']}, T={s['T']}", fontsize=9)
    ax[0].legend(fontsize=7)
    cmap = plt.get_cmap("viridis")
    for i, de in enumerate(des):
        seed_band(ax[1], sph[de], "val", label=f"d_e = {de}",
                  color=cmap(i / max(1, len(des) - 1)))
    ax[1].set(yscale="log", xlabel="step", ylabel="in-distribution validation loss")
    ax[1].set_title("(a') sphere PE training curves", fontsize=9)
    ax[1].legend(fontsize=7)
    Tmax = _largest_shared_T(s)
    for runs, name, col in ((theo, "theory, query=sum", "C0"),
                            (prac, f"practical, query={s['practical']['query']}", "C1")):
        seed_band(ax[2], runs, "val", label=f"{name}: in-distribution", color=col)
        if Tmax is not None:
            seed_band(ax[2], runs, f"val/T={Tmax}", label=f"{name}: T_test={Tmax}",
                      color=col, ls="--")
    ax[2].set(yscale="log", xlabel="step", ylabel="validation loss")
    ax[2].set_title(f"(b) theory (sum, {s['theory']['optimizer']} lr={s['theory']['lr']}) vs "
                    f"practical (mean, {s['practical']['optimizer']} lr="
                    f"{s['practical']['lr']}), slots", fontsize=8)
    ax[2].legend(fontsize=7)
    save_png(fig, out, NAME, dpi=100)


def measure(s, results):
    """Measure and check the figure; returns ``(measured, checks)``.

    ``results``: ``{job name: Result}`` holding every run of :func:`jobs`. ``measured``:
    ``sphere_final_val`` (``{val key: {d_e: [per seed]}}``), ``sphere_wall_time_s``, and both
    models' losses (in-distribution, largest ``T_test``, shared ``q_test``) at their last
    common step (``theory_vs_practical``, ``theory_vs_practical_at_step``). Checks: the
    in-distribution loss falls from the smallest to the largest ``d_e`` and between every
    consecutive pair."""
    des, sph, prac, theo = _runs(s, results)
    keys, _ = _val_keys(s)
    table = {}
    for key in keys:
        v = np.array([_final(sph[de], key) for de in des])          # (n_de, seeds)
        table[key] = {str(de): row.tolist() for de, row in zip(des, v)}
    Tmax = _largest_shared_T(s)
    boot = Boot()
    smp = [eval_sample(boot, results, [j.name for j in sphere_jobs(s) if j.options["d_e"] == de],
                       "val") for de in des]
    common = int(min(theo[0].history["step"][-1], prac[0].history["step"][-1]))
    qts = [qt for qt in s["theory"]["q_test"] if qt in s["practical"]["q_test"]]
    measured = {"sphere_final_val": table,
                "sphere_wall_time_s": {str(de): [r.info.get("wall_time_s") for r in sph[de]]
                                       for de in des},
                "theory_vs_practical_at_step": common,
                "theory_vs_practical": {
                    k: {"theory": _at(theo, k, common).tolist(),
                        "practical": _at(prac, k, common).tolist()}
                    for k in ["val"] + ([f"val/T={Tmax}"] if Tmax is not None else [])
                    + [f"val/q={qt}" for qt in qts]}}
    checks = [
        boot_check(f"sphere floor falls with d_e: in-distribution loss at d_e={des[-1]} / at "
                   f"d_e={des[0]} (seed means)", lambda a, b: b.mean(-1) / a.mean(-1),
                   [smp[0], smp[-1]], "<", 1.0),
        boot_check("sphere: the in-distribution loss falls at every larger d_e: largest "
                   "ratio of consecutive seed means",
                   lambda *xs: np.maximum.reduce([b.mean(-1) / a.mean(-1)
                                                  for a, b in zip(xs[:-1], xs[1:])]),
                   smp, "<", 1.0),
    ]
    return measured, checks
