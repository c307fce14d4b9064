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
    rep = check_theorem(T, q, d, lr, eps, full_steps=500, T_test=(16,), n_mc=20000, seed=1)
    assert rep.conditions_hold and rep.reached
    # t_eps is the first step with L <= eps (independent re-run of the map)
    tr = reduced_gd_scalar(T, q, d, lr, rep.t_eps)
    assert tr.loss[0, -1] <= eps < tr.loss[0, -2]
    # the rate law is asymptotic: t_eps / ((T−1)/(4 lr eps)) → 1 as eps → 0
    small = check_theorem(T, q, d, lr, eps / 20, full_steps=0)
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
    assert any("Theorem 2" in n for n in rep.notes)


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
