"""The command line (``stsim.cli``): ``stsim run`` flags generated from ``Config`` (with
``--lr W=…,V=…`` and ``--freeze``), the FCN baseline from the command line, and one
convention for every study command."""
import dataclasses
import json

import numpy as np
import pytest

import stsim
from stsim.cli import COMMANDS, build_parser, main
from stsim.cli.common import DEFAULT_WORKERS
from stsim.core.config import Config

STUDIES = ("figures", "separation", "expressivity", "sparse")


def _actions(parser):
    return {a.dest: a for a in parser._actions}


def test_every_config_field_is_a_run_flag_with_the_python_default():
    acts = _actions(build_parser("run"))
    for f in dataclasses.fields(Config):
        a = acts[f.name]
        assert f"--{f.name}" in a.option_strings
        assert a.default == f.default, f.name
        assert f.metadata["help"] and a.help.startswith(f.metadata["help"])
        shown = f.metadata.get("default_text") or (
            ",".join(map(str, f.default)) if isinstance(f.default, tuple) else str(f.default))
        assert a.help.endswith(f"(default: {shown})"), a.help
    # the Python call and the command line without options agree
    args = build_parser("run").parse_args([])
    assert Config(**{f.name: getattr(args, f.name) for f in dataclasses.fields(Config)}) \
        == Config()
    # list-valued fields take comma lists; dashed spellings work too
    args = build_parser("run").parse_args(["--T-test", "60,80", "--q_test", "2"])
    assert args.T_test == (60, 80) and args.q_test == (2,)


def test_run_fcn_from_the_command_line(tmp_path, capsys):
    out = tmp_path / "fcn"
    rc = main(["run", "--arch", "fcn", "--width", "16", "--depth", "2", "--T", "8", "--q", "2",
               "--d", "2", "--optimizer", "adam", "--steps", "30", "--batch", "32",
               "--out", str(out), "--quiet"])
    assert rc == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["status"] == "completed"
    cfg = stsim.load(out / "result.npz").config
    assert (cfg["arch"], cfg["width"], cfg["depth"]) == ("fcn", 16, 2)
    assert main(["run", "--arch", "mlp", "--out", str(tmp_path / "x")]) == 2
    assert "arch must be one of" in capsys.readouterr().err


@pytest.mark.parametrize("name", STUDIES)
def test_every_study_command_has_the_common_options(name, tmp_path):
    p = build_parser(name)
    args = p.parse_args([])
    assert args.mode == "quick" and args.workers == DEFAULT_WORKERS and not args.quiet
    args = p.parse_args(["--full", "--out", str(tmp_path), "--workers", "1", "--quiet"])
    assert (args.mode, args.out, args.workers, args.quiet) == ("full", str(tmp_path), 1, True)
    assert p.parse_args(["--quick"]).mode == "quick"
    with pytest.raises(SystemExit):
        p.parse_args(["--quick", "--full"])
    text = p.format_help()
    for flag in ("--quick", "--full", "--out", "--workers", "--quiet"):
        assert flag in text


@pytest.mark.parametrize("name", STUDIES + ("attention", "targets"))
def test_the_set_example_of_a_study_is_its_own(name):
    """``stsim <study> --help`` shows a ``--set`` example of that study's settings, which
    the study takes (the figures' ``fig1.seeds`` only for the figures)."""
    import importlib

    from stsim.cli.common import contract_overrides
    from stsim.studies.contract import resolve_config
    study = importlib.import_module(COMMANDS[name][0]).__dict__.get(name) or \
        importlib.import_module(f"stsim.studies.{name}")
    text = " ".join(build_parser(name).format_help().split())
    example = text.split("override a setting (repeatable), e.g. ", 1)[1].split(" ")[:2]
    assert example[0] == "--set" and ("fig1." in example[1]) == (name == "figures"), example
    args = build_parser(name).parse_args(["--full", *example])
    resolve_config(study, "full", contract_overrides(args, study))      # accepted


@pytest.mark.parametrize("name", ("attention", "separation", "sparse"))
def test_a_studys_loss_level_is_level_and_target_is_the_task(name, tmp_path, capsys):
    """A study's loss level is its setting ``level`` (``--level``); ``--target`` is the task's
    target, as in ``stsim run``: the attention study takes it, a study without one refuses
    it in one line naming ``--level``, before any file is written."""
    args = build_parser(name).parse_args(["--level", "0.5"])
    assert args.preset_level == "0.5"
    assert "--level LEVEL" in build_parser(name).format_help()
    out = tmp_path / "o"
    if name == "attention":
        assert build_parser(name).parse_args(["--target", "variance"]).preset_target == \
            "variance"
        return
    assert main([name, "--target", "variance", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"the loss level of stsim {name} is --level" in err and err.count("\n") == 1
    assert not out.exists()


def test_study_preset_options_default_to_the_chosen_preset():
    from stsim.cli.common import contract_overrides
    from stsim.studies import separation
    from stsim.studies.contract import resolve_config
    from stsim.studies.separation.study import FULL, QUICK
    p = build_parser("separation")
    args = p.parse_args([])
    assert resolve_config(separation, args.mode, contract_overrides(args, separation)) \
        == dict(QUICK, mode="quick")
    args = p.parse_args(["--full", "--tf-Ts", "8,16", "--steps", "500", "--lrs", "0.1,0.2"])
    assert resolve_config(separation, args.mode, contract_overrides(args, separation)) \
        == dict(FULL, tf_Ts=(8, 16), steps=500, lrs=(0.1, 0.2), mode="full")


def test_help_of_every_command(capsys):
    for name in [None, *COMMANDS]:
        with pytest.raises(SystemExit) as exc:
            main(([name] if name else []) + ["--help"])
        assert exc.value.code == 0
        assert "usage: stsim" in capsys.readouterr().out


def test_figures_report_prints_tables(tmp_path, capsys):
    (tmp_path / "fig1.json").write_text(json.dumps({
        "settings": {"T": 20}, "total_train_time_s": 6.0,
        "checks": [{"claim": "c", "measured": 1.0, "op": "<=", "threshold": 2.0, "ok": True},
                   {"claim": "v", "measured": 1.0, "op": "<=", "threshold": 2.0, "se": 0.25,
                    "verdict": "held", "margin_se": 4.0, "ok": True}]}))
    assert main(["figures", "--report", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    # the one table of checks carries the SE and the verdict with its margin; a check
    # written before verdicts existed (no SE) is shown as such, never as a verdict (the
    # critical-value column is empty for checks written before it was recorded)
    assert "### fig1" in out and "| **held** | v | 1 | 0.25 | <= 2 |  | +4.0 |" in out
    assert "| not judged (no se recorded) | c | 1 |  | <= 2 |  |  |" in out


def test_cli_step_per_parameter_and_freeze(tmp_path, capsys):
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
