r"""Numerical checks of Theorems 1–2 (SPEC §5) on the population dynamics, and the
``stsim theory`` command (:mod:`stsim.cli.theory`).

:func:`check_theorem` takes ``(T, q, d, η, ε)`` and measures, on the exact reduced GD map
(:mod:`stsim.theory.reduced`, equal to full-matrix population GD — tested):

* Theorem 1's conditions ``2 <= q < T/4``, ``ε < dT/(100(T−q)q)``, ``η <= 1/(20 d²)``,
  ``x_query = 0``, ``W(0) = 0``, ``V(0) = 0`` — each reported as holding or failing; the
  run goes ahead either way. (The seeds do not state Theorem 2's conditions for the
  stochastic encoding, nor either theorem's iteration bound or constants: the report says
  so rather than invent them.)
* whether the loss reaches ε, the step ``t_ε``, and ``t_ε`` against ``(n−1)/(4ηε)`` (``n =
  T`` onehot, ``d_e`` slots; ``4c²`` in place of 4 for ``query="mean"``);
* the slope of ``1/L(t)`` fitted on the second half of the run against ``4η c²/(n−1)``;
* the loss is non-increasing and ``a`` non-decreasing at EVERY step;
* invariants over a full-matrix population GD run (``stsim.run(objective="population")``)
  of ``full_steps`` steps when enumeration is affordable: the blocks that stay 0, the
  distances from the spans, and the deviation from the reduced map;
* OOD at ``T_test``: closed forms (slots: ``L(a, γ)`` at ``T_test``; fixed onehot: the
  exact finite-(a, γ) loss and its floor) beside Monte-Carlo estimates of the trained
  model (the final reduced state embedded in full matrices, evaluated with
  :func:`stsim.forward_backward` on fresh seeded samples).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np

from stsim.core.encodings import make_encoding
from stsim.core.model import forward_backward
from stsim.theory.population import count_configurations
from stsim.theory.reduced import (ood_floor_onehot, ood_loss_onehot, query_coef, reduced_gd_scalar,
                      reduced_loss, step_divisor)
from stsim.core.task import sample_batch
from stsim.util.validate import check_int

__all__ = ["theorem1_conditions", "check_theorem", "TheoremReport", "embed_reduced"]

PES = ("onehot", "stochastic")


def theorem1_conditions(T, q, d, lr, eps) -> dict:
    """Theorem 1's hypotheses on the sizes and step (SPEC §5), each as
    ``{"holds": bool, "detail": str}``. ``x_query = 0``, ``W(0) = V(0) = 0`` hold by
    construction in :func:`check_theorem` and are listed too."""
    eps_max = d * T / (100.0 * (T - q) * q) if T > q else float("nan")
    lr_max = 1.0 / (20.0 * d * d)
    return {
        "2 <= q < T/4": {"holds": bool(2 <= q < T / 4),
                         "detail": f"q={q}, T/4={T / 4:g}"},
        "eps < dT/(100(T-q)q)": {"holds": bool(0 < eps < eps_max),
                                 "detail": f"eps={eps:g}, bound={eps_max:.6g}"},
        "lr <= 1/(20 d^2)": {"holds": bool(lr <= lr_max),
                             "detail": f"lr={lr:g}, bound={lr_max:.6g}"},
        "x_query = 0, W(0) = 0, V(0) = 0": {"holds": True, "detail": "by construction"},
    }


def embed_reduced(a, gamma, d, d_e, n):
    """Full ``(W, V)`` of the reduced state: ``W_ee = a (I_n − J_n/n)`` on the first n
    slots (n = T for onehot, d_e for slots), ``V_x = γ I``, all other blocks 0."""
    D = d + d_e
    W = np.zeros((D, D))
    W[d:d + n, d:d + n] = a * (np.eye(n) - 1.0 / n)
    V = np.zeros((d, D))
    V[:, :d] = gamma * np.eye(d)
    return W, V


@dataclass
class TheoremReport:
    """Everything :func:`check_theorem` measured (JSON-serialisable via :meth:`to_dict`)."""

    settings: dict
    conditions: dict
    reached: bool
    t_eps: int | None
    t_eps_predicted: float
    final: dict
    slope: float
    slope_predicted: float
    monotone: dict
    full_matrix: dict
    ood: list = field(default_factory=list)
    notes: list = field(default_factory=list)

    @property
    def conditions_hold(self) -> bool:
        """``True`` if every checked condition of the theorem holds."""
        return all(c["holds"] for c in self.conditions.values())

    def to_dict(self) -> dict:
        """The report as a JSON-ready dict."""
        return asdict(self)

    def format(self) -> str:
        """Human-readable report."""
        s = self.settings
        de = f"d_e={s['d_e']}" + (" (trained: first T slots)" if s["pe"] == "onehot" else "")
        out = [f"stsim theory: pe={s['pe']} T={s['T']} q={s['q']} d={s['d']} {de} "
               f"lr={s['lr']:g} eps={s['eps']:g} query={s['query']} steps run={s['steps']}",
               "Theorem 1 conditions:"]
        for name, c in self.conditions.items():
            out.append(f"  [{'ok  ' if c['holds'] else 'FAIL'}] {name:34s} {c['detail']}")
        if not self.conditions_hold:
            out.append("  -> some conditions fail: the theorem makes no claim here; "
                       "the dynamics are run anyway")
        out.append("Loss:")
        out.append(f"  L(0) = {self.final['L0']:.6g}   L(final) = {self.final['loss']:.6g}   "
                   f"a = {self.final['a']:.6g}   gamma = {self.final['gamma']:.6g}")
        if self.reached:
            out.append(f"  reaches eps at t_eps = {self.t_eps} steps;  (n-1)/(4 lr c^2 eps) = "
                       f"{self.t_eps_predicted:.6g};  ratio = {self.t_eps / self.t_eps_predicted:.4f}")
        else:
            out.append(f"  does NOT reach eps within {s['steps']} steps "
                       f"(prediction (n-1)/(4 lr c^2 eps) = {self.t_eps_predicted:.6g})")
        out.append(f"  slope of 1/L(t) (2nd half) = {self.slope:.6g};  4 lr c^2/(n-1) = "
                   f"{self.slope_predicted:.6g};  ratio = {self.slope / self.slope_predicted:.4f}")
        m = self.monotone
        out.append(f"  every step: max L(t+1)-L(t) = {m['max_loss_increase']:.3g} "
                   f"({'non-increasing' if m['loss_non_increasing'] else 'INCREASES'}); "
                   f"min a(t+1)-a(t) = {m['min_a_increment']:.3g} "
                   f"({'non-decreasing' if m['a_non_decreasing'] else 'DECREASES'})")
        f = self.full_matrix
        if f.get("ran"):
            out.append(f"Full-matrix population GD ({f['steps']} steps, {f['configurations']} "
                       f"enumerated configurations):")
            for k in ("inv/W_xx", "inv/W_xe", "inv/W_ex", "inv/V_e", "inv/W_ee_offspan",
                      "inv/V_x_offspan"):
                out.append(f"  max {k:18s} = {f[k]:.3g}")
            out.append(f"  max relative deviation from the reduced map: loss {f['rel_dev_loss']:.3g}, "
                       f"a {f['rel_dev_a']:.3g}, gamma {f['rel_dev_gamma']:.3g}")
            out.append(f"  loss non-increasing: {f['loss_non_increasing']};  "
                       f"a non-decreasing: {f['a_non_decreasing']}")
        else:
            out.append(f"Full-matrix population GD: skipped ({f.get('reason')})")
        if self.ood:
            out.append("Out-of-distribution length (final state; MC = mean ± s.e. of the "
                       "trained model on fresh samples):")
            for r in self.ood:
                extra = f"  floor(a->inf) = {r['floor']:.5g}" if r.get("floor") is not None else ""
                out.append(f"  T_test={r['T_test']:5d}  closed form = {r['closed_form']:.5g}   "
                           f"MC = {r['mc']:.5g} ± {r['mc_se']:.2g}{extra}")
        for n in self.notes:
            out.append(f"note: {n}")
        return "\n".join(out)


def _mc_ood(a, gamma, n, enc, T_test, q, d, n_mc, rng, query):
    """Monte-Carlo loss at length T_test of the trained model (the reduced state with
    structure size ``n`` embedded in width ``enc.d_e``), on encodings ``enc``: mean, s.e."""
    W, V = embed_reduced(a, gamma, d, enc.d_e, n)
    B = max(1, min(2000, n_mc // 10))
    vals = []
    for _ in range(max(2, n_mc // B)):
        b = sample_batch(rng, B, T_test, q, d)
        vals.append(forward_backward(W, V, b.X, b.y, enc.sample(rng, B, T_test), query=query,
                                     target=b.target, need_grad=False)[0])
    return float(np.mean(vals)), float(np.std(vals, ddof=1) / math.sqrt(len(vals)))


def check_theorem(T, q, d, lr, eps, *, pe="onehot", d_e=None, query="sum", max_steps=None,
                  full_steps=2000, T_test=(), n_mc=20000, seed=0, max_full_work=2e9):
    """Run the population dynamics from zero and measure the claims of Theorems 1–2.

    Parameters
    ----------
    T, q, d : int — sizes (``1 <= q < T``).
    lr : float — GD step η;  eps : float — target loss ε (> 0).
    pe : ``"onehot"`` | ``"stochastic"`` (slots);  d_e : slots width (default
        ``max(T, T_test)``; onehot ignores it in training).
    query : ``"sum"`` | ``"mean"``.
    max_steps : int — reduced steps to run (default ``ceil(2 t_pred) + 10``,
        ``t_pred = (n−1)/(4ηc²ε)``).
    full_steps : int — full-matrix population GD steps for the invariants (0: skip);
        skipped when the enumeration work ``C · T · q · steps`` exceeds ``max_full_work``.
    T_test : sequence of int — OOD lengths (``> T``).
    n_mc : Monte-Carlo samples per OOD estimate;  seed : seed of those samples.

    Returns
    -------
    TheoremReport
    """
    T = check_int("T", T, 2)
    q = check_int("q", q, 1, T - 1)
    d = check_int("d", d, 1)
    lr, eps = float(lr), float(eps)
    if not (math.isfinite(lr) and lr > 0):
        raise ValueError(f"lr must be a finite number > 0, got {lr}")
    if not (math.isfinite(eps) and eps > 0):
        raise ValueError(f"eps must be a finite number > 0, got {eps}")
    if pe not in PES:
        raise ValueError(f"pe must be one of {PES} (the encodings with an exact reduction), "
                         f"got {pe!r}")
    T_test = tuple(check_int("T_test", t, T + 1) for t in T_test)
    full_steps = check_int("full_steps", full_steps, 0)
    n_mc = check_int("n_mc", n_mc, 2)
    T_max = max((T,) + T_test)
    if pe == "stochastic":
        d_e = check_int("d_e", T_max if d_e is None else d_e, T_max)
    else:
        d_e = T_max
    # the encoding trained on (one-hot: its trained block d_e = T) and the one tested on;
    # everything below asks these objects, not the name
    enc = make_encoding(pe, T_max=T, d_e=T if pe == "onehot" else d_e)
    enc_test = make_encoding(pe, T_max=T_max, d_e=d_e)
    n = enc.reduced_n(T)
    nm1 = float(step_divisor(enc, T))
    c = float(query_coef(query, q))
    t_pred = nm1 / (4.0 * lr * c * c * eps)
    slope_pred = 4.0 * lr * c * c / nm1
    steps = check_int("max_steps", math.ceil(2 * t_pred) + 10 if max_steps is None
                      else max_steps, 1)
    stride = max(1, steps // 20000)
    tr = reduced_gd_scalar(T, q, d, lr, steps, pe=enc, query=query, record_every=stride)
    L = tr.loss[0]
    hit = np.nonzero(L <= eps)[0]
    t_eps = None
    if hit.size:
        j = int(hit[0])
        if j == 0:
            t_eps = 0
        else:   # refine inside the stride, from the last record above eps
            k0 = int(tr.step[j - 1])
            fine = reduced_gd_scalar(T, q, d, lr, int(tr.step[j]) - k0, pe=enc, query=query,
                                     a0=tr.a[0, j - 1], gamma0=tr.gamma[0, j - 1])
            t_eps = k0 + int(np.nonzero(fine.loss[0] <= eps)[0][0])
    half = tr.step.size // 2
    slope = float(np.polyfit(tr.step[half:].astype(float), 1.0 / L[half:], 1)[0]) \
        if tr.step.size >= 4 else float("nan")
    a_f, g_f = float(tr.a[0, -1]), float(tr.gamma[0, -1])
    monotone = {"max_loss_increase": float(tr.max_loss_increase[0]),
                "min_a_increment": float(tr.min_a_increment[0]),
                "loss_non_increasing": bool(tr.max_loss_increase[0] <= 0),
                "a_non_decreasing": bool(tr.min_a_increment[0] >= 0)}
    notes = ["the theorems' iteration bounds and constants are not in the project's sources; "
             "t_eps and the 1/L slope are compared with the asymptotic rate law of SPEC §4, "
             "1/L(t) ~ 4 lr c^2 t/(n-1), not with the paper's bound"]
    if pe == "stochastic":
        notes.append("Theorem 2 (stochastic PE): its exact conditions are not in the sources; "
                     "Theorem 1's conditions are shown instead")

    # ---- full-matrix population GD: invariants and agreement with the reduced map
    full = {"ran": False}
    n_fs = min(full_steps, steps)
    count = count_configurations(enc, T, q)
    work = float(count) * T * q * n_fs
    if n_fs == 0:
        full["reason"] = "full_steps = 0"
    elif count > 10 ** 6 or work > max_full_work:
        full["reason"] = (f"enumeration of {count:.3g} configurations x {n_fs} steps is too "
                          f"costly (work {work:.2g} > {max_full_work:.2g}); lower T or full_steps")
    else:
        from stsim.core.run import run
        res = run(T=T, q=q, pe=enc.name, d=d, d_e=enc.d_e, query=query, objective="population",
                  optimizer="gd", lr=lr, steps=n_fs, eval_every=1)
        h = res.history
        ref = reduced_gd_scalar(T, q, d, lr, n_fs, pe=enc, query=query)
        full = {"ran": True, "steps": n_fs, "configurations": int(count),
                "status": res.status,
                "loss_non_increasing": bool(np.all(np.diff(h["loss"]) <= 0)),
                "a_non_decreasing": bool(np.all(np.diff(h["a"]) >= 0))}
        for k in ("inv/W_xx", "inv/W_xe", "inv/W_ex", "inv/V_e", "inv/W_ee_offspan",
                  "inv/V_x_offspan"):
            full[k] = float(np.max(h[k]))
        for k, r in (("loss", ref.loss[0]), ("a", ref.a[0]), ("gamma", ref.gamma[0])):
            rel = np.abs(h[k][1:] - r[1:]) / np.maximum(np.abs(r[1:]), 1e-300)
            full[f"rel_dev_{k}"] = float(rel.max()) if rel.size else 0.0

    # ---- OOD length
    rng = np.random.default_rng(np.random.SeedSequence(seed))
    ood = []
    for Tt in T_test:
        mc, se = _mc_ood(a_f, g_f, n, enc_test, Tt, q, d, n_mc, rng, query)
        if pe == "onehot":
            row = {"T_test": Tt, "closed_form": float(ood_loss_onehot(a_f, g_f, T, Tt, q, d,
                                                                      query=query)),
                   "floor": ood_floor_onehot(T, Tt, q, d) if query == "sum" else None}
        else:
            row = {"T_test": Tt, "closed_form": float(reduced_loss(a_f, g_f, Tt, q, d,
                                                                   query=query)), "floor": None}
        row.update(mc=mc, mc_se=se)
        ood.append(row)
    if T_test and pe == "onehot" and query == "mean":
        notes.append("the a -> inf floor formula is stated for query='sum' only")

    settings = {"T": T, "q": q, "d": d, "d_e": d_e, "lr": lr, "eps": eps, "pe": pe,
                "query": query, "steps": steps, "n_minus_1": nm1, "seed": seed}
    return TheoremReport(settings=settings, conditions=theorem1_conditions(T, q, d, lr, eps),
                         reached=t_eps is not None, t_eps=t_eps, t_eps_predicted=t_pred,
                         final={"L0": float(L[0]), "loss": float(L[-1]), "a": a_f,
                                "gamma": g_f},
                         slope=slope, slope_predicted=slope_pred, monotone=monotone,
                         full_matrix=full, ood=ood, notes=notes)

