"""Separation study: statistics (threshold widths with bootstrap, growth-law fits with CIs),
the transformer family (sampler, optimum, agreement with the population objective), the
training point (budgets), and the quick run end to end (files, tuning, resumability, CLI)."""
import json
import os

import numpy as np
import pytest

from stsim import cli
from stsim.cli import main as cli_main
from stsim.baselines.fcn import fcn_param_count
from stsim.studies.separation.study import (cells, check, tf_params, train_point, width_grid,
                                            FULL, QUICK)
from stsim.sweeps import read_table
from stsim.theory.family import (best_family_loss, family_loss_at, family_rel,
                                 sample_scores)
from stsim.util.stats import bootstrap_threshold, compare_growth, fit_growth_law, threshold_width


def _boot(ws, v, level, **kw):
    """The separation study's smallest width with its paired bootstrap over seeds."""
    from stsim.studies.widths import trained_width
    return trained_width(ws, np.asarray(v, float), level, kw.get("n_boot", 2000),
                           kw.get("rng", 0))


def compare_growth_laws(T, w, censored=None):
    """The separation study's comparison (relative weights, >= 5 points)."""
    return compare_growth(T, w, censored=censored, min_points=5, weights="relative")


def test_width_grid():
    assert width_grid(16) == [1, 2, 3, 4, 6, 8, 11, 16]
    assert width_grid(16, 4) == [4, 6, 8, 11, 16]
    g = width_grid(1024)
    assert g[-1] == 1024 and all(b > a for a, b in zip(g, g[1:]))
    assert max(b / a for a, b in zip(g[4:], g[5:])) < 1.5
    with pytest.raises(ValueError, match="max_width"):
        width_grid(0)


# ---- statistics --------------------------------------------------------------------------
def test_threshold_width_rules():
    ws = [4, 8, 16, 32]
    v = [[0.9, 0.8, 0.7], [0.3, 0.2, 0.5], [0.1, 0.2, 0.3], [0.1, 0.1, 0.1]]
    assert threshold_width(ws, v, 0.25) == (16, False)
    assert threshold_width(ws, v, 0.05) == (None, True)                 # censored
    # a passing width below a failing one does not count (all larger must pass)
    v2 = [[0.1] * 3, [0.9] * 3, [0.1] * 3, [0.1] * 3]
    assert threshold_width(ws, v2, 0.25) == (16, False)
    # a failed run (nan) never passes
    v3 = [[np.nan] * 3, [np.nan, 0.1, 0.1], [0.1] * 3, [0.1] * 3]
    assert threshold_width(ws, v3, 0.25) == (8, False)


def test_bootstrap_threshold_interval_and_censoring():
    ws = [4, 8, 16, 32]
    v = np.array([[0.9, 0.8, 0.7], [0.3, 0.2, 0.5], [0.1, 0.2, 0.3], [0.1, 0.1, 0.1]])
    b = _boot(ws, v, 0.25, n_boot=500, rng=1)
    assert b["width"] == 16 and not b["censored"]
    assert b["lo"] == 8 and b["hi"] == 32          # seeds straddle the level at 8 and 16
    b = _boot(ws, np.full((4, 3), 0.1), 0.25, n_boot=100)
    assert b["width"] == 4 and b["lower_censored"] and b["lo"] == b["hi"] == 4
    b = _boot(ws, np.full((4, 3), 0.9), 0.25, n_boot=100)
    assert b["censored"] and b["width"] is None and b["hi"] is None and b["frac_censored"] == 1
    with pytest.raises(ValueError, match="shape"):
        _boot(ws, np.ones((3, 3)), 0.25)
    with pytest.raises(ValueError, match="shape"):
        bootstrap_threshold(lambda V: threshold_width(ws, V, 0.25)[0], np.ones(4))


@pytest.mark.parametrize("law", ["log", "linear", "power"])
def test_fit_growth_law_recovers_each_law_and_ranks_it_first(law):
    T = np.array([8, 16, 32, 64, 128, 256, 512], float)
    true = {"log": 6 * np.log2(T) + 3, "linear": 2 * T + 5, "power": 3 * T ** 0.4}[law]
    rng = np.random.default_rng(0)
    w = true * np.exp(0.01 * rng.standard_normal(len(T)))
    f = fit_growth_law(T, w, law, weights="relative")
    a_true = {"log": 6, "linear": 2, "power": 0.4}[law]
    assert f["a_ci"][0] < a_true < f["a_ci"][1]
    assert f["rms_log2"] < 0.03 and len(f["residuals_log2"]) == len(T)
    c = compare_growth_laws(T, w)
    assert c["ranking"][0] == law


def test_compare_growth_laws_leaves_censored_points_out():
    T = [8, 16, 32, 64, 128, 256]
    w = [8, 16, 32, 64, 128, None]
    c = compare_growth_laws(T, w, censored=[0, 0, 0, 0, 0, 1])
    assert c["censored_T"] == [256] and c["n_points"] == 5
    assert c["fits"]["power"]["T"] == [8, 16, 32, 64, 128]
    assert c["fits"]["power"]["a"] == pytest.approx(1)
    c = compare_growth_laws(T[:4], w[:4])
    assert c["fits"] == {} and "not fitted" in c["note"]


# ---- the transformer family ---------------------------------------------------------------
def sample_scores_dense(T, q, d_e, n_mc, rng):
    """Reference sampler: explicit sphere encodings (as the population objective and the
    trainer draw them), sum query."""
    rng = np.random.default_rng(rng)
    P = rng.standard_normal((n_mc, T, d_e))
    P /= np.linalg.norm(P, axis=2, keepdims=True)
    return np.einsum("nte,ne->nt", P, P[:, :q].sum(axis=1))


def test_fast_sampler_matches_the_dense_sphere_sampler():
    T, q, d_e, n = 24, 3, 12, 6000
    g1 = sample_scores(T, q, d_e, n, 1)
    g2 = sample_scores_dense(T, q, d_e, n, 2)
    for a in (1.0, 3.0, 10.0):
        assert family_rel(a, g1, q) == pytest.approx(family_rel(a, g2, q), abs=0.02)


def test_family_optimum_and_population_objective():
    from stsim.theory.population import make_population_objective
    T, q, d, d_e = 16, 3, 2, 8
    g = sample_scores(T, q, d_e, 4000, 3)
    r = best_family_loss(T, q, d, d_e, g=g)
    assert 0 < r["rel"] < 1 and not r["at_bound"]
    base = family_loss_at(r["a"], r["gamma"], T, q, d, g)
    assert base == pytest.approx(r["loss"], rel=1e-9)
    for da, dg in ((1.2, 1), (0.8, 1), (1, 1.1), (1, 0.9)):   # a local minimum in (a, γ)
        assert family_loss_at(r["a"] * da, r["gamma"] * dg, T, q, d, g) > base - 1e-9
    obj = make_population_objective(dict(T=T, q=q, d=d, d_e=d_e, pe="stochastic",
                                         sampler="sphere", query="sum", model="theory"),
                                    method="mc", n_mc=8000, rng=5)
    D = d + d_e
    W = np.zeros((D, D))
    W[d:, d:] = r["a"] * np.eye(d_e)
    V = np.zeros((d, D))
    V[:, :d] = r["gamma"] * np.eye(d)
    assert obj.loss(W, V) / (d / (2 * q)) == pytest.approx(r["rel"], abs=0.02)


def test_learning_rate_extension_rule():
    from stsim.studies.separation.design import extend_rates, lr_edge
    extra = (1e-4, 3e-4, 1e-1, 3e-1)
    grid = [1e-3, 3e-3, 1e-2, 3e-2]
    assert extend_rates(grid, [3e-3], extra) == []
    assert extend_rates(grid, [3e-2], extra) == [1e-1]
    assert extend_rates(grid, [1e-3, 3e-2], extra) == [3e-4, 1e-1]      # one per budget
    assert extend_rates(grid + [1e-1, 3e-1], [3e-1], extra) == []       # the ladder's end
    assert extend_rates([1e-2], [1e-2], ()) == []
    assert lr_edge(grid, 3e-3, extra) == ""
    assert lr_edge(grid, 3e-2, extra) == "high" and lr_edge(grid, 1e-3, extra) == "low"
    assert lr_edge(grid + [1e-1, 3e-1], 3e-1, extra) == "high-end"
    assert lr_edge([1e-4] + grid, 1e-4, extra) == "low-end"


def _check_fits(fits):
    """The checks of :func:`test_committed_fits_resolve_no_finer_than_the_grid` on one
    ``fits.json``; returns the number of fits whose CI was held against its cells."""
    checked = 0
    for q, e in fits.items():
        for name, c in e.items():
            assert c["fits"] or c["n_points"] < 5, (q, name, c["note"])
            for law, f in c["fits"].items():
                assert f["method"] == "interval-censored ML" and f["n"] == c["n_points"]
                assert f["n_censored"] == sum(f["censored"]) == len(c["censored_T"])
                T, w = np.array(f["T"]), np.array(f["width"], float)
                low = np.array(f["lower"], float)
                cen = np.array(f["censored"])
                lo = np.where(cen, w, low)
                hi = np.where(cen, np.inf, w)
                if law == "power":
                    x = np.log2(T)
                    with np.errstate(divide="ignore"):
                        lo, hi = np.log2(lo), np.log2(hi)
                else:
                    x = np.log2(T) if law == "log" else T
                span = _feasible_slopes(x, lo, hi)
                # σ̂ at its floor exactly where some law passes through every cell
                assert f["flat"] == (span[0] <= span[1] + 1e-12), (q, name, law)
                if span[0] <= span[1]:
                    checked += 1
                    ci = [-np.inf if f["a_ci"][0] is None else f["a_ci"][0],
                          np.inf if f["a_ci"][1] is None else f["a_ci"][1]]
                    assert ci[0] <= span[0] + 1e-9 and ci[1] >= span[1] - 1e-9, (q, name, law)
    return checked


def test_committed_fits_resolve_no_finer_than_the_grid():
    """docs/figures/separation/fits.json: every series with ≥ 5 points is fitted,
    the FCN at q = 3 among them; censored points enter as censored; every CI of a slope
    holds every law through all the grid cells of its points (pairwise, independently of
    the fitter); the trained transformer's exponent is not printed to a precision the
    √2 grid cannot give. Seeded fault: the q = 3 transformer's power-law CI narrowed to
    the width the earlier least-squares fit printed fails the check."""
    here = os.path.dirname(__file__)
    fits = json.load(open(os.path.join(here, "..", "docs", "figures", "separation", "fits.json")))
    assert fits["3"]["fcn"]["fits"] and fits["3"]["fcn@8000"]["fits"]
    assert _check_fits(fits) >= 5
    p = fits["3"]["transformer"]["fits"]["power"]
    assert p["a_ci"][1] - p["a_ci"][0] > 0.2
    p["a_ci"] = [p["a"] - 0.0125, p["a"] + 0.0125]           # 0.497 [0.484, 0.509]
    with pytest.raises(AssertionError):
        _check_fits(fits)


def _feasible_slopes(x, lo, hi):
    """[min, max] slope of the lines through every interval [lo_i, hi_i] (pairwise)."""
    up = [(hi[j] - lo[i]) / (x[j] - x[i]) for i in range(len(x)) for j in range(len(x))
          if x[j] > x[i]]
    dn = [(lo[i] - hi[j]) / (x[i] - x[j]) for i in range(len(x)) for j in range(len(x))
          if x[i] > x[j]]
    return max(dn), min(up)


# ---- training points and the design -------------------------------------------------------
def test_train_point_budgets_equal_shorter_runs():
    """A run evaluated at several budgets gives, at each, the loss of a run that stops
    there (constant rate): the long budget reuses the short run."""
    kw = dict(arch="fcn", T=8, d=1, width=8, q=3, batch=32, lr=1e-2, n_val=64, seed=3)
    long = train_point(steps=40, budgets="20", **kw)
    short = train_point(steps=20, **kw)
    assert long["val_20"] == pytest.approx(short["final_val"], rel=1e-12)
    assert long["final_val"] == long["val_40"] and long["rel"] == pytest.approx(
        long["final_val"] / (1 / 6))
    with pytest.raises(ValueError, match="budgets"):
        train_point(steps=40, budgets="15", **kw)
    with pytest.raises(ValueError, match="arch"):
        train_point("mlp", T=4, d=1, width=4)
    with pytest.raises(ValueError, match="level must lie"):
        train_point("fcn", T=4, d=1, width=4, level=1.5)


def test_parameter_counts_match_the_models():
    import stsim
    r = stsim.run(T=8, q=3, d=2, arch="fcn", width=5, steps=1, batch=4, n_val=4)
    assert fcn_param_count(8, 2, 5) == r.info["n_params"] == sum(v.size for v in r.params.values())
    r = stsim.run(T=8, q=3, d=2, pe="stochastic", sampler="sphere", d_e=6, steps=1, batch=4,
                  n_val=4, optimizer="adam", lr=1e-3)
    assert tf_params(2, 6) == sum(np.asarray(v).size for v in r.params.values())


def test_design_of_the_full_run():
    cs = cells(dict(FULL, qs=(3,)), {(3, T): 45 for T in FULL["tf_Ts"]})
    for T in FULL["fcn_Ts"]:
        fc = [c for c in cs if c["arch"] == "fcn" and c["T"] == T]
        assert min(c["width"] for c in fc) <= T and max(c["width"] for c in fc) >= 4 * T
        long = [c for c in fc if c["steps"] == FULL["long_steps"]]
        assert bool(long) == (T in FULL["long_Ts"])
        assert all(c["budgets"] == "2000,8000" for c in long)
    tf = {c["width"] for c in cs if c["arch"] == "transformer" and c["T"] == 64}
    assert tf == {32, 45, 64}
    # the long budget alone at q = 3, T = 256: width 2T, read at 8000 steps only
    assert [c for c in cs if c["T"] == 256] == [dict(arch="fcn", q=3, T=256, width=512,
                                                     steps=8000, budgets="8000")]
    assert not [c for c in cells(dict(FULL, qs=(2,))) if c["T"] == 256]
    for bad in (((3, 256),), ((3, 256, ()),), ((3, 1, (8,)),), ((3, 256, (0,)),)):
        with pytest.raises(ValueError, match="extra_long|T must|width must"):
            check(dict(FULL, extra_long=bad))


# ---- the quick run end to end ---------------------------------------------------------------
# the quick run made smaller (~8 s instead of ~22 s) for the default suite; the quick run
# itself under -m slow
SMALLER = dict(fcn_Ts=(4,), tf_Ts=(4,), long_Ts=(4,), family_Ts=(4, 8), seeds=2, steps=150,
               long_steps=300)


@pytest.mark.parametrize("over", [SMALLER, pytest.param({}, marks=pytest.mark.slow)],
                         ids=["smaller", "quick"])
def test_quick_study_end_to_end(tmp_path, over):
    S = dict(QUICK, **over)
    given = [a for k, v in over.items() for a in (f"--{k}", ",".join(map(str, v))
                                                 if isinstance(v, tuple) else str(v))]
    out = str(tmp_path / "sep")
    assert cli_main(["separation", "--quick", *given, "--workers", "1", "--out", out,
                     "--quiet"]) == 0
    for f in ("points.csv", "fits.json", "summary.json", "separation.png", "agreement.png",
              "report.md"):
        assert os.path.getsize(os.path.join(out, f)) > 0
    pts = read_table(os.path.join(out, "points.csv"))
    for col in ("arch", "T", "d", "q", "width", "lr", "seed", "final_loss", "budget", "role"):
        assert col in pts[0]
    tune_seeds = {p["seed"] for p in pts if p["role"] == "tune"}
    rep = [p for p in pts if p["role"] == "report"]
    assert len(tune_seeds) == 1 and not tune_seeds & {p["seed"] for p in rep}
    assert {p["seed_index"] for p in rep} == set(range(S["seeds"]))
    # reported runs are at the rate the tuning seed chose, from the same grid for both arms,
    # extended past an end while the chosen rate sits on it (the same rule for both arms)
    # (a run serving two budgets may be at the rate only one of them chose)
    chosen = {(p["arch"], p["T"], p["width"], p["lr"]) for p in rep if p["lr_chosen"]}
    assert all((p["arch"], p["T"], p["width"], p["lr"]) in chosen for p in rep)
    ladder = set(S["lrs"]) | set(S["lr_extra"])
    for cell in {(p["arch"], p["T"], p["width"]) for p in pts}:
        tried = {p["lr"] for p in pts if p["role"] == "tune" and (p["arch"], p["T"], p["width"])
                 == cell}
        assert set(S["lrs"]) <= tried <= ladder
    assert {p["lr"] for p in pts if p["role"] == "tune"} > set(S["lrs"])       # it extended
    summary = json.load(open(os.path.join(out, "summary.json")))
    for w in summary["widths"]:         # every chosen rate is interior or at the ladder's end
        assert set(w["lr_edge"]) <= {"", "low-end", "high-end"}, w
    ws = {(w["series"], w["T"]): w for w in summary["widths"]}
    assert ("fcn", max(S["fcn_Ts"])) in ws and ("transformer", max(S["tf_Ts"])) in ws
    assert (f"fcn@{S['long_steps']}", max(S["long_Ts"])) in ws
    for w in ws.values():
        assert w["censored"] or w["lo"] <= w["width"]
    assert summary["agreement"] and summary["family"] and summary["incomplete"] == []
    # the rate is chosen per cell: every (cell, budget) has its reported seeds at the rate
    # that is best on the tuning seed for that cell
    for key in {(p["arch"], p["T"], p["width"], p["budget"]) for p in pts}:
        tune = [p for p in pts if p["role"] == "tune"
                and (p["arch"], p["T"], p["width"], p["budget"]) == key]
        best = min(tune, key=lambda p: p["final_loss"])["lr"]
        assert {p["lr"] for p in rep if (p["arch"], p["T"], p["width"], p["budget"]) == key} \
            >= {best}
    # resumable: the same command again trains nothing
    journals = [os.path.join(out, "raw", f"{t}.csv.journal.jsonl")
                for t in ("family", "family_cells", "tune", "runs")]
    n = [len(open(j).readlines()) for j in journals]
    assert cli_main(["separation", "--quick", *given, "--workers", "1", "--out", out,
                     "--quiet"]) == 0
    assert [len(open(j).readlines()) for j in journals] == n
    assert json.load(open(os.path.join(out, "summary.json")))["widths"] == summary["widths"]
    # seeded fault: read as if the ladder went further (the extension not run), the edges
    # are open ("low"/"high") and the check above fails
    from stsim.studies.separation.analysis import analyse
    from stsim.studies.separation.design import check
    wider = analyse(check(dict(S, lr_extra=(1e-4, 1e-3, 3e-2, 1e-1))), out)
    assert any(set(w["lr_edge"]) - {"", "low-end", "high-end"} for w in wider["widths"])
    # analyse-only reproduces every output file from the raw tables, byte for byte
    files = ("points.csv", "fits.json", "summary.json", "report.md")
    before = {f: open(os.path.join(out, f), "rb").read() for f in files}
    for f in files + ("separation.png", "agreement.png"):
        os.remove(os.path.join(out, f))
    assert cli_main(["separation", "--quick", *given, "--out", out, "--quiet",
                     "--analyse-only"]) == 0
    assert {f: open(os.path.join(out, f), "rb").read() for f in files} == before
    assert os.path.getsize(os.path.join(out, "separation.png")) > 0
    # a row serves only the settings that made it: another precision of the family is
    # refused, naming it; runs of another d, batch or n_val are not this config's
    with pytest.raises(ValueError, match="fam_n_start: 256 there, 512 here"):
        analyse(check(dict(S, fam_n_start=512)), out)
    for key, value in (("d", 3), ("batch", 32), ("n_val", 128)):
        assert analyse(check(dict(S, **{key: value})), out)["widths"] == [], key


def test_cli_errors(tmp_path, capsys):
    # a list that is not numbers is refused before any work (exit status 2), naming it
    assert cli_main(["separation", "--quick", "--lrs", "0.01,x", "--out", str(tmp_path / "w")]) == 2
    assert "lrs must be a list" in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "w")
    assert cli.main(["separation", "--quick", "--tf-Ts", "1", "--out", str(tmp_path / "x")]) == 2
    assert "T must be an integer" in capsys.readouterr().err
    assert cli.main(["separation", "--quick", "--max-width-fcn", "0",
                     "--out", str(tmp_path / "y")]) == 2
    assert cli.main(["separation", "--quick", "--level", "1.5",
                     "--out", str(tmp_path / "z")]) == 2


def test_the_study_follows_the_contract():
    from stsim.studies import separation
    from stsim.studies.contract import check_study, resolve_config
    check_study(separation)
    for mode in ("quick", "full"):
        cfg = resolve_config(separation, mode)
        assert cfg["mode"] == mode and cfg["level"] in cfg["levels"]
    with pytest.raises(ValueError, match="lr must be"):        # every rate, before any work
        resolve_config(separation, "quick", {"lrs": "[0.01, -1]"})


# --------------------------------------------------------------------------------------
# the checks (stsim.studies.separation.checks)
# --------------------------------------------------------------------------------------
def _committed_separation():
    """``(cfg, A, checks)`` of the committed run: the analysis parts the checks read."""
    docs = os.path.join(os.path.dirname(__file__), "..", "docs", "figures", "separation")
    s = json.load(open(os.path.join(docs, "summary.json")))
    fits = json.load(open(os.path.join(docs, "fits.json")))
    return s["config"], {"fits": fits, "widths": s["widths"], "family": s["family"]}, s["checks"]


def _by_claim(cs, start):
    return [c for c in cs if c["claim"].startswith(start)]


def test_separation_checks_reproduce_the_committed_ones_and_fail_on_seeded_faults():
    """The checks judged from the committed analysis equal the committed ones; doctored so
    each statement is false, its check fails: the transformer wider than the FCN at T = 64,
    a trained d_e off the family's, the FCN's exponent 0.5 (its CI shifted), the family's
    first law another one."""
    import copy
    from stsim.studies.separation.checks import checks
    cfg, A, committed = _committed_separation()
    got = checks(cfg, A)
    assert json.loads(json.dumps(got)) == committed
    assert {c["verdict"] for c in got} <= {"held", "inconclusive"}
    bad = copy.deepcopy(A)
    for w in bad["widths"]:
        if w["series"] == "transformer" and w["q"] == 3 and w["T"] == 64:
            w.update(width=256, lo=256.0, hi=256.0)
    cs = checks(cfg, bad)
    assert [c["verdict"] for c in _by_claim(cs, "q = 3, fcn@8000, T = 64")] == ["failed"]
    assert [c["verdict"] for c in _by_claim(cs, "q = 3: the trained transformer")] == ["failed"]
    bad = copy.deepcopy(A)
    f = bad["fits"]["3"]["fcn@8000"]["fits"]["power"]
    shift = f["a"] - 0.5
    f["a"], f["a_ci"] = 0.5, [x - shift for x in f["a_ci"]]
    cs = checks(cfg, bad)
    assert [c["verdict"] for c in _by_claim(cs, "q = 3, fcn@8000: the trained FCN's")] == [
        "failed"]
    bad = copy.deepcopy(A)
    e = bad["fits"]["3"]["family@0.25"]["fits"]
    e["log2"]["delta_2loglik"], e["power"]["delta_2loglik"] = 28.65, 0.0
    cs = checks(cfg, bad)
    assert [c["verdict"] for c in _by_claim(cs, "q = 3, family at 0.25·L0: its width")] == [
        "failed"]


def test_the_page_quotes_every_check():
    """docs/separation.md quotes the verdict and numbers of every committed check where it
    states the claim."""
    from test_verdict import unquoted
    assert unquoted("separation.md", ["separation/summary.json"]) == []
