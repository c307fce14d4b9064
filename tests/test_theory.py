"""Tests of the theorem checks (stsim.theory.checks) and the ``stsim theory`` command."""
import json

from stsim.cli import main as cli_main
from stsim.theory.reduced import reduced_gd_scalar
from stsim.theory.checks import check_theorem, theorem1_conditions


def test_conditions_name_the_failing_one():
    ok = theorem1_conditions(T=12, q=2, d=3, lr=1 / 180, eps=0.009)
    assert all(c["holds"] for c in ok.values())
    bad_q = theorem1_conditions(T=8, q=2, d=3, lr=1 / 180, eps=0.009)        # q = T/4
    assert [k for k, c in bad_q.items() if not c["holds"]] == ["2 <= q < T/4"]
    bad_eps = theorem1_conditions(T=12, q=2, d=3, lr=1 / 180, eps=0.018)     # = bound
    assert [k for k, c in bad_eps.items() if not c["holds"]] == ["eps < dT/(100(T-q)q)"]
    bad_lr = theorem1_conditions(T=12, q=2, d=3, lr=0.01, eps=0.009)
    assert [k for k, c in bad_lr.items() if not c["holds"]] == ["lr <= 1/(20 d^2)"]


def test_check_theorem_onehot_measures_what_it_claims():
    T, q, d, lr, eps = 12, 2, 3, 1 / 180, 0.009
    rep = check_theorem(T, q, d, lr, eps, full_steps=500, T_test=(16,), n_mc=20000, seed=1,
                        grad_samples=8000)
    assert rep.conditions_hold and rep.reached
    # t_eps is the first step with L <= eps (independent re-run of the map)
    tr = reduced_gd_scalar(T, q, d, lr, rep.t_eps)
    assert tr.loss[0, -1] <= eps < tr.loss[0, -2]
    # the rate law is asymptotic: t_eps / ((T−1)/(4 lr eps)) → 1 as eps → 0
    small = check_theorem(T, q, d, lr, eps / 20, full_steps=0, grad_points=0)
    r_big, r_small = (rep.t_eps / rep.t_eps_predicted, small.t_eps / small.t_eps_predicted)
    assert abs(r_small - 1) < abs(r_big - 1) and abs(r_small - 1) < 0.05, (r_big, r_small)
    assert 0.9 < rep.slope / rep.slope_predicted < 1.1
    assert rep.monotone["loss_non_increasing"] and rep.monotone["a_non_decreasing"]
    f = rep.full_matrix
    assert f["ran"] and f["configurations"] == 66
    assert max(f["inv/W_xx"], f["inv/W_xe"], f["inv/W_ex"], f["inv/V_e"]) == 0.0
    assert max(f["rel_dev_loss"], f["rel_dev_a"], f["rel_dev_gamma"]) < 1e-10
    (row,) = rep.ood
    assert abs(row["mc"] - row["closed_form"]) < 4 * row["mc_se"]
    assert row["closed_form"] < row["floor"]     # finite a: not yet at the a → ∞ floor
    json.dumps(rep.to_dict())                     # serialisable


def test_check_theorem_slots_ood_closed_form_vs_mc():
    rep = check_theorem(8, 2, 3, 0.5, 0.02, pe="stochastic", d_e=16, full_steps=0,
                        T_test=(12, 16), n_mc=20000, seed=2)
    assert rep.reached and rep.full_matrix["ran"] is False
    for row in rep.ood:
        assert abs(row["mc"] - row["closed_form"]) < 4 * row["mc_se"], row
    assert any("Theorem 2" in n for n in rep.notes) and rep.theorem2


def test_cli_reports_failing_condition_and_still_runs(capsys):
    rc = cli_main(["theory", "--T", "8", "--q", "2", "--d", "2", "--lr", "0.5", "--eps", "0.01",
                   "--full-steps", "50"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "[FAIL] 2 <= q < T/4" in out and "[FAIL] lr <= 1/(20 d^2)" in out
    assert "reaches eps at t_eps" in out and "Full-matrix population GD (50 steps" in out


def test_cli_json_and_bad_input(capsys):
    rc = cli_main(["theory", "--T", "10", "--q", "2", "--d", "2", "--json", "--full-steps", "0"])
    rep = json.loads(capsys.readouterr().out)
    assert rc == 0 and rep["reached"] and rep["settings"]["T"] == 10
    rc = cli_main(["theory", "--T", "10", "--q", "12"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "q must be an integer in [1, 9]" in err
    rc = cli_main(["theory", "--pe", "near-orthogonal"])
    assert rc == 2 and "pe must be one of" in capsys.readouterr().err
    rc = cli_main(["theory", "--T", "10", "--T-test", "8"])
    assert rc == 2 and "T_test" in capsys.readouterr().err


def test_theory_figures_quick(tmp_path, capsys):
    assert cli_main(["theory", "--figures", str(tmp_path)]) == 0
    assert "fitted slope" in capsys.readouterr().out
    for name in ("theory_loss.png", "theory_a_gamma.png", "theory_invariants.png"):
        assert (tmp_path / name).stat().st_size > 10_000


# ---- issue 13: the checks gate, with tolerances, and fail when they should -------------
import stsim.theory.checks as checks_mod  # noqa: E402
from stsim.theory.population import PopulationObjective  # noqa: E402

FAST = dict(full_steps=300, grad_points=3, grad_samples=8000)


def _by_name(rep):
    return {c["name"]: c for c in rep.checks}


def test_every_check_has_a_tolerance_and_the_default_passes():
    rep = check_theorem(12, 2, 3, 1 / 180, 0.009, **FAST)
    assert rep.passed, rep.format()
    assert len(rep.checks) >= 10
    for c in rep.checks:
        assert c["tolerance"] and isinstance(c["passed"], bool)
    text = rep.format()
    assert text.count("tolerance:") == len(rep.checks) and "RESULT: all checks pass" in text
    # the rate law is checked where it is claimed (eps -> 0): closer to 1 at eps/8
    f = rep.final
    assert abs(f["t_eps_ratio_eps_over_8"] - 1) < abs(f["t_eps_ratio"] - 1) / 4


def test_wrong_step_size_fails(monkeypatch):
    """The map runs 25% faster than the stated lr: the rate-law checks and the agreement of
    full-matrix GD with the reduced map fail."""
    real = checks_mod.reduced_gd_scalar

    def wrong(T, q, d, lr, steps, **kw):
        return real(T, q, d, 1.25 * lr, steps, **kw)
    monkeypatch.setattr(checks_mod, "reduced_gd_scalar", wrong)
    rep = check_theorem(12, 2, 3, 1 / 180, 0.009, **FAST)
    byn = _by_name(rep)
    assert not rep.passed
    assert not byn["rate law: t_eps / ((n-1)/(4 lr c^2 eps)) -> 1"]["passed"]
    assert not byn["rate law: slope of 1/L (2nd half) / (4 lr c^2/(n-1)) -> 1"]["passed"]
    assert not byn["full-matrix GD = reduced map"]["passed"]


def test_perturbed_off_set_gradient_fails(monkeypatch):
    """A small bias in the W_xe block of the minibatch gradient (a population gradient that
    would leave the invariant set) is detected by the block-gradient check."""
    real = checks_mod.forward_backward

    def biased(W, V, X, y, pe, **kw):
        L, dW, dV = real(W, V, X, y, pe, **kw)
        if dW is not None:
            dW = dW.copy()
            dW[0, 3] += 0.02          # W_xe entry (d = 3)
        return L, dW, dV
    monkeypatch.setattr(checks_mod, "forward_backward", biased)
    rep = check_theorem(12, 2, 3, 1 / 180, 0.009, full_steps=0, grad_points=3,
                        grad_samples=8000)
    assert not _by_name(rep)["population gradient of W_xe, V_e (off-set blocks) = 0"]["passed"]


def test_perturbed_population_gradient_fails(monkeypatch):
    """A perturbation of the full-matrix population gradient off the span of I − J/n is
    caught by the structure and agreement checks."""
    real = PopulationObjective.loss_grad

    def perturbed(self, W, V):
        L, dW, dV = real(self, W, V)
        dW = dW.copy()
        dW[self.d, self.d] += 1e-6 * (1 + abs(dW[self.d, self.d]))
        return L, dW, dV
    monkeypatch.setattr(PopulationObjective, "loss_grad", perturbed)
    rep = check_theorem(12, 2, 3, 1 / 180, 0.009, full_steps=300, grad_points=0)
    byn = _by_name(rep)
    assert not byn["W_ee = a(I - J/n), V_x = gamma I along the run"]["passed"]
    assert not byn["full-matrix GD = reduced map"]["passed"]


def test_cli_exits_nonzero_when_a_check_fails(capsys):
    rc = cli_main(["theory", "--lr", "40", "--full-steps", "20"])
    out = capsys.readouterr().out
    assert rc == 1
    assert "[FAIL] loss non-increasing at every step" in out and "RESULT: FAILED" in out


def test_theorem2_stochastic_defaults_are_really_stochastic():
    rep = check_theorem(9, 2, 3, 1 / 180, 0.009, pe="stochastic", T_test=(12,), **FAST)
    assert rep.settings["d_e"] == 12 and rep.settings["n_minus_1"] == 11
    assert rep.theorem2["d_e > T (law really stochastic)"]["holds"]
    assert {c["source"] for c in rep.theorem2.values()} == {"P", "D"}
    assert rep.full_matrix["configurations"] == 66 * 120      # C(12,2) C(10,7)
    assert rep.passed, rep.format()
    # d_e = T is the fixed one-hot law: reported as such
    same = check_theorem(8, 2, 3, 0.5, 0.02, pe="stochastic", d_e=8, full_steps=0,
                         grad_points=0)
    assert not same.theorem2["d_e > T (law really stochastic)"]["holds"]
    assert any("fixed one-hot law" in n for n in same.notes)
