"""The (T, m) sample-complexity study (stsim.studies.sparse) and its CLI."""
import concurrent.futures as cf
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

from stsim.cli import main as cli_main
from stsim.studies.sparse import boolean as sparse_boolean
from stsim.studies.sparse import study as sparse
from stsim.studies.sparse.design import plan
from stsim.sweeps import InlineExecutor, make_executor, read_table

TINY = dict(sparse.QUICK, Ts=(8, 16), m_min=8, m_max=32, ratio=2.0, fns="majority:3",
            seeds=2, max_steps=40, n_test=200)


def run_experiment(cfg, out, executor=None):
    """check + run of the study on ``executor`` (default inline); the run record with the
    table's ok rows, the m grid and the design's replicate seeds."""
    cfg = sparse.check(cfg)
    sparse.run(cfg, out, executor if executor is not None else InlineExecutor())
    rec = json.load(open(os.path.join(out, "run.json")))
    p = plan(cfg)
    rows = [r for r in read_table(os.path.join(out, "trials.csv")) if r["status"] == "ok"]
    return dict(rec, rows=rows, grid=p["grid"], seeds=p["seeds"])


def test_m_grid_and_fns_parsing():
    assert sparse.m_grid(16, 64, math.sqrt(2)) == [16, 23, 32, 45, 64]
    assert sparse.m_grid(8, 100, 2) == [8, 16, 32, 64]
    assert sparse.parse_fns("and:3, parity:2,majority") == [("and", 3), ("parity", 2),
                                                            ("majority", 3)]
    with pytest.raises(ValueError, match="ratio must be a finite number > 1"):
        sparse.m_grid(8, 64, 1.0)
    with pytest.raises(ValueError, match="m_max must be an integer >= 8"):
        sparse.m_grid(8, 4)
    with pytest.raises(ValueError, match="fns entries look like"):
        sparse.parse_fns("and:x")


def _stats(rates, key=("and", 3, "attention", 64)):
    return {key + (m,): {"rate": r, "opt_fail": 0, "stat_fail": 0} for m, r in rates.items()}


def test_mstar_interpolates_in_log_m_and_marks_censoring():
    grid = [16, 32, 64, 128]
    st = _stats({16: 0.0, 32: 0.5, 64: 1.0, 128: 1.0})
    (r,) = sparse.estimate_mstar(st, grid, 0.9)
    # 0.9 is 80 % of the way from 0.5 to 1.0 in log m between 32 and 64
    assert r["m_star"] == pytest.approx(32 * 2 ** 0.8) and r["m_grid"] == 64
    assert r["censored"] is None
    (r,) = sparse.estimate_mstar(_stats({16: 0.9, 32: 1.0}), grid, 0.9)
    assert r["censored"] == "below" and r["m_star"] == 16
    (r,) = sparse.estimate_mstar(_stats({16: 0.1, 32: 0.8}), grid, 0.9)
    assert r["censored"] == "above" and r["m_star"] is None and r["m_max"] == 32


def test_fits_recover_known_laws_and_pick_the_better_one():
    Ts = [16, 32, 64, 128, 256, 512]
    rows = [dict(fn="and", s=3, model="attention", T=T, m_star=10 * math.log2(T) + 5)
            for T in Ts]
    rows += [dict(fn="and", s=3, model="fcn", T=T, m_star=3.0 * T + 7) for T in Ts]
    rows.append(dict(fn="and", s=3, model="fcn", T=1024, m_star=None))
    fits = sparse.fit_mstar(rows)
    att, fcn = fits["and:3/attention"], fits["and:3/fcn"]
    assert att["log_T"]["a"] == pytest.approx(10) and att["log_T"]["b"] == pytest.approx(5)
    assert att["better"] == "log_T" and fcn["better"] == "linear_T"
    assert fcn["linear_T"]["a"] == pytest.approx(3) and fcn["censored_above"] == [1024]
    assert fcn["power_T"]["a"] == pytest.approx(1.0, abs=0.1)


def test_experiment_runs_resumes_and_is_executor_independent(tmp_path):
    out1, out2 = str(tmp_path / "inline"), str(tmp_path / "threads")
    e1 = run_experiment(TINY, out1, executor=InlineExecutor())
    with cf.ThreadPoolExecutor(2) as ex:
        run_experiment(TINY, out2, executor=ex)
    with open(os.path.join(out1, "trials.csv")) as f1, open(os.path.join(out2, "trials.csv")) as f2:
        t1 = [r for r in f1.read().splitlines()]
        t2 = [r for r in f2.read().splitlines()]
    # identical tables except the cpu-time column
    cols = t1[0].split(",")
    keep = [i for i, c in enumerate(cols) if c != "cpu_time_s"]
    strip = lambda rows: [[r.split(",")[i] for i in keep] for r in rows]  # noqa: E731
    assert strip(t1) == strip(t2)
    assert e1["n_run"] == len(t1) - 1 > 0
    again = run_experiment(TINY, out1, executor=InlineExecutor())
    assert again["n_run"] == 0 and len(again["rows"]) == len(e1["rows"])
    # a row serves only the trial settings that made it: another lr analyses no trial
    from stsim.studies.sparse.analysis import analyse
    assert analyse(sparse.check(TINY), out1)["n_trials"] == len(e1["rows"])
    assert analyse(sparse.check(dict(TINY, lr=0.01)), out1)["n_trials"] == 0


def test_resume_after_topup_retires_the_same_series(tmp_path, monkeypatch):
    # a trial that succeeds on 9 of the 10 ladder seeds and on none of the top-up seeds:
    # the ladder retires every series at the first two levels (0.9 each), the top-up takes
    # those cells to 30 trials (rate 9/30); a rerun must read the ladder's 10-trial rates
    # again, not the 30-trial ones, and so run nothing new
    from stsim.sweeps import spawn_seeds
    wins = set(spawn_seeds(10)[:9])

    def fake_trial(seed, **point):
        ok = seed in wins
        return dict(success=int(ok), train_acc=1.0, test_acc=1.0 if ok else 0.5,
                    attn_on_support=None, max_block_norm=1.0, cpu_time_s=0.0)
    monkeypatch.setattr("stsim.studies.sparse.runs.train_trial", fake_trial)
    cfg = dict(TINY, Ts=(8,), fns="and:3", models="attention", seeds=10, topup=30,
               stop_after=2, m_max=64)
    first = run_experiment(cfg, str(tmp_path), executor=InlineExecutor())
    assert {r["m"] for r in first["rows"]} == {8, 16}            # retired after two levels
    assert first["n_run"] == 2 * 30
    again = run_experiment(cfg, str(tmp_path), executor=InlineExecutor())
    assert again["n_run"] == 0 and {r["m"] for r in again["rows"]} == {8, 16}


def test_ladder_retires_series_and_leaves_cells_not_run(tmp_path):
    cfg = dict(TINY, Ts=(8,), m_max=64, stop_after=1, max_steps=200)
    exp = run_experiment(cfg, str(tmp_path), executor=InlineExecutor())
    stats = sparse.cell_stats(exp["rows"])
    retired = 0
    for model in ("attention", "fcn"):
        ms = sorted(k[4] for k in stats if k[2] == model)
        rates = [stats[("majority", 3, model, 8, m)]["rate"] for m in ms]
        # the ladder stopped right after the first grid size at or above the level, or ran
        # every grid size if none reached it
        first = next((i for i, r in enumerate(rates) if r >= 0.9), None)
        assert len(ms) == (first + 1 if first is not None else len(exp["grid"])), (ms, rates)
        retired += first is not None and len(ms) < len(exp["grid"])
    assert retired >= 1          # the configuration does exercise the early retirement
    full = dict(cfg, stop_after=0)
    exp0 = run_experiment(full, str(tmp_path / "all"), executor=InlineExecutor())
    assert len({r["m"] for r in exp0["rows"]}) == 4


def test_bad_settings_fail_before_any_work(tmp_path):
    with pytest.raises(ValueError, match=r"s must be an integer in \[1, 8\]"):
        run_experiment(dict(TINY, fns="and:9", Ts=(8,)), str(tmp_path))
    with pytest.raises(ValueError, match="level"):
        run_experiment(dict(TINY, level=0.0), str(tmp_path))
    assert not os.path.exists(tmp_path / "trials.csv")


def test_cli_quick_writes_every_output(tmp_path):
    out = str(tmp_path / "q")
    assert cli_main(["sparse", "--quick", "--Ts", "8,16", "--m_max", "32", "--seeds", "2",
                     "--max_steps", "40", "--workers", "0", "--out", out,
                     "--quiet"]) == 0
    for name in ("trials.csv", "mstar.csv", "fits.json", "report.md", "summary.json",
                 "sparse_heatmap.png", "sparse_mstar.png"):
        assert os.path.getsize(os.path.join(out, name)) > 0, name
    summary = json.load(open(os.path.join(out, "summary.json")))
    assert summary["mode"] == "quick" and summary["n_trials"] == len(read_table(
        os.path.join(out, "trials.csv")))
    assert set(summary["m_star"]) == {"0.9", "0.5"}
    assert {r["model"] for r in summary["m_star"]["0.9"]} == {"attention", "fcn"}
    with open(os.path.join(out, "mstar.csv")) as fh:
        assert {line.split(",")[0] for line in fh.read().splitlines()[1:]} == {"0.90", "0.50"}


@pytest.mark.parametrize("argv,match", [
    (["--Ts", "2", "--fns", "and:3"], "s must be an integer in [1, 2]"),
    (["--fns", "majority:2"], "s must be odd"),
    (["--m_min", "0"], "m_min must be an integer >= 1"),
    (["--lr", "-1"], "lr must be a finite number > 0"),
    (["--pos", "rope"], "pos must be one of"),
])
def test_cli_bad_input_is_one_line_and_exit_2(tmp_path, argv, match):
    p = subprocess.run([sys.executable, "-m", "stsim", "sparse", "--quick", "--workers", "0",
                        "--out", str(tmp_path / "x"), *argv], capture_output=True, text=True)
    assert p.returncode == 2
    assert p.stderr.startswith("stsim: error: ") and match in p.stderr, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


def test_command_in_a_subprocess(tmp_path):
    p = subprocess.run([sys.executable, "-m", "stsim", "sparse", "--Ts", "8", "--m_max", "16", "--seeds", "2",
                        "--max_steps", "20", "--workers", "0", "--quiet",
                        "--out", str(tmp_path)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert os.path.exists(tmp_path / "sparse_heatmap.png")
    summary = json.load(open(tmp_path / "summary.json"))
    assert np.isfinite(summary["wall_time_s"])
    # 2 functions x 2 models x T=8 x m in {8, 16} (two levels: no series can retire
    # before the last) x 2 seeds = 16 trials, all run now
    assert summary["n_run"] == summary["n_trials"] == 16
    assert "16 trials run" in p.stdout
    # a row of the table is the trial computed here with the same settings and seed
    rows = read_table(str(tmp_path / "trials.csv"))
    r = next(r for r in rows if r["model"] == "attention" and r["m"] == 16)
    keys = ("fn", "s", "model", "T", "m", "max_steps", "lr", "weight_decay", "max_norm",
            "d_v", "hidden", "n_test", "threshold", "pos")
    here = sparse_boolean.train_trial(**{k: r[k] for k in keys}, seed=r["seed"])
    for k in ("test_acc", "train_acc", "train_loss", "max_block_norm", "attn_on_support"):
        assert here[k] == r[k], k


@pytest.mark.pool
def test_process_pool_path_matches_inline(tmp_path):
    """The CLI's pool (spawned workers, one BLAS thread each) gives the inline table."""
    cfg = dict(TINY, Ts=(8,), m_max=16)
    run_experiment(cfg, str(tmp_path / "a"))
    ex = make_executor(2)
    try:
        run_experiment(cfg, str(tmp_path / "b"), ex)
    finally:
        ex.shutdown()
    drop = lambda rows: [{k: v for k, v in r.items() if k != "cpu_time_s"} for r in rows]  # noqa: E731
    assert drop(read_table(str(tmp_path / "a" / "trials.csv"))) == \
        drop(read_table(str(tmp_path / "b" / "trials.csv")))


def test_truth_table_from_the_command_line_resumes(tmp_path):
    argv = ["sparse", "--quick", "--fns", "table:3", "--table", "01101001", "--Ts", "8", "--m_max", "16",
            "--seeds", "2", "--max_steps", "20", "--workers", "0", "--quiet",
            "--out", str(tmp_path)]
    assert cli_main(argv) == 0
    rows = read_table(str(tmp_path / "trials.csv"))
    assert {r["table"] for r in rows} == {"-++-+--+"}
    n = len(rows)
    assert cli_main(argv) == 0
    assert json.load(open(tmp_path / "summary.json"))["n_run"] == 0
    assert len(read_table(str(tmp_path / "trials.csv"))) == n


def test_wilson_interval_is_the_score_interval():
    from stsim.util.stats import wilson_interval
    for k, n in ((5, 10), (9, 10), (0, 10), (30, 30), (7, 30)):
        z, p = 1.959963984540054, k / n
        c = (p + z * z / (2 * n)) / (1 + z * z / n)
        h = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
        assert wilson_interval(k, n) == pytest.approx((c - h, c + h), abs=1e-12)
    assert wilson_interval(0, 0) == (0.0, 1.0)


def test_mstar_bootstrap_interval_brackets_the_estimate():
    grid = [16, 32, 64, 128, 256]
    counts = {16: (0, 10), 32: (5, 10), 64: (26, 30), 128: (30, 30), 256: (10, 10)}
    st = {("and", 3, "attention", 64, m): {"rate": k / n, "n": n, "opt_fail": 0, "stat_fail": 0}
          for m, (k, n) in counts.items()}
    (r,) = sparse.estimate_mstar(st, grid, 0.9)
    assert 32 < r["m_star_lo"] < r["m_star"] < r["m_star_hi"] <= 128
    assert r["m_star"] == pytest.approx(64 * 2 ** ((0.9 - 26 / 30) / (1 - 26 / 30)))
    assert r["n"] == "10 10 30 30 10" and r["m_max"] == 256
    assert sparse.estimate_mstar(st, grid, 0.9) == [r]          # seeded: reproducible
    # a series whose crossing is at a 9/10 cell: often no crossing at all -> open above
    st2 = {("and", 3, "attention", 64, m): {"rate": k / n, "n": n, "opt_fail": 0, "stat_fail": 0}
           for m, (k, n) in {16: (2, 10), 32: (9, 10)}.items()}
    (r2,) = sparse.estimate_mstar(st2, [16, 32], 0.9)
    assert r2["m_star"] == 32 and r2["m_star_hi"] is None and r2["m_star_lo"] is not None
    # the ends are crossings a redraw can have (order statistics, not interpolations)
    reachable = {sparse.crossing([16, 32], [k0 / 10, k1 / 10], 0.9)[0]
                 for k0 in range(11) for k1 in range(11)} - {None}
    assert r2["m_star_lo"] in reachable
    assert r["m_star_lo"] in {sparse.crossing(grid, [k0 / 10, k1 / 10, k2 / 30, 1, 1], 0.9)[0]
                              for k0 in range(11) for k1 in range(11) for k2 in range(31)}


def test_mstar_bootstrap_counts_never_crossing_draws_at_the_lower_end():
    # most redraws of this series never reach 0.9 (its last cell is 8/10); the lower end
    # is the 2.5% quantile of all draws (the non-crossing ones as +inf), so it lies above
    # the 2.5% quantile of the crossing draws alone
    grid = [16, 32, 64]
    counts = {16: (3, 10), 32: (7, 10), 64: (8, 10)}
    st = {("and", 3, "attention", 64, m): {"rate": k / n, "n": n, "opt_fail": 0, "stat_fail": 0}
          for m, (k, n) in counts.items()}
    (r,) = sparse.estimate_mstar(st, grid, 0.9, n_boot=4000, seed=1)
    assert r["m_star"] is None and r["m_star_hi"] is None
    rng = np.random.default_rng(1)
    n = np.array([10, 10, 10])
    draws = rng.binomial(n, np.array([0.3, 0.7, 0.8]), size=(4000, 3)) / n
    boot = [sparse.crossing(grid, d, 0.9)[0] for d in draws]
    crossing = sorted(b for b in boot if b is not None)
    assert 0.025 * 4000 < len(crossing) < 0.975 * 4000
    assert r["m_star_lo"] > np.quantile(crossing, 0.025, method="inverted_cdf")
    k = int(np.ceil(0.025 * 4000))                 # inverted_cdf: the k-th smallest draw
    assert r["m_star_lo"] == crossing[k - 1]


def test_topup_adds_trials_only_where_the_rate_is_uncertain(tmp_path):
    base = run_experiment(TINY, str(tmp_path / "base"), executor=InlineExecutor())
    cfg = dict(TINY, topup=5, topup_range=(0.2, 0.95))
    exp = run_experiment(cfg, str(tmp_path / "topup"), executor=InlineExecutor())
    first = sparse.cell_stats(base["rows"])
    stats = sparse.cell_stats(exp["rows"], set(exp["seeds"]))
    assert set(first) == set(stats)
    topped = [k for k, c in first.items() if 0.2 <= c["rate"] <= 0.95]
    assert topped, "the configuration exercises the top-up"
    for k, c in stats.items():
        assert c["n"] == (5 if k in topped else 2), (k, c["n"], first[k]["rate"])
    # the ladder's replicates are the same trials with and without the top-up
    key = lambda r: (r["model"], r["T"], r["m"], r["seed"], r["test_acc"])  # noqa: E731
    assert {key(r) for r in base["rows"]} <= {key(r) for r in exp["rows"]}
    assert exp["levels"][-1]["m"] == "topup" and exp["levels"][-1]["series"] == len(topped)
    again = run_experiment(cfg, str(tmp_path / "topup"), executor=InlineExecutor())
    assert again["n_run"] == 0
    with pytest.raises(ValueError, match="topup_range"):
        run_experiment(dict(cfg, topup_range=(0.9, 0.2)), str(tmp_path / "bad"))


def test_rerun_computes_nothing_and_analyse_only_reproduces_every_output(tmp_path):
    out = str(tmp_path / "s")
    argv = ["sparse", "--quick", "--Ts", "8,16", "--m_max", "32", "--seeds", "2",
            "--max_steps", "30", "--fns", "majority:3", "--workers", "0", "--quiet",
            "--out", out]
    assert cli_main(argv) == 0
    journal = os.path.join(out, "trials.csv.journal.jsonl")
    n = len(open(journal).readlines())
    assert cli_main(argv) == 0                       # a rerun on a complete folder
    assert len(open(journal).readlines()) == n
    assert json.load(open(os.path.join(out, "run.json")))["n_run"] == 0
    files = ("mstar.csv", "fits.json", "report.md", "summary.json")
    before = {f: open(os.path.join(out, f), "rb").read() for f in files}
    for f in files + ("sparse_heatmap.png", "sparse_mstar.png"):
        os.remove(os.path.join(out, f))
    assert cli_main(argv + ["--analyse-only"]) == 0
    assert {f: open(os.path.join(out, f), "rb").read() for f in files} == before
    assert len(open(journal).readlines()) == n
    assert os.path.getsize(os.path.join(out, "sparse_mstar.png")) > 0


def test_the_study_follows_the_contract():
    from stsim.studies import sparse as study
    from stsim.studies.contract import check_study, resolve_config
    check_study(study)
    for mode in ("quick", "full"):
        cfg = resolve_config(study, mode)
        assert cfg["mode"] == mode and cfg["restarts"] == 1
        # the optional settings at their defaults leave the published config as before
        from stsim.studies.sparse.design import published_config
        assert set(published_config(cfg)) == set(sparse.QUICK)
    with pytest.raises(ValueError, match="table is only used"):
        resolve_config(study, "quick", {"table": "01101001"})


# --------------------------------------------------------------------------------------
# the checks (stsim.studies.sparse.checks)
# --------------------------------------------------------------------------------------
def _synthetic(mstar, Ts=(16, 32, 64, 128, 256, 512), n=30):
    """Cell statistics whose success rate rises smoothly in log2 m through 1/2 at
    ``mstar[(fn, s, model)](T)`` (the grid of the full design)."""
    grid = sparse.m_grid(16, 2048, math.sqrt(2))
    stats = {}
    for (fn, s, model), f in mstar.items():
        for T in Ts:
            for m in grid:
                z = 2.0 * (math.log2(m) - math.log2(f(T)))
                stats[(fn, s, model, T, m)] = {"rate": round(n / (1 + math.exp(-z))) / n,
                                               "n": n}
    return stats, grid


def _judged(stats, grid):
    from stsim.studies.sparse.analysis import estimate_mstar, fit_mstar
    from stsim.studies.sparse.checks import checks
    panels = []
    for lv in (0.9, 0.5):
        ms = estimate_mstar(stats, grid, lv, n_boot=50)
        panels.append({"level": lv, "mstar": ms, "fits": fit_mstar(ms)})
    return checks(stats, grid, panels)


def test_sparse_checks_hold_on_the_claimed_laws_and_fail_on_seeded_faults():
    """A head whose m* grows like log T and an FCN whose m* grows like T: the checks at
    success 1/2 hold (log fit better for the head, linear for the FCN, the head needs
    fewer samples). Swapped (the head linear, the FCN logarithmic and below it) they fail;
    a parity head that reaches 1/2 at T = 128 fails the wall check."""
    log_head = {("and", 3, "attention"): lambda T: 8 * math.log2(T),
                ("and", 3, "fcn"): lambda T: 3.0 * T}
    ok = [c for c in _judged(*_synthetic(log_head)) if c["level"] == 0.5]
    assert ok and {c["verdict"] for c in ok} == {"held"}, [
        (c["claim"], c["verdict"]) for c in ok]
    swapped = {("and", 3, "attention"): lambda T: 3.0 * T,
               ("and", 3, "fcn"): lambda T: 8 * math.log2(T)}
    bad = [c for c in _judged(*_synthetic(swapped)) if c["level"] == 0.5]
    law = [c for c in bad if "better fitted" in c["claim"]]
    fewer = [c for c in bad if "fewer samples" in c["claim"] and c["T"] >= 128]
    assert law and fewer and {c["verdict"] for c in law + fewer} == {"failed"}
    wall = {("parity", 2, "attention"): lambda T: 2048 * T / 64}
    cs = [c for c in _judged(*_synthetic(wall)) if "never reaches" in c["claim"]]
    assert [c["verdict"] for c in cs] == ["held"]
    wall = {("parity", 2, "attention"): lambda T: 400.0}
    cs = [c for c in _judged(*_synthetic(wall)) if "never reaches" in c["claim"]]
    assert [c["verdict"] for c in cs] == ["failed"] and cs[0]["measured"] == 3


def test_sparse_committed_checks_are_the_analysis_of_the_committed_tables(tmp_path):
    """summary.json's checks are what the analysis of trials.csv gives."""
    import shutil
    docs = os.path.join(os.path.dirname(__file__), "..", "docs", "figures", "sparse")
    s = json.load(open(os.path.join(docs, "summary.json")))
    shutil.copy(os.path.join(docs, "trials.csv"), tmp_path / "trials.csv")
    cfg = sparse.check(dict(sparse.PRESETS["full"], **s["config"]))
    from stsim.studies.sparse.analysis import stats_of
    from stsim.studies.sparse.checks import checks
    res = sparse.analyse(cfg, str(tmp_path))
    got = checks(stats_of(res["cells"]), res["grid"], res["panels"])
    assert json.loads(json.dumps(got)) == s["checks"]


def test_the_page_quotes_every_check():
    """docs/sparse-functions.md quotes the verdict and numbers of every check of the three
    committed runs where it states the claim."""
    from test_verdict import unquoted
    assert unquoted("sparse-functions.md", ["sparse/summary.json",
                                            "sparse/restarts_summary.json",
                                            "sparse/fcn_tuned_summary.json"]) == []


def test_sparse_check_on_cells_that_do_not_vary_has_no_standard_error():
    """Every cell at 0/n or n/n: the redraws do not vary, so the check is inconclusive
    ("no standard error"), not exact."""
    step = {("majority", 3, "attention"): lambda T: 8 * math.log2(T),
            ("majority", 3, "fcn"): lambda T: 3.0 * T}
    stats, grid = _synthetic(step)
    for c in stats.values():
        c["rate"] = float(c["rate"] >= 0.5)
    cs = [c for c in _judged(stats, grid) if "fewer samples" in c["claim"]]
    assert cs and all(c["verdict"] == "inconclusive" and not c["exact"]
                      and c["reason"].startswith("no standard error") for c in cs)
