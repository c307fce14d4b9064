"""Adam (and the step-size schedule) against a reference written from Kingma & Ba (2015),
Algorithm 1, independently of ``stsim/core/optim.py``.

Reference, for update number ``t = 1, 2, …`` with gradient ``g_t``::

    m_t = β₁ m_{t−1} + (1 − β₁) g_t          v_t = β₂ v_{t−1} + (1 − β₂) g_t²
    m̂_t = m_t / (1 − β₁ᵗ)                    v̂_t = v_t / (1 − β₂ᵗ)
    θ_t = θ_{t−1} − α_t m̂_t / (√v̂_t + ε)

with ``m_0 = v_0 = 0``; ``α_t = α`` (no decay) or, for ``lr_decay="linear"`` over ``total``
updates, ``α`` for the first ``⌊total/2⌋`` updates and then linearly to 0:
``α_t = α · min(1, (total − k)/(total − ⌊total/2⌋))`` with ``k = t − 1`` (the schedule as
documented for ``stsim.run``). Compared in float64 after every step: the same
operations in the same order give the same numbers, so the tolerance is 1e-15.

A step per parameter (``lr`` as a dict) is each parameter's own optimiser, and must give a
step for every parameter.
"""
import numpy as np
import pytest

import stsim
from conftest import RUN
from stsim.core.optim import SGD, Adam, make_optimizer

RTOL = 1e-15


def reference_lr(alpha, k, total=None):
    """Step size of update number ``k = 0, 1, …`` (``total=None``: constant)."""
    if total is None:
        return alpha
    start = total // 2
    return alpha * min(1.0, max(total - k, 0) / (total - start))


def reference_adam(theta, grads, alpha, b1=0.9, b2=0.999, eps=1e-8, total=None):
    """Parameters after each update, for the sequence ``grads`` (Algorithm 1)."""
    theta = {k: v.copy() for k, v in theta.items()}
    m = {k: np.zeros_like(v) for k, v in theta.items()}
    v = {k: np.zeros_like(x) for k, x in theta.items()}
    out = []
    for t, g in enumerate(grads, start=1):
        a_t = reference_lr(alpha, t - 1, total)
        for k in theta:
            m[k] = b1 * m[k] + (1 - b1) * g[k]
            v[k] = b2 * v[k] + (1 - b2) * g[k] * g[k]
            m_hat = m[k] / (1 - b1 ** t)
            v_hat = v[k] / (1 - b2 ** t)
            theta[k] = theta[k] - a_t * m_hat / (np.sqrt(v_hat) + eps)
        out.append({k: x.copy() for k, x in theta.items()})
    return out


def _problem(seed=0, steps=30):
    """Parameters of two shapes and gradients on scales from 1e-10 (where ε matters) to 10."""
    rng = np.random.default_rng(seed)
    theta = {"W": rng.normal(size=(4, 5)), "V": rng.normal(size=(3, 5))}
    scales = 10.0 ** rng.uniform(-10, 1, size=steps)
    grads = [{k: s * rng.normal(size=x.shape) for k, x in theta.items()} for s in scales]
    return theta, grads


def _run(opt, theta, grads):
    params = {k: v.copy() for k, v in theta.items()}
    out = []
    for g in grads:
        opt.step(params, {k: x.copy() for k, x in g.items()})
        out.append({k: x.copy() for k, x in params.items()})
    return out


def _assert_matches(got, want):
    for t, (a, b) in enumerate(zip(got, want, strict=True)):
        for k in b:
            np.testing.assert_allclose(a[k], b[k], rtol=RTOL, atol=0,
                                       err_msg=f"update {t + 1}, parameter {k}")


def _assert_adam_matches_reference(make, total=None):
    theta, grads = _problem(steps=30 if total is None else total)
    _assert_matches(_run(make(), theta, grads),
                    reference_adam(theta, grads, 0.02, total=total))


def test_adam_matches_reference_step_by_step():
    _assert_adam_matches_reference(lambda: Adam(0.02))
    _assert_adam_matches_reference(lambda: make_optimizer("adam", 0.02))


@pytest.mark.parametrize("total", [10, 7])
def test_adam_linear_decay_matches_reference(total):
    opt = Adam(0.02, decay="linear", total=total)
    lrs = []
    for k in range(total):
        lrs.append(opt.lr)
        opt.t += 1
    assert lrs == [reference_lr(0.02, k, total) for k in range(total)]
    assert lrs[total // 2] == 0.02 and lrs[-1] == pytest.approx(0.02 / (total - total // 2))
    _assert_adam_matches_reference(lambda: Adam(0.02, decay="linear", total=total), total)


def test_adam_eps_and_betas_are_the_ones_given():
    theta, grads = _problem(seed=1)
    got = _run(Adam(0.05, betas=(0.8, 0.99), eps=1e-6), theta, grads)
    _assert_matches(got, reference_adam(theta, grads, 0.05, b1=0.8, b2=0.99, eps=1e-6))
    # the tiny gradients make ε visible: without it the parameters end elsewhere
    no_eps = reference_adam(theta, grads, 0.05, b1=0.8, b2=0.99, eps=0.0)
    assert np.max(np.abs(got[-1]["W"] - no_eps[-1]["W"])) > 1e-3


def test_sgd_matches_its_reference():
    theta, grads = _problem(seed=2, steps=9)
    want, params = [], {k: v.copy() for k, v in theta.items()}
    for k, g in enumerate(grads):
        params = {n: params[n] - reference_lr(0.3, k, 9) * g[n] for n in params}
        want.append(params)
    _assert_matches(_run(SGD(0.3, decay="linear", total=9), theta, grads), want)


class _NoBiasCorrection(float):
    """A β whose powers are 0: ``1 − βᵗ = 1``, i.e. the bias correction removed (a seeded
    fault in the real ``Adam.step``, which forms ``1 − β ** t``)."""

    def __pow__(self, other):
        return 0.0


def test_the_reference_test_fails_without_bias_correction():
    def faulty():
        opt = Adam(0.02)
        opt.b1, opt.b2 = _NoBiasCorrection(opt.b1), _NoBiasCorrection(opt.b2)
        return opt
    theta, grads = _problem()
    assert np.max(np.abs(_run(faulty(), theta, grads)[0]["W"]
                         - _run(Adam(0.02), theta, grads)[0]["W"])) > 1e-3, \
        "the seeded fault did not take effect: Adam.step no longer computes 1 - beta ** t"
    with pytest.raises(AssertionError):
        _assert_adam_matches_reference(faulty)


def test_the_steps_applied_are_the_schedules_and_their_check_is_not_per_step(monkeypatch):
    """The step of each parameter, every update, is ``opt.lr``'s (a step per parameter,
    decaying) bit for bit; ``lr`` is looked up once per parameter, not every update (the
    check belongs to the run's resolution); a new ``step_size`` is looked up afresh, and
    one without a step for a parameter is refused naming ``lr``."""
    from stsim.util.validate import Steps
    lookups = []
    block = Steps.block
    monkeypatch.setattr(Steps, "block", lambda self, k: lookups.append(k) or block(self, k))
    theta, grads = _problem(seed=3, steps=9)
    opt = SGD({"W": 0.3, "V": 0.07}, decay="linear", total=9)
    params = {k: v.copy() for k, v in theta.items()}
    for g in grads:
        want = {k: params[k] - opt.lr[k] * g[k] for k in params}
        opt.step(params, g)
        for k in params:
            np.testing.assert_array_equal(params[k], want[k])
    assert sorted(lookups) == ["V", "W"]
    opt.step_size = Steps({"W": 0.5, "V": 0.1})
    opt.step(params, grads[0])
    assert sorted(lookups) == ["V", "V", "W", "W"]
    opt.step_size = Steps({"W": 0.5, "X": 0.1})
    with pytest.raises(ValueError, match="lr gives no step for the parameter 'V'"):
        opt.step(params, grads[0])


# ---- a step per parameter ---------------------------------------------------------------
@pytest.mark.parametrize("cls", [SGD, Adam])
def test_a_step_per_parameter_is_each_blocks_own_optimiser(cls):
    """``cls(lr={"W": a, "V": b})`` updates W as ``cls(a)`` and V as ``cls(b)`` would, bit
    for bit, also under the linear decay."""
    rng = np.random.default_rng(0)
    p = {"W": rng.standard_normal((4, 4)), "V": rng.standard_normal((2, 4))}
    both = {k: v.copy() for k, v in p.items()}
    alone = {k: v.copy() for k, v in p.items()}
    opt = cls(lr={"W": 0.3, "V": 0.05}, decay="linear", total=6)
    per = {"W": cls(0.3, decay="linear", total=6), "V": cls(0.05, decay="linear", total=6)}
    for _ in range(6):
        g = {k: rng.standard_normal(v.shape) for k, v in p.items()}
        opt.step(both, g)
        for k in g:
            per[k].step({k: alone[k]}, {k: g[k]})
    for k in p:
        np.testing.assert_array_equal(both[k], alone[k])
    assert not np.array_equal(both["W"] - p["W"], 0.3 / 0.05 * (both["V"][:1] - p["V"][:1]))


def test_a_dict_lr_must_cover_every_parameter():
    with pytest.raises(ValueError, match=r"lr as a dict must give one step for each parameter "
                                         r"\['V', 'W'\]"):
        stsim.run(lr={"W": 1.0}, **RUN)
    with pytest.raises(ValueError, match=r"lr\['V'\] must be"):
        stsim.run(lr={"W": 1.0, "V": -1}, **RUN)
    with pytest.raises(ValueError, match=r"lr\['W'\] must be a number, got the string '1'"):
        stsim.run(lr={"W": "1", "V": 1.0}, **RUN)       # as lr="1" is
    with pytest.raises(ValueError, match="gives no step for the parameter 'V'"):
        SGD(lr={"W": 1.0}).step({"V": np.zeros(2)}, {"V": np.ones(2)})
