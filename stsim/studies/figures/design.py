r"""The figures study's design: the presets of its figures (:func:`preset`, from each
figure's ``SETTINGS``), ``HELP``, ``EPILOG``, the files of the run step, and :func:`check`
(the shared settings resolved and every run validated before any work).

Config (``PRESETS["quick"]`` / ``PRESETS["full"]``, overridden with ``--set
<figure>.<key>=<value>``)::

    {"mode": "quick" | "full",          # the preset's name: labels every output
     "only": ["fig1", ..., "claims"],   # the figures to make (--only)
     "fig1": {...}, "fig2": {...}, "fig3": {...}, "fig5": {...},
     "beyond": {...}, "claims": {...}}  # each figure's SETTINGS[mode]

:func:`check` resolves what figures share: ``fig4`` takes the settings of ``fig2`` (its
``GROUP``: the same runs), and ``beyond`` / ``claims`` take the settings of the figures
they compare (their ``LINKS``), so ``--set fig2.lr=3`` changes Figs. 2 and 4 and the
linked parts of the others. It then builds every run and validates its options
(:meth:`stsim.Config.from_options`) before any work.
"""
from __future__ import annotations

import copy

from stsim.util.validate import check_choice, check_int
from stsim.studies.contract import MODES
from stsim.studies.figures.common import FIGURES, figure_module, unique_jobs

__all__ = ["TABLE", "SESSION", "HELP", "EPILOG", "check", "preset"]

TABLE = "jobs.csv"          # the sweep table of the runs, in <out>/runs
SESSION = "run.json"        # workers and wall time of the last run step, in <out>/runs


def preset(mode) -> dict:
    cfg = {"mode": mode, "only": list(FIGURES)}
    for n in FIGURES:
        mod = figure_module(n)
        if hasattr(mod, "GROUP"):          # fig4: fig2's settings, filled by check
            continue
        s = copy.deepcopy(mod.SETTINGS[mode])
        for key in getattr(mod, "LINKS", {}):
            s.pop(key, None)               # filled by check from the linked figure
        cfg[n] = s
    return cfg


#: the help of the top-level settings (the options of ``stsim figures``; the figures' own
#: settings are nested: ``--set fig2.lr=3``)
HELP = {"only": f"comma-separated subset of {','.join(FIGURES)} (fig4 shares the runs and "
                "settings of fig2)"}
#: the command's epilog
EPILOG = ("examples: stsim figures                      # all figures, small problem "
          "(seconds)\n"
          "          stsim figures --full --only fig2,fig4 --set fig2.lr=3\n"
          "          stsim figures --out runs/figures-quick --analyse-only   # redraw only\n"
          "          stsim figures --report docs/figures   # tables of a finished run")


def _link(cfg, fig, key, src):
    """Set ``cfg[fig][key]`` (``key`` None: ``cfg[fig]``) to a copy of ``cfg[src]``; a value
    already there that differs is refused (the two share runs)."""
    target, name = (cfg, fig) if key is None else (cfg[fig], key)
    value = copy.deepcopy(cfg[src])
    if name in target and target[name] != value:
        where = fig if key is None else f"{fig}.{key}"
        raise ValueError(f"{where} takes the settings of {src} (shared runs): set {src}.<key> "
                         f"instead")
    target[name] = value


def _check_seeds(where, settings) -> None:
    """Every ``seeds`` setting in ``settings`` (nested dicts too) is a non-empty list of
    whole numbers >= 0: a figure's verdicts need a seed to stand on (``seeds=[]`` ran
    the other figures for minutes, then failed in the verdicts)."""
    for key, value in settings.items():
        if isinstance(value, dict):
            _check_seeds(f"{where}.{key}", value)
        elif key == "seeds":
            if not isinstance(value, (list, tuple)) or not value:
                raise ValueError(f"{where}.seeds must be a non-empty list of seeds, got "
                                 f"{value!r}")
            for s in value:
                check_int(f"{where}.seeds", s, 0)


def check(config) -> dict:
    """Validate ``config`` and resolve the shared settings (module docstring); every run's
    options are validated (``ValueError`` naming the figure, the run and the option) and
    two runs of one name with different options are refused, before any work."""
    cfg = copy.deepcopy(dict(config))
    check_choice("mode", cfg.get("mode"), MODES)
    only = cfg.get("only")
    only = [only] if isinstance(only, str) else list(only or ())
    if not only:
        raise ValueError(f"only must name at least one figure of {FIGURES}")
    for n in only:
        if n not in FIGURES:
            raise ValueError(f"only: unknown figure {n!r}; choose from {FIGURES}")
    cfg["only"] = list(dict.fromkeys(only))
    for n in FIGURES:
        group = getattr(figure_module(n), "GROUP", None)
        if group is not None:
            _link(cfg, n, None, group)
        elif not isinstance(cfg.get(n), dict):
            raise ValueError(f"the settings of {n} are missing (a dict under {n!r})")
    for n in FIGURES:
        for key, src in getattr(figure_module(n), "LINKS", {}).items():
            _link(cfg, n, key, src)
    for n in cfg["only"]:
        _check_seeds(n, cfg[n])
        if not figure_module(n).jobs(cfg[n]):
            raise ValueError(f"{n}: its settings give no runs; a figure needs at least one")
        for j in figure_module(n).jobs(cfg[n]):  # before their twins: a bound needs a config
            try:
                j.estimated_seconds()                # Config.from_options: validates
            except ValueError as exc:
                raise ValueError(f"{n}: run {j.name}: {exc}") from None
    unique_jobs(cfg)
    return cfg
