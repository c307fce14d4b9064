"""The JSON records of a result file, checked when it is read (:meth:`stsim.Result.load`).

What is on disk is the truth, so nothing is guessed: a record that is missing, of the
wrong type, or outside its range is refused with a ``ValueError`` naming the file and the
record — a ``status`` other than a run's, a ``message`` that is not text, a config that
lacks the fields that size the parameters or holds values no run accepts (``T="x"``,
``lr=-1``), an architecture not registered in this process (its parameter shapes could
not be checked), ``history_keys`` missing while the file holds history arrays (they
would be dropped silently), or history arrays it does not name.

A recorded config dict is read back in today's terms (:func:`upgrade_config`) and as the
options of a new run (:func:`options_from_record`); the shapes of its parameters need its
architecture's name resolved (:func:`stsim.core.config.recorded_shapes`).
"""
from __future__ import annotations

import numbers
import os

from stsim.core.config import OBJECT_FIELDS
from stsim.core.optim import resolve_optimizer
from stsim.core.problem import arch_names
from stsim.util.validate import Steps

__all__ = ["check_result_records", "STATUSES", "upgrade_config", "options_from_record"]

#: a Result's status: how the run ended ("checkpoint": read from a checkpoint, unfinished)
STATUSES = ("completed", "diverged", "interrupted", "stopped", "checkpoint")


def _bad(path, defect):
    return ValueError(f"result file {os.fspath(path)!r} is corrupt: {defect}; not a result "
                      f"stsim wrote (or written by a version that is not compatible)")


def _whole(v, lo) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool) and v >= lo


def check_config_record(path, config) -> dict:
    """The config record of a result file, upgraded (:func:`upgrade_config`) and checked:
    ``T``, ``q`` (``1 <= q <= T``), ``d`` and ``steps`` whole numbers, ``lr`` a finite
    number > 0, ``arch`` registered, ``pe`` text for the transformer. Returns it."""
    if not isinstance(config, dict):
        raise _bad(path, f"its config record is a {type(config).__name__}, not a JSON object")
    cfg = upgrade_config(config)
    need = ("T", "q", "d", "steps", "lr", "arch")
    missing = [k for k in need if k not in cfg]
    if missing:
        raise _bad(path, f"its config record lacks {missing}")
    for key, lo in (("T", 1), ("q", 1), ("d", 1), ("steps", 0)):
        if not _whole(cfg[key], lo):
            raise _bad(path, f"its config has {key}={cfg[key]!r}, not a whole number >= {lo}")
    if cfg["q"] > cfg["T"]:
        raise _bad(path, f"its config has q={cfg['q']} > T={cfg['T']}")
    try:
        Steps(cfg["lr"])
    except ValueError:
        raise _bad(path, f"its config has lr={cfg['lr']!r}, not a finite number > 0 (or a "
                         f"dict of them, one per parameter)") from None
    if cfg["arch"] not in arch_names():
        raise ValueError(f"result file {os.fspath(path)!r} is of arch={cfg['arch']!r}, which "
                         f"is not registered in this process (registered: {arch_names()}): "
                         f"import the module that registers it (stsim.register_arch) and load "
                         f"again; its parameter shapes cannot be checked without it")
    if cfg["arch"] == "transformer":
        if not isinstance(cfg.get("pe"), str) or not _whole(cfg.get("d_e"), 1):
            raise _bad(path, f"its config has pe={cfg.get('pe')!r}, d_e={cfg.get('d_e')!r}; "
                             f"a transformer's are a name and a whole number >= 1")
    return cfg


def check_result_records(path, meta: dict, arrays: dict) -> dict:
    """The records of a result file read from ``path`` (``meta``, ``arrays`` of
    :func:`stsim.util.io.load_npz`), checked (module docstring); returns the upgraded
    config."""
    missing = [k for k in ("config", "status", "message", "history_keys") if k not in meta]
    if missing:
        held = sorted(k for k in arrays if k.startswith("history/"))
        why = (f" (it holds {len(held)} history array(s), which would be dropped)"
               if "history_keys" in missing and held else "")
        raise ValueError(f"result file {os.fspath(path)!r} lacks {missing}{why}: not a "
                         f"complete stsim result")
    status, message = meta["status"], meta["message"]
    if status not in STATUSES or not isinstance(status, str):
        raise _bad(path, f"its status is {status!r}, not one of {STATUSES}")
    if not isinstance(message, str):
        raise _bad(path, f"its message is {message!r}, not text")
    if "info" in meta and not isinstance(meta["info"], dict):
        raise _bad(path, f"its info record is a {type(meta['info']).__name__}, not an object")
    keys = meta["history_keys"]
    if not (isinstance(keys, list) and all(isinstance(k, str) for k in keys)):
        raise _bad(path, "its history_keys record is not a list of names")
    absent = [f"history/{k}" for k in keys if f"history/{k}" not in arrays]
    if absent:
        raise ValueError(f"result file {os.fspath(path)!r} lacks {absent}: not a complete "
                         f"stsim result")
    unnamed = sorted(k for k in arrays if k.startswith("history/") and k[8:] not in keys)
    if unnamed:
        raise _bad(path, f"its arrays {unnamed} are not named by its history_keys")
    return check_config_record(path, meta["config"])


def options_from_record(record: dict, given: dict) -> dict:
    """The options of a recorded config dict (``Result.config``, a checkpoint's), in
    today's terms (:func:`upgrade_config`), for a run that also gets the options
    ``given``. A field that was given as an object (recorded as ``<field>_object``: the
    object's class) cannot be rebuilt from its name: it must be in ``given`` again
    (``run(config=res.config, pe=enc)``), else ``ValueError`` saying so."""
    out = upgrade_config(record)
    out.pop("optimizer_settings", None)     # the optimiser object's, given again below
    for name in OBJECT_FIELDS:
        kind = out.pop(f"{name}_object", None)
        if kind is not None and name == "init" and "init" not in given:
            raise ValueError(f"this config's init was a warm start (recorded as init="
                             f"{out.get('init')!r}, the hash of its parameters), which a "
                             f"config dict does not hold: pass its source again, "
                             f"run(config=res.config, init=<the Result, its saved file or "
                             f"the dict of parameters>)")
        if name == "init":      # a path is a source as well
            continue
        if kind is not None and (name not in given or isinstance(given[name], str)):
            raise ValueError(
                f"this config's {name} was an object ({kind}, recorded as {name}="
                f"{out.get(name)!r}), which a config dict does not hold: pass the object "
                f"again, e.g. run(config=res.config, {name}=<the {kind}>)")
    return out


def upgrade_config(old: dict) -> dict:
    """A config dict written by an earlier version, in today's terms (checkpoints and
    results keep the config they were written with): ``lr_decay`` (added later) is
    ``"none"``; ``optimizer="gd"`` is resolved to ``"sgd"`` with ``objective="sample"``
    (or the population). Unknown keys are kept.

    >>> upgrade_config({"optimizer": "gd", "objective": "online"})
    {'optimizer': 'sgd', 'objective': 'sample', 'lr_decay': 'none'}
    """
    new = dict(old)
    new.setdefault("lr_decay", "none")
    if "optimizer" in new and "objective" in new:
        new["optimizer"], new["objective"] = resolve_optimizer(new["optimizer"],
                                                               new["objective"])
    return new
