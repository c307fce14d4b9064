"""``stsim attention`` (stsim.studies.attention): the contract, the outputs with se,
critical and verdict for every check, analyse-only from the raw table, bad settings, and
the verdict rule on seeded values."""
import json

import pytest

from stsim.studies import attention
from stsim.studies.attention.study import parse_mechanism, verdict
from stsim.studies.contract import check_study, run_study

SMALL = {"mechanisms": ["softmax", "linear", "rank=2"], "seeds": 2, "steps": 40, "T": 8,
         "T_test": [10], "width_T": [8, 64, 512], "taus": [0.5, 1.0], "tau_T": 20}


@pytest.mark.slow
def test_quick_study_writes_every_check_with_se_critical_verdict(tmp_path):
    check_study(attention)
    out = str(tmp_path / "a")
    res = run_study(attention, out, mode="quick", overrides=SMALL)
    data = json.loads((tmp_path / "a" / "attention.json").read_text())
    assert res["checks"] == len(data["checks"]) == 3 * 2 + 2 + 1
    for c in data["checks"]:
        assert {"se", "critical", "verdict", "n", "threshold"} <= set(c)
        assert c["verdict"] in ("held", "failed", "inconclusive")
        if c["n"] == 2:
            assert c["critical"] == pytest.approx(12.706, abs=1e-3)   # t(0.975, 1 df)
    for name in ("report.md", "width.csv", "temperature.csv", "curves.csv", "curves.png",
                 "width.png", "raw/runs.csv"):
        assert (tmp_path / "a" / name).exists(), name
    temp = [c for c in data["checks"] if c["claim"].startswith("temperature")]
    assert all(c["verdict"] == "held" and c["se"] == 0 for c in temp)
    run_study(attention, out, mode="quick", overrides=SMALL, analyse_only=True)
    assert json.loads((tmp_path / "a" / "attention.json").read_text()) == data


def test_verdict_rule_with_seeded_values():
    # the mean 0.01 ± 0.001 (3 seeds) is below 0.02 by 10 se > t(0.975, 2) = 4.30
    assert verdict([0.009, 0.010, 0.011], "<=", 0.02, "x")["verdict"] == "held"
    assert verdict([0.029, 0.030, 0.031], "<=", 0.02, "x")["verdict"] == "failed"
    # 0.02 ± 0.005: within 4.3 se of the threshold
    assert verdict([0.015, 0.02, 0.025], "<=", 0.018, "x")["verdict"] == "inconclusive"
    c = verdict([0.01, 0.02, 0.03], "<=", 0.05, "x")
    assert c["critical"] == pytest.approx(4.3027, abs=1e-4) and c["n"] == 3
    assert verdict([float("nan"), 0.01, 0.01], "<=", 0.02, "x")["verdict"] == "inconclusive"
    assert verdict([0.0], "<=", 1e-9, "x")["verdict"] == "held"          # exact: se 0
    assert verdict([2e-9], "<=", 1e-9, "x")["verdict"] == "failed"


@pytest.mark.parametrize("bad,match", [({"mechanisms": ["tanh"]}, "mechanisms must hold"),
                                       ({"mechanisms": []}, "at least one"),
                                       ({"seeds": 1}, "seeds must be"),
                                       ({"T_test": [5]}, "T_test must be"),
                                       ({"target": 1.5}, "target must be")])
def test_bad_settings_are_refused_before_work(tmp_path, bad, match):
    with pytest.raises(ValueError, match=match):
        run_study(attention, str(tmp_path / "x"), mode="quick", overrides=bad)
    assert not (tmp_path / "x").exists()


def test_parse_mechanism():
    assert parse_mechanism("relu-norm") == {"attention": "relu-norm"}
    assert parse_mechanism("rank=4") == {"rank": 4}
    assert parse_mechanism("tau=0.5") == {"temperature": 0.5}
    with pytest.raises(ValueError, match="mechanisms must hold"):
        parse_mechanism("rank=0")
