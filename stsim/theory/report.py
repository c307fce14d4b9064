"""The report of :func:`stsim.theory.checks.check_theorem` (:class:`TheoremReport`) and
the shape of one gating check (:func:`make_check`)."""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from stsim.util.verdict import judge

__all__ = ["TheoremReport", "make_check", "not_run", "EXIT"]


ON = ("reduced", "model")      # what a check measures: the two-scalar map, or W and V
SOURCES = ("P", "D")          # the paper's statement, or derived here

#: exit status of ``stsim theory`` per :attr:`TheoremReport.status`
EXIT = {"PASS": 0, "FAILED": 1, "HYPOTHESES FAIL": 3, "NOT VERIFIED": 4}


def make_check(name, value, tolerance, measured, op=">=", threshold=1.0, data=None, *,
               on="reduced", source="D", ran=True) -> dict:
    """One gating check, exact (:func:`stsim.util.verdict.judge` with ``se = 0``: the
    tolerance is the threshold, judged as written): the one check record, whose claim is
    ``name``, with the context ``{"name", "value", "tolerance", "passed", "ran", "on",
    "source"}`` (``value`` and ``tolerance`` are the printed texts; ``measured op threshold`` the
    check, a boolean outcome ``ok`` being ``float(ok) >= 1``; ``measured`` None if not
    finite; ``on``: ``"reduced"`` for a
    check of the two-scalar map, ``"model"`` for one of W and V themselves; ``source``:
    ``"P"`` for a statement of the paper, ``"D"`` for one derived here), plus ``"data"`` —
    the measured numbers, for ``--json`` readers — when given. A check that did not run
    (``ran=False``) never passes."""
    if on not in ON or source not in SOURCES:
        raise ValueError(f"on must be one of {ON} and source one of {SOURCES}, got "
                         f"{on!r}, {source!r}")
    v = judge(name, float(measured), op, threshold,
              reason="" if ran else "did not run", name=name, value=value,
              tolerance=tolerance, passed=False, ran=bool(ran), on=on, source=source)
    v["passed"] = v["verdict"] == "held"
    if not math.isfinite(v["measured"]):
        v["measured"] = None
    if data is not None:
        v["data"] = data
    return v


def not_run(name, reason, *, on, source="D") -> dict:
    """A check that did not run, and why (unmeasured: inconclusive): it makes the result
    "not verified"."""
    return make_check(name, f"did not run: {reason}", "must run", math.nan, on=on,
                      source=source, ran=False)


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
        """``True`` if every hypothesis of the theorem checked holds: Theorem 1's for a
        fixed encoding, Theorem 2's (those that can be decided) for a stochastic one."""
        conds = self.theorem2 if self.theorem2 else self.conditions
        return all(c["holds"] is not False for c in conds.values())

    @property
    def model_checked(self) -> bool:
        """``True`` if at least one check on W and V themselves ran."""
        return any(c["on"] == "model" and c["ran"] for c in self.checks)

    @property
    def status(self) -> str:
        """``"HYPOTHESES FAIL"`` (a hypothesis of the theorem fails: it claims nothing here,
        so a check that fails there, e.g. a diverging step, refutes nothing), else
        ``"FAILED"`` (a check that ran failed), else ``"NOT VERIFIED"`` (a check did not
        run, or none ran on the model), else ``"PASS"``."""
        if not self.conditions_hold:
            return "HYPOTHESES FAIL"
        if self.failed():
            return "FAILED"
        if not self.checks or self.not_run() or not self.model_checked:
            return "NOT VERIFIED"
        return "PASS"

    @property
    def passed(self) -> bool:
        """True only when the theorem is verified here: every hypothesis holds, every check
        ran (at least one on the model) and passed."""
        return self.status == "PASS"

    @property
    def exit_code(self) -> int:
        """The exit status of ``stsim theory`` (:data:`EXIT`)."""
        return EXIT[self.status]

    def failed(self) -> list:
        return [c["name"] for c in self.checks if c["ran"] and not c["passed"]]

    def not_run(self) -> list:
        return [c["name"] for c in self.checks if not c["ran"]]

    def to_dict(self) -> dict:
        """The report as a JSON-ready dict, with the top-level ``passed``,
        ``conditions_hold``, ``status`` and ``exit_code``."""
        return {"passed": self.passed, "conditions_hold": self.conditions_hold,
                "status": self.status, "exit_code": self.exit_code,
                "model_checked": self.model_checked, **asdict(self)}

    def format(self) -> str:
        """Human-readable report."""
        s = self.settings
        de = f"d_e={s['d_e']}" + (" (trained: first T slots)" if s.get("fixed") else "")
        out = [f"stsim theory: pe={s['pe']} T={s['T']} q={s['q']} d={s['d']} {de} "
               f"lr={s['lr']:g} eps={s['eps']:g} query={s['query']} steps run={s['steps']}",
               "Every line is labelled (P): the paper's statement, or (D): derived here "
               "(a derived law is not the paper's bound).",
               "Theorem 1 conditions (P):"]
        for name, c in self.conditions.items():
            out.append(f"  [{'ok  ' if c['holds'] else 'FAIL'}] (P) {name:34s} {c['detail']}")
        if not self.conditions_hold:
            out.append("  -> a hypothesis of the theorem fails: it makes no claim here; the "
                       "dynamics are run and checked anyway, and the result cannot be PASS")
        if self.theorem2:
            out.append("Theorem 2 (stochastic PE, slots law) conditions "
                       "(P = the paper, as far as the sources state it; D = derived here):")
            for name, c in self.theorem2.items():
                flag = {True: "ok  ", False: "FAIL", None: "n/a "}[c["holds"]]
                out.append(f"  [{flag}] ({c['source']}) {name:40s} {c['detail']}")
        out.append("Loss (P: the loss reaches eps; D: the derived rate law 1/L ~ 4 lr c^2 t/(n-1)):")
        out.append(f"  L(0) = {self.final['L0']:.6g}   L(final) = {self.final['loss']:.6g}   "
                   f"a = {self.final['a']:.6g}   gamma = {self.final['gamma']:.6g}")
        if s.get("estimated_s") is not None:
            out.append(f"  (estimated beforehand: {s['estimated_s']:.3g} s of CPU; "
                       f"{s['estimated_bytes'] / 2 ** 20:.3g} MiB at most)")
        if self.reached:
            out.append(f"  (P) reaches eps at t_eps = {self.t_eps} steps;  (D) derived law "
                       f"(n-1)/(4 lr c^2 eps) = "
                       f"{self.t_eps_predicted:.6g};  ratio = {self.t_eps / self.t_eps_predicted:.4f}")
        else:
            out.append(f"  (P) does NOT reach eps within {s['steps']} steps "
                       f"((D) derived law (n-1)/(4 lr c^2 eps) = {self.t_eps_predicted:.6g})")
        out.append(f"  (D) slope of 1/L(t) (2nd half) = {self.slope:.6g};  derived law "
                   f"4 lr c^2/(n-1) = "
                   f"{self.slope_predicted:.6g};  ratio = {self.slope / self.slope_predicted:.4f}")
        m = self.monotone
        out.append(f"  (D) every step: max L(t+1)-L(t) = {m['max_loss_increase']:.3g} "
                   f"({'non-increasing' if m['loss_non_increasing'] else 'INCREASES'}); "
                   f"min a(t+1)-a(t) = {m['min_a_increment']:.3g} "
                   f"({'non-decreasing' if m['a_non_decreasing'] else 'DECREASES'})")
        f = self.full_matrix
        if f.get("ran"):
            out.append(f"(D) Full-matrix population GD of W and V ({f['steps']} steps, "
                       f"{f['configurations']} enumerated configurations"
                       + (f"; at the smaller width d_e = {f['d_e']}: {f['why_smaller']}"
                          if f.get("why_smaller") else "") + "):")
            for k in ("inv/W_xx", "inv/W_xe", "inv/W_ex", "inv/V_e", "inv/W_ee_offspan",
                      "inv/V_x_offspan"):
                out.append(f"  max {k:18s} = {f[k]:.3g}")
            out.append(f"  max relative deviation from the reduced map: loss {f['rel_dev_loss']:.3g}, "
                       f"a {f['rel_dev_a']:.3g}, gamma {f['rel_dev_gamma']:.3g}")
            out.append(f"  loss non-increasing: {f['loss_non_increasing']};  "
                       f"a non-decreasing: {f['a_non_decreasing']}")
        else:
            out.append(f"(D) Full-matrix population GD: did not run ({f.get('reason')})")
        if self.ood:
            out.append("(D) Out-of-distribution length (final state; MC = mean ± s.e. of the "
                       "trained model on fresh samples):")
            for r in self.ood:
                extra = (f"  limit a->inf = {r['floor']:.5g} (from below)" if r.get("floor") is not None
                         else "")
                out.append(f"  T_test={r['T_test']:5d}  closed form = {r['closed_form']:.5g}   "
                           f"MC = {r['mc']:.5g} ± {r['mc_se']:.2g}{extra}")
        out.extend(_length_lines(self.ood))
        bg = self.block_gradients
        if bg.get("ran"):
            out.append(f"(D) Population gradient of every block at {len(bg['points'])} points of "
                       f"the trajectory (steps {bg['points']}; Monte-Carlo over X and the "
                       f"encoding, {bg['n_samples']} samples in {bg['n_batches']} batches; "
                       f"W_ee, V_x exact from the closed form):")
            out.append(f"  max |W_xx|, |W_ex| in any batch = {bg['max_W_xx_W_ex']:.3g};  "
                       f"max |z| of W_xe, V_e (off-set) = {bg['max_z_offset']:.3g};  "
                       f"max |z| of W_ee, V_x - exact = {bg['max_z_onset']:.3g};  "
                       f"live gradient / s.e. = {bg['live_over_se']:.3g}")
        elif bg.get("reason"):
            out.append(f"(D) Population gradient of every block: did not run ({bg['reason']})")
        out.append("Checks (each with its tolerance; P/D, and on: the reduced two-scalar map or "
                   "the model's W and V):")
        for c in self.checks:
            flag = "pass" if c["passed"] else ("FAIL" if c["ran"] else "NOT RUN")
            out.append(f"  [{flag}] ({c['source']}, {c['on']}) {c['name']}: {c['value']}   "
                       f"tolerance: {c['tolerance']}")
        out.append(self._result_line())
        for n in self.notes:
            out.append(f"note: {n}")
        return "\n".join(out)

    def _result_line(self) -> str:
        st = self.status
        if st == "PASS":
            return ("RESULT: PASS — every hypothesis holds, every check ran (on the model too) "
                    "and passed")
        if st == "FAILED":
            return "RESULT: FAILED: " + ", ".join(self.failed())
        if st == "HYPOTHESES FAIL":
            bad = [k for k, c in (self.theorem2 or self.conditions).items()
                   if c["holds"] is False]
            return ("RESULT: HYPOTHESES FAIL (the theorem claims nothing here; every check "
                    "that ran passed): " + ", ".join(bad))
        why = self.not_run() or ["no check ran on the model (W, V)"]
        return "RESULT: NOT VERIFIED (a check did not run): " + ", ".join(why)


def _length_lines(rows) -> list:
    """The length-generalisation statement per ``T_test`` (the rows of
    :func:`stsim.theory.ood.length_step`), as report lines."""
    out = []
    zero = [r for r in rows if "ratio_limit" in r]
    floor = [r for r in rows if "floor_inf" in r]
    if zero:
        out.append("(P) Length generalisation, stochastic PE, checked along the derived law "
                   "(D) (OOD/ID along the trajectory at t_eps "
                   "and t_eps/8; law R*(xi) of docs/theory.md §5, limit rho = R*(0)):")
        for r in zero:
            out.append(f"  T_test={r['T_test']:5d}  OOD/ID = {r['ratio'][0]:.5g} -> "
                       f"{r['ratio'][1]:.5g}  (law {r['ratio_law'][0]:.5g} -> "
                       f"{r['ratio_law'][1]:.5g}; rho = {r['ratio_limit']:.5g});  OOD "
                       f"{r['ood'][0]:.4g} -> {r['ood'][1]:.4g} (/{r['factor']:.4g}; law "
                       f"/{r['factor_law']:.4g}; -> 8 as eps -> 0)")
    if floor:
        out.append("(D) Length generalisation, fixed PE (OOD along the run to t_eps/8 against the "
                   "infimum F of the reduced family, docs/theory.md §5):")
        for r in floor:
            rel = ">=" if r["min_ood"] >= r["floor_inf"] * (1 - 1e-9) else "<"
            out.append(f"  T_test={r['T_test']:5d}  min OOD = {r['min_ood']:.5g} {rel} F = "
                       f"{r['floor_inf']:.5g};  at t_eps/8: OOD = {r['ood_eps8']:.5g}, ID = "
                       f"{r['id_eps8']:.3g};  limit a->inf = {r['floor']:.5g} (approached "
                       "from below)")
    return out
