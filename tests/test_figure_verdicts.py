"""Verdicts that carry their uncertainty (stsim.studies.figures.verdicts), the final
estimates on large fresh sets (.evaluate) and the stability labels (.stability): each
check is shown failing on a seeded fault."""
import numpy as np
import pytest

import stsim
from stsim.core.config import Config
from stsim.studies.figures import evaluate as ev
from stsim.studies.figures.stability import (above_bound, needs_twin, oscillating,
                                             reduced_stability, step_bound, twin_options)
from stsim.studies.figures.verdicts import Boot, boot_check, make_check, relabel
from stsim.util.verdict import verdict


# --------------------------------------------------------------------------------------
# the verdict
# --------------------------------------------------------------------------------------
def test_a_value_within_two_standard_errors_is_inconclusive():
    assert verdict(0.018, "<=", 0.02, 0.0005) == ("held", pytest.approx(4.0))
    assert verdict(0.022, "<=", 0.02, 0.0005) == ("failed", pytest.approx(-4.0))
    assert verdict(0.0195, "<=", 0.02, 0.0005)[0] == "inconclusive"    # 1 SE inside
    assert verdict(0.0205, "<=", 0.02, 0.0005)[0] == "inconclusive"    # 1 SE outside
    assert verdict(1.25, ">", 1.0, 0.125) == ("held", 2.0)            # exactly 2 SE: decided
    assert verdict(1.19, ">", 1.0, 0.1)[0] == "inconclusive"
    # exact values (se = 0) are judged as written; a value that is not finite never holds
    assert verdict(1.0, ">=", 1.0, 0.0)[0] == "held" and verdict(1.0, ">", 1.0, 0.0)[0] == "failed"
    assert verdict(float("nan"), "<=", 1.0, 0.1)[0] == "inconclusive"
    assert verdict(0.5, "<=", 1.0, float("nan"))[0] == "inconclusive"
    with pytest.raises(ValueError, match="op"):
        verdict(1.0, "==", 1.0, 0.1)


def test_unstable_or_unmeasured_checks_are_never_held_or_failed():
    c = make_check("x", 0.01, "<=", 0.02, 0.001)
    assert c["verdict"] == "held" and c["ok"]
    u = relabel(c, "unstable: lr 7 above the stability bound 6")
    assert u["verdict"] == "inconclusive" and not u["ok"] and u["stability"].startswith("unstable")
    m = make_check("y", float("nan"), "<=", 0.02, float("nan"))
    assert m["unmeasured"] and relabel(m)["verdict"] == "inconclusive"


def test_bootstrap_standard_error_matches_the_closed_form():
    # a mean over seeds of per-seed means over blocks: SE = sqrt(var_between / S) (the
    # between-seed variance includes the within-seed one); the bootstrap recovers it
    rng = np.random.default_rng(0)
    S, K = 40, 64
    seed_means = 1.0 + 0.1 * rng.standard_normal(S)
    blocks = seed_means[:, None] + 0.2 * rng.standard_normal((S, K))
    boot = Boot(n_boot=2000)
    within = np.array([boot.blocks(f"r{i}", "val", b) for i, b in enumerate(blocks)])
    smp = boot.sample(blocks.mean(1), within, runs=[f"r{i}" for i in range(S)])
    c = boot_check("mean", lambda x: x.mean(-1), [smp], "<=", 2.0)
    closed = blocks.mean(1).std(ddof=1) / np.sqrt(S)
    assert c["se"] == pytest.approx(closed, rel=0.15)
    # seeded fault: the replicates of one seed alone (no seed resampling) underestimate it
    wrong = np.std(within.mean(0), ddof=1)
    assert wrong < 0.5 * closed
    # a worst-seed statistic gets a standard error too, and the runs it used
    w = boot_check("worst", lambda x: x.max(-1), [smp], "<=", 2.0)
    assert w["se"] > 0 and len(w["runs"]) == S


# --------------------------------------------------------------------------------------
# the final estimates
# --------------------------------------------------------------------------------------
def _onehot_run(a, gamma, seed, T=12, q=3, d=4, T_test=(16,), q_test=(2,)):
    """A Result holding W_ee = a (I − J/T) on the trained block, V_x = γ I (the reduced
    state), for a fixed one-hot PE of width max(T_test)."""
    cfg = Config.from_options(T=T, q=q, d=d, pe="onehot", d_e=max(T_test), T_test=list(T_test),
                              q_test=list(q_test), seed=seed, steps=1, lr=0.1)
    D = d + cfg.d_e
    W, V = np.zeros((D, D)), np.zeros((d, D))
    W[d:d + T, d:d + T] = a * (np.eye(T) - 1.0 / T)
    V[:, :d] = gamma * np.eye(d)
    return stsim.core.result.Result(config=cfg.to_dict(), params={"W": W, "V": V},
                                    history={"step": np.array([0])}, status="completed",
                                    message="", info={})


def test_final_estimate_is_unbiased_and_its_standard_error_calibrated():
    # the exact population losses at a reduced state (in distribution, longer T, other q)
    # against the estimate: z = (estimate − exact) / SE over 24 seeds is ~ N(0, 1)
    from stsim.theory.reduced import ood_loss_onehot, reduced_loss
    a, g, T, q, d = 2.0, 0.9, 12, 3, 4
    exact = {"val": reduced_loss(a, g, T, q, d), "val/T=16": ood_loss_onehot(a, g, T, 16, q, d),
             "val/q=2": reduced_loss(a, g, T, 2, d)}
    settings = dict(block=32, n_min=512, n_max=2048, rel_se=0.02)
    z = {k: [] for k in exact}
    for seed in range(24):
        out = ev.evaluate_run(_onehot_run(a, g, seed), settings)
        for k, e in out["sets"].items():
            assert e["n"] >= 512 and len(e["final"]) == e["n"] // 32
            assert e["se"] <= 0.02 * e["mean"] or e["n"] == 2048
            z[k].append((e["mean"] - exact[k]) / e["se"])
    zs = np.concatenate([np.array(v) for v in z.values()])
    assert abs(zs.mean()) < 0.5 and 0.6 < zs.std() < 1.5
    # seeded fault in the evaluation: its blocks repeat (4 distinct draws, cycled), so the
    # block means are not independent and the SE is too small: the z-scores spread out
    from stsim.core.problem import TransformerProblem as Problem
    real = Problem._draw
    count = {}

    def repeating(self, rng, b, T, q, part="train"):
        key = id(rng)       # the generator is kept in its entry, so no later one gets its id
        base = count.setdefault(key, [int(rng.integers(2 ** 31)), 0, rng])
        base[1] += 1
        return real(self, np.random.default_rng([base[0], base[1] % 4]), b, T, q, part)
    Problem._draw = repeating
    try:
        bad = []
        for seed in range(24):
            out = ev.evaluate_run(_onehot_run(a, g, seed), settings)
            bad += [(e["mean"] - exact[k]) / e["se"] for k, e in out["sets"].items()]
    finally:
        Problem._draw = real
    assert not (0.6 < np.std(bad) < 1.5), np.std(bad)


def test_each_evaluation_set_has_its_own_stream():
    a = ev.evaluate_run(_onehot_run(2.0, 0.9, 0, T_test=(16,)), dict(block=32, n_min=64,
                                                                     n_max=64, rel_se=1))
    b = ev.evaluate_run(_onehot_run(2.0, 0.9, 0, T_test=(14, 16)), dict(block=32, n_min=64,
                                                                          n_max=64, rel_se=1))
    assert a["sets"]["val/T=16"]["final"] == b["sets"]["val/T=16"]["final"]
    assert a["sets"]["val"]["final"] == b["sets"]["val"]["final"]
    # not the training-time validation sets: another stream
    r = _onehot_run(2.0, 0.9, 0)
    from stsim.core.problem import make_problem
    val = make_problem(Config.from_options(**r.config)).val["val"]
    from stsim.core.model import forward_backward
    b0, pe = val
    first = forward_backward(r.W, r.V, b0.X[:32], b0.y[:32], pe, need_grad=False)[0]
    assert first != a["sets"]["val"]["final"][0]


def test_a_diverged_run_has_no_estimate_and_its_checks_are_unmeasured():
    r = _onehot_run(2.0, 0.9, 0)
    r.status = "diverged"
    out = ev.evaluate_run(r, dict(block=32, n_min=64, n_max=64, rel_se=1))
    assert out["sets"] == {}
    r.info["evaluation"] = out
    boot = Boot(n_boot=50)
    ok = _onehot_run(2.0, 0.9, 1)
    ok.info["evaluation"] = ev.evaluate_run(ok, dict(block=32, n_min=64, n_max=64, rel_se=1))
    smp = ev.eval_sample(boot, {"a": r, "b": ok}, ["a", "b"], "val")
    c = boot_check("worst", lambda x: x.max(-1), [smp], "<=", 1.0)
    assert c["unmeasured"] and c["verdict"] == "inconclusive" and c["runs"] == ["a", "b"]


# --------------------------------------------------------------------------------------
# stability
# --------------------------------------------------------------------------------------
def test_step_bounds_of_each_model():
    base = dict(T=200, q=3, d=5, steps=10, seed=0, optimizer="sgd")
    b, why = step_bound(dict(base, pe="stochastic", d_e=400, lr=5.0))
    assert b == 6.0 and "eta_max" in why                               # 2q
    b, _ = step_bound(dict(base, pe="stochastic", d_e=400, lr=5.0, model="practical",
                           query="mean"))
    assert b == pytest.approx(2 * 16 / 3)                               # 2(q+1)^2/q
    b, _ = step_bound(dict(base, T=20, pe="onehot", d_e=40, lr=5.0))
    assert b == pytest.approx(2.5)                  # transverse: 2n/((q-1)(q+d)), n = T
    assert step_bound(dict(base, pe="onehot", d_e=400, lr=0.01, optimizer="adam"))[0] is None
    assert above_bound(dict(base, T=20, pe="onehot", d_e=40, lr=5.0)).startswith("unstable")
    assert above_bound(dict(base, pe="stochastic", d_e=400, lr=6.0)) is None   # at, not above
    assert above_bound(dict(base, pe="stochastic", d_e=400, lr=7.0)).startswith("unstable")


def test_twins_are_trained_at_the_edge_and_move_the_lr_by_one_ulp():
    base = dict(T=200, q=3, d=5, steps=10, pe="stochastic", d_e=400, optimizer="sgd")
    assert needs_twin(dict(base, lr=5.5, seed=0), 1e4)          # 0.92 of the bound
    assert not needs_twin(dict(base, lr=5.0, seed=0), 1e4)      # 0.83, expensive
    assert needs_twin(dict(base, lr=5.0, seed=0), 1.0)          # cheap
    assert not needs_twin(dict(base, lr=5.5, seed=1), 1e4)      # first seed only
    assert not needs_twin(dict(base, lr=7.0, seed=0), 1.0)      # above: unstable anyway
    t = twin_options(dict(base, lr=5.0))["lr"]
    assert t > 5.0 and t == np.nextafter(5.0, np.inf)


def test_oscillating_trajectories_are_detected():
    t = np.arange(300)
    assert not oscillating((1 + 1 / (t + 1))[None])[0]                 # monotone
    period2 = 1 + 0.01 * (-1) ** t
    assert oscillating(period2[None])[0]
    damped = 1 + 0.3 * (-0.5) ** t + 1e-2 * t       # dies within a few steps, then drifts
    assert not oscillating(damped[None])[0]
    # the exact reduced map: stable below 2q, oscillating above it (T = 20, 3 000 steps)
    *_, osc = reduced_stability(20, 3, 5, [5.0, 6.0, 7.5], 3000, pe="stochastic", d_e=40,
                                record_every=10)
    assert osc[:, -1].tolist() == [False, False, True]


def test_one_seed_without_sampling_error_has_no_standard_error():
    # a cosine of one run: every bootstrap replicate is the same number, so its spread
    # (0 or a rounding residue, 1e-17) is no standard error; the verdict is inconclusive,
    # never "failed by 3e13 SE"
    boot = Boot(n_boot=200)
    one = boot.sample([0.983], runs=["r0"])
    c = boot_check("cos", lambda x: x.min(-1), [one], ">=", 0.99)
    assert np.isnan(c["se"]) and c["verdict"] == "inconclusive" and "one seed" in c["note"]
    # two seeds that differ: a standard error and a verdict
    two = boot.sample([0.983, 0.984], runs=["r0", "r1"])
    c2 = boot_check("cos", lambda x: x.min(-1), [two], ">=", 0.99)
    assert 0 < c2["se"] < 1e-3 and c2["critical"] == pytest.approx(12.706, abs=1e-3)
    assert c2["verdict"] == "inconclusive"        # 11.5 SE below: t with 1 d.o.f.
    far = boot_check("cos", lambda x: x.min(-1), [boot.sample([0.95, 0.951],
                                                               runs=["r0", "r1"])], ">=", 0.99)
    assert far["verdict"] == "failed"


# --------------------------------------------------------------------------------------
# the committed full run (docs/figures)
# --------------------------------------------------------------------------------------
def _committed_checks():
    import json
    import pathlib
    path = pathlib.Path(__file__).resolve().parents[1] / "docs" / "figures" / "figures.json"
    overview = json.loads(path.read_text())
    return overview, [c for cs in overview["checks"].values() for c in cs]


def _consistent(c):
    """The stored verdict is the one its value, threshold and SE give (relabelled
    inconclusive where unstable or unmeasured)."""
    v, _ = verdict(c["measured"], c["op"], c["threshold"], c["se"], c["critical"])
    if c["stability"] != "stable" or c["unmeasured"]:
        v = "inconclusive"
    return v == c["verdict"]


def test_every_committed_check_has_its_standard_error_and_a_consistent_verdict():
    overview, checks = _committed_checks()
    assert overview["mode"] == "full" and checks
    assert sum(overview["verdicts"][v] for v in ("held", "failed", "inconclusive")) == \
        len(checks)
    for c in checks:
        assert "se" in c and c["verdict"] in ("held", "failed", "inconclusive"), c["claim"]
        assert _consistent(c), c
    # seeded fault: a check whose verdict was written without its SE (held at a margin
    # of 1 SE) is caught
    c = dict(next(c for c in checks if c["se"] > 0 and c["stability"] == "stable"))
    c["measured"] = c["threshold"] + (c["se"] if c["op"][0] == ">" else -c["se"])
    c["verdict"] = "held"
    assert not _consistent(c)


# --------------------------------------------------------------------------------------
# small samples: the t critical value and the bias-corrected bootstrap
# --------------------------------------------------------------------------------------
from stsim.studies.figures.verdicts import rejudge  # noqa: E402
from stsim.util.verdict import critical_value  # noqa: E402


def n_seeds(runs) -> int:
    """The number of seeds of the setting with the fewest among ``runs`` (names holding a
    ``-s<seed>`` part; a name without one counts as one seed)."""
    import re
    per = {}
    for r in runs:
        m = re.search(r"-s(\d+)(?=-|$)", r)
        key, seed = (r[:m.start()] + r[m.end():], m.group(1)) if m else (r, "0")
        per.setdefault(key, set()).add(seed)
    return min((len(v) for v in per.values()), default=1)


def test_three_seeds_are_judged_at_t_with_two_degrees_of_freedom():
    """A mean over S = 3 seeds: the bootstrap SE times sqrt(3/2) is the closed-form SE
    s/sqrt(3) (the raw bootstrap is sqrt(2/3) of it), judged at t_{0.975, 2} = 4.30."""
    vals = np.array([1.0, 1.3, 0.8])
    smp = Boot(n_boot=20000).sample(vals, runs=["r-s0", "r-s1", "r-s2"])
    c = boot_check("mean", lambda x: x.mean(-1), [smp], "<=", 2.0)
    closed = vals.std(ddof=1) / np.sqrt(3)
    assert c["se"] == pytest.approx(closed, rel=0.02)
    assert c["se_bootstrap"] == pytest.approx(closed * np.sqrt(2 / 3), rel=0.02)
    assert c["df"] == 2 and c["critical"] == pytest.approx(4.3027, abs=1e-4)
    # 3.5 SE from the threshold: held under the 2-SE rule, inconclusive at t
    far = boot_check("mean", lambda x: x.mean(-1), [smp], "<=", 1.0333 + 3.5 * c["se"])
    assert far["verdict"] == "inconclusive" and 3.4 < far["margin_se"] < 3.6
    assert verdict(0.0, "<=", 3.5, 1.0)[0] == "held"                   # the old rule


def test_critical_value_by_degrees_of_freedom():
    assert critical_value(None) == 2.0 and critical_value(2) == pytest.approx(4.3027, abs=1e-4)
    assert critical_value(1000) == 2.0                                  # never below 2
    assert critical_value(31) == pytest.approx(2.0395, abs=1e-4)
    assert n_seeds(["a-s0", "a-s1", "b-s0-lr2", "b-s1-lr2", "b-s2-lr2"]) == 2
    with pytest.raises(ValueError, match="df"):
        critical_value(0)


def test_rejudge_judges_again_from_the_recorded_evidence():
    old = {"claim": "x", "measured": 0.2, "se": 0.01, "op": ">=", "threshold": 0.15,
           "verdict": "held", "margin_se": 5.0, "critical": 2.0, "df": 2, "ok": True,
           "note": "", "unmeasured": False, "stability": "stable",
           "runs": ["f/a-s0", "f/a-s1", "f/a-s2"], "se_bootstrap": 0.008}
    new = rejudge(old)                       # a stale critical value (2 for 2 d.o.f.)
    assert new["critical"] == pytest.approx(4.3027, abs=1e-4) and new["verdict"] == "held"
    assert new["se"] == 0.01 and new["se_bootstrap"] == 0.008 and new["exact"] is False
    assert rejudge(dict(old, measured=0.19))["verdict"] == "inconclusive"      # 4 SE < 4.30
    assert rejudge(new) == new                                          # idempotent
    exact = rejudge(dict(old, se=0.0))
    assert exact["verdict"] == "held" and exact["critical"] == 0.0 and exact["exact"]
    assert rejudge(dict(old, stability="unstable: x"))["verdict"] == "inconclusive"


def _agrees(c):
    if c["stability"] != "stable" or c["unmeasured"] or not np.isfinite(c["se"]):
        return c["verdict"] == "inconclusive"
    m, k = c["margin_se"], c["critical"]
    if c["se"] == 0:
        return c["verdict"] in ("held", "failed") and k == 0
    return c["verdict"] == ("held" if m >= k else "failed" if m <= -k else "inconclusive")


def test_committed_checks_record_critical_and_agree_with_their_margin():
    import json
    import os
    path = os.path.join(os.path.dirname(__file__), "..", "docs", "figures", "figures.json")
    with open(path) as fh:
        checks = [c for cs in json.load(fh)["checks"].values() for c in cs]
    assert len(checks) > 100
    for c in checks:
        assert "critical" in c and _agrees(c), c["claim"]
        if c["se"] > 0 and n_seeds(c["runs"]) == 3:
            assert c["critical"] == pytest.approx(4.3027, abs=1e-4), c["claim"]
    # seeded fault: a verdict at 2 SE where t says 4.30 is caught
    bad = dict(next(c for c in checks if c.get("df") == 2), margin_se=3.0, verdict="held")
    assert not _agrees(bad)


def test_systematic_misfit_is_shown_when_every_seed_misses_the_same_way():
    from stsim.studies.figures.fig2 import systematic_check
    same = [{"measured": m, "exact": 1.0, "se": 0.01} for m in (1.05, 1.04, 1.06)]
    c = systematic_check(same, 300, "Adam: ")
    assert c["verdict"] == "held" and c["measured"] == pytest.approx(0.05)
    assert c["se"] == pytest.approx(0.01 / np.sqrt(3)) and "+++" in c["note"]
    mixed = [{"measured": m, "exact": 1.0, "se": 0.01} for m in (1.01, 0.99, 1.005)]
    assert systematic_check(mixed, 300)["verdict"] == "inconclusive"


def test_s5_on_the_tail_sees_a_dip_the_last_point_hides():
    from stsim.studies.figures.fig4 import tail_check
    rng = np.random.default_rng(1)
    flat = [0.2 + 0.002 * rng.standard_normal((40, 4)) for _ in range(3)]
    assert tail_check("x", flat)["verdict"] == "held"
    dip = [c.copy() for c in flat]
    for c in dip:                           # the tail dips to 0.14, the last record is 0.2
        c[30:39] = 0.14
    t = tail_check("x", dip)
    assert t["verdict"] == "failed" and t["measured"] < 0.15 and dip[0][-1].min() > 0.19
