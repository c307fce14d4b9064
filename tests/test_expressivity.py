"""Expressivity constructions: agreement with the model and with dense references, the
derived error bounds, exactness in the limit (large m, d, λ, τ), errors falling with
width, the width laws on seeded instances, and refusals of bad input."""
import math

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import softmax

from stsim.studies.expressivity import patterns as pt
from stsim.studies.expressivity import qsa
from stsim.core.encodings import PEBatch
from stsim.studies.expressivity import design as D
from stsim.studies.expressivity import study as E
from stsim.core.model import forward_backward
from stsim.core.task import sample_subsets
from stsim.util.stats import fit_linear


def _subsets(seed, B, N, q):
    return sample_subsets(np.random.default_rng(seed), B, N, q)


# --------------------------------------------------------------------------------------
# q-sparse averaging
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("family", qsa.FAMILIES)
def test_position_table_rows_chunks_and_norms(family):
    t = qsa.PositionTable(N=50, m=7, family=family, seed=3, chunk=8)
    U = t.dense()
    assert U.shape == (50, 7)
    np.testing.assert_allclose(np.linalg.norm(U, axis=1), 1.0, rtol=1e-13)
    idx = np.array([[0, 49, 17], [8, 7, 9]])
    np.testing.assert_array_equal(t.rows(idx), U[idx])
    np.testing.assert_array_equal(qsa.PositionTable(50, 7, family, 3, 8).dense(), U)
    assert not np.array_equal(qsa.PositionTable(50, 7, family, 4, 8).dense(), U)


def test_exact_query_interpolates_and_sum_query_sums():
    rng = np.random.default_rng(0)
    U = qsa.position_vectors(rng, 40, 16)
    Y = _subsets(1, 9, 40, 5)
    w = qsa.subset_queries(U[Y], "exact")
    np.testing.assert_allclose(np.einsum("bqm,bm->bq", U[Y], w), 1.0, atol=1e-12)
    np.testing.assert_allclose(qsa.subset_queries(U[Y], "sum"), U[Y].sum(axis=1))


@pytest.mark.parametrize("query", qsa.QUERIES)
def test_construction_agrees_with_stsim_model(query):
    """The construction evaluated by stsim's own model (W = λW*, V = V*, shared P = U,
    x_query = 0) gives the same loss as the structured computation."""
    rng = np.random.default_rng(1)
    N, q, m, d, lam = 30, 3, 12, 4, 6.0
    U = qsa.position_vectors(rng, N, m)
    Y = _subsets(2, 16, N, q)
    X = rng.standard_normal((16, N, d))
    f, err = qsa.qsa_output(X, U, Y, lam, query)
    W, V = qsa.qsa_params(d, m, lam)
    if query == "sum":           # stsim's p_query = Σ p_j is exactly the sum query
        loss = forward_backward(W, V, X, Y, PEBatch(d_e=m, P=U), need_grad=False)[0]
        assert loss == pytest.approx(0.5 * np.mean(err ** 2), rel=1e-12)
    # weight errors from the streamed path agree with a dense softmax
    tab = qsa.PositionTable(N, m, seed=5, chunk=7)
    e = qsa.qsa_errors(tab, Y, [lam], query)
    Ut = tab.dense()
    s = softmax(lam * qsa.subset_queries(Ut[Y], query) @ Ut.T, axis=1)
    u = np.zeros_like(s)
    np.put_along_axis(u, Y, 1.0 / q, axis=1)
    np.testing.assert_allclose(e["l1"][0], np.abs(s - u).sum(axis=1), atol=1e-13)
    # ‖s − u‖₁ is the worst case over tokens in the unit ball: token error ≤ it · max‖x‖
    s2 = softmax(lam * qsa.subset_queries(U[Y], query) @ U.T, axis=1)
    bound = np.abs(s2 - np.where(np.isin(np.arange(N)[None], Y), 1.0 / q, 0.0)).sum(1)
    assert np.all(err <= bound * np.linalg.norm(X, axis=2).max(axis=1) + 1e-12)


@pytest.mark.parametrize("query", qsa.QUERIES)
def test_derived_error_bound_holds(query):
    """‖s − u‖₁ ≤ 2ρ + (e^{λσ} − 1) and ρ ≤ ((N−q)/q) e^{−λΔ} on every sampled input."""
    N, q, m = 200, 4, 48
    tab = qsa.PositionTable(N, m, seed=7)
    Y = _subsets(3, 300, N, q)
    lams = np.array([1.0, 5.0, 20.0, 80.0])
    e = qsa.qsa_errors(tab, Y, lams, query)
    for t, lam in enumerate(lams):
        assert np.all(e["l1"][t] <= 2 * e["leak"][t] + np.expm1(lam * e["spread"]) + 1e-12)
        assert np.all(e["leak"][t] <= (N - q) / q * np.exp(-lam * e["margin"]) + 1e-12)
    if query == "exact":
        assert np.all(e["spread"] < 1e-12)
        np.testing.assert_allclose(e["l1"], 2 * e["leak"], atol=1e-12)


def test_exactness_in_the_limit_and_sum_query_floor():
    """Exact query: error → 0 as λ → ∞ when the margin is positive (large m); the sum
    query with q ≥ 3 keeps a floor: the hard-max limit is 2(q−1)/q."""
    N, q, m = 64, 3, 2048
    tab = qsa.PositionTable(N, m, seed=11)
    Y = _subsets(4, 50, N, q)
    ex_ = qsa.qsa_errors(tab, Y, [10.0, 100.0, 400.0, np.inf], "exact")
    assert ex_["margin"].min() > 0.5
    # the bound 2((N−q)/q) e^{−λΔ} is ~1e-20 at λ = 100: only rounding is left
    assert 2 * (N - q) / q * math.exp(-100 * ex_["margin"].min()) < 1e-18
    assert ex_["l1"][0].max() > 1e-6 and ex_["l1"][1:].max() < 1e-12
    assert ex_["l1"][3].max() < 1e-12                    # hard max = uniform on y
    su = qsa.qsa_errors(tab, Y, [np.inf], "sum")
    assert np.all(su["spread"] > 0)
    np.testing.assert_allclose(su["l1"][0], 2 * (q - 1) / q)
    # q = 2: the two selected logits are equal, so the sum query is exact as well
    su2 = qsa.qsa_errors(tab, _subsets(5, 50, N, 2), [np.inf], "sum")
    assert su2["l1"].max() < 1e-12


def test_error_falls_with_width():
    N, q = 512, 4
    Y = _subsets(6, 200, N, q)
    lam = qsa.design_lambda(N, q, 0.1)
    worst, mean, floor = [], [], []
    for m in (32, 128, 512):
        e = qsa.qsa_errors(qsa.PositionTable(N, m, seed=m), Y, [lam], "exact")
        worst.append(e["l1"].max())
        mean.append(e["l1"].mean())
        s = qsa.qsa_errors(qsa.PositionTable(N, m, seed=m), Y, np.geomspace(1, 300, 30), "sum")
        floor.append(s["l1"].max(axis=1).min())
    assert worst[0] > 10 * worst[1] > 100 * worst[2]
    assert mean[0] > mean[1] > mean[2]
    assert worst[2] <= 0.1                          # the design target is met at large m
    assert floor[0] > floor[1] > floor[2] > 0.1     # the sum query's floor falls, slowly


def test_width_law_on_seeded_instances():
    """m* (worst over 100 subsets ≤ ε at the design λ, exact query) follows the derived
    law m = q ln(2(N−q)/(qε)) / (2γ(1−γ)): it is a lower bound for the worst case (the
    mean-error requirement), and the worst case needs at most twice it."""
    cfg = dict(E.QUICK["width"])
    pts = []
    for q in (2, 4):
        for N in (64, 512, 4096):
            m, _ = E.search_width(N, q, "sphere", "exact", cfg, 0, 0.1, 4096)
            pts.append((q, N, m))
    ratio = np.array([m / E.predicted_m(N, q, 0.1, 0.5) for q, N, m in pts])
    assert np.all(ratio >= 0.9) and np.all(ratio <= 2.0), ratio
    fit = fit_linear([q * math.log(N) for q, N, _ in pts], [m for *_, m in pts])
    assert 1.0 <= fit.slope <= 6.0 and fit.r2 > 0.9, fit
    for q in (2, 4):
        ms = [m for qq, _, m in pts if qq == q]
        assert ms[0] < ms[-1]                       # grows with N


@pytest.mark.parametrize("query", qsa.QUERIES)
def test_seq2seq_matches_explicit_parameters(query):
    rng = np.random.default_rng(8)
    N, q, m, d, lam = 25, 3, 10, 3, 7.0
    U = qsa.position_vectors(rng, N, m)
    Ys = _subsets(9, N, N, q)
    X = rng.standard_normal((N, d))
    e = qsa.seq2seq_errors(U, Ys, [lam], query, X=X, block=6)
    Wq = qsa.subset_queries(U[Ys], query)
    Z = np.concatenate([X, U, Wq], axis=1)                   # tokens e_i (N, d + 2m)
    W, V = qsa.seq2seq_params(d, m, lam)
    logits = (Z @ W @ Z.T).T                                 # [i, j] = e_jᵀ W e_i
    f = softmax(logits, axis=1) @ Z @ V.T
    np.testing.assert_allclose(e["err"][0], np.linalg.norm(f - X[Ys].mean(axis=1), axis=1),
                               atol=1e-12)


def test_seq2seq_error_falls_with_width():
    N, q = 256, 3
    Ys = _subsets(10, N, N, q)
    lam = qsa.design_lambda(N, q, 0.1)
    w = [qsa.seq2seq_errors(qsa.position_vectors(np.random.default_rng(m), N, m), Ys, [lam],
                           "exact")["l1"].max() for m in (32, 128, 512)]
    assert w[0] > w[1] > w[2] and w[2] < 0.1


# --------------------------------------------------------------------------------------
# sparse attention patterns
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", pt.TARGETS)
def test_targets_respect_k(kind):
    A = pt.sparse_target(kind, 37, 4, np.random.default_rng(0))
    A = pt.check_pattern(A, 4)
    assert A.shape == (37, 37) and A.data.min() >= 0.1
    if kind == "permutation":
        assert A.nnz == 37


@pytest.mark.parametrize("scheme", pt.SCHEMES)
def test_pattern_errors_match_dense_reference(scheme):
    rng = np.random.default_rng(2)
    L, d = 30, 24
    A = pt.sparse_target("random", L, 3, rng)
    Q, K, tau = pt.pattern_inputs(A, d, rng, k=3, scheme=scheme, eps_off=0.05)
    WQ, WK = pt.pattern_params(d)
    S = pt.pattern_attention(np.concatenate([Q, K], axis=1), WQ, WK)
    Ad = A.toarray()
    e = pt.pattern_errors(A, Q, K, block=7)
    sup = Ad > 0
    np.testing.assert_allclose(e["off_mass"], np.where(sup, 0, S).sum(axis=1), atol=1e-13)
    np.testing.assert_allclose(e["tv"], 0.5 * np.abs(S - Ad / Ad.sum(1, keepdims=True)).sum(1),
                               atol=1e-13)
    lr = np.where(sup, np.log(np.where(sup, S, 1)) - np.log(np.where(sup, Ad, 1)), np.nan)
    np.testing.assert_allclose(e["ratio"], np.nanmax(lr, 1) - np.nanmin(lr, 1), atol=1e-10)
    e2 = pt.pattern_errors(A, Q, K, block=512)
    for k in e:
        np.testing.assert_allclose(e[k], e2[k], atol=1e-13)


def test_exact_scheme_preserves_ratios_and_off_mass_vanishes():
    rng = np.random.default_rng(3)
    A = pt.sparse_target("block", 300, 4, rng)
    off = []
    for d in (64, 256, 1024):
        Q, K, _ = pt.pattern_inputs(A, d, np.random.default_rng(d), eps_off=0.01)
        e = pt.pattern_errors(A, Q, K)
        assert e["ratio"].max() < 1e-9                   # exact on the support
        off.append(e["off_mass"].max())
    assert off[0] > off[1] > off[2] and off[2] < 1e-3
    # τ → ∞ at fixed large d: the off-support logits stay O(τ √(k/d)) < τ, mass → 0
    Q, K, _ = pt.pattern_inputs(A, 1024, np.random.default_rng(1), tau=200.0)
    assert pt.pattern_errors(A, Q, K)["tv"].max() < 1e-12


def test_jl_scheme_ratio_error_falls_with_d():
    A = pt.sparse_target("random", 200, 4, np.random.default_rng(4))
    r = [pt.pattern_errors(A, *pt.pattern_inputs(A, d, np.random.default_rng(d), scheme="jl",
                                                 tau=5.0)[:2])["ratio"].max()
         for d in (64, 1024, 16384)]
    assert r[0] > r[1] > r[2]
    assert r[1] / r[2] > 2.0                         # ≈ 4 for the √(1/d) law


def test_pattern_width_law_on_seeded_instances():
    """d* (off mass ≤ 0.01, exact scheme) against the derived d = 2 k ln(L/ε_off)."""
    ratios, ds = [], []
    for L in (64, 256, 1024):
        A = pt.sparse_target("random", L, 4, D._rng(0, 31, L))
        kk = int(np.diff(A.indptr).max())
        d, _ = E.search_pattern_dim(A, L, 4, 0, "exact", 0.01, 0.01, None, 4096, 0, 100)
        ds.append(d)
        ratios.append(d / E.predicted_d(L, kk, 0.01))
    assert all(0.8 <= r <= 2.0 for r in ratios), ratios
    assert ds[0] < ds[-1]


# --------------------------------------------------------------------------------------
# bad input
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("call, name", [
    (lambda: pt.check_pattern(np.eye(3) + np.eye(3, k=1), k=1), "k=1"),
    (lambda: pt.check_pattern(np.array([[1.0, -0.5], [0.0, 1.0]])), ">= 0"),
    (lambda: pt.check_pattern(np.ones((2, 3))), "square"),
    (lambda: pt.check_pattern(np.ones((2, 2, 2))), "square"),
    (lambda: pt.check_pattern(np.zeros((0, 0))), "non-empty"),
    (lambda: pt.check_pattern(np.array([[1.0, 0.0], [0.0, 0.0]])), "row 1"),
    (lambda: pt.check_pattern(np.array([[np.nan, 0.0], [0.0, 1.0]])), "finite"),
    (lambda: pt.check_pattern(sp.eye(3), k=0), "k must be"),
    (lambda: pt.pattern_inputs(np.eye(4), 0, np.random.default_rng(0)), "d must be"),
    (lambda: pt.pattern_inputs(np.ones((4, 4)), 2, np.random.default_rng(0)), "d >= the"),
    (lambda: pt.pattern_inputs(np.eye(4), 2, np.random.default_rng(0), scheme="x"), "scheme"),
    (lambda: pt.pattern_inputs(np.eye(4), 2, np.random.default_rng(0), eps_off=0), "eps_off"),
    (lambda: qsa.position_vectors(np.random.default_rng(0), 5, 0), "m must be"),
    (lambda: qsa.PositionTable(N=5, m=0), "m must be"),
    (lambda: qsa.PositionTable(N=0, m=3), "N must be"),
    (lambda: qsa.PositionTable(N=5, m=3, family="gauss"), "family"),
    (lambda: qsa.qsa_params(3, 0, 1.0), "m must be"),
    (lambda: qsa.subset_queries(np.ones((1, 4, 2)), "exact"), "q <= m"),
    (lambda: qsa.subset_queries(np.ones((1, 2, 2)), "mean"), "query"),
    (lambda: qsa.design_lambda(10, 2, 0.0), "eps"),
    (lambda: pt.sparse_target("diag", 5, 2, np.random.default_rng(0)), "kind"),
])
def test_bad_input_names_the_parameter(call, name):
    with pytest.raises(ValueError, match=name.replace("(", r"\(")):
        call()


def test_cli_quick_runs_and_writes_outputs(tmp_path):
    import json
    import os

    from stsim.cli import main
    from stsim.sweeps import read_table
    rc = main(["expressivity", "--quick", "--only", "seq2seq,trained,patterns,jl",
               "--workers", "0", "--out", str(tmp_path), "--quiet"])
    assert rc == 0
    for part in ("seq2seq", "trained", "patterns", "jl"):
        for ext in ("png", "csv", "json"):
            assert (tmp_path / f"{part}.{ext}").stat().st_size > 0
    assert main(["expressivity", "--quick", "--only", "nope", "--out", str(tmp_path)]) == 2
    # the design's rows, counted exactly: seq2seq 2 N x 5 m x 2 queries; patterns 4 kinds
    # at k=4 + random at k=2, x 3 L; jl 3 L, and 2 tolerances x 3 L ratio-only
    n = {f: len(read_table(str(tmp_path / f))) for f in
         ("seq2seq.csv", "trained.csv", "patterns.csv", "jl.csv", "jl_ratio.csv")}
    assert n == {"seq2seq.csv": 20, "trained.csv": 1, "patterns.csv": 15, "jl.csv": 3,
                 "jl_ratio.csv": 6}
    # measured: the trained W is the construction's shape (share of ||W||^2 in the PE
    # block and cosine with I near 1), and the exact pattern scheme's d* is within
    # [0.8, 2] x the derived 2 k ln(L / eps_off) (the width-law test's bounds)
    (tr,) = read_table(str(tmp_path / "trained.csv"))
    assert tr["W_share_ee"] > 0.99 and tr["cos_Wee_I"] > 0.99
    for r in read_table(str(tmp_path / "patterns.csv")):
        assert 0.8 <= r["d_star"] / E.predicted_d(r["L"], r["k_actual"], 0.01) <= 2.0, r
    assert json.load(open(tmp_path / "seq2seq.json"))["summary"]["m_star_on_grid"][
        "exact/N=64"] == 64
    # a rerun on the complete folder computes nothing; --analyse-only rewrites every
    # output from the raw tables alone, byte for byte
    journals = sorted((tmp_path / "raw").glob("*.journal.jsonl"))
    assert len(journals) == 5
    lines = [len(j.read_text().splitlines()) for j in journals]
    assert main(["expressivity", "--quick", "--only", "seq2seq,trained,patterns,jl",
                 "--workers", "0", "--out", str(tmp_path), "--quiet"]) == 0
    assert [len(j.read_text().splitlines()) for j in journals] == lines
    files = [f for f in os.listdir(tmp_path) if f.endswith((".csv", ".json"))]
    before = {f: (tmp_path / f).read_bytes() for f in files}
    for f in files:
        os.remove(tmp_path / f)
    assert main(["expressivity", "--quick", "--only", "seq2seq,trained,patterns,jl",
                 "--out", str(tmp_path), "--quiet", "--analyse-only"]) == 0
    assert {f: (tmp_path / f).read_bytes() for f in files} == before


@pytest.mark.slow
def test_example_quick_all_parts(tmp_path):
    from stsim.cli import main
    assert main(["expressivity", "--quick", "--out", str(tmp_path), "--quiet"]) == 0
    assert (tmp_path / "expressivity.json").exists()


def test_jl_ratio_width_scales_as_inverse_tolerance_squared():
    """JL scheme, ratio criterion alone at fixed τ: d*(tol) / d*(2 tol) ≈ 4 (the derived
    d ∝ k τ² ln(Lk)/tol²); bounds [2.5, 6] allow the bisection / sampling noise."""
    A = pt.sparse_target("random", 64, 4, D._rng(0, 41, 64, 4))
    d1, _ = E.search_pattern_dim(A, 64, 4, 0, "jl", 1.0, 1.0, 5.0, 8192, 0, 500)
    d2, _ = E.search_pattern_dim(A, 64, 4, 0, "jl", 2.0, 1.0, 5.0, 8192, 0, 100)
    assert 2.5 <= d1 / d2 <= 6.0, (d1, d2)


def test_docstring_examples():
    import doctest
    assert doctest.testmod(qsa).failed == 0 and doctest.testmod(pt).failed == 0


def test_the_study_follows_the_contract():
    from stsim.studies import expressivity
    from stsim.studies.contract import check_study, resolve_config
    check_study(expressivity)
    for mode in ("quick", "full"):
        cfg = resolve_config(expressivity, mode)
        assert cfg["only"] == E.PARTS and cfg["seed"] == 0
    cfg = resolve_config(expressivity, "quick", {"only": ["width", "jl"], "width.eps": "0.05"})
    assert cfg["only"] == ("width", "jl") and cfg["width"]["eps"] == 0.05
    for bad, words in (({"only": ["width", "nope"]}, "only must name parts"),
                       ({"width.eps": "1.5"}, r"width.eps must be a number in \(0, 1\)"),
                       ({"patterns.targets": "['random', 'diag']"}, "patterns.targets"),
                       ({"seed": "-1"}, "seed must be")):
        with pytest.raises(ValueError, match=words):
            resolve_config(expressivity, "quick", bad)


# --------------------------------------------------------------------------------------
# the checks (stsim.studies.expressivity.checks)
# --------------------------------------------------------------------------------------
def _committed_expressivity():
    import os
    return os.path.join(os.path.dirname(__file__), "..", "docs", "figures", "expressivity")


def test_expressivity_checks_reproduce_the_committed_ones_and_fail_on_seeded_faults(tmp_path):
    """The checks judged from the committed part tables equal expressivity.json's; with the
    tables doctored so a statement is false its check fails: the JL scheme below the exact
    one, the sum query reaching ε in seq2seq, the sum query narrower than the exact one,
    m* flat in ln N, the sum query inexact at q = 2."""
    import csv
    import json
    import shutil
    from stsim.studies.expressivity.checks import checks, read_table
    src = _committed_expressivity()
    ov = json.load(open(f"{src}/expressivity.json"))
    assert json.loads(json.dumps(checks(src, E.PARTS))) == ov["checks"]
    for name in ("width", "curves", "seq2seq", "jl"):
        shutil.copy(f"{src}/{name}.csv", tmp_path / f"{name}.csv")
    shutil.copy(f"{src}/seq2seq.json", tmp_path / "seq2seq.json")

    def doctor(name, fix):
        rows = read_table(src, name)
        for r in rows:
            fix(r)
        with open(tmp_path / f"{name}.csv", "w", newline="") as fh:
            w = csv.DictWriter(fh, list(rows[0]))
            w.writeheader()
            w.writerows(rows)

    def verdicts(part, start):
        return {c["verdict"] for c in checks(str(tmp_path), [part])
                if c["claim"].startswith(start)}
    assert verdicts("jl", "jl, L = 4096") == {"held"}
    doctor("jl", lambda r: r.update(d_star=r["d_star_exact_scheme"] // 4))
    assert verdicts("jl", "jl, L = ") == {"failed"}
    doctor("seq2seq", lambda r: r.update(l1_worst=r["l1_worst"] / 100))
    assert verdicts("seq2seq", "seq2seq: the sum query") == {"failed"}

    def width_fault(r):
        if r["query"] == "sum":
            r["m_star"] = 10
        elif r["q"] == 8 and r["family"] == "sphere":
            r["m_star"] = 250 + r["rep"]          # flat in ln N
    doctor("width", width_fault)
    assert verdicts("width", "width, sphere, q = 4, N = ") == {"failed"}
    assert verdicts("width", "width, sphere, q = 8") == {"failed"}
    doctor("curves", lambda r: r.update(l1_worst=1e-3) if r["q"] == 2 else None)
    assert verdicts("curves", "curves, sphere: the sum query is exact") == {"failed"}


def test_the_page_quotes_every_check():
    """docs/expressivity.md quotes the verdict and numbers of every committed check where
    it states the claim."""
    from test_verdict import unquoted
    assert unquoted("expressivity.md", ["expressivity/expressivity.json"]) == []
