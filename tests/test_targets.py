"""Targets (stsim.core.targets): the object's facts, the model's value features and
quadratic readout (finite differences on the dense and index paths), the exact
constructions, the mean bit for bit, runs of every target, one's own target, refusals."""
import subprocess
import sys

import numpy as np
import pytest

import stsim
from stsim.core import kernels
from stsim.core.encodings import PEBatch
from stsim.core.gradcheck import check_grad
from stsim.core.model import forward_backward
from stsim.core.constructions import construction
from stsim.core.targets import TARGETS, Mean, Moment, Target, hermite, make_target
from stsim.core.task import draw_batch, sts_target

BUILT_IN = ["mean", "moment:2", "moment:3", "variance"]
d, T, q, B = 3, 9, 3, 6


class MeanSquare(Target):
    """One's own target: ``((1/q) Σ_j x_j)²`` elementwise — the quadratic readout with
    ``Q_o = e_o e_oᵀ`` represents it (φ(x) = x)."""

    name = "mean-square"
    readout = "quadratic"

    def value(self, X, y):
        return sts_target(X, y) ** 2

    def exact(self, d):
        Q = np.zeros((d, d, d))
        Q[np.arange(d), np.arange(d), np.arange(d)] = 1.0
        return {"V_x": np.zeros((d, d)), "b": np.zeros(d), "Q": Q}


def _encodings(kind, rng, d_e):
    if kind == "onehot":
        return PEBatch(d_e=d_e, idx=np.arange(T))
    if kind == "slots":
        return PEBatch(d_e=d_e, idx=np.stack([rng.permutation(d_e)[:T] for _ in range(B)]))
    return PEBatch(d_e=d_e, P=rng.standard_normal((B, T, d_e)) / np.sqrt(d_e))


def test_hermite_features_are_orthonormal():
    """``E h_k h_l = δ_kl``, ``E h_k = 0`` under N(0, 1), exact by Gauss–Hermite quadrature
    (the moments a separable target's population loss needs)."""
    x, w = np.polynomial.hermite_e.hermegauss(30)
    w = w / w.sum()
    H = np.stack([hermite(x, k) for k in range(1, 7)])
    assert np.allclose(H @ w, 0, atol=1e-12) and np.allclose((H * w) @ H.T, np.eye(6), atol=1e-10)
    for t in BUILT_IN:
        m, S = make_target(t).moments(4)
        assert np.array_equal(m, np.zeros(m.size)) and np.array_equal(S, np.eye(m.size))
    assert MeanSquare().moments(4) is None


def test_facts_of_the_built_ins():
    X = np.random.default_rng(0).standard_normal((B, T, d))
    y = np.tile(np.arange(q), (B, 1))
    sel = X[:, :q]
    v = make_target("variance")
    assert np.allclose(v.value(X, y), sel.var(axis=1), atol=1e-14)
    assert np.allclose(make_target("moment:2").value(X, y),
                       ((sel ** 2 - 1) / np.sqrt(2)).mean(axis=1), atol=1e-14)
    assert np.array_equal(Moment(1).features(X), X)          # h_1 = x
    assert (v.feature_dim(d), v.dim(d), v.readout, v.separable) == (2 * d, d, "quadratic", False)
    assert make_target("MOMENT:3") == Moment(3) and make_target("moment:3").label == "moment:3"
    assert set(TARGETS) == {"mean", "moment", "variance", "text", "masked"}


@pytest.mark.parametrize("bad", ["moment", "moment:0", "moment:9", "moment:x", "mean:2",
                                 "median", 3, None, "moment:³", "moment:٣"])
def test_bad_target_refused_before_any_file(tmp_path, bad):
    ck = tmp_path / "ck.npz"
    with pytest.raises(ValueError, match="target must be"):
        stsim.run(T=12, q=2, steps=5, target=bad, checkpoint=ck)
    assert not ck.exists()


def test_object_without_value_and_population_refused():
    with pytest.raises(ValueError, match="target: .* defines no value"):
        stsim.Config.from_options(T=12, q=2, target=Target())
    with pytest.raises(ValueError, match="target='variance': objective='population'"):
        stsim.Config.from_options(T=6, q=2, target="variance", objective="population")


# ---- the model's side: finite differences of every parameter, dense and index ----------
CASES = [(k, d_e, m, {}) for k, d_e in (("onehot", T), ("slots", 2 * T), ("slots", 80),
                                         ("dense", 7)) for m in ("theory", "practical")] + [
    ("slots", 2 * T, "practical", {"x_query": True}), ("slots", 2 * T, "practical", {"rank": 4})]


@pytest.mark.parametrize("kind,d_e,model,extra", CASES)
@pytest.mark.parametrize("target", ["variance", "moment:2"])
def test_finite_differences(kind, d_e, model, target, extra):
    """float64 central differences against the analytic gradients of W, V (the target's
    rows), b and Q of the quadratic readout (the moment: W and V on Hermite features), on
    both routes of the index form (d_e <= dim φ T: rows; 80: gathered columns), with a
    query content part, and through a key/query pair of rank 4."""
    rng = np.random.default_rng(1)
    t = make_target(target)
    b = t.draw(rng, B, T, q, d, features=True)
    pe = _encodings(kind, rng, d_e)
    m, o = t.feature_dim(d), t.dim(d)
    r = extra.get("rank")
    P = [0.5 * rng.standard_normal((m + d_e, m + d_e)) if r is None else
         0.5 * rng.standard_normal((2, r, m + d_e)), 0.5 * rng.standard_normal((o, m + d_e))]
    if t.readout == "quadratic":
        P += [rng.standard_normal(o), 0.3 * rng.standard_normal((o, m, m))]
    xq = rng.standard_normal((B, m)) if extra.get("x_query") else None

    def fg(p):
        head = None if len(p) == 2 else {"b": p[2], "Q": p[3]}
        out = forward_backward(p[0] if r is None else tuple(p[0]), p[1], b.X, b.y, pe,
                               model=model, target=b.target, readout=head, x_query=xq, rank=r)
        dW = np.asarray(out[1]) if r is None else np.stack(out[1])
        return out[0], [dW, out[2]] + ([] if head is None else [out[3]["b"], out[3]["Q"]])

    check_grad(fg, P, rng, rtol=1e-6)
    for i in range(len(P)):             # each parameter on its own
        def one(x, i=i):
            loss, g = fg(P[:i] + [x[0]] + P[i + 1:])
            return loss, [g[i]]
        check_grad(one, [P[i]], rng, rtol=1e-6)


def test_finite_differences_fail_on_a_seeded_fault(monkeypatch):
    """The check above can fail: the readout's term of ∂ℓ/∂h without ``Q_oᵀ``."""
    rng = np.random.default_rng(2)
    t = make_target("variance")
    b = t.draw(rng, B, T, q, d, features=True)
    pe = _encodings("slots", rng, 2 * T)
    m = t.feature_dim(d)
    P = [0.5 * rng.standard_normal((m + 2 * T, m + 2 * T)),
         0.5 * rng.standard_normal((d, m + 2 * T)), rng.standard_normal(d),
         rng.standard_normal((d, m, m))]
    good = kernels._quadratic_back

    def faulty(head, h_x, r, Qh):
        grads, _ = good(head, h_x, r, Qh)
        return grads, np.einsum("bo,boi->bi", r, Qh)
    monkeypatch.setattr("stsim.core.index_form._quadratic_back", faulty)

    def fg(p):
        out = forward_backward(p[0], p[1], b.X, b.y, pe, target=b.target,
                               readout={"b": p[2], "Q": p[3]})
        return out[0], [np.asarray(out[1]), out[2], out[3]["b"], out[3]["Q"]]
    with pytest.raises(AssertionError, match="gradient check failed"):
        check_grad(fg, P, rng, rtol=1e-6)


# ---- the exact constructions ---------------------------------------------------------------
@pytest.mark.parametrize("target", BUILT_IN + [MeanSquare()])
@pytest.mark.parametrize("kind", ["onehot", "dense"])
@pytest.mark.parametrize("query", ["sum", "mean"])
def test_construction_is_exact(target, kind, query):
    """Given the ideal attention (W = β [[0,0],[0,I]], β = 800: 1/q on the selected
    tokens), the construction's loss is below 1e-20 on sampled batches (measured: ≤ 1e-31)."""
    rng = np.random.default_rng(3)
    t = make_target(target)
    p = construction(t, d, T)
    pe = PEBatch(d_e=T, idx=np.arange(T)) if kind == "onehot" else PEBatch(d_e=T, P=np.eye(T))
    for _ in range(3):
        b = t.draw(rng, 256, T, q, d, features=True)
        head = {"b": p["b"], "Q": p["Q"]} if "Q" in p else None
        out = forward_backward(p["W"], p["V"], b.X, b.y, pe, query=query, target=b.target,
                               readout=head, need_grad=False)
        assert out[0] < 1e-20


# ---- runs -----------------------------------------------------------------------------------
def test_mean_is_bit_identical():
    """``target="mean"`` draws and trains as before: the same arrays, the same history, no
    ``target`` in the recorded config."""
    a, b = (np.random.default_rng(5) for _ in range(2))
    one, two = draw_batch(a, 4, T, q, d), make_target("mean").draw(b, 4, T, q, d, features=True)
    assert all(np.array_equal(getattr(one, k), getattr(two, k)) for k in ("X", "y", "target"))
    r0 = stsim.run(T=12, q=2, steps=30, batch=32)
    r1 = stsim.run(T=12, q=2, steps=30, batch=32, target="mean")
    assert "target" not in r1.config and r0.config == r1.config
    assert all(np.array_equal(r0.history[k], r1.history[k], equal_nan=True) for k in r0.history)


@pytest.mark.parametrize("target", BUILT_IN)
def test_short_runs_of_every_target(target):
    res = stsim.run(T=12, q=3, steps=150, batch=64, target=target, progress=False)
    v = res.history["val"]
    assert res.status == "completed" and v[-1] < 0.5 * v[0]
    assert res.config.get("target", "mean") == target


@pytest.mark.slow
@pytest.mark.parametrize("target,ratio", [("mean", 0.02), ("moment:2", 0.02),
                                          ("moment:3", 0.02), ("variance", 0.02)])
def test_default_runs_at_T50_learn(target, ratio):
    """``stsim.run(T=50, q=3, target=t)`` with its default step (measured, seed 0: final
    val/initial 0.0063 mean; val/L(0) 0.0067 moment:2, 0.0075 moment:3, 0.0058 variance:
    docs/targets.md, "Default step")."""
    res = stsim.run(T=50, q=3, target=target, progress=False)
    v = res.history["val"]
    assert res.status == "completed" and v[-1] < ratio * v[0]
    how = "" if target == "mean" else "derived" if "moment" in target else "measured on"
    assert how in res.message


def test_own_target_trains_and_is_recorded():
    res = stsim.run(T=12, q=2, steps=300, batch=64, lr=0.5, target=MeanSquare(),
                    progress=False)
    v = res.history["val"]
    assert res.status == "completed" and v[-1] < 0.5 * v[0]
    assert res.config["target"] == "mean-square" and res.config["target_object"] == "MeanSquare"
    assert "neither derived nor measured" in stsim.run(T=12, q=2, target=MeanSquare(),
                                                       steps=2).message
    with pytest.raises(ValueError, match="target was an object"):
        stsim.run(config=res.config)
    again = stsim.run(config=res.config, target=MeanSquare())
    assert np.array_equal(again.history["val"], v)


def test_resume_with_another_target_refused(tmp_path):
    for first, second in (("mean", "moment:2"), ("moment:2", "mean"), ("variance", "mean")):
        ck = tmp_path / f"{first}.npz"
        stsim.run(T=12, q=2, steps=10, batch=16, target=first, checkpoint=ck)
        with pytest.raises(ValueError, match="differs in .*target"):
            stsim.run(T=12, q=2, steps=20, batch=16, target=second, checkpoint=ck)


class OwnMoment(Target):
    """A target of one's own that shares a built-in's label (name "moment", k = 3)."""

    name = "moment"
    separable = orthonormal = True

    def settings(self):
        return {"k": 3}

    def value(self, X, y):
        return sts_target(hermite(X, 3), y)


def test_resume_compares_what_either_side_recorded(tmp_path):
    """A checkpoint of a target of one's own is not the built-in target of its label's,
    nor the reverse."""
    for first, second in ((OwnMoment(), "moment:3"), ("moment:3", OwnMoment())):
        ck = tmp_path / f"{type(first).__name__}.npz"
        stsim.run(T=12, q=2, steps=10, batch=16, target=first, checkpoint=ck,
                  callback=lambda row: row["step"] >= 4)
        with pytest.raises(ValueError, match="differs in .*target_object"):
            stsim.run(T=12, q=2, steps=20, batch=16, target=second, checkpoint=ck)


def test_a_target_is_immutable_and_checked_before_work():
    m = Moment(3)
    with pytest.raises(AttributeError, match="immutable"):
        m.k = 0
    assert m.k == 3 and stsim.Config.from_options(T=8, q=2, target=m).resolve().target == \
        "moment:3"
    # the variance of one token is 0: refused, naming q
    with pytest.raises(ValueError, match="needs q >= 2"):
        stsim.run(T=8, q=1, steps=3, target="variance")


class Doubled(Mean):
    def value(self, X, y):
        return 2 * sts_target(X, y)


def test_a_mean_of_ones_own_is_not_trained_on_the_mean_population_loss():
    with pytest.raises(ValueError, match="Doubled has a value or features of its own"):
        stsim.run(T=8, q=2, steps=3, target=Doubled(), objective="population")
    ok = stsim.run(T=8, q=2, steps=3, target="mean", objective="population", progress=False)
    assert ok.status == "completed"


def _own(**methods):
    """A subclass of MeanSquare with the given methods (each a function of self, ...)."""
    return type("Broken", (MeanSquare,), methods)()


@pytest.mark.parametrize("methods, match", [
    (dict(value=lambda s, X, y: sts_target(X, y)[:, :2]), r"value\(X, y\) must "
     r"return an array of shape \(2, 3\)"),
    (dict(value=lambda s, X, y: sts_target(X, y)[:, 0]), r"value\(X, y\) .* shape"),
    (dict(value=lambda s, X, y: sts_target(X, y) + 0j), r"value\(X, y\) must return real"),
    (dict(value=lambda s, X, y: sts_target(X, y) * np.nan), r"value\(X, y\) returned "
     r"values that are not finite"),
    (dict(features=lambda s, X: np.concatenate([X, X], 2)), r"features\(X\) .* shape"),
    (dict(feature_dim=lambda s, d: 0), r"feature_dim\(3\) must be an integer >= 1"),
    (dict(effective_dim=lambda s, d: 0), r"effective_dim\(3\) must be an integer >= 1"),
    (dict(fourth_moments=lambda s, d: (1.0,)), r"fourth_moments\(3\) must return None"),
    (dict(fourth_moments=lambda s, d: ("a", "b")), r"fourth_moments\(3\) must return"),
    (dict(exact=lambda s, d: {"V_x": np.zeros((d, d)), "b": np.zeros(d),
                              "Q": np.zeros((d, d))}), r"exact\(3\)\['Q'\] .* shape")])
def test_a_target_of_ones_own_is_checked_before_work(tmp_path, methods, match):
    ck = tmp_path / "ck.npz"
    with pytest.raises(ValueError, match="target: Broken." + match.removeprefix("Broken.")):
        stsim.run(T=8, q=2, d=3, steps=3, target=_own(**methods), checkpoint=ck)
    assert not ck.exists()


def test_quadratic_readout_with_a_key_query_pair_and_frozen_blocks():
    """The variance's b and Q are not W or V blocks: a rank-r pair gets its default step
    per parameter (W_K, W_Q take W's), and holding V or every W/V block still trains b and
    Q (and, through them, W)."""
    r = stsim.run(T=8, q=2, steps=10, batch=16, target="variance", rank=2, progress=False)
    assert r.status == "completed" and r.config["lr"]["W_K"] == r.config["lr"]["W_Q"]
    held_v = stsim.run(T=8, q=2, steps=60, batch=64, target="variance",
                       freeze=("V_x", "V_e"), progress=False)
    assert held_v.history["val"][-1] < 0.8 * held_v.history["val"][0]
    assert np.abs(held_v.params["W"]).sum() > 0
    blocks = ("W_xx", "W_xe", "W_ex", "W_ee", "V_x", "V_e")
    held = stsim.run(T=8, q=2, steps=60, batch=64, target="variance", freeze=blocks,
                     progress=False)
    assert held.history["val"][-1] < 0.8 * held.history["val"][0]
    with pytest.raises(ValueError, match="nothing would train"):
        stsim.run(T=8, q=2, steps=3, freeze=blocks)            # the mean's: nothing else


def test_fcn_and_sweep_take_targets():
    res = stsim.run(T=8, q=2, arch="fcn", width=16, steps=20, batch=16, target="variance")
    assert res.status == "completed" and res.params["A"].shape == (5, 16)
    def fn(target, seed):
        return {"val": stsim.run(T=8, q=2, steps=10, batch=16, target=target,
                                 seed=seed).final("val")}

    rows = stsim.sweep(fn, {"target": ["mean", "variance"]}, max_workers=1)
    rows = rows.rows if hasattr(rows, "rows") else rows.to_pandas().to_dict("records")
    assert len(rows) == 2 and all(np.isfinite(r["val"]) for r in rows)


def test_command_line(tmp_path):
    out = tmp_path / "run"
    base = [sys.executable, "-m", "stsim", "run", "--T", "10", "--q", "2", "--steps", "20",
            "--batch", "16", "--quiet", "--out"]
    ok = subprocess.run(base + [str(out), "--target", "moment:2"], capture_output=True,
                        text=True)
    assert ok.returncode == 0, ok.stderr
    assert stsim.load(out).config["target"] == "moment:2"
    bad = subprocess.run(base + [str(tmp_path / "bad"), "--target", "moment"],
                         capture_output=True, text=True)
    assert bad.returncode != 0 and "target must be" in bad.stderr
    assert not (tmp_path / "bad").exists()


@pytest.mark.parametrize("d_e", [2 * T, 80])
def test_parts_of_the_batch_change_no_bit_with_the_readout(monkeypatch, d_e):
    rng = np.random.default_rng(4)
    t = make_target("variance")
    b = t.draw(rng, 40, T, q, d, features=True)
    pe = PEBatch(d_e=d_e, idx=np.stack([rng.permutation(d_e)[:T] for _ in range(40)]))
    m = t.feature_dim(d)
    W, V = rng.standard_normal((m + d_e, m + d_e)), rng.standard_normal((d, m + d_e))
    head = {"b": rng.standard_normal(d), "Q": rng.standard_normal((d, m, m))}
    for model in ("theory", "practical"):
        whole = forward_backward(W, V, b.X, b.y, pe, target=b.target, readout=head, model=model)
        monkeypatch.setattr("stsim.core.index_form._PART", 32)      # one sample per part
        parts = forward_backward(W, V, b.X, b.y, pe, target=b.target, readout=head, model=model)
        monkeypatch.undo()
        assert whole[0] == parts[0] and np.array_equal(np.asarray(whole[1]), np.asarray(parts[1]))
        assert np.array_equal(whole[2], parts[2])
        assert all(np.array_equal(whole[3][k], parts[3][k]) for k in "bQ")


def test_result_of_a_target_saves_loads_and_attends(tmp_path):
    res = stsim.run(T=10, q=2, steps=20, batch=16, target="variance")
    back = stsim.load(res.save(tmp_path / "r.npz"))
    assert sorted(back.params) == ["Q", "V", "W", "b"] and back.config["target"] == "variance"
    assert back.params["Q"].shape == (5, 10, 10) and back.attention(n=2).shape == (2, 10)


@pytest.mark.parametrize("target", BUILT_IN + ["moment:4"])
def test_zero_loss_is_half_the_mean_square_of_the_value(target):
    """``L(0) = ½ E‖target‖²`` (the loss of the output 0) of every built-in target against
    a Monte-Carlo estimate, within 5 of its standard errors (a wrong formula — d/q, the
    mean's for the variance — is off by many); the mean's is ``d/(2q)`` bit for bit."""
    t, n, dd, qq = make_target(target), 60_000, 2, 3
    b = t.draw(np.random.default_rng(7), n, 7, qq, dd)
    half = 0.5 * np.sum(b.target ** 2, axis=1)
    se = half.std(ddof=1) / np.sqrt(n)
    assert abs(half.mean() - t.zero_loss(dd, qq)) <= 5 * se
    if target == "mean":
        assert all(t.zero_loss(k, m) == k / (2 * m) for k in (1, 3, 5) for m in (2, 3, 7))


@pytest.mark.parametrize("target", BUILT_IN + ["moment:4"])
def test_constant_loss_is_half_the_variance_of_the_value(target):
    """``L_c = ½ E‖target − E target‖²`` (the best constant output's loss, the footing every
    target is judged on) against Monte-Carlo within 5 of its standard errors; it is L(0)
    where ``E target = 0`` and half of it for the variance at q = 3 (``2/(q+1)``; giving the
    variance L(0), or the mean's ``d/(2q)``, is off by many standard errors)."""
    t, n, dd, qq = make_target(target), 60_000, 2, 3
    b = t.draw(np.random.default_rng(8), n, 7, qq, dd)
    half = 0.5 * np.sum((b.target - b.target.mean(axis=0)) ** 2, axis=1)
    se = half.std(ddof=1) / np.sqrt(n)
    assert abs(half.mean() - t.constant_loss(dd, qq)) <= 5 * se
    ratio = t.constant_loss(dd, qq) / t.zero_loss(dd, qq)
    assert ratio == (pytest.approx(2 / (qq + 1)) if target == "variance" else 1.0)


def test_readout_facts():
    """What the schedule, the model's blocks and the theory ask of the readout."""
    for name in BUILT_IN:
        t = make_target(name)
        assert t.linear_readout == (t.readout == "linear")
        assert t.mean_on_features == (name != "variance")
    assert not MeanSquare().linear_readout and not MeanSquare().mean_on_features
    Lin = type("OwnLinear", (Target,), {"name": "own-linear", "value": Target.value})
    assert Lin().linear_readout and not Lin().mean_on_features      # not separable
