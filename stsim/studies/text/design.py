r"""The text study's design: the encodings, tasks and presets with each option's help and
the epilog, :func:`check` (before any work), the arms and a run's options, :func:`made_by`.

Its constants: :data:`ENCODINGS`, :data:`TASKS`, the paper's encodings (:data:`FIXED`,
:data:`PAPER`), the one-hot width :data:`VOCAB` and the tuning's root seed
:data:`TUNE_ROOT`; its presets ``QUICK`` and ``FULL`` with :data:`HELP` beside them and
:data:`EPILOG`; the ``settings`` stamp of a row (:data:`MADE_BY`, :func:`made_by`).

Arms: each task of ``tasks`` — ``"mean"`` (the Gaussian task, the reference, at the same
``T, q, d``), ``"text"`` (selection on Tiny Shakespeare) and ``"masked"`` (the masked
character, ``q = 1``) — with each encoding of ``encodings`` (:data:`ENCODINGS`: the
paper's fixed one-hot and near-orthogonal encodings, its stochastic slots, the
stochastic sphere and the smooth randomised ordered encoding). Every arm is trained at
``T`` with SGD at ``lr`` × a multiplier of ``mults`` for ``steps`` steps (the same grid
and budget for every arm).
"""
from __future__ import annotations


from stsim.core.corpus import load_corpus
from stsim.core.reduced import LEARNED
from stsim.studies.cells import settings_text
from stsim.util.validate import check_int, check_real

__all__ = ["TUNE_ROOT", "ENCODINGS", "FIXED", "PAPER", "TASKS", "VOCAB", "QUICK", "FULL",
           "HELP", "EPILOG", "MADE_BY", "made_by", "check", "run_options",
           "arms_of", "arm_name"]

TUNE_ROOT = 1
#: the encodings compared: name -> the run's options
ENCODINGS = {"onehot": {"pe": "onehot"}, "near-orthogonal": {"pe": "near-orthogonal"},
             "slots": {"pe": "stochastic", "sampler": "slots"},
             "sphere": {"pe": "stochastic", "sampler": "sphere"},
             "sinusoid": {"pe": "stochastic", "sampler": "sinusoid"}}
FIXED = ("onehot", "near-orthogonal")       # the paper's fixed encodings
#: the encodings the paper's claim names: its fixed ones and its stochastic one (slots);
#: the sphere and the smooth sinusoid are stsim's, judged per arm but not part of the claim
PAPER = FIXED + ("slots",)
TASKS = ("mean", "text", "masked")
VOCAB = 65                                  # Tiny Shakespeare's symbols: the one-hot d

_COMMON = dict(tasks=TASKS, q=3, batch=256, lr=8.0, ratio=LEARNED, fail=0.15, margin=0.5,
               gen_bits=0.1, fail_bits=0.5, attn_offsets=8)
QUICK = dict(_COMMON, mode="quick", encodings=("onehot", "slots"), T=12,
             T_test=(24,), steps=150, seeds=2, n_val=128, mults=(0.125, 0.5, 2.0),
             mults_extra=(0.03125, 8.0))
FULL = dict(_COMMON, mode="full", encodings=tuple(ENCODINGS), T=64,
            T_test=(128, 256, 512), steps=2000, seeds=3, n_val=512,
            # 1/128 ... 64: every arm's choice of the extended grid is inside it
            mults=tuple(2.0 ** k for k in range(-7, 7)),
            mults_extra=tuple(2.0 ** k for k in (-10, -9, -8, 7, 8)))

#: the help of each setting (the options of ``stsim text``), beside its preset
HELP = {"tasks": "mean (Gaussian tokens), text (selection on Tiny Shakespeare), masked",
        "encodings": f"of {', '.join(ENCODINGS)}", "q": "subset size of mean and text",
        "batch": "batch size", "lr": "the SGD step the multipliers scale (every arm; the "
        "text tasks' tokens are unit vectors, so their steps are larger than the Gaussian's)",
        "ratio": "learns / generalises: loss <= ratio of the initial",
        "fail": "a fixed encoding fails to generalise: loss >= fail of the initial",
        "margin": "masked learns: this many bits below the unigram entropy",
        "gen_bits": "masked generalises: within gen_bits of its loss at T",
        "fail_bits": "masked fails to generalise: at least fail_bits above its loss at T",
        "n_val": "held-out windows of each validation set",
        "attn_offsets": "offsets from the masked position in the attention maps",
        "T": "training length", "T_test": "lengths of evaluation (> T)",
        "steps": "SGD steps of every run", "seeds": "seeds per arm (>= 2: the SE)",
        "mults": "multipliers of lr tried on the tuning seed (the same for every arm)",
        "mults_extra": "multipliers beyond the grid's ends, tried one at a time past the end "
        "an arm's choice sits on (the same rule for every arm)"}
#: the command's epilog
EPILOG = ("writes raw/tune.csv, raw/runs.csv (a rerun with the same --out resumes) and\n"
          "raw/run.json, then text.json (every check with se, critical, verdict),\n"
          "report.md, length.png/.csv, attention.png/.csv (--analyse-only: from raw/)\n"
          "examples: stsim text                       # quick, T = 12 (about 10 s)\n"
          "          stsim text --full --out docs/figures/text")


#: the settings that make a row of either table (its ``settings`` cell; the arm and the
#: multiplier are in its point): a rerun with others computes other rows, an analysis uses
#: only the rows its settings made
MADE_BY = ("T", "q", "T_test", "steps", "batch", "lr", "n_val", "attn_offsets")


def made_by(cfg) -> str:
    """The ``settings`` cell of the rows made with ``cfg``."""
    return settings_text(**{k: cfg[k] for k in MADE_BY})


def check(cfg):
    """Every setting validated (``ValueError`` naming it), before any work."""
    bad = [t for t in cfg["tasks"] if t not in TASKS]
    if bad or not cfg["tasks"]:
        raise ValueError(f"tasks must be a non-empty list of {TASKS}, got {list(cfg['tasks'])}")
    bad = [e for e in cfg["encodings"] if e not in ENCODINGS]
    if bad or not cfg["encodings"]:
        raise ValueError(f"encodings must be a non-empty list of {tuple(ENCODINGS)}, got "
                         f"{list(cfg['encodings'])}")
    T = check_int("T", cfg["T"], cfg["q"] + 1, 4096)
    check_int("q", cfg["q"], 1, 64)
    for Tt in cfg["T_test"]:
        check_int("T_test", Tt, T + 1, 8192)
    for key, lo in (("batch", 1), ("steps", 1), ("seeds", 2), ("n_val", 16),
                    ("attn_offsets", 1)):
        check_int(key, cfg[key], lo)
    for key in ("lr", "margin", "gen_bits", "fail_bits"):
        check_real(key, cfg[key], lo=0.0, lo_open=True)
    for key in ("ratio", "fail"):
        check_real(key, cfg[key], lo=0.0, hi=1.0, lo_open=True)
    if not cfg["mults"]:
        raise ValueError("mults must hold at least one multiplier")
    for key in ("mults", "mults_extra"):        # positive and distinct
        for m in cfg[key]:
            check_real(key, m, lo=0.0, lo_open=True)
        if len(set(cfg[key])) != len(cfg[key]):
            raise ValueError(f"{key} must be distinct, got {list(cfg[key])}")
    load_corpus().check_window(max(cfg["T_test"]), "T_test")
    return cfg


def run_options(task, encoding, cfg):
    """The options of one run of an arm (the Gaussian task at the text's ``d``)."""
    target = {"mean": "mean", "text": "text", "masked": "masked"}[task]
    return dict(T=cfg["T"], q=1 if task == "masked" else cfg["q"], d=VOCAB, target=target,
                batch=cfg["batch"], steps=cfg["steps"], T_test=tuple(cfg["T_test"]),
                n_val=cfg["n_val"], eval_every=max(1, cfg["steps"] // 20),
                **ENCODINGS[encoding])


def arms_of(cfg):
    return [{"task": t, "encoding": e} for t in cfg["tasks"] for e in cfg["encodings"]]


def arm_name(r) -> str:
    return f"{r['task']}/{r['encoding']}"
