"""Tests of the reduced dynamics (stsim.core.reduced: the one formula, against its
definition, finite differences and full-matrix population GD) and of the derived defaults
(stsim.core.schedule): the stability bound, the user's lr/steps obeyed, a step per
parameter, the default stochastic width, the plateau diagnosis, defaults that learn, and
the decaying schedule (a run of zero steps with one is valid).
Frozen blocks are test_freeze.py's."""
import json
import warnings

import numpy as np
import pytest

import stsim
from conftest import RUN, _same     # bit for bit: parameters and every history entry
from stsim.cli import main as cli_main
from stsim.core.config import Config
from stsim.core.session import RunInterrupted
from stsim.core.gradcheck import check_grad
from stsim.core.reduced import (loss_grad, loss_grad_scalar, reduced_map_losses,
                                reduced_map_steps)
from stsim.core.schedule import FROZEN, predict
from stsim.core.stability import NOISE_W, eta_max, eta_xe_max, sample_curvature


def _softmax_reference(a, b, g, T, q, d, c, practical):
    """The reduced loss from its definition, token by token: logits ``c a`` for
    the q selected tokens, 0 for the T − q others, and (practical) ``φ`` for the query
    token, whose value is 0; ``L = (d/2)(|s_tokens|² γ² − 2 γ s·u + 1/q)``, u = 1_y/q."""
    logits = [c * a] * q + [0.0] * (T - q)
    if practical:
        logits.append(c * c * q * (a - b * q) + c * b * q)
    z = np.array(logits)
    s = np.exp(z - z.max())
    s /= s.sum()
    tok = s[:T]
    return 0.5 * d * (tok @ tok * g * g - 2.0 * g * tok[:q].sum() / q + 1.0 / q)


POINTS = [(0.0, 0.0, 0.0), (0.7, 0.2, 1.4), (3.0, -0.4, 0.9), (-2.0, 0.1, 0.3), (40.0, 1.0, 1.1)]


@pytest.mark.parametrize("practical", [False, True])
@pytest.mark.parametrize("query", ["sum", "mean"])
def test_reduced_loss_is_its_definition_and_the_paths_agree(practical, query):
    """The one formula (stsim.core.reduced) against the softmax written out; its array
    and scalar paths give the same numbers."""
    T, q, d = 9, 3, 4
    c = 1.0 if query == "sum" else 1.0 / q
    for a, b, g in POINTS:
        ref = _softmax_reference(a, b, g, T, q, d, c, practical)
        L = loss_grad_scalar(a, b, g, T, q, d, c, practical)
        assert L[0] == pytest.approx(ref, rel=1e-12, abs=1e-15)
        arr = loss_grad(a, b, g, T, q, d, c=c, practical=practical)
        np.testing.assert_allclose([float(x) for x in arr], L, rtol=1e-14, atol=1e-300)
    if not practical:                 # b plays no part in the theory model
        assert loss_grad_scalar(0.7, 5.0, 1.4, T, q, d, c)[2] == 0.0


@pytest.mark.parametrize("practical", [False, True])
@pytest.mark.parametrize("query", ["sum", "mean"])
def test_reduced_gradient_finite_differences_in_a_b_gamma(practical, query):
    T, q, d = 9, 3, 4
    c = 1.0 if query == "sum" else 1.0 / q
    rng = np.random.default_rng(1)

    def f(ps):
        L, *g = loss_grad(ps[0], ps[1], ps[2], T, q, d, c=c, practical=practical)
        return float(L), [np.asarray(x) for x in g]

    for a, b, g in POINTS[:-1]:
        check_grad(f, [np.array(a), np.array(b), np.array(g)], rng, n_dirs=6, rtol=1e-7)


def test_the_gradient_check_sees_a_wrong_query_term():
    """Seeded fault: the query logit's derivative ∂L/∂φ scaled by 1.01 is caught."""
    import stsim.core.reduced as R

    def wrong(ps):
        L, da, db, dg = R.loss_grad(ps[0], ps[1], ps[2], 9, 3, 4, practical=True)
        dph = db / (3 - 9)               # ∂L/∂b = (cq − c²q²) ∂L/∂φ with c = 1, q = 3
        # ∂L/∂φ 1% too large: in ∂L/∂a (weight c²q = 3) and in ∂L/∂b
        return float(L), [np.asarray(da + 3 * 0.01 * dph), np.asarray(1.01 * db),
                          np.asarray(dg)]

    with pytest.raises(AssertionError, match="gradient check failed"):
        check_grad(wrong, [np.array(0.7), np.array(0.2), np.array(1.4)],
                   np.random.default_rng(1), n_dirs=6, rtol=1e-7)


@pytest.mark.parametrize("T,q,d,lr,n,c", [(50, 3, 5, 3.0, 100, 1.0), (20, 2, 5, 2.0, 20, 0.5)])
def test_map_steps_are_the_first_crossings_of_the_map_losses(T, q, d, lr, n, c):
    L = np.array(reduced_map_losses(T, q, d, lr, n, 5000, c=c))
    expect = [int(np.nonzero(L <= f * L[0])[0][0]) for f in (0.5, 0.02)]
    assert reduced_map_steps(T, q, d, lr, n, c=c) == expect
    assert np.all(np.diff(L) <= 0)                  # a stable step decreases the loss


@pytest.mark.parametrize("pe,query,d_e", [("onehot", "sum", None), ("onehot", "mean", None),
                                          ("stochastic", "sum", 8)])
def test_practical_map_equals_full_matrix_population_gd(pe, query, d_e):
    """The practical model's 3-scalar reduction (W_ee = aI − bJ, V_x = γI; query logit
    φ = c²q(a − bq) + cbq) is exact: full-matrix population GD follows it."""
    T, q, d, lr, steps = 6, 2, 3, 0.5, 300
    kw = {"d_e": d_e} if d_e else {}
    res = stsim.run(T=T, q=q, pe=pe, d=d, model="practical", query=query,
                    objective="population", optimizer="gd", lr=lr, steps=steps, eval_every=1,
                    **kw)
    n = d_e or T
    mine = reduced_map_losses(T, q, d, lr, n, steps, c=1.0 if query == "sum" else 1.0 / q,
                              practical=True)
    np.testing.assert_allclose(res.history["loss"], mine, rtol=1e-10)


def test_eta_max_formula_and_values():
    assert eta_max(3, 5, 400) == 6.0                               # 2q binds
    assert eta_max(25, 5, 200) == pytest.approx(2 * 200 / (24 * 30))  # transverse W_xe binds
    assert eta_max(3, 5, 100, c=1 / 3) == 6.0
    # with a batch: 2/(max(1/q, lam_xe) + kappa/B), kappa = (d+2)/q + c^2(q-1)/q
    # + c^2(q-1)(q+d)/q (V, W_ee, W_xe)
    kappa = 7 / 3 + 2 / 3 + 16 / 3
    assert sample_curvature(3, 5) == pytest.approx(kappa)
    assert sample_curvature(3, 5, token_rows=False) == pytest.approx(3.0)
    assert eta_max(3, 5, 400, batch=256) == pytest.approx(2 / (1 / 3 + kappa / 256))
    assert eta_max(2, 5, 20, batch=1) == pytest.approx(2 / (0.5 + 3.5 + 0.5 + 3.5))  # 0.25
    assert eta_max(3, 5, 400, batch=10 ** 9) == pytest.approx(6.0, rel=1e-6)  # population
    assert eta_xe_max(1, 5, 100, batch=4) == float("inf")
    cfg = Config.from_options(T=200, q=3, freeze=())       # the single step
    assert cfg.lr == pytest.approx(0.5 * 2 / (1 / 3 + kappa / 256)) and cfg.d_e == 400
    # the default: a step per block with W's token rows held (no W_xe term in V's bound)
    cfg = Config.from_options(T=200, q=3)
    assert cfg.freeze == FROZEN == ("W_xx", "W_xe")
    assert cfg.lr == {"W": pytest.approx(NOISE_W * 256 * 400 / 15),
                      "V": pytest.approx(0.5 * 2 / (1 / 3 + 3 / 256))}
    assert "held at their initial value" in cfg.resolved.plan.note
    # a given number is the plain single step on every parameter
    assert Config.from_options(T=200, q=3, lr=1.0).freeze == ()


@pytest.mark.parametrize("pe,extra", [("stochastic", {}),                      # sparse dW
                                      ("stochastic", dict(sampler="sphere", d_e=16))])
def test_step_per_parameter_run(pe, extra):
    """Equal steps are the single step bit for bit; other steps move V otherwise; the config
    records the dict."""
    one = stsim.run(pe=pe, lr=1.5, **RUN, **extra)
    same = stsim.run(pe=pe, lr={"W": 1.5, "V": 1.5}, **RUN, **extra)
    _same(one, same)
    per = stsim.run(pe=pe, lr={"W": 3.0, "V": 1.5}, **RUN, **extra)
    assert per.config["lr"] == {"W": 3.0, "V": 1.5}
    assert not np.array_equal(per.W, one.W) and not np.array_equal(per.V, one.V)
    assert per.success


def test_lr_per_block_derives_its_steps_and_other_dicts_need_steps():
    """{"W", "V"} is a step per block of the reduced map: the steps are derived with it
    (2x its 2% step); a step per parameter the map does not describe needs steps."""
    c = stsim.Config.from_options(T=10, q=2, lr={"W": 2.0, "V": 1.0})
    tgt = reduced_map_steps(10, 2, 5, {"W": 2.0, "V": 1.0}, 20)[1]
    assert c.steps == max(100, -(-2 * tgt // 100) * 100) and c.freeze == ()
    with pytest.raises(ValueError, match="needs steps"):
        stsim.Config.from_options(T=10, q=2, arch="fcn", lr={"W1": 0.1, "b1": 0.1, "A": 0.1,
                                                              "c": 0.1})


@pytest.mark.parametrize("kw", [dict(T=10, q=2, batch=8), dict(T=20, q=3, batch=8),
                                dict(T=10, q=2, batch=1)], ids=str)
def test_small_batch_defaults_do_not_diverge_and_the_old_step_did(kw):
    """The derived step accounts for the batch (the mean-square bound of
    stsim.core.schedule): these default calls diverged at the population step
    eta_max/2 = min(2q, 2n/(c^2(q-1)(q+d)))/2 (the seeded fault: that step, given)."""
    ok = stsim.run(steps=300, n_val=32, prefetch=False, **kw)
    assert ok.status == "completed", ok.message
    old = eta_max(kw["q"], 5, 2 * kw["T"]) / 2
    bad = stsim.run(steps=300, n_val=32, prefetch=False, lr=old, **kw)
    assert bad.status == "diverged" or bad.history["val"][-1] > 10 * bad.history["val"][0]


@pytest.mark.slow
@pytest.mark.parametrize("T", [10, 20, 50])
@pytest.mark.parametrize("q", [2, 3])
@pytest.mark.parametrize("batch", [1, 2, 8, 32, 256])
@pytest.mark.parametrize("mq", [("theory", "sum"), ("theory", "mean"), ("practical", "sum"),
                                ("practical", "mean")], ids=str)
def test_no_default_diverges_on_the_grid(T, q, batch, mq):
    res = stsim.run(T=T, q=q, batch=batch, model=mq[0], query=mq[1], steps=600, n_val=32,
                    prefetch=False)
    assert res.status == "completed", res.message
    assert res.history["val"][-1] < 2 * res.history["val"][0], res.message


def test_fcn_default_step_trains_where_the_fixed_one_diverged():
    """The FCN's default (fcn_default_lr: half the mean-square bound of its read-out) at
    T = 16, q = 3; the fixed SGD default 1.0 it replaces diverges (the seeded fault)."""
    from stsim.baselines.fcn import fcn_default_lr
    cfg = Config.from_options(arch="fcn", T=16, q=3)
    assert cfg.lr == pytest.approx(fcn_default_lr(cfg)) and 0.02 < cfg.lr < 0.1
    res = stsim.run(arch="fcn", T=16, q=3, steps=300, prefetch=False)
    h = res.history
    assert res.status == "completed" and h["val"][-1] < 0.97 * h["val"][0], res.message
    assert stsim.run(arch="fcn", T=16, q=3, steps=300, lr=1.0,
                     prefetch=False).status == "diverged"


def test_user_lr_and_steps_are_obeyed_exactly():
    c = Config.from_options(T=50, q=3, lr=0.7, steps=123)
    assert (c.lr, c.steps) == (0.7, 123)
    c = Config.from_options(T=50, q=3, lr=0.7)                     # steps derived at lr 0.7
    s = predict(c, lr=0.7)
    assert c.lr == 0.7 and c.steps == s.steps and s.target_step < c.steps
    c = Config.from_options(T=50, q=3, steps=77)
    assert c.steps == 77 and c.lr == predict(c, blocks=True).lr
    # re-resolving a resolved config changes nothing
    assert Config.from_options(**c.to_dict()) == c


def test_default_widths():
    assert Config.from_options(T=50, q=3).d_e == 100                      # slots: 2 T_max
    assert Config.from_options(T=50, q=3, T_test=(80,)).d_e == 160
    assert Config.from_options(T=50, q=3, pe="onehot").d_e == 50
    assert Config.from_options(T=50, q=3, d_e=60).d_e == 60
    assert Config.from_options(T=20, q=2, sampler="sphere").d_e == 64


def test_long_default_run_says_so():
    with pytest.warns(UserWarning, match="expect roughly"):
        Config.from_options(T=500, q=3, freeze=())             # the single step: slow
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Config.from_options(T=500, q=3)                        # a step per block: fast
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Config.from_options(T=500, q=3, steps=10)                  # user steps: no warning
    # a long default with the stop rule: its step count is a most, and it says why
    with pytest.warns(UserWarning, match=r"at most 10200 steps .*the stop rule ends it"):
        Config.from_options(T=2000, q=3)
    with pytest.warns(UserWarning) as seen:
        Config.from_options(T=2000, q=3, stop="none")
    assert all("stop rule" not in str(w.message) for w in seen)


def test_plateau_is_reported(tmp_path, capsys):
    res = stsim.run(T=50, q=3, lr=1.0, steps=20, batch=32)
    assert res.status == "completed" and res.assessment == "plateau"
    assert "still on the initial plateau: loss" in res.message
    assert "predict the escape near step" in res.message
    assert "still on the initial plateau" in res.summary() and "plateau" in repr(res)
    rc = cli_main(["run", "--T", "50", "--q", "3", "--lr", "1", "--steps", "20", "--batch", "32",
                   "--out", str(tmp_path / "r"), "--quiet"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["assessment"] == "plateau"
    assert "still on the initial plateau" in out["message"]


def test_small_default_run_learns():
    res = stsim.run(T=20, q=2, pe="onehot", seed=1)
    h = res.history
    assert res.assessment == "learned" and "learned" in res.message
    assert h["val"][-1] <= 0.02 * h["val"][0] and h["cos_V"][-1] >= 0.99


@pytest.mark.slow
@pytest.mark.parametrize("kw", [dict(), dict(T=50, q=3, model="practical", query="mean"),
                                dict(T=100, q=3, pe="onehot"), dict(optimizer="adam")], ids=str)
def test_default_runs_learn(kw):
    """The issue's call (T=200, q=3, stochastic, nothing else) and two other families."""
    res = stsim.run(**kw)
    h = res.history
    assert h["val"][-1] <= 0.02 * h["val"][0], res.summary()
    assert h["cos_V"][-1] >= 0.99, res.summary()


def test_linear_decay_schedule_values():
    from stsim.core.optim import SGD, Adam
    o = SGD(2.0, decay="linear", total=10)
    lrs = []
    for _ in range(10):
        lrs.append(o.lr)
        o.step({"w": np.zeros(1)}, {"w": np.zeros(1)})
    # constant for updates 0..5, then (10 - k)/5 of it: 0.8, 0.6, 0.4, 0.2
    np.testing.assert_allclose(lrs, [2.0] * 6 + [1.6, 1.2, 0.8, 0.4])
    assert SGD(2.0).lr == 2.0 and Adam(0.1, decay="linear", total=4).lr == 0.1
    with pytest.raises(ValueError, match="decay"):
        SGD(1.0, decay="cosine")
    with pytest.raises(ValueError, match="total"):
        SGD(1.0, decay="linear")


def test_adam_default_anneals_and_user_lr_is_constant():
    c = Config.from_options(T=200, q=3, optimizer="adam")
    assert (c.lr, c.steps, c.lr_decay) == (0.02, 6000, "linear")
    assert Config.from_options(T=50, q=3, optimizer="adam").steps == 2000
    c = Config.from_options(T=200, q=3, optimizer="adam", lr=0.01)
    assert c.lr_decay == "none"                      # a given lr is obeyed exactly
    assert Config.from_options(T=50, q=3).lr_decay == "none"
    assert Config.from_options(T=50, q=3, lr_decay="linear").lr_decay == "linear"
    with pytest.raises(ValueError, match="lr_decay"):
        Config.from_options(T=50, q=3, lr_decay="cosine")


def test_decaying_run_resumes_bit_identically_and_refuses_other_steps(tmp_path,
                                                                      default_sigint):
    kw = dict(T=12, q=2, pe="stochastic", optimizer="adam", batch=32, n_val=32, eval_every=5,
              steps=40)
    full = stsim.run(**kw)
    assert full.config["lr_decay"] == "linear"
    ck = tmp_path / "ck.npz"

    def interrupt(step, steps, row):
        if step == 25:
            raise KeyboardInterrupt

    # a KeyboardInterrupt raised by the progress callable is a Ctrl-C: the run stops at its
    # next step boundary, keeps its result and writes its checkpoint
    with pytest.warns(RunInterrupted):
        cut = stsim.run(checkpoint=ck, checkpoint_every=10, progress=interrupt, **kw)
    assert cut.status == "interrupted" and cut.history["step"][-1] < kw["steps"]
    resumed = stsim.run(checkpoint=ck, checkpoint_every=10, **kw)
    np.testing.assert_array_equal(resumed.W, full.W)
    for k in full.history:
        np.testing.assert_array_equal(resumed.history[k], full.history[k])
    # the schedule depends on the total: the checkpoint cannot be continued to 80 steps
    with pytest.raises(ValueError, match=r"ties the step schedule to the step count, so a "
                                         r"run cannot be extended: resume with steps=40, or "
                                         r"give lr_decay='none'"):
        stsim.run(checkpoint=ck, **dict(kw, steps=80))


def test_small_adam_default_run_learns():
    res = stsim.run(T=20, q=2, pe="onehot", optimizer="adam", seed=1)
    h = res.history
    assert h["val"][-1] <= 0.02 * h["val"][0], res.summary()
    assert h["cos_V"][-1] >= 0.99, res.summary()


def test_eta_max_transverse_curvature_scales_with_c_squared():
    """The W_xe curvature carries the query twice (z_q enters the logit and its gradient):
    c², so the mean query (c = 1/q) moves the transverse bound by q², not q."""
    n, q, d = 200, 25, 5
    for c in (1.0, 0.5, 1 / 3):
        assert eta_max(q, d, n, c=c) == pytest.approx(
            min(2 * q, 2 * n / (c * c * (q - 1) * (q + d))), rel=1e-15)
    assert eta_max(q, d, n, c=0.5) == pytest.approx(4 * eta_max(q, d, n), rel=1e-15)


@pytest.mark.parametrize("T, q, d, lr, c", [(20, 3, 3, 0.5, 1 / 3), (12, 2, 3, 0.5, 0.5)])
def test_extrapolation_beyond_max_steps_follows_the_rate_law_with_c_squared(T, q, d, lr, c):
    """A level not reached within max_steps is extrapolated by the rate law 1/L ~ 4ηc²t/(n−1):
    with the mean query (c = 1/q) the extrapolated step is within 5% of the map's own first
    crossing, and closer when max_steps grows."""
    true = reduced_map_steps(T, q, d, lr, T, c=c, max_steps=10 ** 7)[1]
    errs = []
    for ms in (true // 4, true // 2):
        got = reduced_map_steps(T, q, d, lr, T, c=c, max_steps=ms)
        assert got[0] < ms < got[1]                    # escaped, then extrapolated
        errs.append(abs(got[1] / true - 1))
    assert errs[1] < errs[0] < 0.1 and errs[1] < 0.05, errs


def test_linear_decay_ends_at_zero_and_stays_there():
    """Past its ``total`` updates the linear schedule's step is 0: an extra update leaves
    the parameters where they are (the schedule decays to 0, it does not stop above it)."""
    from stsim.core.optim import SGD
    o = SGD(2.0, decay="linear", total=10)
    p = {"w": np.zeros(1)}
    for _ in range(10):
        o.step(p, {"w": np.ones(1)})
    assert o.lr == 0.0
    before = p["w"].copy()
    o.step(p, {"w": np.ones(1)})
    np.testing.assert_array_equal(p["w"], before)


@pytest.mark.parametrize("opts", [dict(lr=1.0, lr_decay="linear"), dict(optimizer="adam")])
def test_zero_steps_with_a_decay(opts):
    res = stsim.run(T=10, q=2, steps=0, progress=False, **opts)
    assert res.status == "completed" and res.config["lr_decay"] == "linear"
    init = stsim.run(T=10, q=2, steps=0, progress=False,
                     **{**opts, "lr_decay": "none"})
    np.testing.assert_array_equal(res.params["W"], init.params["W"])
    assert list(res.history["step"]) == [0]


def test_measured_step_budget_is_one_function():
    """``max(2000, 30 T)`` rounded up to 100, the default count where none is derived:
    Adam's and a mechanism's without derived steps both ask it (the same number at every
    T, including a T where 30 T is not a multiple of 100)."""
    from stsim.core.attention import make_attention
    from stsim.core.attention_dynamics import mechanism_schedule
    from stsim.core.optim import adam_steps
    from stsim.core.reduced import measured_steps
    assert [measured_steps(T) for T in (1, 66, 67, 100, 133)] == [2000, 2000, 2100, 3000, 4000]
    for T in (20, 67, 133):
        assert adam_steps(T) == measured_steps(T)
        assert Config.from_options(T=T, q=3, optimizer="adam").steps == measured_steps(T)
        sched = mechanism_schedule(make_attention("relu"), 4, T, 3, 5, 2 * T, 1.0, False, 1.0)
        assert sched[1] == measured_steps(T)


def test_learned_level_is_one_constant():
    """The learned level (2% of L(0)) that the reduced map's step, the assessment and the
    studies use is core.reduced.LEARNED (TARGET its earlier name)."""
    from stsim.core.reduced import LEARNED, TARGET, reduced_map_steps
    assert LEARNED == 0.02 and TARGET is LEARNED
    assert reduced_map_steps.__kwdefaults__["levels"][1] is LEARNED
