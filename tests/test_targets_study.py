"""``stsim targets`` (stsim.studies.targets): the contract, a tiny run end to end, its
resumption from the journals, each verdict failing on a seeded fault, the command's exit
statuses."""
import json

import numpy as np
import pytest

from stsim.core.targets import Variance
from stsim.studies import targets
from stsim.studies.contract import check_study, resolve_config, run_study
from stsim.studies.targets import runs, study

TINY = {"targets": ["mean", "variance"], "T": 8, "steps": 40, "seeds": 3, "mults": [1.0],
        "T_test": [10], "n_fit": 2000, "rep_T": 5, "batch": 32, "fam_Ts": [8, 16, 32],
        "fam_n_start": 128, "fam_n_max": 512, "fam_replicates": 2, "fam_se_rel": 0.1,
        "fam_rtol": 0.1, "eq_Ts": [8], "fcn_Ts": [4, 8], "fcn_steps": 40,
        "fcn_batch": 32, "fcn_n_val": 64, "fcn_max_width": 8, "fcn_span": 2, "n_boot": 50}
FLAGS = [f"--set={k}={v}" for k, v in TINY.items()]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("t") / "o")
    return out, run_study(targets, out, mode="quick", overrides=TINY)


def test_contract_and_presets():
    check_study(targets)
    for mode in ("quick", "full"):
        resolve_config(targets, mode)
    for bad, name in [({"q": 0}, "q"), ({"T_test": [41]}, "T_test"), ({"targets": ["x"]},
                      "target"), ({"mults": [0.0]}, "mults"), ({"seeds": 1}, "seeds"),
                      ({"targets": [Variance()]}, "targets"), ({"fcn_Ts": [3]}, "fcn_Ts"),
                      ({"eq_Ts": [17]}, "eq_Ts"), ({"reach": 1.5}, "reach"),
                      ({"fcn_batch": 0}, "fcn_batch"),
                      ({"fcn_max_width": 10 ** 9, "fcn_span": 10 ** 8}, "memory"),
                      # impossible sizes: refused with the memory they would need
                      ({"T": 10 ** 9}, "run of mean .*memory"),
                      ({"d": 10 ** 9}, "run of mean .*memory"),
                      ({"batch": 10 ** 9}, "run of mean .*memory"),
                      ({"eq_n": 10 ** 12}, "eq_n=.*memory"),
                      ({"fcn_Ts": [4, 10 ** 9]}, "fcn_Ts: T=1000000000 has no FCN width"),
                      ({"mults": [1.0, 1.0]}, "mults must hold distinct"),
                      ({"steps": 10 ** 20}, r"steps must be an integer in \[0, ")]:
        with pytest.raises(ValueError, match=name):
            resolve_config(targets, "quick", bad)


def test_a_target_is_one_spelling_and_its_q_is_checked():
    cfg = resolve_config(targets, "quick", {"targets": ["Moment:3", "mean"]})
    assert list(cfg["targets"]) == ["moment:3", "mean"]
    with pytest.raises(ValueError, match="distinct targets"):
        resolve_config(targets, "quick", {"targets": ["moment:3", "MOMENT:3"]})
    with pytest.raises(ValueError, match="q must be"):
        resolve_config(targets, "quick", {"q": 1})       # the variance of one token is 0
    assert resolve_config(targets, "quick", {"q": 1, "targets": ["mean"]})["q"] == 1


def test_tiny_run_end_to_end(tiny):
    out, res = tiny
    data = json.load(open(f"{out}/targets.json"))
    # represents, learns, length; widths (the variance's law, each FCN law), separation
    assert len(data["checks"]) == 2 + 1 + 2 + 2 + 3 + 2
    for c in data["checks"]:
        assert {"se", "critical", "verdict"} <= set(c) and c["verdict"] in (
            "held", "failed", "inconclusive")
    rep = {c["claim"]: c for c in data["checks"] if "construction" in c["claim"]}
    assert all(c["verdict"] == "held" and c["exact"] for c in rep.values())
    learns = res["learns"]["mean"][0]
    assert learns["n"] == 3 and learns["critical"] == pytest.approx(4.303, abs=1e-3)
    for name in ("report.md", "represents.png", "represents.csv", "learns.png", "curves.csv",
                 "length.png", "length.csv", "raw/runs.csv", "raw/tune.csv", "widths.png",
                 "widths.csv", "raw/family_width.csv", "raw/fcn_runs.csv"):
        assert (tmp := f"{out}/{name}") and open(tmp, "rb").read(1), name
    assert res["errors"] == [] and res["unmeasured"] == []


def test_resumes_from_its_journals(tiny, monkeypatch):
    import functools

    from stsim.studies import cells as training
    from stsim.studies.targets import widths
    out, res = tiny
    calls = []

    def counted(fn):
        @functools.wraps(fn)
        def f(*a, **k):
            calls.append(fn.__name__)
            return fn(*a, **k)
        return f
    for mod, name in ((runs, "train_one"), (training, "train_point"),
                      (widths, "family_point"), (widths, "equal_point")):
        monkeypatch.setattr(mod, name, counted(getattr(mod, name)))
    again = run_study(targets, out, mode="quick", overrides=TINY)
    assert calls == [] and again["learns"] == res["learns"]
    assert again["fcn"] == res["fcn"] and again["family"] == res["family"]


@pytest.mark.parametrize("key, value", [("T", 10), ("steps", 50), ("q", 2), ("d", 2),
                                        ("batch", 16), ("T_test", [12]), ("fam_Ts", [8, 64]),
                                        ("fam_n_start", 256), ("width_d", 2),
                                        ("rep_T", 6), ("fcn_Ts", [4, 8, 12])])
def test_analysis_refuses_settings_no_row_was_made_with(tiny, key, value):
    out, _ = tiny
    with pytest.raises(ValueError, match="made with|no row"):
        run_study(targets, out, mode="quick", overrides=dict(TINY, **{key: value}),
                  analyse_only=True)


def test_a_rerun_with_other_settings_computes_their_rows(tiny, tmp_path, monkeypatch):
    import shutil
    out = str(tmp_path / "o")
    shutil.copytree(tiny[0], out)
    made = []
    monkeypatch.setattr(runs, "train_one", lambda *a, _f=runs.train_one, **k:
                        made.append(k["T"]) or _f(*a, **k))
    res = run_study(targets, out, mode="quick", overrides=dict(TINY, T=10))
    assert made and set(made) == {10}       # nothing reused from the rows made at T = 8
    assert "trained at T = 10" in res["learns"]["mean"][0]["claim"]
    again = run_study(targets, out, mode="quick", overrides=TINY, analyse_only=True)
    assert again["learns"] == tiny[1]["learns"]     # the T = 8 rows serve T = 8 still


def test_damaged_tables_are_read_from_their_journals(tiny, tmp_path):
    """A duplicated or edited row, a garbled or emptied table: the journal is the truth;
    without one, two rows of one point and replicate are refused, naming the table."""
    import os
    import shutil
    out = str(tmp_path / "o")
    shutil.copytree(tiny[0], out)
    runs = f"{out}/raw/runs.csv"
    lines = open(runs).read().splitlines()
    open(runs, "w").write("\n".join(lines + [lines[1]]).replace(",40,", ",999,") + "\n")
    open(f"{out}/raw/tune.csv", "w").write("garbage\x00,,\n")
    open(f"{out}/raw/represents.csv", "w").write("")
    again = run_study(targets, out, mode="quick", overrides=TINY, analyse_only=True)
    assert again["learns"] == tiny[1]["learns"] and again["represents"] == tiny[1]["represents"]
    os.remove(runs + ".journal.jsonl")
    with pytest.raises(ValueError, match="runs.csv' holds two rows of one point"):
        run_study(targets, out, mode="quick", overrides=TINY, analyse_only=True)
    shutil.copy(f"{tiny[0]}/raw/runs.csv.journal.jsonl", runs + ".journal.jsonl")
    fcn = f"{out}/raw/fcn_runs.csv"             # the FCN's reported runs lost
    os.remove(fcn + ".journal.jsonl")
    open(fcn, "w").write("")
    with pytest.raises(ValueError, match="fcn_runs.csv has no row of target 'mean' at T = 4"):
        run_study(targets, out, mode="quick", overrides=TINY, analyse_only=True)


class WrongVariance(Variance):
    """A seeded fault: the construction's bias 0.9 for 1."""

    def exact(self, d):
        return dict(super().exact(d), b=np.full(d, 0.9))


def test_represents_checks_fail_on_seeded_faults(monkeypatch):
    row = study.represents(WrongVariance(), 5, 3, 2, 1, 20_000, 0)
    assert study.represents_checks("variance", row, 3, 2, 0.02)[0]["verdict"] == "failed"
    row = study.represents("variance", 5, 3, 2, 1, 20_000, 0)
    ok = study.represents_checks("variance", row, 3, 2, 0.1)
    assert [c["verdict"] for c in ok] == ["held", "held"]
    # the floor with q² for q³ (the non-additive part's E N² without its 1/q)
    monkeypatch.setattr("stsim.theory.targets.variance_linear_floor",
                        lambda d, q: d * (q - 1) / q ** 2)
    assert study.represents_checks("variance", row, 3, 2, 0.1)[1]["verdict"] == "failed"


def test_learns_and_length_fail_on_a_seeded_fault(tiny):
    """The same raw tables judged against a ratio no run reaches (1e-4 of L(0))."""
    out, _ = tiny
    cfg = resolve_config(targets, "quick", dict(TINY, ratio=1e-4))
    res = study.analyse(cfg, out)
    assert {c["verdict"] for t in TINY["targets"] for p in ("learns", "length")
            for c in res[p][t]} == {"failed"}


def test_every_multiplier_gets_the_plans_budget():
    """steps 0: the default plan's count at multiplier 1 for every multiplier (a plan given
    a step of its own scales its count with it: 4500 steps at 1/4, 600 at 2, T = 200)."""
    rows = [study.train_one("mean", 6, 2, 1, 16, 0, (), m, 0) for m in (0.5, 2.0)]
    assert rows[0]["steps"] == rows[1]["steps"] == runs._base("mean", 6, 2, 1, 16, ())[2]


def test_choose_ties_and_failures():
    rows = [{"target": "a", "mult": 1.0, "rel": 0.1, "run_status": "completed"},
            {"target": "a", "mult": 2.0, "rel": 0.1, "run_status": "completed"},
            {"target": "a", "mult": 4.0, "rel": 0.01, "run_status": "diverged"}]
    assert study.choose(rows) == {"a": 2.0}


def test_cli_exit_statuses(tmp_path, monkeypatch, capsys):
    """2 for a bad setting, 0 for a run that completes, 1 for one whose transformer runs
    raise. The failing run starts from the first one's raw tables without its tuning and
    reported runs (the tables every run of train_one writes): the width parts, made with
    the same settings, are resumed, and every transformer run is tried and raises."""
    import os
    import shutil

    from stsim.cli import main
    assert main(["targets", "--set=q=0", "--out", str(tmp_path / "bad")]) == 2
    out = str(tmp_path / "o")
    assert main(["targets", *FLAGS, "--set=targets=['mean']", "--workers=1", "--out", out]) == 0
    assert "checks:" in capsys.readouterr().out

    def boom(*a, **k):
        raise MemoryError("Unable to allocate 1 GiB")
    monkeypatch.setattr(runs, "train_one", boom)
    shutil.copytree(tmp_path / "o" / "raw", tmp_path / "e" / "raw",
                    ignore=shutil.ignore_patterns("tune.csv*", "runs.csv*", "run.json"))
    assert not {"tune.csv", "runs.csv"} & set(os.listdir(tmp_path / "e" / "raw"))
    out = str(tmp_path / "e")
    assert main(["targets", *FLAGS, "--set=targets=['mean']", "--workers=1", "--out", out]) == 1
    data = json.load(open(f"{out}/targets.json"))
    assert data["learns"]["mean"][0]["verdict"] == "inconclusive"
    assert any("MemoryError" in u for u in data["unmeasured"])
    assert "learns: mean (a run raised)" in data["unmeasured"]     # its cause, not divergence


def test_the_reach_ratio_is_the_learned_level():
    """The targets study's ratio is core.reduced.LEARNED."""
    from stsim.core.reduced import LEARNED
    assert all(targets.PRESETS[m]["ratio"] == LEARNED for m in ("quick", "full"))


def test_a_damaged_curve_in_the_journal_is_refused_naming_its_run(tiny, tmp_path):
    """A run's curve written as ``{}`` into the journal itself: the figure's reading names
    the table and the run (was: a KeyError traceback)."""
    import json
    import shutil
    out = str(tmp_path / "o")
    shutil.copytree(tiny[0], out)
    path = f"{out}/raw/runs.csv.journal.jsonl"
    recs = [json.loads(x) for x in open(path)]
    recs[0]["result"]["curve"] = "{}"
    open(path, "w").write("".join(json.dumps(r) + "\n" for r in recs))
    with pytest.raises(ValueError, match=r"raw/runs.csv: the curve of the run target=.* is "
                                         r"damaged"):
        run_study(targets, out, mode="quick", overrides=TINY, analyse_only=True)
