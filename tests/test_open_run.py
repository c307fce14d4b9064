"""The open run: a step per parameter, frozen blocks, the callback, the session pieces."""
import numpy as np
import pytest

import stsim
from stsim.core.optim import SGD, Adam
from stsim.core.session import Session

RUN = dict(T=10, q=2, d=3, batch=16, steps=160, eval_every=20, seed=3)


def _same(a, b):
    """Bit for bit: parameters and every history entry."""
    assert set(a.params) == set(b.params) and set(a.history) == set(b.history)
    for k in a.params:
        np.testing.assert_array_equal(a.params[k], b.params[k], err_msg=k)
    for k in a.history:
        np.testing.assert_array_equal(a.history[k], b.history[k], err_msg=k)


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
    from stsim.core.reduced import reduced_map_steps
    c = stsim.Config.from_options(T=10, q=2, lr={"W": 2.0, "V": 1.0})
    tgt = reduced_map_steps(10, 2, 5, {"W": 2.0, "V": 1.0}, 20)[1]
    assert c.steps == max(100, -(-2 * tgt // 100) * 100) and c.freeze == ()
    with pytest.raises(ValueError, match="needs steps"):
        stsim.Config.from_options(T=10, q=2, arch="fcn", lr={"W1": 0.1, "b1": 0.1, "A": 0.1,
                                                              "c": 0.1})


# ---- frozen blocks ----------------------------------------------------------------------
@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
@pytest.mark.parametrize("pe,extra", [("onehot", {}), ("stochastic", {}),
                                      ("stochastic", dict(sampler="sphere", d_e=16))])
def test_frozen_blocks_keep_their_initial_value(optimizer, pe, extra):
    opts = dict(RUN, pe=pe, optimizer=optimizer, init="random", init_scale=0.3,
                lr=0.05 if optimizer == "adam" else 1.0, **extra)
    init = stsim.run(**dict(opts, steps=0))
    res = stsim.run(freeze=("W_xe", "W_xx", "V_e"), **opts)
    free = stsim.run(**opts)
    d = RUN["d"]
    assert res.config["freeze"] == ["W_xx", "W_xe", "V_e"]        # the blocks' order
    np.testing.assert_array_equal(res.W[:d], init.W[:d])          # W's token rows
    np.testing.assert_array_equal(res.V[:, d:], init.V[:, d:])
    assert not np.array_equal(free.W[:d], init.W[:d])             # they would move
    assert not np.array_equal(free.V[:, d:], init.V[:, d:])
    assert not np.array_equal(res.W[d:], init.W[d:])              # the others move
    assert not np.array_equal(res.V[:, :d], init.V[:, :d])


def test_freeze_names_are_checked():
    with pytest.raises(ValueError, match=r"freeze must name blocks of \('W_xx', 'W_xe', "
                                         r"'W_ex', 'W_ee', 'V_x', 'V_e'\), got \['W_yy'\]"):
        stsim.run(freeze=("W_xe", "W_yy"), **RUN)
    with pytest.raises(ValueError, match="freeze: arch='fcn' has no named blocks"):
        stsim.Config.from_options(arch="fcn", T=8, q=2, steps=10, freeze=("W_xe",))
    assert stsim.Config.from_options(T=8, q=2, steps=10, lr=1.0).freeze == ()
    assert "freeze" not in stsim.Config.from_options(T=8, q=2, steps=10, lr=1.0).to_dict()
    # the derived default holds W's token rows when it takes a step per block
    assert stsim.Config.from_options(T=8, q=2, steps=10).freeze == ("W_xx", "W_xe")


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_step_per_parameter_and_frozen_blocks_resume_bit_for_bit(tmp_path, optimizer):
    """Stopped by the callback at step 100 with a checkpoint, then resumed: the same
    numbers as the run in one go (parameters, optimiser state, history)."""
    lr = {"W": 0.05, "V": 0.02} if optimizer == "adam" else {"W": 4.0, "V": 1.5}
    opts = dict(RUN, steps=200, lr=lr, optimizer=optimizer, freeze=("W_xx", "W_xe"),
                lr_decay="linear")
    whole = stsim.run(**opts)
    ck = tmp_path / "c.npz"
    part = stsim.run(checkpoint=ck, callback=lambda row: row["step"] == 100, **opts)
    assert part.status == "stopped" and part.history["step"][-1] == 100
    rest = stsim.run(config=part.config, checkpoint=ck)
    assert rest.status == "completed"
    _same(whole, rest)
    assert np.all(rest.W[:RUN["d"]] == 0)


# ---- the callback -----------------------------------------------------------------------
def test_callback_true_at_step_100_stops_there():
    rows = []

    def cb(row):
        rows.append(row)
        return row["step"] >= 100

    res = stsim.run(callback=cb, **dict(RUN, steps=300))
    whole = stsim.run(**dict(RUN, steps=300))
    assert res.status == "stopped" and not res.success
    assert "step 100" in res.message and res.info["stopped_at_step"] == 100
    assert list(res.history["step"]) == list(range(0, 101, 20))
    assert [r["step"] for r in rows] == list(range(0, 101, 20))
    assert set(rows[-1]) == set(res.history) and rows[-1]["val"] == res.history["val"][-1]
    n = len(res.history["step"])
    for k in res.history:                           # the run so far, as in one go
        np.testing.assert_array_equal(res.history[k], whole.history[k][:n])
    # the parameters of the record at step 100: its cosines
    cw, cv = stsim.cosine_to_target(res.W, res.V, RUN["d"])
    assert (cw, cv) == (res.history["cos_W"][-1], res.history["cos_V"][-1])


def test_a_stopped_result_saves_and_loads(tmp_path):
    """A stopped run's result file loads as written (its status was refused before)."""
    res = stsim.run(callback=lambda row: row["step"] >= 20, **dict(RUN, steps=60))
    back = stsim.load(res.save(tmp_path / "stopped.npz"))
    assert back.status == "stopped" and back.message == res.message
    np.testing.assert_array_equal(back.W, res.W)


@pytest.mark.parametrize("where", ["callback", "progress"])
def test_an_exception_in_the_callback_keeps_the_run(tmp_path, where):
    class Boom(RuntimeError):
        pass

    def bad(*args):
        row = args[-1]
        if row["step"] == 60:
            raise Boom("at 60")

    ck = tmp_path / "c.npz"
    with pytest.raises(Boom, match="at 60") as info:
        stsim.run(checkpoint=ck, **{where: bad}, **RUN)
    res = info.value.result
    assert res.status == "stopped" and "Boom: at 60" in res.message
    assert res.history["step"][-1] == 60 and res.params["W"].shape == (3 + 20, 3 + 20)
    assert ck.exists()
    _same(stsim.run(config=res.config, checkpoint=ck), stsim.run(**RUN))


def test_callback_must_be_callable():
    with pytest.raises(ValueError, match="callback must be a callable"):
        stsim.run(callback=3, **RUN)


# ---- the session pieces -----------------------------------------------------------------
def test_session_advanced_in_pieces_is_the_run_in_one_go():
    cfg = stsim.Config.from_options(**RUN)
    s = Session(cfg)
    seen = []
    while not s.advance(35):
        seen.append(s.state.step)
    assert seen == [35, 70, 105, 140]
    _same(s.finish(), stsim.run(**RUN))
    early = Session(cfg)
    early.advance(50)
    res = early.finish()
    assert res.status == "stopped" and res.history["step"][-1] == 40


def test_a_session_finished_early_resumes_from_its_checkpoint(tmp_path):
    ck = tmp_path / "c.npz"
    s = Session(stsim.Config.from_options(**RUN), checkpoint=str(ck))
    assert not s.advance(50) and s.state.step == 50
    assert s.finish().status == "stopped" and ck.exists()
    _same(stsim.run(checkpoint=ck, **RUN), stsim.run(**RUN))


# ---- the command line -------------------------------------------------------------------
def test_cli_step_per_parameter_and_freeze(tmp_path, capsys):
    import json

    from stsim.cli import main as cli_main
    out = tmp_path / "r"
    assert cli_main(["run", "--T", "10", "--q", "2", "--steps", "40", "--batch", "16",
                     "--lr", "W=2,V=1", "--freeze", "W_xx,W_xe", "--quiet",
                     "--out", str(out)]) == 0
    cfg = json.loads((out / "config.json").read_text())["config"]
    assert cfg["lr"] == {"W": 2.0, "V": 1.0} and cfg["freeze"] == ["W_xx", "W_xe"]
    res = stsim.load(out / "result.npz")
    assert np.all(res.W[:5] == 0) and np.any(res.W[5:] != 0)
    capsys.readouterr()
    with pytest.raises(SystemExit) as ex:
        cli_main(["run", "--T", "10", "--q", "2", "--lr", "W=x", "--out",
                  str(tmp_path / "never")])
    assert ex.value.code == 2 and "the step of W must be a number" in capsys.readouterr().err
    with pytest.raises(SystemExit) as ex:       # W twice: refused, not the last one kept
        cli_main(["run", "--T", "10", "--q", "2", "--lr", "W=1,W=2,V=1", "--out",
                  str(tmp_path / "never")])
    assert ex.value.code == 2 and "argument --lr" in capsys.readouterr().err
    assert cli_main(["run", "--T", "10", "--q", "2", "--steps", "5", "--freeze", "W_q",
                     "--out", str(tmp_path / "never")]) == 2
    assert "freeze must name blocks of" in capsys.readouterr().err
    assert not (tmp_path / "never").exists()


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
