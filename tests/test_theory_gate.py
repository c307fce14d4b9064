"""The gate of ``stsim theory``: exit 0 only when every hypothesis of the theorem holds and
every check ran (at least one on the model's W and V) and passed."""
import json

import numpy as np
import pytest

import stsim.core.encodings as enc_mod
from stsim.cli import main as cli_main
from stsim.theory.checks import check_theorem
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


def test_skipping_the_model_checks_is_not_verified(capsys):
    rc, rep = _json_run(["--full_steps", "0", "--grad_points", "0", "--json"], capsys)
    assert rc == EXIT["NOT VERIFIED"] == 4
    assert rep["passed"] is False and rep["conditions_hold"] is True
    assert rep["status"] == "NOT VERIFIED" and rep["model_checked"] is False
    skipped = [c for c in rep["checks"] if not c["ran"]]
    assert {c["on"] for c in skipped} == {"model"} and len(skipped) == 2
    assert not any(c["passed"] for c in skipped)


def test_json_carries_the_flags_and_each_check_what_it_is_on(capsys):
    rc, rep = _json_run(FAST, capsys)
    assert rc == 0 and rep["passed"] is True and rep["conditions_hold"] is True
    assert rep["status"] == "PASS" and rep["exit_code"] == 0
    for c in rep["checks"]:
        assert c["on"] in ("reduced", "model") and c["source"] in ("P", "D") and c["ran"]
    assert {c["on"] for c in rep["checks"]} == {"reduced", "model"}
    byn = {c["name"]: c for c in rep["checks"]}
    assert byn["loss reaches eps"]["source"] == "P"
    assert byn["full-matrix GD = reduced map"]["on"] == "model"


def test_text_labels_every_claim_and_the_result(capsys):
    rc = cli_main(["theory"] + FAST[:-1])
    out = capsys.readouterr().out
    assert rc == 0 and "RESULT: PASS" in out
    checks = [ln for ln in out.splitlines() if ln.startswith("  [pass]")]
    assert checks and all("(P, " in ln or "(D, " in ln for ln in checks)
    assert "derived rate law" in out and "derived law (n-1)/(4 lr c^2 eps)" in out


def test_a_failed_check_wins_over_everything():
    rep = check_theorem(12, 2, 3, 1 / 180, 0.009, full_steps=0, grad_points=0)
    assert rep.status == "NOT VERIFIED"
    rep.checks.append(make_check("seeded", "x", "y", False))
    assert rep.status == "FAILED" and rep.exit_code == 1
    rep.conditions["lr <= 1/(20 d^2)"]["holds"] = False
    assert rep.status == "FAILED"
    rep.checks.pop()
    assert rep.status == "HYPOTHESES FAIL" and rep.exit_code == 3


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


def test_stochastic_T_test_runs_the_full_matrix_check_at_a_smaller_width(capsys):
    """The exact enumeration at d_e = 24 (4.7e7 configurations) is not affordable: the
    full-matrix check runs at the default width T + ceil(T/3) = 12 instead of skipping."""
    rc, rep = _json_run(["--pe", "stochastic", "--T_test", "16,24", "--grad_points", "0",
                         "--full_steps", "100", "--json"], capsys)
    fm = rep["full_matrix"]
    assert fm["ran"] and fm["d_e"] == 12 and "4.71e+07" in fm["why_smaller"]
    byn = {c["name"]: c for c in rep["checks"]}
    assert byn["full-matrix GD = reduced map"]["ran"] and byn["full-matrix GD = reduced map"]["passed"]
    assert rep["model_checked"] and rc == 4          # the block gradients did not run


def test_an_encoding_that_never_uses_its_top_slots_is_caught(monkeypatch):
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
    good = check_theorem(9, 2, 3, 1 / 180, 0.009, **kw)
    assert good.passed, good.format()
    monkeypatch.setattr(enc_mod.StochasticSlots, "sample", short)
    bad = check_theorem(9, 2, 3, 1 / 180, 0.009, **kw)
    assert bad.status == "FAILED"
    assert "population gradient of W_ee, V_x = closed form" in bad.failed()
    assert all(c["on"] == "model" for c in bad.checks if c["ran"] and not c["passed"])
    assert np.isfinite(bad.final["loss"])
