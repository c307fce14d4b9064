"""The gate of ``stsim theory``: exit 0 only when every hypothesis of the theorem holds and
every check ran (at least one on the model's W and V) and passed."""
import json
import math

import numpy as np
import pytest

import stsim.core.encodings as enc_mod
from stsim.core.families import make_encoding
from stsim.cli import main as cli_main
from stsim.theory.checks import check_theorem, theorem_defaults
from stsim.theory.conditions import theorem1_conditions, theorem2_conditions
from stsim.theory.report import EXIT, make_check, not_run

FAST = ["--full_steps", "50", "--grad_points", "2", "--grad_samples", "4000", "--json"]


def _json_run(argv, capsys):
    rc = cli_main(["theory"] + argv)
    return rc, json.loads(capsys.readouterr().out)


def test_lr_just_above_the_bound_does_not_exit_0(capsys):
    """lr = 0.0056 > 1/(20 d^2) = 0.005556 at d = 3: the hypothesis fails, its own status."""
    rc, rep = _json_run(["--lr", "0.0056", "--json"], capsys)
    assert rc == EXIT["HYPOTHESES FAIL"] == 3
    assert rep["passed"] is False and rep["conditions_hold"] is False
    assert not rep["conditions"]["lr <= 1/(20 d^2)"]["holds"]
    assert all(c["passed"] for c in rep["checks"] if c["ran"])    # the dynamics agree anyway


@pytest.mark.parametrize("argv, failing", [
    (["--q", "3"], "2 <= q < T/4"), (["--T", "8", "--q", "2"], "2 <= q < T/4"),
    (["--eps", "0.05"], "eps < dT/(100(T-q)q)")])
def test_every_failed_hypothesis_exits_3(argv, failing, capsys):
    rc, rep = _json_run(argv + FAST, capsys)
    assert rc == 3 and not rep["passed"] and not rep["conditions_hold"], rep["status"]
    assert not rep["conditions"][failing]["holds"]


def test_q_1_fails_its_hypothesis():
    assert not theorem1_conditions(12, 1, 3, 1 / 180, 0.01)["2 <= q < T/4"]["holds"]


def test_skipping_the_model_checks_is_not_verified(capsys, shared_reduced_map):
    rc, rep = _json_run(["--full_steps", "0", "--grad_points", "0", "--json"], capsys)
    assert rc == EXIT["NOT VERIFIED"] == 4
    assert rep["passed"] is False and rep["conditions_hold"] is True
    assert rep["status"] == "NOT VERIFIED" and rep["model_checked"] is False
    skipped = [c for c in rep["checks"] if not c["ran"]]
    assert {c["on"] for c in skipped} == {"model"} and len(skipped) == 2
    assert not any(c["passed"] for c in skipped)


def test_json_carries_the_flags_and_each_check_what_it_is_on(capsys, shared_reduced_map):
    rc, rep = _json_run(FAST, capsys)
    assert rc == 0 and rep["passed"] is True and rep["conditions_hold"] is True
    assert rep["status"] == "PASS" and rep["exit_code"] == 0
    for c in rep["checks"]:
        assert c["on"] in ("reduced", "model") and c["source"] in ("P", "D") and c["ran"]
    assert {c["on"] for c in rep["checks"]} == {"reduced", "model"}
    byn = {c["name"]: c for c in rep["checks"]}
    assert byn["loss reaches eps"]["source"] == "P"
    assert byn["full-matrix GD = reduced map"]["on"] == "model"


def test_text_labels_every_claim_and_the_result(capsys, shared_reduced_map):
    rc = cli_main(["theory"] + FAST[:-1])
    out = capsys.readouterr().out
    assert rc == 0 and "RESULT: PASS" in out
    checks = [ln for ln in out.splitlines() if ln.startswith("  [pass]")]
    assert checks and all("(P, " in ln or "(D, " in ln for ln in checks)
    assert "derived rate law" in out and "derived law (n-1)/(4 lr c^2 eps)" in out


def test_a_failed_hypothesis_wins_over_a_failed_check(shared_reduced_map):
    """Where a hypothesis fails the theorem claims nothing: a failing check there (e.g. a
    diverging step) does not make it "FAILED"; under the hypotheses a failed check wins."""
    rep = check_theorem(12, 2, 3, 1 / 180, 0.009, full_steps=0, grad_points=0)
    assert rep.status == "NOT VERIFIED"
    rep.checks.append(make_check("seeded", "x", "y", False))
    assert rep.status == "FAILED" and rep.exit_code == 1
    rep.conditions["lr <= 1/(20 d^2)"]["holds"] = False
    assert rep.status == "HYPOTHESES FAIL" and rep.exit_code == 3
    rep.checks.pop()
    assert rep.status == "HYPOTHESES FAIL" and rep.exit_code == 3
    # every check ran, but none on the model: not verified
    rep.conditions["lr <= 1/(20 d^2)"]["holds"] = True
    rep.checks = [c for c in rep.checks if c["ran"]]
    assert rep.checks and not rep.model_checked and rep.status == "NOT VERIFIED"


def test_a_check_that_did_not_run_never_passes():
    c = not_run("x", "because", on="model")
    assert c["passed"] is False and c["ran"] is False
    assert make_check("y", "v", "t", True, ran=False)["passed"] is False
    with pytest.raises(ValueError, match="on must be one of"):
        make_check("z", "v", "t", True, on="matrix")


def test_theorem2_width_condition_at_equality():
    """d_e >= max T_test: every test slot was trained; d_e = max T_test holds."""
    key = "d_e >= max T_test (no OOD floor)"
    assert theorem2_conditions(9, 2, 3, 24, 1 / 180, 0.009, (16, 24))[key]["holds"] is True
    assert theorem2_conditions(9, 2, 3, 24, 1 / 180, 0.009, (16, 25))[key]["holds"] is False


def test_stochastic_T_test_runs_the_full_matrix_check_at_a_smaller_width(capsys,
                                                                         shared_reduced_map):
    """The exact enumeration at d_e = 24 (4.7e7 configurations) is not affordable: the
    full-matrix check runs at the default width T + ceil(T/3) = 12 instead of skipping."""
    rc, rep = _json_run(["--pe", "stochastic", "--T_test", "16,24", "--grad_points", "0",
                         "--full_steps", "100", "--json"], capsys)
    fm = rep["full_matrix"]
    assert fm["ran"] and fm["d_e"] == 12 and "4.71e+07" in fm["why_smaller"]
    byn = {c["name"]: c for c in rep["checks"]}
    assert byn["full-matrix GD = reduced map"]["ran"] and byn["full-matrix GD = reduced map"]["passed"]
    assert rep["model_checked"] and rc == 4          # the block gradients did not run


def test_an_encoding_that_never_uses_its_top_slots_is_caught(monkeypatch, shared_reduced_map):
    """Seeded fault: the slots sampler never draws the top 4 slots (below T_test). The
    two-scalar checks and the closed-form OOD statement cannot see it; the block gradients
    of the model can."""
    real = enc_mod.StochasticSlots.sample

    def short(self, rng, B, T):
        if T > self.d_e - 4:
            return real(self, rng, B, T)
        return enc_mod.PEBatch(d_e=self.d_e, idx=enc_mod.sorted_subsets(rng, B, self.d_e - 4, T))
    kw = dict(pe="stochastic", T_test=(16, 24), full_steps=20, grad_points=2,
              grad_samples=20000, n_mc=4000)
    # the two-scalar trajectories (most of the time) draw nothing: the faulty sampler cannot
    # change them, so the second check reuses the first's, each computed once
    # (shared_reduced_map); at the defaults of `stsim theory --pe stochastic` (T = 9,
    # lr = 1/180, eps = 0.00964), whose trajectories the command-line tests compute
    T, lr, eps = theorem_defaults("stochastic")
    runs = shared_reduced_map
    good = check_theorem(T, 2, 3, lr, eps, **kw)
    assert good.passed, good.format()
    computed = len(runs)
    monkeypatch.setattr(enc_mod.StochasticSlots, "sample", short)
    bad = check_theorem(T, 2, 3, lr, eps, **kw)
    assert bad.status == "FAILED"
    assert "population gradient of W_ee, V_x = closed form" in bad.failed()
    assert all(c["on"] == "model" for c in bad.checks if c["ran"] and not c["passed"])
    assert np.isfinite(bad.final["loss"]) and len(runs) == computed    # all reused


# ---- the invariants along the trajectory, at every step ---------------------------------
import stsim.theory.reduced as reduced_mod  # noqa: E402
from stsim.theory.checks import gamma_bound  # noqa: E402
from stsim.theory.population import PopulationObjective  # noqa: E402

BOUND = "0 <= gamma <= Gamma and a >= 0 at every step (derived bound)"
MODEL_BOUND = "W, V: a non-decreasing and 0 <= gamma <= Gamma at every step"


def test_gamma_bound_holds_and_is_nearly_attained(shared_reduced_map):
    """Γ = 1 + r(u*−1)/(q u*² + r), u* = 1 + √(1 + r/q): the reduced trajectory stays in
    [0, Γ] at every step and comes within 3 % of Γ (T = 12, q = 2: 1.690 of 1.725)."""
    G = gamma_bound(12, 2)
    rep = check_theorem(12, 2, 3, 1 / 180, 0.009, full_steps=300, grad_points=0)
    byn = {c["name"]: c for c in rep.checks}
    assert byn[BOUND]["passed"] and byn[MODEL_BOUND]["passed"]
    assert 0.97 * G < rep.monotone["gamma_max"] <= G and rep.monotone["gamma_min"] == 0.0
    # Γ is the maximum of γ*(u) = 1 + r(u−1)/(qu²+r) over u >= 1 (brute force)
    u = np.linspace(1, 50, 200001)
    assert G == pytest.approx(np.max(1 + 10 * (u - 1) / (2 * u * u + 10)), rel=1e-9)


@pytest.mark.parametrize("which", [1, 3])
def test_a_sign_fault_in_the_reduced_map_breaks_the_bounds(which, monkeypatch):
    """Seeded faults: the a gradient (1) or the γ gradient (3) with its sign flipped."""
    import stsim.core.reduced as core_reduced     # the one reduced update lives there
    real = core_reduced.loss_grad_scalar

    def flipped(*args):
        out = list(real(*args))
        out[which] = -out[which]
        return tuple(out)
    monkeypatch.setattr(core_reduced, "loss_grad_scalar", flipped)
    rep = check_theorem(12, 2, 3, 1 / 180, 0.009, max_steps=3000, full_steps=0,
                        grad_points=0)
    assert not {c["name"]: c for c in rep.checks}[BOUND]["passed"]


def test_a_state_gone_nan_fails_the_bounds(monkeypatch):
    """Seeded fault: the γ gradient turns NaN after 500 steps. The bounds are read from
    trackers whose comparisons skip NaN; the check must still fail, not pass."""
    import stsim.core.reduced as core_reduced
    real, calls = core_reduced.loss_grad_scalar, [0]

    def nan_later(*args):
        out = list(real(*args))
        calls[0] += 1
        if calls[0] > 500:
            out[3] = math.nan
        return tuple(out)
    monkeypatch.setattr(core_reduced, "loss_grad_scalar", nan_later)
    rep = check_theorem(12, 2, 3, 1 / 180, 0.009, max_steps=3000, full_steps=0,
                        grad_points=0)
    assert not {c["name"]: c for c in rep.checks}[BOUND]["passed"]
    assert math.isnan(rep.monotone["gamma_max"])


def test_a_sign_fault_in_the_model_gradient_breaks_its_bounds(monkeypatch, shared_reduced_map):
    """Seeded fault: the population gradient of V with its sign flipped (γ runs negative)."""
    real = PopulationObjective.loss_grad

    def flipped(self, W, V):
        L, dW, dV = real(self, W, V)
        return L, dW, -dV
    monkeypatch.setattr(PopulationObjective, "loss_grad", flipped)
    rep = check_theorem(12, 2, 3, 1 / 180, 0.009, full_steps=200, grad_points=0)
    byn = {c["name"]: c for c in rep.checks}
    assert not byn[MODEL_BOUND]["passed"] and byn[BOUND]["passed"]


def test_the_bound_needs_lr_at_most_q():
    rep = check_theorem(12, 2, 3, 2.5, 0.009, full_steps=0, grad_points=0, max_steps=200)
    c = {c["name"]: c for c in rep.checks}[BOUND]
    assert not c["ran"] and "lr <= q" in c["value"]


def test_help_states_every_exit_status(capsys):
    with pytest.raises(SystemExit) as exc:
        cli_main(["theory", "--help"])
    assert exc.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    for text in ("0 verified", "1 a check failed", "3 a hypothesis of the theorem fails",
                 "4 not verified (a check did not run)", "2 invalid options"):
        assert text in out, text


def test_slots_configuration_count_is_the_enumeration():
    """C(d_e, q) C(d_e − q, T − q): selected slots, then the unselected among the rest —
    the number the exact population objective enumerates (T = 9, q = 2, d_e = 12: 7920)."""
    from stsim.core.config import Config
    from stsim.theory.population import make_population_objective
    enc = make_encoding("stochastic", T_max=9, d_e=12)
    assert enc.n_configurations(9, 2) == 66 * 120
    obj = make_population_objective(Config.from_options(T=9, q=2, d=3, pe="stochastic",
                                                        d_e=12, steps=1, lr=0.1), enc)
    assert obj.describe()["configurations"] == 7920          # counted from the enumeration
