"""Registries that drive behaviour: an encoding, an optimiser or an
architecture registered under a new name is asked for its facts — never recognised by its
name — and ``optimizer="gd"`` is the data regime it names. Objects in place of names (an
encoding, an optimiser, an architecture) run and resume without registering anything; an
optimiser object carries its settings (recorded in the config, matched on resume), never
its state (the run steps a fresh copy); an optimiser's ``state_dict()`` that no
checkpoint can hold is refused naming the optimiser; and no module looks a name up
outside the resolver."""
import math
import os

import numpy as np
import pytest

import stsim
from conftest import RUN, SMALL, _same     # bit for bit: parameters and every history entry
from stsim.core import optim, problem
from stsim.core.config import Config
from stsim.core.records import upgrade_config
from stsim.core.encodings import Encoding, PEBatch, StochasticSlots
from stsim.core.families import _REGISTERED, register_encoding
from stsim.core.optim import SGD, Adam, register_optimizer
from stsim.core.problem import TransformerProblem, register_arch
from stsim.core.cost import estimated_seconds
from stsim.util.io import load_npz, save_npz


@pytest.fixture(autouse=True)
def _clean():
    yield
    for table in (_REGISTERED, optim._OPTIMIZERS, problem._ARCHS):
        for k in [k for k in table if k.endswith("-test")]:
            del table[k]


def _copy_of_slots(name, **changes):
    """A copy of the built-in slots class (its own class dict on the Encoding base)."""
    body = {k: v for k, v in vars(StochasticSlots).items() if not k.startswith("__")}
    body.update(name=name, label=name, **changes)
    return type("SlotsCopy", (Encoding,), body)


def test_a_registered_copy_of_slots_gets_the_builtins_derived_lr_and_steps():
    register_encoding("slots-test", _copy_of_slots("slots-test"))
    built = Config.from_options(T=20, q=3, d_e=40)
    copy = Config.from_options(T=20, q=3, pe="slots-test", d_e=40)
    assert isinstance(built.lr, dict) and built.freeze == ("W_xx", "W_xe")   # per block
    assert (copy.lr, copy.steps, copy.lr_decay) == (built.lr, built.steps, built.lr_decay)
    # the default width too: a per-sample index family gets 2 T_max, as the built-in
    assert Config.from_options(T=20, q=3, pe="slots-test").d_e == 40
    for kw in (dict(model="practical", query="mean"), dict(optimizer="adam")):
        a = Config.from_options(T=20, q=3, d_e=40, **kw)
        b = Config.from_options(T=20, q=3, pe="slots-test", d_e=40, **kw)
        assert (a.lr, a.steps) == (b.lr, b.steps)


def test_a_family_without_a_reduction_gets_the_stated_fallback():
    # seeded fault of the test above: the same copy without its reduced_n
    register_encoding("noreduce-test", _copy_of_slots("noreduce-test",
                                                      reduced_n=lambda self, T: None))
    c = Config.from_options(T=20, q=3, pe="noreduce-test", d_e=40)
    built = Config.from_options(T=20, q=3, d_e=40)
    assert (c.lr, c.steps) != (built.lr, built.steps) and (c.lr, c.steps) == (1.0, 1000)
    res = stsim.run(T=6, q=2, pe="noreduce-test", d_e=12, steps=20, batch=8)
    assert "no reduced dynamics for the noreduce-test encoding" in res.message
    assert "default lr 1" in res.message
    # a near-orthogonal family is approximated, not a fallback
    assert "approximate" in stsim.core.schedule.predict(
        Config.from_options(T=20, q=3, sampler="sphere", steps=10)).explanation


def test_a_registered_optimizer_trains_with_its_own_default_lr():
    built = []

    def factory(lr, decay="none", total=None):
        built.append(lr)
        return SGD(lr, decay=decay, total=total)

    spec = register_optimizer("plain-test", factory, lr=0.3, steps=lambda cfg: 40)
    assert spec.fixed_lr == 0.3 and spec.decay == "none"
    kw = dict(T=8, q=2, pe="onehot", batch=16, seed=2)
    res = stsim.run(optimizer="plain-test", **kw)
    assert (res.config["lr"], res.config["steps"], res.config["lr_decay"]) == (0.3, 40, "none")
    assert built == [0.3]
    assert Config.from_options(optimizer="sgd", **kw).lr != 0.3     # not SGD's derived step
    ref = stsim.run(optimizer="sgd", lr=0.3, steps=40, **kw)           # the same steps
    np.testing.assert_array_equal(res.W, ref.W)
    # where nothing is derived (the FCN) its fixed default; a decaying rule is obeyed
    assert Config.from_options(arch="fcn", optimizer="plain-test", T=8, q=2).lr == 0.3
    register_optimizer("decay-test", factory, lr=0.05, steps=lambda cfg: 10, decay="linear",
                       fixed_lr=0.01)
    c = Config.from_options(T=8, q=2, optimizer="decay-test")
    assert (c.lr, c.steps, c.lr_decay) == (0.05, 10, "linear")
    # lr "reduced": the derived step of a plain gradient method
    register_optimizer("derived-test", factory, lr=optim.REDUCED)
    sgd = Config.from_options(T=20, q=3, d_e=40)
    assert Config.from_options(T=20, q=3, d_e=40, optimizer="derived-test").lr == sgd.lr
    with pytest.raises(ValueError, match="optimizer must be one of"):
        Config.from_options(optimizer="nope")
    with pytest.raises(ValueError, match="lr must be a finite number > 0"):
        register_optimizer("bad-test", factory, lr=-1)


def test_register_arch_is_accepted_by_config_and_runs():
    class MyTF(TransformerProblem):
        pass

    register_arch("mytf-test", MyTF)
    c = Config.from_options(T=20, q=3, d_e=40, arch="mytf-test")
    assert c.arch == "mytf-test" and (c.lr, c.steps) == (1.0, 1000)   # stated fallback
    res = stsim.run(T=6, q=2, arch="mytf-test", steps=10, batch=8)
    assert res.success and res.W.shape == (17, 17)
    assert "no reduced dynamics for arch='mytf-test'" in res.message
    # declared as described by the reduced dynamics: the transformer's derived defaults
    register_arch("mytf-test", MyTF, reduced=True)
    c = Config.from_options(T=20, q=3, d_e=40, arch="mytf-test")
    sgd = Config.from_options(T=20, q=3, d_e=40, freeze=())   # no blocks: the single step
    assert (c.lr, c.steps, c.freeze) == (sgd.lr, sgd.steps, ())
    with pytest.raises(ValueError, match="arch must be one of"):
        Config.from_options(arch="nope")


def test_an_arch_brings_its_memory_and_cost_rules():
    from stsim.baselines.fcn import fcn_param_count, fcn_seconds_per_step
    c = Config.from_options(T=30, q=3, arch="fcn", width=16, depth=2, steps=100)
    est = c.memory_estimate()
    assert est["parameters (x4: gradient, optimiser)"] == 4 * 8 * fcn_param_count(30, 5, 16, 2)
    assert estimated_seconds(c) == pytest.approx(100 * fcn_seconds_per_step(c))
    register_arch("costly-test", TransformerProblem, memory=lambda cfg: {"all": 1 << 20},
                  seconds_per_step=lambda cfg: 2.0)
    c = Config.from_options(T=10, q=2, arch="costly-test", steps=7)
    assert c.memory_estimate() == {"all": 1 << 20, "total": 1 << 20}
    assert estimated_seconds(c) == 14.0


def test_gd_is_the_full_batch_data_regime():
    c = Config.from_options(T=10, q=2, optimizer="gd", n_train=32)
    assert (c.optimizer, c.objective) == ("sgd", "sample")
    assert Config.from_options(T=6, q=2, pe="onehot", objective="population",
                               optimizer="gd").optimizer == "sgd"
    kw = dict(T=10, q=2, pe="onehot", n_train=32, lr=0.5, steps=30, seed=4)
    a = stsim.run(optimizer="gd", **kw)
    b = stsim.run(objective="sample", **kw)
    np.testing.assert_array_equal(a.W, b.W)
    assert upgrade_config({"optimizer": "gd", "objective": "population"})["objective"] \
        == "population"


def test_a_checkpoint_written_with_optimizer_gd_resumes(tmp_path):
    kw = dict(T=10, q=2, pe="onehot", optimizer="gd", n_train=32, lr=0.5, seed=4,
              eval_every=5)
    full = stsim.run(steps=40, **kw)
    ck = tmp_path / "ck.npz"
    stsim.run(steps=20, checkpoint=ck, **kw)
    arrays, meta = load_npz(ck)
    assert meta["config"]["optimizer"] == "sgd"
    meta["config"].update(optimizer="gd", objective="online")     # as an old version wrote it
    del meta["config"]["lr_decay"]
    save_npz(ck, arrays, meta)
    resumed = stsim.run(steps=40, checkpoint=ck, **kw)
    np.testing.assert_array_equal(resumed.W, full.W)
    np.testing.assert_array_equal(resumed.history["loss"], full.history["loss"])


def test_encoding_spec_resolves_without_drawing():
    from stsim.core.families import encoding_spec
    spec = encoding_spec("near-orthogonal", T_max=50, d_e=32)
    assert spec.dense and spec.fixed and spec.reduced_n(50) is None
    assert spec.approx_reduced_n(50) == 32 and spec.label == "near-orthogonal"
    enc = spec.build(np.random.default_rng(0))                 # drawing is for the problem
    assert enc.table.shape == (50, 32)
    with pytest.raises(ValueError, match="rng is required"):
        spec.build()

    class Listed(Encoding):
        name = "listed-test"
        fixed = False

        def sample(self, rng, B, T):
            return PEBatch(d_e=self.d_e, idx=np.arange(T))

    register_encoding("listed-test", Listed)
    s = encoding_spec("listed-test", T_max=5, slots_factor=2)
    assert (s.index, s.fixed, s.d_e, s.reduced_n(5)) == (True, False, 10, None)


def test_population_objective_asks_the_encoding_not_its_name():
    """A registered fixed one-hot family whose positions sit at slots 2..T+1: the exact
    population loss enumerates through the family's own slots, so it equals the one-hot
    loss of the parameters with the encoding coordinates shifted (enumerating positions as
    slots, as for the built-in one-hot, would not)."""
    from stsim.core.families import make_encoding
    from stsim.theory.population import make_population_objective

    class Shifted(Encoding):
        name = "shift-test"

        def sample(self, rng, B, T):
            return PEBatch(d_e=self.d_e, idx=np.arange(T) + 2)

        def n_configurations(self, T, q):        # what makes the expectation enumerable
            return math.comb(T, q)

    register_encoding("shift-test", Shifted)
    T, q, d, d_e = 6, 2, 3, 8
    kw = dict(T=T, q=q, d=d, d_e=d_e, objective="population", lr=0.1, steps=1)
    pop = make_population_objective(Config.from_options(pe="shift-test", **kw),
                                    make_encoding("shift-test", T_max=T, d_e=d_e))
    ref = make_population_objective(Config.from_options(pe="onehot", **kw))
    assert pop.method == "enumerate"
    rng = np.random.default_rng(3)
    W, V = rng.standard_normal((d + d_e, d + d_e)), rng.standard_normal((d, d + d_e))
    W[:d, d:], V[:, d:] = 0.0, 0.0                    # the invariant set (W_xe = V_e = 0)
    perm = np.r_[np.arange(d), d + (np.arange(d_e) + 2) % d_e]   # slot j of one-hot -> j + 2
    L = pop.loss_grad(W, V)[0]
    assert L == pytest.approx(ref.loss_grad(W[np.ix_(perm, perm)], V[:, perm])[0], rel=1e-12)
    assert abs(L - ref.loss_grad(W, V)[0]) > 1e-3 * L           # the check has teeth


def test_a_transformer_is_asked_of_its_arch_spec():
    """An architecture built on the transformer is one (ArchSpec.transformer), by name or
    object; the FCN and an unregistered name other than "transformer" are not."""
    class MyTF(TransformerProblem):
        pass

    spec = register_arch("mytf-test", MyTF)
    assert problem.is_transformer("transformer") and problem.is_transformer(spec)
    assert problem.is_transformer("mytf-test") and not problem.is_transformer("fcn")
    assert not problem.is_transformer("elsewhere")
    res = stsim.run(T=6, q=2, arch="mytf-test", steps=5, batch=8, progress=False)
    assert res.transformer and res.attention(n=2).shape == (2, 6)
    assert not stsim.run(T=6, q=2, arch="fcn", width=8, steps=5, batch=8,
                         progress=False).transformer


# ---- objects as well as names, registering nothing -------------------------------------
def _tables():
    from stsim.core import families, optim, problem
    return {"pe": dict(families._REGISTERED), "optimizer": dict(optim._OPTIMIZERS),
            "arch": dict(problem._ARCHS)}


LEARN = dict(T=10, q=2, d=3, steps=300, batch=64, lr=2.0, eval_every=50)


@pytest.mark.parametrize("make", [
    lambda rng: stsim.OneHot(10),
    lambda rng: stsim.NearOrthogonal(16, 20, rng),
    lambda rng: stsim.StochasticSlots(20),
    lambda rng: stsim.StochasticSphere(16),
], ids=["onehot", "near-orthogonal", "slots", "sphere"])
def test_every_builtin_encoding_object_trains_and_registers_nothing(make):
    before = _tables()
    enc = make(np.random.default_rng(0))
    res = stsim.run(pe=enc, **LEARN)
    assert _tables() == before
    assert res.success and res.history["val"][-1] < 0.4 * res.history["val"][0]
    assert res.config["pe"] == enc.name and res.config["d_e"] == enc.d_e
    assert res.config["pe_object"] == type(enc).__name__
    assert res.config["sampler"] == ("sphere" if isinstance(enc, stsim.StochasticSphere)
                                     else "slots")
    if isinstance(enc, stsim.NearOrthogonal):      # the object's own table, not a new one
        assert res.info["encoding"]["delta"] == enc.delta
        np.testing.assert_array_equal(res.attention(n=2).shape, (2, 10))


def test_an_encoding_object_is_the_run_and_its_config_needs_it_again(tmp_path):
    enc = stsim.NearOrthogonal(16, 20, np.random.default_rng(5))
    res = stsim.run(pe=enc, **RUN)
    named = stsim.run(pe="near-orthogonal", d_e=16, **RUN)       # a table from the seed
    assert not np.array_equal(res.W, named.W)
    with pytest.raises(ValueError, match=r"pe was an object \(NearOrthogonal, recorded as "
                                         r"pe='near-orthogonal'\).*pass the object again"):
        stsim.run(config=res.config)
    _same(stsim.run(config=res.config, pe=enc), res)
    res.save(tmp_path / "r.npz")
    with pytest.raises(ValueError, match="pass the object again"):
        stsim.load(tmp_path / "r.npz").attention()
    cfg = stsim.Config.from_options(pe=enc, **RUN)                # a Config keeps it
    assert cfg.resolve().resolved.encoding.instance is enc
    _same(stsim.run(config=cfg), res)


@pytest.mark.parametrize("obj,name,opts", [
    (lambda: SGD(lr=1.0), "sgd", dict(lr=1.0)),
    (lambda: Adam(0.02), "adam", dict(lr=0.02, lr_decay="none")),
    (lambda: SGD(lr={"W": 2.0, "V": 0.5}), "sgd", dict(lr={"W": 2.0, "V": 0.5})),
    (lambda: Adam(0.02, decay="linear", total=160), "adam", dict(lr=0.02, lr_decay="linear")),
])
def test_an_optimiser_object_gives_the_numbers_of_its_name(obj, name, opts):
    before = _tables()
    opt = obj()
    res = stsim.run(optimizer=opt, **RUN)
    assert _tables() == before
    _same(res, stsim.run(optimizer=name, **dict(RUN, **opts)))
    assert res.config["optimizer"] == name and res.config["optimizer_object"] == type(opt).__name__
    assert opt.t == 0                        # the run stepped a copy, not the caller's object


def test_an_optimiser_object_of_ones_own():
    class Halved(SGD):
        """SGD at half its step."""

        def step(self, params, grads):
            for k, g in grads.items():
                params[k] -= 0.5 * self.base_lr * g
            self.t += 1

    before = _tables()
    res = stsim.run(optimizer=Halved(2.0), pe="onehot", **RUN)
    assert _tables() == before and res.config["optimizer"] == "halved"
    _same(res, stsim.run(optimizer="sgd", pe="onehot", **dict(RUN, lr=1.0)))
    with pytest.raises(ValueError, match="lr=3.0 differs from the optimizer object's 2.0"):
        stsim.run(optimizer=Halved(2.0), lr=3.0, **RUN)
    with pytest.raises(ValueError, match="optimizer must be a name"):
        stsim.run(optimizer=object(), **RUN)


def test_an_arch_object_registers_nothing():
    from stsim.core.problem import (ArchSpec, TransformerProblem, transformer_blocks,
                                    transformer_shapes)
    before = _tables()
    spec = ArchSpec("mine-test", TransformerProblem, reduced=True, shapes=transformer_shapes,
                    blocks=transformer_blocks)
    res = stsim.run(arch=spec, **RUN)
    assert _tables() == before
    assert res.config["arch"] == "mine-test" and res.config["arch_object"] == "ArchSpec"
    _same(res, stsim.run(**RUN))
    with pytest.raises(ValueError, match="arch must be a name"):
        stsim.run(arch=3, **RUN)


def test_checkpoints_of_object_runs_resume(tmp_path):
    enc = stsim.StochasticSphere(12)
    opts = dict(RUN, pe=enc, optimizer=Adam(0.05), freeze=("W_xe",))
    whole = stsim.run(**opts)
    ck = tmp_path / "c.npz"
    part = stsim.run(checkpoint=ck, callback=lambda r: r["step"] == 60, **opts)
    _same(stsim.run(config=part.config, pe=enc, optimizer=Adam(0.05), checkpoint=ck), whole)


def test_optimizer_settings_recorded_and_checked_on_resume(tmp_path):
    a = stsim.run(**SMALL, steps=4, optimizer=stsim.Adam(0.02))
    b = stsim.run(**SMALL, steps=4, optimizer=stsim.Adam(0.02, betas=(0.5, 0.9)))
    assert a.config != b.config
    assert b.config["optimizer_settings"] == {"betas": [0.5, 0.9], "eps": 1e-8}
    assert "optimizer_settings" not in stsim.run(**SMALL, steps=2, optimizer="adam").config
    assert "optimizer_settings" not in stsim.run(**SMALL, steps=2,
                                                 optimizer=stsim.SGD(0.5)).config
    ck = tmp_path / "ck.npz"
    first = stsim.run(**SMALL, steps=12, optimizer=stsim.Adam(0.02), checkpoint=ck,
                      callback=lambda row: row["step"] >= 6)
    assert first.status == "stopped" and ck.exists()
    with pytest.raises(ValueError, match="optimizer_settings"):
        stsim.run(**SMALL, steps=12, optimizer=stsim.Adam(0.02, betas=(0.5, 0.9)),
                  checkpoint=ck)
    with pytest.raises(ValueError, match="optimizer_settings"):
        stsim.run(**SMALL, steps=12, optimizer=stsim.Adam(0.02, eps=1e-6), checkpoint=ck)
    again = stsim.run(**SMALL, steps=12, optimizer=stsim.Adam(0.02), checkpoint=ck)
    assert again.status == "completed"
    # a key only the checkpoint holds is compared too: the object's settings against a name
    ck2 = tmp_path / "ck2.npz"
    stsim.run(**SMALL, steps=12, optimizer=stsim.Adam(0.02, betas=(0.5, 0.9)), checkpoint=ck2,
              callback=lambda row: row["step"] >= 6)
    with pytest.raises(ValueError, match="optimizer_settings"):
        stsim.run(**SMALL, steps=12, optimizer="adam", lr=0.02, checkpoint=ck2)
    # a config dict with the settings reruns with the object given again
    rerun = stsim.run(config=b.config, optimizer=stsim.Adam(0.02, betas=(0.5, 0.9)),
                      progress=False)
    np.testing.assert_array_equal(rerun.params["W"], b.params["W"])


def _stale_adam():
    o = stsim.Adam(0.02)
    o.t = 40
    o.m = {"W": np.full((21, 21), 3.0), "V": np.full((5, 21), -2.0)}
    o.v = {"W": np.full((21, 21), 1e-12), "V": np.full((5, 21), 1e-12)}
    return o


def test_optimizer_state_not_taken_nor_changed():
    fresh = stsim.run(**SMALL, steps=10, optimizer=stsim.Adam(0.02))
    o = _stale_adam()
    stale = stsim.run(**SMALL, steps=10, optimizer=o)
    np.testing.assert_array_equal(stale.params["W"], fresh.params["W"])
    assert o.t == 40 and o.m["W"][0, 0] == 3.0 and o.m["W"].shape == (21, 21)
    # moments of another shape than the run's parameters
    o.m, o.v = {"W": np.zeros((3, 3))}, {"W": np.zeros((3, 3))}
    assert stsim.run(**SMALL, steps=3, optimizer=o).status == "completed"
    # an SGD stepped before: the linear schedule starts at its first update again
    sgd = stsim.SGD(0.5, decay="linear", total=20)
    want = stsim.run(**SMALL, optimizer=sgd)
    sgd.t = 15
    got = stsim.run(**SMALL, optimizer=sgd)
    np.testing.assert_array_equal(got.params["W"], want.params["W"])
    assert sgd.t == 15
    assert sgd.fresh().t == 0 and _stale_adam().fresh().m == {}


# ---- an optimiser's state, checked where it enters ------------------------------------
@pytest.mark.parametrize("state, what", [
    ({"t": np.array(1), "m": object()}, r"\['m'\] is not a finite numeric array"),
    ({"t": np.array(np.nan)}, r"\['t'\] is not a finite"),
    ([1, 2], " returned a list"),
    ({1: np.zeros(2)}, " has the key 1"),
])
def test_an_optimiser_state_no_checkpoint_can_hold_is_refused_before_training(
        tmp_path, _clean, state, what):
    class Odd(SGD):
        def state_dict(self):
            return state

    register_optimizer("odd-test", Odd, lr=0.1)
    ckpt = tmp_path / "c.npz"
    with pytest.raises(ValueError, match=r"optimiser Odd: state_dict\(\)" + what):
        stsim.run(T=8, q=2, pe="onehot", optimizer="odd-test", steps=5, batch=8,
                  checkpoint=ckpt, checkpoint_every=2)
    assert os.listdir(tmp_path) == []


def test_an_optimiser_state_that_fails_later_names_the_optimiser(tmp_path, _clean):
    class Late(SGD):
        def state_dict(self):
            return {"t": np.array(self.t), **({"x": "text"} if self.t >= 2 else {})}

    register_optimizer("late-test", Late, lr=0.1)
    ckpt = tmp_path / "c.npz"
    with pytest.raises(ValueError, match=r"optimiser Late: state_dict\(\)\['x'\]"):
        stsim.run(T=8, q=2, pe="onehot", optimizer="late-test", steps=5, batch=8,
                  checkpoint=ckpt, checkpoint_every=2)


# ---- names resolved once ----------------------------------------------------------------
RESOLVER = {"stsim/core/config.py", "stsim/core/families.py", "stsim/core/problem.py",
            "stsim/core/optim.py"}
LOOKUPS = ("encoding_spec", "arch_spec", "optimizer_spec")


def _lookups_outside_the_resolver(root):
    """``[(file, line, text)]``: calls of the name lookups outside the resolver's modules
    (definitions and docstring examples aside)."""
    import re
    call = re.compile(r"\b(" + "|".join(LOOKUPS) + r")\(")
    out = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent).as_posix()
        if rel in RESOLVER:
            continue
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            text = line.strip()
            if call.search(text) and not text.startswith(("def ", ">>>", "...", "#")):
                out.append((rel, i, text))
    return out


def test_no_module_looks_a_name_up_outside_the_resolver(tmp_path):
    import pathlib
    import shutil
    root = pathlib.Path(stsim.__file__).parent
    assert _lookups_outside_the_resolver(root) == []
    # the check sees a lookup added anywhere else
    copy = tmp_path / "stsim"
    shutil.copytree(root, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "core" / "schedule.py").write_text(
        (copy / "core" / "schedule.py").read_text() +
        "\n\ndef _again(cfg):\n    return arch_spec(cfg.arch).reduced\n")
    assert [f for f, _, _ in _lookups_outside_the_resolver(copy)] == ["stsim/core/schedule.py"]


def test_encodings_do_not_import_the_registry():
    import ast
    import pathlib
    src = (pathlib.Path(stsim.__file__).parent / "core" / "encodings.py").read_text()
    imported = {n.module for n in ast.walk(ast.parse(src)) if isinstance(n, ast.ImportFrom)}
    assert "stsim.core.families" not in imported and "__getattr__" not in src
