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

__all__ = ["theorem1_conditions", "theorem2_conditions", "check_theorem", "TheoremReport",
           "embed_reduced", "block_gradients"]

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
    checks: list = field(default_factory=list)
    theorem2: dict = field(default_factory=dict)
    block_gradients: dict = field(default_factory=dict)

    @property
    def conditions_hold(self) -> bool:
        """``True`` if every checked condition of the theorem holds."""
        return all(c["holds"] for c in self.conditions.values())

    @property
    def passed(self) -> bool:
        """True when every gating check passed (the theorems' conditions are reported, not
        gated: where they fail the theorem claims nothing, but the measured dynamics must
        still agree with the derivations)."""
        return all(c["passed"] for c in self.checks)

    def failed(self) -> list:
        return [c["name"] for c in self.checks if not c["passed"]]

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
        if self.theorem2:
            out.append("Theorem 2 (stochastic PE, slots law) conditions "
                       "(P = the paper, via SPEC/seeds; D = derived here):")
            for name, c in self.theorem2.items():
                flag = {True: "ok  ", False: "FAIL", None: "n/a "}[c["holds"]]
                out.append(f"  [{flag}] ({c['source']}) {name:40s} {c['detail']}")
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
        bg = self.block_gradients
        if bg.get("ran"):
            out.append(f"Population gradient of every block at {len(bg['points'])} points of "
                       f"the trajectory (steps {bg['points']}; Monte-Carlo over X and the "
                       f"encoding, {bg['n_samples']} samples in {bg['n_batches']} batches; "
                       f"W_ee, V_x exact from the closed form):")
            out.append(f"  max |W_xx|, |W_ex| in any batch = {bg['max_W_xx_W_ex']:.3g};  "
                       f"max |z| of W_xe, V_e (off-set) = {bg['max_z_offset']:.3g};  "
                       f"max |z| of W_ee, V_x - exact = {bg['max_z_onset']:.3g};  "
                       f"live gradient / s.e. = {bg['live_over_se']:.3g}")
        out.append("Checks (each with its tolerance):")
        for c in self.checks:
            out.append(f"  [{'pass' if c['passed'] else 'FAIL'}] {c['name']}: {c['value']}   "
                       f"tolerance: {c['tolerance']}")
        out.append(f"RESULT: {'all checks pass' if self.passed else 'FAILED: ' + ', '.join(self.failed())}")
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


def theorem2_conditions(T, q, d, d_e, lr, eps, T_test=()) -> dict:
    r"""Theorem 2 (joint training with the stochastic PE) for the slots law: the conditions
    that can be stated, each ``{"holds": bool | None, "source": "P" | "D", "detail"}``.

    P (the paper, as far as the project's sources give it): SPEC §5 says Theorem 2 is
    Theorem 1 "with stochastic PE" (so ``2 <= q < T/4``, ``ε < dT/(100(T−q)q)``,
    ``η <= 1/(20d²)``, zero init, ``x_query = 0``); the seeds give its title and the width
    ``Õ(d + q log T)`` of the paper's encoding, not its exact statement.
    D (derived here): ``d_e > T`` (with ``d_e = T`` every slot is used, in order: the fixed
    one-hot law); ``d_e >= T_test`` (every test slot was trained, so the OOD loss has no
    floor, docs/theory.md §5); ``η < 2q`` (stability of the reduced map,
    :mod:`stsim.core.schedule`); the rate law with divisor ``d_e − 1`` (docs/theory.md §3–4).
    """
    t1 = theorem1_conditions(T, q, d, lr, eps)
    out = {f"{k} (Theorem 1's, 'the same' per SPEC)": dict(v, source="P") for k, v in t1.items()}
    out["width O~(d + q log T)"] = {
        "holds": None, "source": "P",
        "detail": f"the paper's encoding width; the slots law needs d_e >= T (here d_e={d_e}), "
                  "so this is not the paper's width regime (not checked)"}
    out["d_e > T (law really stochastic)"] = {
        "holds": bool(d_e > T), "source": "D",
        "detail": f"d_e={d_e}, T={T}; each slot used w.p. T/d_e = {T / d_e:.3g}"
                  + ("" if d_e > T else ": d_e = T is the fixed one-hot law")}
    if T_test:
        out["d_e >= max T_test (no OOD floor)"] = {
            "holds": bool(d_e >= max(T_test)), "source": "D",
            "detail": f"d_e={d_e}, max T_test={max(T_test)}"}
    out["lr < 2q (reduced-map stability)"] = {
        "holds": bool(lr < 2 * q), "source": "D", "detail": f"lr={lr:g}, 2q={2 * q}"}
    out["rate 1/L ~ 4 lr c^2 t/(d_e - 1)"] = {
        "holds": None, "source": "D", "detail": "checked below (t_eps and slope checks)"}
    return out


def _check(name, value, tolerance, passed):
    return {"name": name, "value": value, "tolerance": tolerance, "passed": bool(passed)}


def _t_eps(T, q, d, lr, eps, steps, enc, query):
    """Reduced trajectory of ``steps`` steps and its first step with L <= eps (None)."""
    stride = max(1, steps // 20000)
    with np.errstate(over="ignore", invalid="ignore"):
        tr = reduced_gd_scalar(T, q, d, lr, steps, pe=enc, query=query, record_every=stride)
    L = tr.loss[0]
    hit = np.nonzero(L <= eps)[0]
    if not hit.size:
        return tr, None
    j = int(hit[0])
    if j == 0:
        return tr, 0
    k0 = int(tr.step[j - 1])      # refine inside the stride, from the last record above eps
    fine = reduced_gd_scalar(T, q, d, lr, int(tr.step[j]) - k0, pe=enc, query=query,
                             a0=tr.a[0, j - 1], gamma0=tr.gamma[0, j - 1])
    return tr, k0 + int(np.nonzero(fine.loss[0] <= eps)[0][0])


def _slope(tr):
    L = tr.loss[0]
    half = tr.step.size // 2
    x, y = tr.step[half:].astype(float), 1.0 / L[half:]
    ok = np.isfinite(y)
    if ok.sum() < 4:
        return float("nan")
    return float(np.polyfit(x[ok], y[ok], 1)[0])


def block_gradients(T, q, d, lr, enc, query, points, traj, *, n_samples=20000, n_batches=40,
                    alpha=1e-3, seed=0):
    r"""The population gradient of EVERY block at points of the trajectory.

    At each recorded step ``t`` in ``points`` (``traj``: reduced trajectory recorded every
    step, equal to full-matrix population GD), the state ``(W, V)`` = ``embed_reduced(a(t),
    γ(t))`` is evaluated with the minibatch model :func:`stsim.forward_backward` (an
    independent code path) on ``n_samples`` fresh samples of X, y and the encoding, in
    ``n_batches`` batches; the batch means give a mean and a standard error per entry.

    * ``W_xx``, ``W_ex``: exactly 0 for every sample (``x_query = 0``) — checked ``== 0``.
    * ``W_xe``, ``V_e`` (the off-set blocks; no closed form is used, their expectation is
      0 by an odd-moment argument, docs/theory.md §2): ``|mean| <= k s.e.`` per entry.
    * ``W_ee``, ``V_x``: exact closed form ``∂L/∂a/(n−1)·(I − J/n)`` and ``∂L/∂γ/d · I``
      (:func:`~stsim.theory.reduced.reduced_loss_grad`); ``|mean − exact| <= k s.e.`` per
      entry — the positive control (the same estimator finds the live gradient).

    ``k`` is the two-sided Student-t quantile (``n_batches − 1`` d.o.f.) at family-wise
    false-alarm ``alpha`` over all tested entries (Bonferroni).
    """
    from scipy.stats import t as student_t
    from stsim.theory.reduced import reduced_loss_grad
    rng = np.random.default_rng(np.random.SeedSequence([seed, 13]))
    d_e = enc.d_e
    n = enc.reduced_n(T)
    B = max(1, n_samples // n_batches)
    n_entries = len(points) * (d * d_e + d * d_e + d_e * d_e + d * d)
    k = float(student_t.isf(alpha / (2 * n_entries), n_batches - 1))
    max_zero, z_off, z_on, live = 0.0, 0.0, 0.0, 0.0
    for t in points:
        a, g = float(traj.a[0, t]), float(traj.gamma[0, t])
        W, V = embed_reduced(a, g, d, d_e, n)
        gW, gV = [], []
        for _ in range(n_batches):
            b = sample_batch(rng, B, T, q, d)
            _, dW, dV = forward_backward(W, V, b.X, b.y, enc.sample(rng, B, T), query=query,
                                         target=b.target)
            gW.append(dW)
            gV.append(dV)
        gW, gV = np.array(gW), np.array(gV)
        mW, mV = gW.mean(0), gV.mean(0)
        sW = gW.std(0, ddof=1) / math.sqrt(n_batches)
        sV = gV.std(0, ddof=1) / math.sqrt(n_batches)
        max_zero = max(max_zero, float(np.abs(gW[:, :d, :d]).max()),
                       float(np.abs(gW[:, d:, :d]).max()))      # W_xx, W_ex in every batch
        _, da, dg = reduced_loss_grad(a, g, T, q, d, query=query)
        exW = np.zeros((d_e, d_e))
        exW[:n, :n] = float(da) / (n - 1) * (np.eye(n) - 1.0 / n)
        exV = float(dg) / d * np.eye(d)

        def z(m, s, ref=0.0):
            diff = np.abs(m - ref)
            return float(np.max(np.where(s > 0, diff / np.where(s > 0, s, 1.0),
                                         np.where(diff > 0, np.inf, 0.0)), initial=0.0))
        z_off = max(z_off, z(mW[:d, d:], sW[:d, d:]), z(mV[:, d:], sV[:, d:]))
        z_on = max(z_on, z(mW[d:, d:], sW[d:, d:], exW), z(mV[:, :d], sV[:, :d], exV))
        se = max(float(sW[d:, d:].max()), float(sV[:, :d].max()), 1e-300)
        live = max(live, max(float(np.abs(exW).max()), float(np.abs(exV).max())) / se)
    return {"ran": True, "points": [int(p) for p in points], "n_samples": B * n_batches,
            "n_batches": n_batches, "k": k, "alpha": alpha, "entries": n_entries,
            "max_W_xx_W_ex": max_zero, "max_z_offset": z_off, "max_z_onset": z_on,
            "live_over_se": live}


def check_theorem(T, q, d, lr, eps, *, pe="onehot", d_e=None, query="sum", max_steps=None,
                  full_steps=2000, T_test=(), n_mc=20000, seed=0, max_full_work=2e9,
                  grad_points=4, grad_samples=20000):
    """Run the population dynamics from zero and check the claims of Theorems 1–2.

    Parameters
    ----------
    T, q, d : int — sizes (``1 <= q < T``).
    lr : float — GD step η;  eps : float — target loss ε (> 0).
    pe : ``"onehot"`` | ``"stochastic"`` (slots);  d_e : slots width (default
        ``max(T + ceil(T/3), T_test)``, so that the law is really stochastic and small enough
        to enumerate; onehot ignores it in training).
    query : ``"sum"`` | ``"mean"``.
    max_steps : int — reduced steps to run (default ``ceil(2 t_pred) + 10``,
        ``t_pred = (n−1)/(4ηc²ε)``).
    full_steps : int — full-matrix population GD steps for the invariants (0: skip);
        skipped when the enumeration work ``C · T · q · steps`` exceeds ``max_full_work``.
    T_test : sequence of int — OOD lengths (``> T``).
    n_mc : Monte-Carlo samples per OOD estimate;  seed : seed of those samples.
    grad_points, grad_samples : points of the trajectory and Monte-Carlo samples per point
        for the gradient of every block (:func:`block_gradients`; 0 points: skip).

    Returns
    -------
    TheoremReport — ``checks`` lists every gating check with its tolerance; ``passed``.
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
    grad_points = check_int("grad_points", grad_points, 0)
    n_mc = check_int("n_mc", n_mc, 2)
    T_max = max((T,) + T_test)
    if pe == "stochastic":
        d_e = check_int("d_e", max(T + math.ceil(T / 3), T_max) if d_e is None else d_e, T_max)
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
    tr, t_eps = _t_eps(T, q, d, lr, eps, steps, enc, query)
    L = tr.loss[0]
    slope = _slope(tr)
    a_f, g_f = float(tr.a[0, -1]), float(tr.gamma[0, -1])
    L0 = float(L[0])
    monotone = {"max_loss_increase": float(tr.max_loss_increase[0]),
                "min_a_increment": float(tr.min_a_increment[0]),
                "loss_non_increasing": bool(tr.max_loss_increase[0] <= 1e-14 * L0),
                "a_non_decreasing": bool(tr.min_a_increment[0] >= 0)}
    if not math.isfinite(monotone["max_loss_increase"]) or not np.all(np.isfinite(L)):
        monotone["loss_non_increasing"] = False
    notes = ["the theorems' iteration bounds and constants are not in the project's sources; "
             "t_eps and the 1/L slope are compared with the asymptotic rate law of SPEC §4, "
             "1/L(t) ~ 4 lr c^2 t/(n-1), not with the paper's bound"]
    checks = []
    checks.append(_check("loss reaches eps", f"t_eps = {t_eps}" if t_eps is not None else
                         f"not within {steps} steps (L = {L[-1]:.4g})",
                         f"within max_steps = {steps}", t_eps is not None))
    checks.append(_check(
        "loss non-increasing at every step",
        f"max L(t+1)-L(t) = {monotone['max_loss_increase']:.3g}",
        "<= 1e-14 L(0) (rounding)", monotone["loss_non_increasing"]))
    checks.append(_check(
        "a non-decreasing at every step", f"min a(t+1)-a(t) = {monotone['min_a_increment']:.3g}",
        ">= 0", monotone["a_non_decreasing"] and math.isfinite(monotone["min_a_increment"])))

    # ---- the rate law, checked where it is claimed: asymptotically (eps -> 0)
    ratio = slope_ratio = ratio_small = slope_small = None
    if t_eps is not None:
        ratio = t_eps / t_pred
        eps_s = eps / 8.0
        t_pred_s = nm1 / (4.0 * lr * c * c * eps_s)
        tr_s, t_eps_s = _t_eps(T, q, d, lr, eps_s, math.ceil(2 * t_pred_s) + 10, enc, query)
        ratio_small = None if t_eps_s is None else t_eps_s / t_pred_s
        slope_ratio = slope / slope_pred
        slope_small = _slope(tr_s) / slope_pred
        tol = max(abs(ratio - 1) / 4, 0.02)
        checks.append(_check(
            "rate law: t_eps / ((n-1)/(4 lr c^2 eps)) -> 1",
            f"{ratio:.4f} at eps, {ratio_small if ratio_small is None else round(ratio_small, 4)}"
            f" at eps/8", f"|ratio(eps/8) - 1| <= max(|ratio(eps) - 1|/4, 0.02) = {tol:.3g} "
            "(the excess is an additive plateau transient, O(eps): /8 expected, /4 required)",
            ratio_small is not None and abs(ratio_small - 1) <= tol))
        stol = max(abs(slope_ratio - 1) / 2, 0.01)
        checks.append(_check(
            "rate law: slope of 1/L (2nd half) / (4 lr c^2/(n-1)) -> 1",
            f"{slope_ratio:.4f} to 2 t_pred(eps), {slope_small:.4f} to 2 t_pred(eps/8)",
            f"|ratio(eps/8) - 1| <= max(|ratio(eps) - 1|/2, 0.01) = {stol:.3g} (the fit window "
            "moves 8x later; the correction decays)", abs(slope_small - 1) <= stol))

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
        m = min(len(h["loss"]), ref.loss.shape[1])
        full = {"ran": True, "steps": n_fs, "configurations": int(count),
                "status": res.status,
                "loss_non_increasing": bool(np.all(np.diff(h["loss"]) <= 0)),
                "a_non_decreasing": bool(np.all(np.diff(h["a"]) >= 0))}
        for k in ("inv/W_xx", "inv/W_xe", "inv/W_ex", "inv/V_e", "inv/W_ee_offspan",
                  "inv/V_x_offspan"):
            full[k] = float(np.max(h[k]))
        for k, r in (("loss", ref.loss[0]), ("a", ref.a[0]), ("gamma", ref.gamma[0])):
            rel = np.abs(h[k][1:m] - r[1:m]) / np.maximum(np.abs(r[1:m]), 1e-300)
            full[f"rel_dev_{k}"] = float(rel.max()) if rel.size else 0.0
        dev = max(full["rel_dev_loss"], full["rel_dev_a"], full["rel_dev_gamma"])
        checks.append(_check("full-matrix population GD completed", res.status, "completed",
                             res.status == "completed"))
        checks.append(_check("full-matrix GD = reduced map",
                             f"max relative deviation {dev:.3g}", "<= 1e-9 (rounding)",
                             res.status == "completed" and dev <= 1e-9))
        off = max(full["inv/W_ee_offspan"], full["inv/V_x_offspan"])
        checks.append(_check("W_ee = a(I - J/n), V_x = gamma I along the run",
                             f"max off-span distance {off:.3g}", "<= 1e-10 (rounding)",
                             off <= 1e-10))
    # ---- gradient of every block at points along the trajectory
    bg = {"ran": False}
    if grad_points > 0 and steps >= 1:
        # geometric from step 1 to t_eps: the start, the plateau, the escape, the descent
        horizon = min(steps, t_eps or steps)
        pts = sorted({max(1, round(horizon ** (i / max(1, grad_points - 1))))
                      for i in range(grad_points)})
        traj = reduced_gd_scalar(T, q, d, lr, max(pts), pe=enc, query=query)
        if np.all(np.isfinite(traj.loss)):
            bg = block_gradients(T, q, d, lr, enc, query, pts, traj, n_samples=grad_samples,
                                 seed=seed)
            checks.append(_check("gradient of W_xx, W_ex (every batch)",
                                 f"max |entry| {bg['max_W_xx_W_ex']:.3g}", "== 0 (x_query = 0)",
                                 bg["max_W_xx_W_ex"] == 0.0))
            checks.append(_check(
                "population gradient of W_xe, V_e (off-set blocks) = 0",
                f"max |mean|/s.e. {bg['max_z_offset']:.3g} over {bg['entries']} entries",
                f"<= k = {bg['k']:.3g} s.e. (t, {bg['n_batches'] - 1} d.o.f., Bonferroni, "
                f"family-wise {bg['alpha']:g})", bg["max_z_offset"] <= bg["k"]))
            checks.append(_check(
                "population gradient of W_ee, V_x = closed form",
                f"max |mean - exact|/s.e. {bg['max_z_onset']:.3g} (live gradient "
                f"{bg['live_over_se']:.3g} s.e.)", f"<= k = {bg['k']:.3g} s.e.",
                bg["max_z_onset"] <= bg["k"]))
            checks.append(_check(
                "Monte-Carlo power: the live gradient is resolved",
                f"max |exact W_ee, V_x gradient|/s.e. = {bg['live_over_se']:.3g}",
                f">= 2k = {2 * bg['k']:.3g} (an off-set gradient of the live size would be "
                "detected)", bg["live_over_se"] >= 2 * bg["k"]))
        else:
            bg["reason"] = "the trajectory is not finite"

    # ---- OOD length
    rng = np.random.default_rng(np.random.SeedSequence(seed))
    ood = []
    finite = math.isfinite(a_f) and math.isfinite(g_f)
    for Tt in (T_test if finite else ()):
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
        checks.append(_check(f"OOD T_test={Tt}: closed form = Monte-Carlo",
                             f"|{row['closed_form']:.4g} - {mc:.4g}| = "
                             f"{abs(row['closed_form'] - mc) / max(se, 1e-300):.2f} s.e.",
                             "<= 4 s.e.", abs(row["closed_form"] - mc) <= 4 * se))
    if T_test and pe == "onehot" and query == "mean":
        notes.append("the a -> inf floor formula is stated for query='sum' only")
    th2 = {}
    if pe == "stochastic":
        th2 = theorem2_conditions(T, q, d, d_e, lr, eps, T_test)
        notes.append("Theorem 2 (stochastic PE): the sources give its title and SPEC's 'the same "
                     "with stochastic PE'; the conditions marked D are derived here")
        if d_e <= T:
            notes.append(f"d_e = T = {T}: the slots law uses every slot in order — this is the "
                         "fixed one-hot law, nothing specific to the stochastic PE is checked")

    settings = {"T": T, "q": q, "d": d, "d_e": d_e, "lr": lr, "eps": eps, "pe": pe,
                "query": query, "steps": steps, "n_minus_1": nm1, "seed": seed}
    return TheoremReport(settings=settings, conditions=theorem1_conditions(T, q, d, lr, eps),
                         reached=t_eps is not None, t_eps=t_eps, t_eps_predicted=t_pred,
                         final={"L0": L0, "loss": float(L[-1]), "a": a_f, "gamma": g_f,
                                "t_eps_ratio": ratio, "t_eps_ratio_eps_over_8": ratio_small,
                                "slope_ratio": slope_ratio,
                                "slope_ratio_eps_over_8": slope_small},
                         slope=slope, slope_predicted=slope_pred, monotone=monotone,
                         full_matrix=full, ood=ood, notes=notes, checks=checks, theorem2=th2,
                         block_gradients=bg)
