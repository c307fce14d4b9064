"""``stsim attention`` (stsim.studies.attention): the contract, the outputs with se,
critical and verdict for every check, analyse-only from the raw table, bad settings, and
the verdict rule on seeded values."""
import json
import os

import numpy as np
import pytest

from stsim.studies import attention
from stsim.studies.attention.runs import choose, mechanism_options
from stsim.studies.attention.analysis import _width_checks, judged, verdict
from stsim.studies.attention.study import parse_mechanism
from stsim.studies.contract import check_study, run_study

SMALL = {"mechanisms": ["softmax", "linear", "rank=2"], "seeds": 2, "steps": 40, "T": 8,
         "T_test": [10], "tune_steps": 10, "tune_mults": [1.0, 0.1], "rank_T": [6],
         "rank_r": [2, 12], "rank_steps": 30, "width_T": [8, 16, 32, 64, 128],
         "width_mechs": ["softmax", "linear", "sigmoid"], "fam_n_start": 128, "fam_n_max": 128, "fam_replicates": 2, "width_max": 256,
         "taus": [0.5, 1.0], "tau_T": 20, "train_T": 8, "train_widths": [16, 23],
         "train_steps": 20}


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """``(out, summary, its attention.json)`` of one run of ``SMALL``; a test that analyses
    or reruns it does so in a copy. An analysis of it costs ~5 s (the growth-law fits of
    the width series), so its analyse-only round trip is done once, after the rerun of
    :func:`test_a_rerun_with_other_settings_computes_their_rows`."""
    out = str(tmp_path_factory.mktemp("a") / "a")
    res = run_study(attention, out, mode="quick", overrides=SMALL)
    with open(f"{out}/attention.json") as f:
        return out, res, json.load(f)


def test_quick_study_writes_every_check_with_se_critical_verdict(small):
    check_study(attention)
    out, res, data = small
    assert res["checks"] == data["checks"]
    claims = [c["claim"] for c in data["checks"]]
    assert sum(" learns: " in c for c in claims) == 3          # one per mechanism
    assert sum(" generalises to " in c for c in claims) == 3
    assert sum(c.startswith("rank ") for c in claims) == 2     # r = 2, 12 at T = 6
    assert sum(c.startswith("temperature") for c in claims) == 2
    assert any("linear (exact): the width grows linearly" in c for c in claims)
    assert any(c.startswith("sigmoid: the family reaches") for c in claims)
    assert sum(c.startswith("linear trained on the sphere") for c in claims) == 2
    assert any(c.startswith("linear: the smallest trained width") for c in claims)
    assert set(data["mechanisms"]["rank=2"]["tuning"]) == {"1.0", "0.1"}
    for c in data["checks"]:
        assert {"se", "critical", "verdict", "n", "threshold"} <= set(c)
        assert c["verdict"] in ("held", "failed", "inconclusive")
        if c["n"] == 2:
            assert c["critical"] == pytest.approx(12.706, abs=1e-3)   # t(0.975, 1 df)
    for name in ("report.md", "width.csv", "rank.csv", "temperature.csv", "curves.csv",
                 "curves.png", "width.png", "raw/runs.csv", "raw/tune.csv", "raw/rank.csv",
                 "raw/width.csv", "raw/trained.csv", "trained.csv"):
        assert os.path.exists(os.path.join(out, name)), name
    temp = [c for c in data["checks"] if c["claim"].startswith("temperature")]
    assert all(c["verdict"] == "held" and c["se"] == 0 for c in temp)


@pytest.mark.parametrize("key, value", [("steps", 30), ("T", 9), ("tune_steps", 12),
                                        ("batch", 32), ("d", 3), ("T_test", [12]),
                                        ("tune_mults", [1.0, 0.1, 2.0]), ("rank_steps", 20),
                                        ("rank_r", [2, 4]), ("width_T", [8, 16, 256]),
                                        ("fam_n_start", 64), ("width_max", 512),
                                        ("train_steps", 10), ("train_widths", [16, 32]),
                                        ("mechanisms", ["softmax", "relu"]),
                                        ("width_level", 0.3), ("target", "variance")])
def test_analysis_refuses_settings_no_row_was_made_with(small, key, value):
    with pytest.raises(ValueError, match="made with|no row"):
        run_study(attention, small[0], mode="quick", overrides=dict(SMALL, **{key: value}),
                  analyse_only=True)


def test_a_rerun_with_other_settings_computes_their_rows(small, tmp_path, monkeypatch):
    """A rerun at 30 steps trains its reported runs again (and nothing else); analysed
    only with the first settings, the folder then gives back the first run's
    attention.json exactly (the rows the rerun added beside theirs change nothing)."""
    import shutil

    from stsim.studies.attention import runs
    out = str(tmp_path / "a")
    shutil.copytree(small[0], out)
    made = []
    monkeypatch.setattr(runs, "run_one", lambda *a, _f=runs.run_one, **k:
                        made.append(k["steps"]) or _f(*a, **k))
    run_study(attention, out, mode="quick", overrides=dict(SMALL, steps=30))
    assert made == [30] * 3 * SMALL["seeds"]        # the reported runs only, at 30 steps
    data = json.loads(open(f"{out}/attention.json").read())
    assert all(" in 30 steps" in c["claim"] for c in data["checks"] if " learns: " in c["claim"])
    again = run_study(attention, out, mode="quick", overrides=SMALL, analyse_only=True)
    assert again["checks"] == small[1]["checks"]
    assert json.loads(open(f"{out}/attention.json").read()) == small[2]


def test_quick_tunes_each_mechanism_around_its_own_step():
    """At the quick preset's three multipliers of the paper model's step (1.62) linear, ReLU
    and sigmoid attention diverge every time; around their own default they train."""
    from stsim.studies.attention.runs import base_schedule
    assert attention.PRESETS["quick"]["tune_base"] == "own"
    c = {k: attention.PRESETS["quick"][k] for k in ("T", "q", "d", "batch", "T_test")}
    paper = base_schedule(**c)[0]
    for m in ("linear", "relu", "sigmoid"):
        own = base_schedule(**c, mechanism=m)[0]
        assert own < paper / 4, m


def test_diverged_runs_are_reported_and_unmeasured_exits_1(tmp_path, capsys):
    from stsim.cli.common import report_divergence
    out = str(tmp_path / "d")
    cfg = dict(SMALL, mechanisms=["softmax", "linear"], tune_base="paper", tune_mults=[16.0],
               train_mechs=["linear"], width_T=[8, 16], width_mechs=["linear"], rank_r=[2],
               train_widths=[16], taus=[1.0])
    res = run_study(attention, out, mode="quick", overrides=cfg)
    assert res["diverged"]["runs"] >= SMALL["seeds"]
    assert any(u.startswith("linear at step x 16.0 of the paper model's (every tuning "
                            "multiplier [16.0] diverged too)") for u in res["unmeasured"])
    data = json.loads(open(f"{out}/attention.json").read())
    assert data["unmeasured"] == res["unmeasured"] and data["diverged"] == res["diverged"]
    assert "## Diverged runs" in open(f"{out}/report.md").read()
    assert report_divergence(res) == 1 and "linear at step x 16.0" in capsys.readouterr().err


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
                                       ({"level": 1.5}, "level must be"),
                                       ({"width_level": 0}, "width_level must be"),
                                       ({"target": 0.02}, "target must be"),
                                       ({"target": "median"}, "target must be 'mean'"),
                                       ({"target": "variance", "q": 1}, "q must be")])
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


def test_equal_tuning_choice_and_options():
    rows = [{"mechanism": "a", "mult": 1.0, "rel": "inf", "run_status": "diverged"},
            {"mechanism": "a", "mult": 0.1, "rel": 0.5, "run_status": "completed"},
            {"mechanism": "a", "mult": 0.01, "rel": 0.2, "run_status": "completed"},
            {"mechanism": "b", "mult": 1.0, "rel": 0.3, "run_status": "completed"},
            {"mechanism": "b", "mult": 0.1, "rel": 0.3, "run_status": "completed"}]
    assert choose(rows) == {"a": 0.01, "b": 1.0}      # lowest loss; a tie to the larger step
    base = {"W": 80.0, "V": 2.0}
    o = mechanism_options("linear", base, ("W_xx", "W_xe"), 0.5)
    assert o == {"attention": "linear", "lr": {"W": 40.0, "V": 1.0},
                 "freeze": ("W_xx", "W_xe"), "init": "random_rows0"}   # token rows at 0
    o = mechanism_options("rank=4", base, ("W_xx", "W_xe"), 0.5)
    assert o == {"rank": 4, "lr": {"W_K": 40.0, "W_Q": 40.0, "V": 1.0}}   # no token rows
    assert mechanism_options("tau=0.5", 1.5, (), 2.0) == {"temperature": 0.5, "lr": 3.0,
                                                          "init": "zero"}


def test_width_law_checks_compare_exponents():
    def fit(a, lo, hi):
        return {"ranking": ["power"], "fits": {"power": {"a": a, "a_ci": [lo, hi], "n": 10,
                                                         "n_censored": 0, "level": 0.95}}}
    got = _width_checks({"softmax": fit(0.4, 0.35, 0.45), "linear": fit(1.0, 0.98, 1.02),
                         "relu": fit(0.42, 0.3, 0.54)})
    faster = [c for c in got if "faster" in c["claim"]]
    assert [c["verdict"] for c in faster] == ["held", "inconclusive"]    # linear, relu
    lin = [c for c in got if "linearly" in c["claim"]][0]
    # the profile interval is the t interval on 10 - 2 d.o.f.: se its width over 2 t_8
    assert lin["critical"] == pytest.approx(2.306, abs=1e-3) and lin["df"] == 8
    assert lin["verdict"] == "held" and lin["se"] == pytest.approx(0.04 / (2 * 2.306), rel=1e-3)
    # the seeded fault: a linear series whose exponent is 0.5 fails the linear-law check
    bad = _width_checks({"linear": fit(0.5, 0.48, 0.52)})
    assert bad[0]["verdict"] == "failed"
    assert judged(1.0, 0.0, None, "<=", 0.5, "x")["verdict"] == "failed"


def test_width_fits_take_the_located_crossings_not_the_grid_cells():
    """A series whose crossings lie on 3T (SE 0.1) inside grid cells a factor 2 wide: each
    point enters the fit as its row's interval x ± (t_3·se + 1%·x), so the power law's
    exponent interval is narrow about 1; fed the grid cells alone (the seeded fault) it is
    several times wider."""
    from stsim.studies.attention.widths import width_fits
    from stsim.studies.widths import interval
    Ts = [8, 16, 32, 64, 128, 256]
    rows = []
    for T in Ts:
        lo, hi = interval(3.0 * T, 0.1, 4, 0.01)
        rows.append({"series": "lin", "T": T, "censored": False, "lo": lo, "hi": hi})
    cells = [{**r, "lo": 2 ** np.floor(np.log2(3 * r["T"])),
              "hi": 2 ** np.ceil(np.log2(3 * r["T"] + 1))} for r in rows]
    a_ci = width_fits(rows)["lin"]["fits"]["power"]["a_ci"]
    grid = width_fits(cells)["lin"]["fits"]["power"]
    assert a_ci[0] <= 1.0 <= a_ci[1] and a_ci[1] - a_ci[0] < 0.1
    assert None in grid["a_ci"] or grid["a_ci"][1] - grid["a_ci"][0] > 3 * (a_ci[1] - a_ci[0])


def test_family_rows_carry_the_crossing_and_its_grid_cell():
    from stsim.studies.attention.widths import family_rows
    rows = [{"mechanism": "m", "T": 8, "d_e": 20.7, "se": 0.1, "lo": 20.2, "hi": 21.2,
             "censored": 0, "n": 4096, "precise": 1, "replicates": "20.6 20.8"},
            {"mechanism": "s", "T": 8, "d_e": float("nan"), "se": float("nan"), "lo": 0.0,
             "hi": 64.0, "censored": 1, "n": 1024, "precise": 0, "replicates": ""}]
    got = {r["series"]: r for r in family_rows(rows)}
    assert (got["m"]["width"], got["m"]["below"], got["m"]["crossing"]) == (23, 16, 20.7)
    assert got["s"]["censored"] and got["s"]["width"] == 64     # censored: the cap


def test_at_chosen_keeps_the_runs_at_the_choice():
    """A table whose rows all lack ``mult`` (written before it was recorded) is kept whole;
    in a mixed table (a folder resumed across that change) a row without one was made at
    a choice not recorded and is dropped, as is a row at another multiplier."""
    from stsim.studies.tuning import at_chosen
    old = [{"m": "a", "mult": ""}, {"m": "b"}]
    assert at_chosen(old, "m", {"a": 1.0}) == old
    mixed = old + [{"m": "a", "mult": "1.0"}, {"m": "a", "mult": "2.0"}, {"m": "b", "mult": "4"}]
    assert at_chosen(mixed, "m", {"a": 1.0, "b": 4.0}) == [mixed[2], mixed[4]]


def test_the_reach_ratio_is_the_learned_level():
    """The attention study calls a mechanism learned at core.reduced.LEARNED of L(0)."""
    from stsim.core.reduced import LEARNED
    assert all(attention.PRESETS[m]["level"] == LEARNED for m in ("quick", "full"))


def test_mechanisms_are_compared_on_another_target(tmp_path):
    """``target`` is the task's (as in ``stsim run``): the tuned, reported and rank runs
    train on it and are measured against its own L(0); their claims name it; the width
    family, trained widths and temperature map stay the mean task's (the report says so)."""
    import csv
    out = str(tmp_path / "v")
    small = dict(SMALL, mechanisms=["softmax", "linear"], rank_r=[2], width_T=[8, 16],
                 width_mechs=["linear"], train_widths=[16], target="variance")
    res = run_study(attention, out, mode="quick", overrides=small)
    claims = [c["claim"] for c in res["checks"]]
    assert sum(" learns on the target variance: " in c for c in claims) == 2
    assert sum(" generalises on the target variance to " in c for c in claims) == 2
    assert any(c.startswith("rank 2 learns on the target variance") for c in claims)
    assert not any(" learns: " in c for c in claims)
    rows = list(csv.DictReader(open(f"{out}/raw/runs.csv")))
    assert {json.loads(r["settings"])["target"] for r in rows} == {"variance"}
    assert "Task: the target variance" in open(f"{out}/report.md").read()
    with pytest.raises(ValueError, match="made with"):      # the mean's rows are not these
        run_study(attention, out, mode="quick", overrides=dict(small, target="mean"),
                  analyse_only=True)


def test_a_run_on_a_target_is_measured_against_its_own_zero_loss():
    """run_one on the variance: the target's default step with its head's (b, Q), the same
    run as stsim.run with those options, its loss over the variance's L(0)."""
    import stsim
    from stsim.core.targets import make_target
    from stsim.studies.attention.runs import base_schedule, mechanism_options, run_one
    c = dict(T=8, q=2, d=5, batch=64, T_test=[10])
    base = base_schedule(**c, target="variance")
    assert set(base[0]) == {"W", "V", "b", "Q"}
    row = run_one("linear", steps=20, seed=0, base=base, mult=0.5, target="variance", **c)
    res = stsim.run(**dict(c, T_test=(10,)), steps=20, seed=0, target="variance",
                    progress=False, **mechanism_options("linear", *base, 0.5))
    assert row["rel"] == res.final("val") / make_target("variance").zero_loss(5, 2)
    assert row["rel"] != res.final("val") / make_target("mean").zero_loss(5, 2)
    pair = mechanism_options("rank=2", *base, 0.5)["lr"]       # the pair keeps the head
    assert pair == {"W_K": base[0]["W"] / 2, "W_Q": base[0]["W"] / 2, "V": base[0]["V"] / 2,
                    "b": base[0]["b"] / 2, "Q": base[0]["Q"] / 2}
    own = base_schedule(**c, mechanism="rank=2", target="variance")[0]     # the pair's own
    assert mechanism_options("rank=2", own, (), 0.5)["lr"] == {k: v / 2 for k, v in own.items()}
