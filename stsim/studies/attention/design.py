"""The design of ``stsim attention``: its presets (:data:`QUICK`, :data:`FULL`) with
``HELP`` and ``EPILOG``, :func:`check` (every setting validated, and each part's largest run
checked to fit, before any work), the mechanisms' names, the points of the rank grid and
the ``settings`` stamp of each table's rows (:data:`MADE_BY`).

The sizes checked before any work (:func:`check_sizes`): each part's largest run resolved
as a :class:`~stsim.core.config.Config` (its options and memory), the width family's and
the reduced map's arrays.
"""
from __future__ import annotations


from stsim.core.attention import (ATTENTIONS, MECHANISMS, TAU_RANGE, Attention,
                                  check_temperature)
from stsim.core.config import MECHANISM_DEFAULTS, Config
from stsim.core.reduced import LEARNED
from stsim.core.targets import make_target
from stsim.studies.cells import settings_text
from stsim.studies.widths import QUICK as QUICK_PRECISION, Precision
from stsim.util.validate import check_int, check_memory, check_real

__all__ = ["MECHS", "WIDTH_MECHS", "FAM_FULL", "FAM_QUICK", "QUICK", "FULL", "EPILOG", "HELP",
           "TUNE_ROOT", "MADE_BY", "made_by", "TUNE_BASES", "BASE_TEXT", "LISTS",
           "parse_mechanism", "mechanism_label", "named", "check", "check_sizes", "width_cap",
           "rank_points"]

MECHS = list(ATTENTIONS) + ["rank=4", "tau=0.5"]
#: a normalised element-wise mechanism has the family of its base one (a constant scale)
WIDTH_MECHS = [n for n, m in MECHANISMS.items() if not (m.elementwise and m.normalised)]
#: the precision rule of the family crossings (:class:`stsim.studies.widths.Precision`):
#: the library's default in full, a coarse one in quick
FAM_FULL = Precision().settings()
FAM_QUICK = QUICK_PRECISION.settings()
QUICK = {"mode": "quick", "T": 12, "q": 2, "d": 5, "seeds": 3, "mechanisms": MECHS,
         "steps": 300, "batch": 64, "T_test": [16, 20], "target": "mean",
         "level": LEARNED, "ood_level": 0.05, "tune_steps": 300,
         "tune_mults": [2.0, 1.0, 0.5],
         "tune_base": "own",
         "rank_T": [8], "rank_q": [2], "rank_r": [4, 16], "rank_steps": 300,
         "width_mechs": WIDTH_MECHS, "width_level": 0.25, "width_T": [8, 16, 32, 64, 128],
         **FAM_QUICK, "width_max": 1024,
         "taus": [0.5, 1.0, 2.0], "tau_T": 50,
         "train_mechs": ["linear"], "train_T": 8, "train_widths": [16, 23, 32],
         "train_steps": 300}
FULL = {"mode": "full", "T": 200, "q": 3, "d": 5, "seeds": 3, "mechanisms": MECHS,
        "steps": 1500, "batch": 256, "T_test": [250, 300, 350, 400], "target": "mean",
        "level": LEARNED, "ood_level": 0.05,
        "tune_steps": 1500,        # tuned at the full budget
        "tune_mults": [2.0 ** -k for k in range(-7, 10)],  # 128 ... 1/512, factor 2
        "tune_base": "paper",      # the grid spans every mechanism's own default
        "rank_T": [8, 16, 32], "rank_q": [2, 3], "rank_r": [4, 8, 16, 32, 64],
        "rank_steps": 0,
        "width_mechs": WIDTH_MECHS, "width_level": 0.25,
        "width_T": [8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096],
        **FAM_FULL, "width_max": 32768,
        "taus": [0.25, 0.5, 1.0, 2.0, 4.0], "tau_T": 200,
        "train_mechs": ["linear", "relu"], "train_T": 16,
        "train_widths": [23, 32, 45, 64, 91], "train_steps": 0}

EPILOG = ("writes raw/tune.csv, raw/runs.csv, raw/rank.csv, raw/width.csv (a rerun with the\n"
          "same --out resumes) and raw/run.json, then attention.json (every check with se,\n"
          "critical, verdict), report.md, width.csv, rank.csv, temperature.csv, curves.csv,\n"
          "curves.png, width.png (--analyse-only: from raw/)\n"
          "examples: stsim attention                       # quick, T = 12\n"
          "          stsim attention --full --out docs/figures/attention")

HELP = {"T": "training length", "q": "subset size", "d": "token dimension",
        "seeds": "seeds per mechanism", "mechanisms": "names, rank=r (r <= d + d_e), "
        "tau=t (1e-100 <= t <= 1e100: tau^2 and 1/tau^2 scale the steps, and stay 1e108 "
        "inside float64's range)",
        "steps": "the budget: steps of every reported run", "batch": "batch size",
        "T_test": "out-of-distribution lengths", "target": "the task's target of the tuned, "
        "reported and rank runs, as in stsim run (mean, moment:k, variance, text, masked; "
        "the width family, trained widths and temperature map are the mean task's)",
        "level": "learns: loss <= level L(0) (the target's L(0))",
        "ood_level": "generalises: loss <= ood_level L(0)",
        "width_level": "width law: loss <= width_level L(0)",
        "width_T": "lengths of the width law", "taus": "temperatures of the reduced "
        "map (1e-100 ... 1e100, as tau=t)",
        "tau_T": "length of the reduced map (q < "
        "tau_T; 20 tau_T steps, within memory)",
        "tune_steps": "steps of a tuning run", "tune_mults": "multipliers of the base "
        "step tried per mechanism", "tune_base": "the base step: own (each mechanism's "
        "default) or paper (the paper model's for every one)",
        "rank_T": "lengths of the rank grid",
        "rank_q": "subset sizes of the rank grid", "rank_r": "ranks of the rank grid (each "
        "<= 2 max(rank_T), one <= 2 min(rank_T): d_e = 2T)",
        "rank_steps": "steps of a rank run (0: its default)",
        "width_mechs": "mechanisms of the width law",
        **Precision.help(), "width_max": "largest d_e a family crossing is searched to (at most 8T)",
        "train_mechs": "mechanisms trained on the sphere against d_e",
        "train_T": "length of the trained width check",
        "train_widths": "d_e of the trained width check",
        "train_steps": "steps of a trained width run (0: its default)"}

TUNE_ROOT = 1        # root seed of the tuning replicate (the reported seeds use root 0)
#: the settings that make a row of each of the study's tables (its ``settings`` cell,
#: :func:`stsim.studies.cells.settings_text`): a rerun with others computes other rows, an
#: analysis refuses settings no row was made with
MADE_BY = {"tune": ("T", "q", "d", "batch", "T_test", "tune_steps", "tune_base", "target"),
           "runs": ("T", "q", "d", "batch", "T_test", "steps", "tune_base", "target"),
           "rank": ("d", "batch", "rank_steps", "target"),
           "width": ("q", "width_level", "width_max", *Precision().settings()),
           "trained": ("train_T", "q", "d", "train_steps")}


def made_by(cfg, name) -> str:
    """The ``settings`` cell of the rows of table ``name`` made with ``cfg``."""
    return settings_text(**{k: cfg[k] for k in MADE_BY[name]})


#: the step a mechanism's tuning multiplies: its own default, or the paper model's
TUNE_BASES = ("own", "paper")
#: the words for each tuning base in a check's note
BASE_TEXT = {"own": "its own default", "paper": "the paper model's"}
LISTS = ("mechanisms", "tune_mults", "width_mechs", "rank_T", "rank_q", "rank_r", "width_T",
         "train_mechs", "train_widths")


def parse_mechanism(label) -> dict:
    """``"linear"`` -> ``{"attention": "linear"}``, ``"rank=4"`` -> ``{"rank": 4}``,
    ``"tau=0.5"`` -> ``{"temperature": 0.5}``, an :class:`~stsim.core.attention.Attention`
    object (one's own mechanism) -> ``{"attention": obj}``; ``ValueError`` naming
    ``mechanisms``."""
    if label in ATTENTIONS or isinstance(label, Attention):
        return {"attention": label}
    key, _, val = str(label).partition("=")
    try:
        if key == "rank":
            return {"rank": check_int("rank", int(val), 1)}
        if key == "tau":
            return {"temperature": check_temperature(float(val), "tau")}
    except ValueError:
        pass
    raise ValueError(f"mechanisms must hold names of {ATTENTIONS}, rank=r (r >= 1), tau=t "
                     f"({TAU_RANGE[0]:g} <= t <= {TAU_RANGE[1]:g}) or Attention objects, got "
                     f"{label!r}")


def mechanism_label(mechanism) -> str:
    """The name a mechanism of ``mechanisms`` has in the tables: its own, or an object's
    :attr:`~stsim.core.attention.Attention.label`."""
    return mechanism.label if isinstance(mechanism, Attention) else mechanism


def named(cfg):
    """``cfg`` with each mechanism by its label (the tables', JSON-ready)."""
    return dict(cfg, mechanisms=[mechanism_label(m) for m in cfg["mechanisms"]])


def check(cfg: dict) -> dict:
    """Validate every setting of every part (``ValueError`` naming it and its range) before
    any work: each grid not empty and without repeats, the ranks usable at the rank grid's
    lengths, temperatures in :data:`~stsim.core.attention.TAU_RANGE`, and the largest run of each part
    within memory (:func:`check_sizes`)."""
    cfg = dict(cfg)
    for name, lo in (("T", 2), ("d", 1), ("seeds", 2), ("steps", 1), ("batch", 1),
                     ("tune_steps", 1), ("rank_steps", 0), ("width_max", 2)):
        cfg[name] = check_int(name, cfg[name], lo)
    Precision.from_cfg(cfg)         # the family's precision settings, each checked
    task = _named_target(cfg["target"])
    cfg["target"], min_q = task.label, task.min_q
    cfg["q"] = check_int("q", cfg["q"], min_q, cfg["T"] - 1)
    for key in LISTS:
        if not cfg[key]:
            raise ValueError(f"{key} must hold at least one value, got []")
    runs = [{**MECHANISM_DEFAULTS, **parse_mechanism(m)} for m in cfg["mechanisms"]]
    if any(runs.count(r) > 1 for r in runs):       # e.g. tau=1 is softmax; labels: below
        raise ValueError(f"mechanisms must be distinct runs, got "
                         f"{[mechanism_label(m) for m in cfg['mechanisms']]}")
    for key in ("width_mechs", "train_mechs"):
        for m in cfg[key]:
            if m not in ATTENTIONS:
                raise ValueError(f"{key} must hold names of {ATTENTIONS}, got {m!r}")
    for name in ("level", "ood_level", "width_level"):
        cfg[name] = check_real(name, cfg[name], lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    q = cfg["q"]
    cfg["T_test"] = [check_int("T_test", t, cfg["T"] + 1) for t in cfg["T_test"]]
    cfg["width_T"] = [check_int("width_T", t, max(4, q + 1)) for t in cfg["width_T"]]
    cfg["tau_T"] = check_int("tau_T", cfg["tau_T"], max(3, q + 1))
    cfg["rank_T"] = [check_int("rank_T", t, 3) for t in cfg["rank_T"]]
    cfg["rank_q"] = [check_int("rank_q", t, min_q, min(cfg["rank_T"]) - 1)
                     for t in cfg["rank_q"]]
    lo_T, hi_T = min(cfg["rank_T"]), max(cfg["rank_T"])
    cfg["rank_r"] = [check_int("rank_r", t, 1) for t in cfg["rank_r"]]
    if max(cfg["rank_r"]) > 2 * hi_T or min(cfg["rank_r"]) > 2 * lo_T:
        raise ValueError(f"rank_r must hold ranks <= 2 max(rank_T) = {2 * hi_T}, one of them "
                         f"<= 2 min(rank_T) = {2 * lo_T} (the key/query pair's d_e = 2T: a "
                         f"rank above 2T is not run at T), got {cfg['rank_r']}")
    cfg["tune_mults"] = [check_real("tune_mults", m, lo=0.0, lo_open=True)
                         for m in cfg["tune_mults"]]
    if cfg["tune_base"] not in TUNE_BASES:
        raise ValueError(f"tune_base must be one of {TUNE_BASES}, got {cfg['tune_base']!r}")
    cfg["taus"] = [check_real("taus", t, lo=TAU_RANGE[0], hi=TAU_RANGE[1]) for t in cfg["taus"]]
    cfg["train_T"] = check_int("train_T", cfg["train_T"], max(4, q + 1))
    cfg["train_steps"] = check_int("train_steps", cfg["train_steps"], 0)
    cfg["train_widths"] = sorted(check_int("train_widths", w, 1) for w in cfg["train_widths"])
    for key in LISTS + ("T_test", "taus"):
        vals = [mechanism_label(v) for v in cfg[key]]
        if len(set(vals)) != len(vals):
            raise ValueError(f"{key} must hold distinct values, got {vals}")
    check_sizes(cfg)
    return cfg


def _named_target(target):
    """The task's :class:`~stsim.core.targets.Target`, made again from its label
    (:func:`stsim.core.targets.make_target`: the study's tables record it by name, so a
    target of one's own is refused), ``ValueError`` naming ``target``."""
    label = make_target(target).label
    try:
        return make_target(label)
    except ValueError:
        raise ValueError(f"target must be a target of stsim run given by its name (mean, "
                         f"moment:k, variance, text[...], masked[...]): the study's tables "
                         f"record it by name, got {label!r}") from None


def check_sizes(cfg) -> None:
    """Refuse, before any work, a part whose largest run does not fit: each mechanism's run
    (:meth:`stsim.core.config.Config.resolve`: its options, e.g. ``rank <= d + d_e``, and
    its memory), the largest rank run, each trained mechanism at the largest width, the
    family at each ``width_T`` and the reduced map (their largest arrays, by name, in the
    message); the message names the setting."""
    c = {k: cfg[k] for k in ("T", "q", "d", "batch")}

    def fits(setting, **opts):
        try:
            Config(**opts).resolve()
        except ValueError as exc:
            raise ValueError(f"{setting}: {exc}") from None
    for m in cfg["mechanisms"]:     # the study gives each run its lr (mechanism_options)
        fits(f"mechanisms ({mechanism_label(m)})", **c, T_test=tuple(cfg["T_test"]),
             steps=cfg["steps"], lr=1.0, **parse_mechanism(m))
    T = max(cfg["rank_T"])
    fits("rank_T, rank_q, rank_r", T=T, q=max(cfg["rank_q"]), d=cfg["d"], batch=cfg["batch"],
         rank=max(r for r in cfg["rank_r"] if r <= 2 * T))
    for m in cfg["train_mechs"]:
        fits(f"train_T, train_widths ({m})", T=cfg["train_T"], q=cfg["q"], d=cfg["d"],
             d_e=max(cfg["train_widths"]), pe="stochastic", sampler="sphere", model="theory",
             query="sum", attention=m)
    prec = Precision.from_cfg(cfg)
    for T in cfg["width_T"]:
        check_memory({"scores and encodings (5 x max(fam_n_cells, fam_n_start T))":
                      prec.memory(T)}, f"attention: the family at T={T} (width_T), "
                     f"fam_n_start={prec.n_start}, fam_n_cells={prec.n_cells}")
    n = 20 * cfg["tau_T"] + 1
    check_memory({"reduced maps (2 x 4 x (20 tau_T + 1))": 8 * n * 8,
                  "their comparison (3 x (20 tau_T + 1))": 3 * n * 8},
                 f"attention: the reduced map at tau_T={cfg['tau_T']}")


def width_cap(T, cfg) -> int:
    """The largest ``d_e`` a family crossing is searched to at ``T``: ``8T`` (at least
    64), at most ``width_max``."""
    return min(cfg["width_max"], max(64, 8 * T))


def rank_points(cfg) -> list:
    """The rank grid's points ``{T, q, rank}`` (q < T, rank <= 2T)."""
    return [{"T": T, "q": q, "rank": r} for T in cfg["rank_T"] for q in cfg["rank_q"]
            for r in cfg["rank_r"] if q < T and r <= 2 * T]


