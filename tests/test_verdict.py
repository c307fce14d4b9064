"""The one verdict (stsim.util.verdict): every study's checks and the theory report's go
through it — a seeded fault in its critical value or its rule changes a figure verdict,
an attention-study verdict and a theory-report check alike."""
import pytest

from stsim.studies.attention.analysis import verdict as attention_verdict
from stsim.studies.figures.claims_reduced import _held
from stsim.studies.figures.verdicts import make_check
from stsim.theory.report import make_check as theory_check
from stsim.util import verdict as V


def _all():
    return (make_check("f", 0.0, "<=", 1.0, 0.1, df=2)["verdict"],          # 10 SE, t_2
            attention_verdict([0.009, 0.010, 0.011], "<=", 0.02, "a")["verdict"],
            theory_check("t", "v", "<= 1e-14", 1e-15, "<=", 1e-14)["passed"],
            bool(_held("S1", [0.0])[0]))


def test_every_study_is_judged_by_the_one_module(monkeypatch):
    assert _all() == ("held", "held", True, True)
    monkeypatch.setattr(V, "critical_value", lambda df=None: 1e3)          # seeded fault
    assert _all() == ("inconclusive", "inconclusive", True, True)         # exact: no k
    monkeypatch.setattr(V, "verdict", lambda *a, **k: ("failed", -1.0))   # seeded fault
    assert _all() == ("failed", "failed", False, False)


def test_the_rule():
    assert V.critical_value(None) == 2.0 and V.critical_value(1000) == 2.0   # never below 2
    assert V.critical_value(2) == pytest.approx(4.3027, abs=1e-4)
    with pytest.raises(ValueError, match="df"):
        V.critical_value(0)
    with pytest.raises(ValueError, match="op"):
        V.judge("x", 1.0, "==", 1.0)
    c = V.judge("x", 0.2, ">=", 0.15, 0.01, df=2)                          # 5 SE > 4.30
    assert (c["verdict"], c["exact"], c["df"]) == ("held", False, 2)
    assert V.judge("x", 0.19, ">=", 0.15, 0.01, df=2)["verdict"] == "inconclusive"
    assert V.judge("x", 0.1, ">=", 0.15, 0.01)["verdict"] == "failed"       # -5 SE, k = 2
    e = V.judge("x", 3, "<=", 3)
    assert (e["verdict"], e["exact"], e["critical"], e["margin_se"]) == ("held", True, 0.0, 0.0)
    assert V.judge("x", float("nan"), "<=", 3, 0.1)["verdict"] == "inconclusive"
    assert V.interval_se(-2.306, 2.306, 8) == pytest.approx(1.0, abs=1e-3)


def test_every_committed_check_is_as_the_one_module_judges_it():
    """The committed figures (checks and claims-map cells) and attention study: each
    recorded verdict, critical value and margin is what the module gives on the recorded
    evidence (a seeded fault — one attention check at the normal 1.96 — is caught)."""
    import glob
    import json
    import math
    import os

    from stsim.studies.figures.verdicts import rejudge
    docs = os.path.join(os.path.dirname(__file__), "..", "docs", "figures")

    def same(c, new):
        return (c["verdict"], c["critical"], c["exact"]) == \
            (new["verdict"], new["critical"], new["exact"]) and (
            c["margin_se"] == new["margin_se"] or math.isnan(c["margin_se"]))

    n = 0
    for path in glob.glob(os.path.join(docs, "*.json")):
        with open(path) as fh:
            d = json.load(fh)
        checks = d["checks"] if isinstance(d.get("checks"), list) else []
        for c in checks + (d.get("measured", {}).get("cells") or []):
            assert same(c, rejudge(c)), (path, c["claim"])
            n += 1
    with open(os.path.join(docs, "attention", "attention.json")) as fh:
        att = json.load(fh)["checks"]
    keys = ("claim", "measured", "op", "threshold", "se", "df")
    for c in att:
        assert same(c, V.judge(*(c[k] for k in keys))), c["claim"]
    assert n > 300 and len(att) > 90
    bad = dict(next(c for c in att if c["df"] == 8), critical=1.959964)
    assert not same(bad, V.judge(*(bad[k] for k in keys)))


def _committed_checks():
    """``{file: [check records]}`` of every JSON of the committed studies' outputs."""
    import glob
    import json
    import os
    docs = os.path.join(os.path.dirname(__file__), "..", "docs", "figures")
    out = {}
    for path in sorted(glob.glob(os.path.join(docs, "**", "*.json"), recursive=True)):
        with open(path) as fh:
            cs = V.find_checks(json.load(fh))
        if cs:
            out[os.path.relpath(path, docs)] = cs
    return out


def quote(c) -> str:
    """How a doc page quotes a check: ``verdict (measured ± se, critical k)``, ``verdict
    (exact: measured)`` or ``verdict (no standard error: measured)``."""
    import math
    v, m, se = c["verdict"], c["measured"], c["se"]
    if se is None or not math.isfinite(se):
        return f"{v} (no standard error: {m:.3g})"
    if c["exact"]:
        return f"{v} (exact: {m:.4g})"
    return f"{v} ({m:.3g} ± {se:.2g}, critical {c['critical']:.3g})"


def unquoted(page, jsons) -> list:
    """The checks of the committed ``jsons`` (paths under docs/figures) that the doc
    ``page`` (under docs/) does not quote (:func:`quote`)."""
    import json
    import os
    docs = os.path.join(os.path.dirname(__file__), "..", "docs")
    body = " ".join(open(os.path.join(docs, page), encoding="utf-8").read().split())
    out = []
    for j in jsons:
        with open(os.path.join(docs, "figures", j), encoding="utf-8") as fh:
            out += [(j, c["claim"], quote(c)) for c in json.load(fh)["checks"]
                    if quote(c) not in body]
    return out


#: the JSON of each study that carries its checks
STUDY_JSON = {"figures": "figures.json", "attention": "attention/attention.json",
              "targets": "targets/targets.json", "sparse": "sparse/summary.json",
              "sparse restarts": "sparse/restarts_summary.json",
              "sparse, the FCN's own protocol": "sparse/fcn_tuned_summary.json",
              "separation": "separation/summary.json",
              "expressivity": "expressivity/expressivity.json", "text": "text/text.json"}


def test_every_study_json_carries_its_checks_in_the_one_schema():
    """Every check of every committed study has the record's keys; an inconclusive one says
    why, a decided one does not; each is what the rule gives on its recorded numbers,
    unless it was made inconclusive for a stated reason."""
    found = _committed_checks()
    assert set(STUDY_JSON.values()) <= set(found), sorted(found)
    n = 0
    for path, checks in found.items():
        for c in checks:
            missing = [k for k in V.CHECK_KEYS if k not in c]
            assert not missing, (path, c["claim"], missing)
            assert c["verdict"] in V.VERDICTS, (path, c["claim"])
            assert bool(c["reason"]) == (c["verdict"] == "inconclusive"), (path, c["claim"])
            again = V.rejudge(c)
            assert again["verdict"] == c["verdict"] or (
                c["verdict"] == "inconclusive"                  # downgraded for a reason
                and not c["reason"].startswith("within")), (path, c["claim"])
            n += 1
    assert n > 400


def test_the_record_and_its_report():
    c = V.judge("a claim", 0.17, ">=", 0.15, 0.01, df=2, T=8)
    assert c["verdict"] == "inconclusive" and c["reason"].startswith("within the critical")
    assert c["T"] == 8 and list(c)[:len(V.CHECK_KEYS)] == list(V.CHECK_KEYS)
    with pytest.raises(ValueError, match="record's own"):
        V.judge("x", 1, ">=", 0, verdict="held")
    held = V.judge("b", 1.0, "<=", 2.0, 0.1)
    down = V.inconclusive(held, "2 run(s) failed")
    assert (held["verdict"], down["verdict"], down["reason"]) == ("held", "inconclusive",
                                                                  "2 run(s) failed")
    assert V.rejudge(down)["verdict"] == "held"                     # the downgrade is not
    assert V.rejudge(down, "2 run(s) failed")["verdict"] == "inconclusive"   # in the numbers
    failed = V.judge("f", 3.0, "<=", 2.0, 0.1)
    both = V.all_of("both", [held, failed])
    assert (both["verdict"], both["decided_by"], both["parts"]) == ("failed", "f", ["b", "f"])
    assert V.all_of("both", [held, held])["verdict"] == "held"
    und = V.all_of("both", [held, c])
    assert und["verdict"] == "inconclusive" and und["reason"].startswith("a claim: within")
    assert V.counts([held, failed, c]) == {"held": 1, "failed": 1, "inconclusive": 1}
    assert V.summary_line([held, failed, c]) == "3 checks: 1 held, 1 failed, 1 inconclusive"
    table = V.checks_table([held, down], context=("T",))
    assert table[0].startswith("| T | verdict | claim |") and "| **held** | b |" in table[2]
    assert "2 run(s) failed" in table[3]
    assert V.check_line(failed).startswith("failed: f — measured 3 <= 2 (se 0.1, critical 2")
