"""The study on real text (stsim text): it follows the contract, writes every check in the
one schema, reruns from its raw tables alone, and its checks fail on seeded faults."""
import csv
import json

import pytest

from stsim.studies import text
from stsim.studies.text.study import TASKS
from stsim.studies.contract import check_study, run_study
from stsim.util import verdict as V

SMALL = dict(encodings=["onehot", "slots"], T=8, T_test=[12], steps=30, seeds=2, n_val=64,
             mults=[0.125, 0.5, 2.0], batch=64)


@pytest.fixture(scope="module")
def done(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("text"))
    return out, run_study(text, out, mode="quick", overrides=SMALL)


def test_the_study_runs_and_writes_every_check_in_the_one_schema(done):
    out, res = done
    check_study(text)
    data = json.load(open(f"{out}/text.json"))
    assert data["checks"] == res["checks"] and len(res["checks"]) > 10
    for c in V.find_checks(data["checks"]):
        assert set(V.CHECK_KEYS) <= set(c) and c["verdict"] in V.VERDICTS
    assert {a["arm"] for a in res["arms"]} == {f"{t}/{e}" for t in TASKS
                                              for e in SMALL["encodings"]}
    assert len(res["claims"]) == 3 and all("parts" in c for c in res["claims"])
    masked = next(a for a in res["arms"] if a["arm"] == "masked/onehot")
    assert set(masked["attention"]) == {str(k) for k in range(-8, 9)}
    import os
    for f in ("report.md", "length.png", "length.csv", "attention.png", "attention.csv"):
        assert os.path.getsize(os.path.join(out, f)) > 0, f


def test_analyse_only_rewrites_the_same_checks(done):
    out, res = done
    again = run_study(text, out, mode="quick", overrides=SMALL, analyse_only=True)
    assert again["checks"] == res["checks"]


def _doctor(out, fn):
    path = f"{out}/raw/runs.csv"
    rows = list(csv.DictReader(open(path)))
    for r in rows:
        fn(r)
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    import os
    os.remove(path + ".journal.jsonl")      # the table as the truth of the analysis


def test_the_claim_fails_when_a_stochastic_encoding_does_not_generalise(tmp_path):
    """Seeded fault: the slots runs' loss at T_test doctored to their initial loss — the
    stochastic encoding's "generalises" check and with it the paper's claim fail for the
    selection task."""
    import shutil
    out = str(tmp_path / "t")
    wide = dict(SMALL, tasks=["text"], mults=[0.125, 0.5, 2.0, 8.0], ratio=0.5)
    first = run_study(text, out, mode="quick", overrides=wide)
    inside = {c["encoding"]: c["verdict"] for c in first["checks"] if c.get("part") == "tuning"}
    assert inside["slots"] == "held", first["mults"]           # an interior choice
    shutil.copy(f"{out}/raw/runs.csv", f"{out}/runs.bak")

    def spoil(r):
        if r["encoding"] == "slots":
            r["val_T12"] = r["val0_T12"]
    _doctor(out, spoil)
    res = run_study(text, out, mode="quick", overrides=wide, analyse_only=True)
    gen = [c for c in res["checks"] if c["claim"].startswith("text/slots: generalises")]
    assert [c["verdict"] for c in gen] == ["failed"]
    assert res["claims"][0]["verdict"] == "failed"


@pytest.mark.parametrize("key, value, match", [
    ("encodings", ["onehot", "rope"], "encodings must be"),
    ("tasks", ["mean", "sum"], "tasks must be"),
    ("T_test", [8], "T_test must be"),
    ("seeds", 1, "seeds must be"),
    ("mults", [1.0, 1.0], "mults must be distinct"),
    ("mults_extra", [8.0, 8.0], "mults_extra must be distinct"),
    ("mults_extra", [0.0], "mults_extra must be"),
    ("T_test", [10 ** 6], "T_test must be"),
])
def test_bad_settings_are_refused_before_work(tmp_path, key, value, match):
    with pytest.raises(ValueError, match=match):
        run_study(text, str(tmp_path / "x"), mode="quick", overrides=dict(SMALL, **{key: value}))
    assert not (tmp_path / "x").exists()


def test_a_row_serves_only_the_settings_that_made_it(done, tmp_path):
    """Another step count: --analyse-only is refused (no row was made with it); a rerun
    computes its rows beside the old ones."""
    import shutil
    out = str(tmp_path / "copy")
    shutil.copytree(done[0], out)
    other = dict(SMALL, steps=31, tasks=["text"])
    with pytest.raises(ValueError, match="steps"):
        run_study(text, out, mode="quick", overrides=other, analyse_only=True)
    res = run_study(text, out, mode="quick", overrides=other)
    assert res["arms"] and all(a["task"] == "text" for a in res["arms"])
    rows = list(csv.DictReader(open(f"{out}/raw/runs.csv")))
    assert {json.loads(r["settings"])["steps"] for r in rows} == {30, 31}


def test_a_choice_at_an_end_of_the_grid_leaves_its_arm_inconclusive(done):
    """Where an arm's chosen multiplier is an end of the grid, its best step may lie
    outside it: its checks are inconclusive, saying so (the quick grid's ends)."""
    out, res = done
    ends = [c for c in res["checks"] if c.get("part") == "tuning" and c["verdict"] == "failed"]
    assert ends, "some arm should choose an end of a three-point grid"
    for e in ends:
        mine = [c for c in res["checks"] if c.get("encoding") == e["encoding"]
                and c.get("task") == e["task"] and c.get("part") != "tuning"]
        assert mine and all(c["verdict"] == "inconclusive" and "end of the grid" in
                            c["reason"] for c in mine)


def test_docs_quote_the_committed_run():
    """docs/text.md's table and counts are the committed text.json's."""
    import os
    root = os.path.join(os.path.dirname(__file__), "..")
    page = open(os.path.join(root, "docs", "text.md"), encoding="utf-8").read()
    data = json.load(open(os.path.join(root, "docs", "figures", "text", "text.json")))
    n = V.counts(data["checks"])
    assert (f"{sum(n.values())} checks: {n['held']} held, {n['failed']} failed, "
            f"{n['inconclusive']} inconclusive") in page
    for a in data["arms"]:
        fmt = (lambda x: f"{x:.3f}") if a["task"] == "masked" else (lambda x: f"{x:.3g}")
        m, se = a["in_distribution"]
        row = (f"| {a['task']} | {a['encoding']} | {a['mult']:g}")
        cells = [f"{fmt(m)} ± {se:.2g}"] + [fmt(a["length"][k][0]) for k in
                                             sorted(a["length"], key=int)]
        line = next(x for x in page.splitlines() if x.startswith(row))
        assert all(c in line for c in cells), (line, cells)


def _rows(arm, losses):
    task, enc = arm.split("/")
    return [{"task": task, "encoding": enc, "mult": m, "val": v, "status": "ok",
             "run_status": "completed"} for m, v in losses.items()]


def test_the_grid_is_extended_past_the_end_a_choice_sits_on():
    """``tuned``: an arm whose best multiplier is an end of ``mults`` is tried one step
    beyond it (the separation study's extend_rates), until its choice is interior or
    ``mults_extra`` has nothing beyond; every arm by the same rule."""
    from stsim.studies.cells import lr_edge
    from stsim.studies.text.runs import tuned
    cfg = dict(tasks=["text"], encodings=["onehot", "slots"], mults=[0.5, 1.0, 2.0],
               mults_extra=[0.25, 4.0, 8.0])
    rows = _rows("text/onehot", {0.5: 3.0, 1.0: 2.0, 2.0: 1.0}) + \
        _rows("text/slots", {0.5: 1.0, 1.0: 2.0, 2.0: 3.0})
    chosen, tried, missing = tuned(rows, cfg)
    assert chosen == {} and sorted((p["encoding"], p["mult"]) for p in missing) == \
        [("onehot", 4.0), ("slots", 0.25)]
    rows += _rows("text/onehot", {4.0: 0.5}) + _rows("text/slots", {0.25: 1.5})
    chosen, tried, missing = tuned(rows, cfg)
    assert chosen == {"text/slots": 0.5} and missing == [dict(task="text", encoding="onehot",
                                                               mult=8.0)]
    assert tried["text/slots"] == [0.25, 0.5, 1.0, 2.0]
    rows += _rows("text/onehot", {8.0: 0.1})        # still falling at the last one
    chosen, tried, missing = tuned(rows, cfg)
    assert chosen == {"text/onehot": 8.0, "text/slots": 0.5} and not missing
    assert lr_edge(tried["text/onehot"], 8.0, cfg["mults_extra"]) == "high-end"
    assert lr_edge(tried["text/slots"], 0.5, cfg["mults_extra"]) == ""


def test_analysis_refuses_a_table_without_the_extension_it_needs(done, tmp_path):
    """Seeded fault: the tuning rows past a grid's end removed — --analyse-only refuses,
    naming the arm and the multiplier, instead of choosing from the shorter grid."""
    import os
    import shutil
    out = str(tmp_path / "cut")
    shutil.copytree(done[0], out)
    path = f"{out}/raw/tune.csv"
    rows = list(csv.DictReader(open(path)))
    extra = [r for r in rows if float(r["mult"]) not in SMALL["mults"]]
    assert extra, "the quick grid should have been extended for some arm"
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(r for r in rows if r not in extra)
    os.remove(path + ".journal.jsonl")
    with pytest.raises(ValueError, match="extension needs"):
        run_study(text, out, mode="quick", overrides=SMALL, analyse_only=True)
