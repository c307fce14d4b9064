"""The diagnosis of a finished run (stsim.core.assessment): a run that did not learn or
diverged names the cause it can see and what to change — the noise floor of small-batch
SGD or its lag, dense encodings too narrow for T (with the width to give), otherwise the
reduced dynamics' late escape; an init_scale above the one the derived step assumes, a
mechanism's measured step."""
import numpy as np

import stsim
from stsim.core.assessment import FLAT, floor_cause, narrow_width


def test_small_batch_run_names_the_noise_floor():
    """batch=2 at T = 8 stops near a third of L(0) long after the reduced dynamics reach 2%:
    the message names the minibatch noise and the remedies, not a late escape."""
    r = stsim.run(T=8, batch=2, progress=False)
    assert r.info["assessment"] == "not converged"
    assert "small-batch SGD" in r.message and "larger batch (>= q kappa = 25)" in r.message
    assert "smaller lr" in r.message and "escapes later" not in r.message


def test_narrow_sphere_encodings_named_with_the_width_to_give():
    r = stsim.run(T=8, sampler="sphere", d_e=2, progress=False)
    assert r.info["assessment"] in ("not converged", "plateau")
    assert "too narrow for T=8" in r.message and "give d_e >= 6" in r.message
    assert "escapes later" not in r.message
    assert narrow_width(8) == 6 and narrow_width(20) == 9 and narrow_width(1024) == 20


def test_a_short_large_batch_run_keeps_the_late_escape_diagnosis():
    """Neither cause at batch 256 and slots encodings: the prediction of the escape stays."""
    r = stsim.run(T=10, q=2, steps=10, progress=False)
    assert "predict the escape" in r.message
    assert "small-batch" not in r.message and "too narrow" not in r.message


def test_floor_or_lag_told_apart_by_the_last_quarters():
    cfg = stsim.Config(T=8, batch=2).resolve()
    plan = cfg.resolved.plan
    flat = {"val": np.r_[1.0, np.full(39, 0.3)]}
    falling = {"val": np.r_[1.0, np.linspace(0.6, 0.2, 39)]}
    assert floor_cause(cfg, flat, plan).startswith("a noise floor of small-batch SGD")
    assert floor_cause(cfg, falling, plan).startswith("small-batch SGD lagging")
    assert floor_cause(cfg, falling, plan).endswith("or more steps")
    big = stsim.Config(T=8, batch=256).resolve()     # kappa/B below 1/q: not the noise
    assert floor_cause(big, flat, big.resolved.plan) is None
    assert 0 < FLAT < 1


def test_divergence_with_a_large_init_scale_names_it():
    """The derived step's bound is taken from a small initialisation: init_scale=1 diverges
    near step 11, and the message names init_scale and its default."""
    r = stsim.run(T=10, init="random", init_scale=1, progress=False)
    assert r.status == "diverged"
    assert "init_scale=1 is above its default 0.02" in r.message
    assert "smaller init_scale, or a smaller lr" in r.message


def test_divergence_of_a_measured_mechanism_suggests_a_smaller_lr():
    r = stsim.run(T=8, q=2, attention="linear", lr=5.0, steps=50, progress=False)
    assert r.status == "diverged"
    assert "a smaller lr: the linear mechanism" in r.message and "calibrated" in r.message
    r = stsim.run(T=8, q=2, lr=500.0, steps=50, progress=False)
    assert r.status == "diverged" and r.message.endswith("a smaller lr")
