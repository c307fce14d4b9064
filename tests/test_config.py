"""A config is a request: never changed. :meth:`Config.resolve` returns a new, resolved
config; each value is decided once, by one stage, and the run's step, step count, held
blocks, schedule and stop rule are written from the frozen plan."""
import dataclasses

import pytest

from stsim.core.attention import Softmax
from stsim.core.config import Config
from stsim.core.optim import SGD
from stsim.core.schedule import Plan
from stsim.core.targets import Variance


def _fields(c):
    return {f.name: getattr(c, f.name) for f in dataclasses.fields(c)}


def test_a_config_is_never_changed():
    """Assigning a field of a config, requested or resolved, is refused; resolving leaves
    the request as it was, objects given in place of names included."""
    request = Config(T=8, q=2, attention=Softmax(), target=Variance(),
                     optimizer=SGD(0.1), steps=20)
    before = _fields(request)
    resolved = request.resolve()
    assert _fields(request) == before
    assert resolved is not request and resolved.target == "variance"
    for c in (request, resolved):
        with pytest.raises(dataclasses.FrozenInstanceError):
            c.steps = 5
    with pytest.raises(dataclasses.FrozenInstanceError):
        resolved.resolved.plan.steps = 5


@pytest.mark.parametrize("opts", [dict(T=20, q=3), dict(T=8, q=2, lr=0.5, steps=30),
                                  dict(T=8, q=2, optimizer="adam"),
                                  dict(T=8, q=2, target="variance", freeze=())])
def test_the_decided_schedule_is_the_plans(opts):
    """The resolved config's lr, steps, freeze, lr_decay and stop are the plan's record:
    one holder of each decided value."""
    c = Config(**opts).resolve()
    p = c.resolved.plan
    assert isinstance(p, Plan)
    assert {k: getattr(c, k) for k in ("lr", "steps", "freeze", "lr_decay", "stop")} == \
        p.record()
    assert c.eval_every == max(1, p.steps // 100)


def test_resolving_again_gives_the_same_config():
    c = Config(T=8, q=2, attention=Softmax(temperature=0.5), steps=10).resolve()
    again = c.resolve()
    assert _fields(again) == _fields(c)


def test_an_architecture_returns_the_fields_it_decides():
    """The FCN decides ``width`` (64 by default): in the resolved config, not the request."""
    request = Config(T=8, q=2, arch="fcn", steps=10)
    assert request.resolve().width == 64 and request.width is None


def test_a_stage_that_writes_into_the_config_is_refused(monkeypatch):
    """Seeded fault: a plan stage that changes the config it is given (as stages did
    before) fails at once instead of changing a value behind the caller."""
    import stsim.core.config as config

    def writes(cfg):
        cfg.steps = 1
    monkeypatch.setattr(config, "settle", writes)
    with pytest.raises(dataclasses.FrozenInstanceError):
        Config(T=8, q=2).resolve()
