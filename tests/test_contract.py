"""The study contract (stsim.studies.contract): overrides parsed and checked before any
work, and the one driver calling check → run → analyse → report."""
import types

import pytest

from stsim.studies.contract import apply_overrides, check_study, resolve_config, run_study

PRESET = {"lr": 0.1, "steps": 10, "Ts": (8, 16), "name": "and", "fig1": {"seeds": [0, 1]}}


def test_overrides_are_typed_like_the_preset():
    cfg = apply_overrides(PRESET, {"lr": "0.5", "steps": "20", "Ts": "[4, 8]", "name": "or",
                                   "fig1.seeds": "[0, 1, 2]"})
    assert cfg == {"lr": 0.5, "steps": 20, "Ts": (4, 8), "name": "or",
                   "fig1": {"seeds": [0, 1, 2]}}
    assert PRESET["fig1"]["seeds"] == [0, 1]            # the preset is not touched


@pytest.mark.parametrize("key,value,words", [
    ("lr", "abc", "lr"), ("steps", 2.5, "steps must be an integer"),
    ("bogus", 1, "unknown setting 'bogus'"), ("fig1.nope", 1, "fig1 has no key 'nope'"),
    ("Ts", "[4, 'x']", "Ts must be an integer")])
def test_bad_overrides_name_the_key(key, value, words):
    with pytest.raises(ValueError, match=words):
        apply_overrides(PRESET, {key: value})


def _study(calls):
    def check(cfg):
        calls.append("check")
        if cfg["steps"] < 1:
            raise ValueError("steps must be >= 1")
        return cfg
    return types.SimpleNamespace(
        NAME="toy", PRESETS={"quick": dict(PRESET, mode="quick"),
                             "full": dict(PRESET, steps=100, mode="full")},
        check=check, run=lambda cfg, out, ex, log: calls.append(("run", cfg["steps"])),
        analyse=lambda cfg, out: calls.append("analyse") or {"x": 1},
        report=lambda cfg, out, res: calls.append("report") or dict(res, checks=[]),
        HELP={"lr": "the step"}, EPILOG="", console=lambda summary: [])


def test_run_study_calls_the_contract_in_order(tmp_path):
    calls = []
    s = run_study(_study(calls), str(tmp_path), mode="full", overrides={"steps": 7})
    assert calls == ["check", ("run", 7), "analyse", "report"]
    assert s["x"] == 1 and s["mode"] == "full" and "wall_time_s" in s     # recorded, not timed
    calls.clear()
    run_study(_study(calls), str(tmp_path), analyse_only=True)
    assert calls == ["check", "analyse", "report"]
    calls.clear()
    with pytest.raises(ValueError, match="steps must be >= 1"):   # refused before any work
        run_study(_study(calls), str(tmp_path), overrides={"steps": 0})
    assert calls == ["check"]


def test_a_module_without_the_members_is_not_a_study():
    with pytest.raises(TypeError, match="lacks"):
        check_study(types.SimpleNamespace(NAME="x"))
    with pytest.raises(ValueError, match="mode must be one of"):
        resolve_config(_study([]), "medium")


def test_the_preset_name_mode_is_not_an_override(tmp_path):
    import argparse

    from stsim.cli.common import add_contract_options
    study = _study([])
    study.PRESETS = {m: dict(PRESET, mode=m) for m in ("quick", "full")}
    assert resolve_config(study, "full")["mode"] == "full"
    with pytest.raises(ValueError, match="mode is chosen by the preset"):
        resolve_config(study, "quick", {"mode": "full"})
    p = argparse.ArgumentParser()
    add_contract_options(p, study)
    flags = {s for a in p._actions for s in a.option_strings}
    assert "--lr" in flags and "--mode" not in flags and "--fig1" not in flags


def test_the_toy_study_of_the_architecture_doc_runs():
    """The example of "The study contract" in docs/architecture.md, run as a doctest."""
    import doctest
    import pathlib
    import re
    text = (pathlib.Path(__file__).parents[1] / "docs" / "architecture.md").read_text()
    section = text.split("## The study contract", 1)[1].split("\n## ", 1)[0]
    code = "\n".join(re.findall(r"```python\n(.*?)```", section, re.S))
    test = doctest.DocTestParser().get_doctest(code, {}, "architecture.md: study contract",
                                               "docs/architecture.md", 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    runner.run(test)
    assert runner.summarize(verbose=False).attempted >= 8
    assert runner.summarize(verbose=False).failed == 0


def test_every_preset_names_itself():
    from stsim.studies import expressivity, figures, separation, sparse
    for study in (figures, separation, sparse, expressivity):
        check_study(study)
    bad = _study([])
    bad.PRESETS["full"]["mode"] = "quick"
    with pytest.raises(TypeError, match="must name itself"):
        check_study(bad)


def test_every_study_command_is_built_from_its_study():
    """The five study commands are one module (stsim.cli.study) reading each study's
    presets and their help: every flag-able setting has help written beside its preset,
    and ``--help`` shows it."""
    from stsim.cli import COMMANDS, build_parser
    from stsim.cli.study import STUDIES, study_of
    for name in STUDIES:
        assert COMMANDS[name][0] == "stsim.cli.study"
        study = study_of(name)
        check_study(study)
        flat = [k for k, v in {**study.PRESETS["quick"], **study.PRESETS["full"]}.items()
                if k != "mode" and not isinstance(v, dict) and not (
                    isinstance(v, (list, tuple)) and v and isinstance(v[0], (list, tuple,
                                                                             dict)))]
        assert sorted(set(flat) - set(study.HELP)) == [], name
        assert set(study.HELP) <= set(study.PRESETS["full"]) | set(study.PRESETS["quick"])
        text = build_parser(name).format_help()
        k = flat[0]
        assert study.HELP[k].split()[0] in text and study.EPILOG.split()[0] in text, name


#: where each member of the contract lives in a study package (docs/architecture.md, "The
#: study contract"): the rooms design, runs, analysis and outputs; study.py is the face
ROOMS = {"HELP": "design", "EPILOG": "design", "check": "design", "run": "runs",
         "analyse": "analysis", "report": "outputs", "console": "outputs"}


def _misplaced(study, rooms) -> list:
    """The members of ``study`` (its ``study.py``) that are not the ones of their room
    (``rooms``: room name -> module)."""
    return [f"{member} is not {room}.{member}" for member, room in ROOMS.items()
            if room not in rooms or getattr(study, member, None)
            is not getattr(rooms[room], member, object())]


def test_every_study_has_the_same_rooms():
    import importlib
    from stsim.cli.study import STUDIES
    for name in STUDIES + ("figures",):
        pkg = f"stsim.studies.{name}"
        study = importlib.import_module(f"{pkg}.study")
        rooms = {r: importlib.import_module(f"{pkg}.{r}") for r in set(ROOMS.values())}
        assert _misplaced(study, rooms) == [], name
        package = importlib.import_module(pkg)
        assert [m for m in ROOMS if getattr(package, m) is not getattr(study, m)] == [], name
    # a seeded fault: a study whose run is written in its face, not in its runs room
    from stsim.studies.separation import analysis, design, outputs, runs, study
    fake = types.SimpleNamespace(**{m: getattr(study, m) for m in ROOMS})
    fake.run = lambda cfg, out, executor, log=None: None
    rooms = dict(design=design, runs=runs, analysis=analysis, outputs=outputs)
    assert _misplaced(fake, rooms) == ["run is not runs.run"]
    assert _misplaced(study, dict(rooms, outputs=design)) == [
        "report is not outputs.report", "console is not outputs.console"]
