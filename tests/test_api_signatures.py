"""The public API as Jupyter, IDEs and ``help`` see it: ``stsim.run``'s signature lists every
option (made from the fields of ``Config``), ``stsim.sweep`` has its own signature and
docstring, ``stsim.Session`` takes options, a dict or a Config; a result's config reruns it
bit for bit; and the traps of a first hour get messages that say what to do."""
import dataclasses
import inspect
import pydoc

import numpy as np
import pytest

import stsim
from stsim.core.config import Config

FIELDS = [f.name for f in dataclasses.fields(Config)]


def test_run_signature_lists_every_option_with_the_fields_defaults():
    params = inspect.signature(stsim.run).parameters
    assert set(FIELDS) <= set(params)
    for f in dataclasses.fields(Config):
        assert params[f.name].default == f.default, f.name
    assert not any(p.kind is p.VAR_KEYWORD for p in params.values())
    assert params["lr"].annotation is not inspect.Parameter.empty
    for name in ("config", "checkpoint", "progress", "callback"):
        assert params[name].kind is inspect.Parameter.KEYWORD_ONLY
    assert "attention" in pydoc.render_doc(stsim.run) and "freeze" in pydoc.render_doc(stsim.run)


def test_the_signature_follows_the_fields(monkeypatch):
    """Made from the fields, not written twice: a field added to Config shows up."""
    from stsim.core.run import with_options

    @dataclasses.dataclass(frozen=True)
    class Grown(Config):
        extra: int = 7

    monkeypatch.setattr("stsim.core.run.Config", Grown)

    def f(T=None, **options):
        pass

    params = inspect.signature(with_options(f)).parameters
    assert params["extra"].default == 7 and params["T"].default == 200


def test_sweep_has_its_own_signature_and_docstring():
    sig = inspect.signature(stsim.sweep)
    assert list(sig.parameters)[:3] == ["fn", "grid", "seeds"]
    assert sig.parameters["seeds"].default == 1
    assert stsim.sweep.__doc__.startswith("Run ``fn(**point, seed=seed)``")
    text = pydoc.render_doc(stsim.sweep)
    assert "Parameters\n" in text
    # help() shows the function, not a package of modules (was 680 lines on a package)
    assert text.splitlines()[0].endswith("function sweep in module stsim.sweeps")
    assert "PACKAGE CONTENTS" not in text and len(text.splitlines()) < 200
    assert inspect.isfunction(stsim.sweep) and stsim.sweep is stsim.sweeps.sweep


def test_every_public_function_is_annotated():
    bare = []
    for name in stsim.__all__:
        obj = getattr(stsim, name)
        if callable(obj) and not isinstance(obj, type):
            sig = inspect.signature(obj)
            if sig.return_annotation is sig.empty and all(
                    p.annotation is p.empty for p in sig.parameters.values()):
                bare.append(name)
    assert not bare


def test_py_typed_is_shipped():
    import configparser
    from pathlib import Path
    root = Path(stsim.__file__).parent
    assert (root / "py.typed").is_file()
    cfg = configparser.ConfigParser()
    cfg.read(root.parent / "setup.cfg")
    assert "py.typed" in cfg["options.package_data"]["stsim"]


@pytest.mark.parametrize("make", [
    lambda: stsim.Session(T=12, q=2, steps=6, batch=16, progress=False),
    lambda: stsim.Session(dict(T=12, q=2, steps=6, batch=16), progress=False),
    lambda: stsim.Session(Config(T=12, q=2, steps=6, batch=16), progress=False),
    lambda: stsim.Session(dict(T=12, q=99), q=2, steps=6, batch=16, progress=False),
])
def test_session_takes_options_a_dict_or_a_config(make):
    with make() as s:
        s.advance()
        res = s.finish()
    ref = stsim.run(T=12, q=2, steps=6, batch=16, progress=False)
    assert res.config == ref.config
    assert all(np.array_equal(res.params[k], ref.params[k]) for k in ref.params)


def _same(a, b):
    assert a.config == b.config and a.status == b.status and a.message == b.message
    for k in a.params:
        assert np.array_equal(a.params[k], b.params[k]), k
    for k in a.history:
        assert np.array_equal(a.history[k], b.history[k], equal_nan=True), k


@pytest.mark.parametrize("options", [
    dict(T=16, q=2),                                            # the default: a step per block
    dict(T=12, q=2, pe="onehot", lr={"W": 4.0, "V": 1.0}, freeze="W_xx", steps=80,
         attention="sigmoid", temperature=0.8, batch=32, T_test=[14], seed=3),
])
def test_a_results_config_reruns_it_bit_for_bit(options):
    res = stsim.run(**options, progress=False)
    _same(stsim.run(**res.config, progress=False), res)
    _same(stsim.run(config=res.config, progress=False), res)


@pytest.mark.parametrize("field, cls", [("pe", stsim.NearOrthogonal), ("optimizer", stsim.Adam)])
def test_a_class_in_place_of_an_object_asks_for_an_instance(field, cls):
    with pytest.raises(ValueError, match=rf"{field} got the class {cls.__name__}, not an "
                                         rf"object: pass an instance"):
        stsim.run(T=12, q=2, steps=3, **{field: cls})


def test_a_bad_lr_flag_is_named_as_the_flag(capsys):
    from stsim.cli import main
    with pytest.raises(SystemExit):
        main(["run", "--lr", "0.1.2", "--T", "10"])
    err = capsys.readouterr().err
    assert "argument --lr: give one number" in err and "step_arg" not in err


def test_the_annotations_say_what_a_field_takes():
    """A field that takes an object is annotated with it (``help``, Jupyter and IDEs show
    the annotation): names and objects alike, in run's and Session's signatures."""
    expected = {"pe": "Encoding", "attention": "Attention", "optimizer": "Optimizer",
                "target": "Target", "arch": "ArchSpec", "init": "Result"}
    for fn in (stsim.run, stsim.Session):
        params = inspect.signature(fn).parameters
        for name, kind in expected.items():
            text = str(params[name].annotation)
            assert "str" in text and kind in text, (fn, name, text)
        seed = str(params["seed"].annotation)
        assert all(t in seed for t in ("int", "SeedSequence", "Generator")), seed
    from stsim.core.optim import Optimizer
    assert isinstance(stsim.Adam(0.02), Optimizer) and not isinstance("adam", Optimizer)


def test_help_of_run_lists_the_mechanisms_as_the_command_line_does(capsys):
    from stsim.cli import main
    from stsim.core.attention import ATTENTIONS
    text = pydoc.render_doc(stsim.run)
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    cli = " ".join(capsys.readouterr().out.split())
    for name in ATTENTIONS:
        assert f'"{name}"' in text and f" {name} " in cli, name
    assert "{MECHANISM_NAMES}" not in text
    assert stsim.Attention is stsim.core.attention.Attention and "Attention" in stsim.__all__
