"""Configuration of a run: every option of :func:`stsim.run`, validated in one place.

:meth:`Config.resolve` checks every field (``ValueError`` naming the parameter and its
allowed range) and fills the defaults; the command line's ``stsim run`` flags are
generated from the fields of :class:`Config`, so Python and command-line names and
defaults cannot drift apart.
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field

from stsim.core.families import SAMPLERS, encoding_spec
from stsim.core.model import MODELS, QUERIES
from stsim.core.optim import LR_DECAYS, optimizer_names, optimizer_spec, resolve_optimizer
from stsim.core.problem import arch_names, arch_spec
from stsim.core.schedule import default_schedule
from stsim.core.seeds import seed_record
from stsim.util.malloc import MMAP_THRESHOLD
from stsim.util.validate import check_choice, check_int, check_lr, check_real, int_tuple

__all__ = ["Config", "OBJECTIVES", "INITS", "field_help", "upgrade_config"]

#: the data regimes: fresh minibatches, a fixed sample of n_train points (full batch), the
#: exact population loss (registered by stsim.theory.population)
OBJECTIVES = ("online", "sample", "population")
INITS = ("zero", "random")


def _field(default, help, default_text=None):
    """A :class:`Config` field with its help text; ``default_text`` says what a ``None``
    default means (the command line shows it as ``(default: …)``)."""
    return field(default=default, metadata={"help": help, "default_text": default_text})


@dataclass
class Config:
    """All options of a run; :meth:`resolve` validates them and fills defaults.

    The fields, their defaults and meanings are listed below (generated from the field
    metadata, which also gives the ``stsim run`` flags their help text).

    The rules :meth:`resolve` applies to every field alike: a number must be given as a
    number (``lr="0.1"`` is refused as ``T="10"`` is; the command line converts its text
    itself); a choice (``pe``, ``optimizer``, ``model``, ``query``, ``init``, ``sampler``,
    ``objective``, ``lr_decay``, ``arch``) is matched ignoring case and recorded in its
    registered spelling (``--optimizer SGD`` as ``--pe ONEHOT``); an option of another
    architecture is refused (``width``/``depth`` with the transformer).
    """

    T: int = _field(200, "sequence length")
    q: int = _field(3, "subset size, 1 <= q <= T")
    pe: str = _field("stochastic", "positional encodings: onehot | near-orthogonal | stochastic")
    d: int = _field(5, "token dimension")
    d_e: int | None = _field(None, "PE width", "2 max(T, T_test) for stochastic/slots (so that "
                             "the law is really stochastic: d_e = T would use every slot, in "
                             "order, i.e. the fixed one-hot PE), max(T, T_test) for onehot, 64 "
                             "for dense")
    sampler: str = _field("slots", "law of the stochastic family: slots | sphere")
    model: str = _field("theory", "theory | practical (attention also over the query token)")
    query: str = _field("sum", "query token: sum (p_query = sum of p_j, j in y) | mean")
    objective: str = _field("online", "the data: online (a fresh minibatch every step) | sample "
                            "(a fixed sample of n_train points: full-batch training) | "
                            "population (the exact population loss)")
    optimizer: str = _field("sgd", "sgd (plain gradient steps) | adam | gd (alias: sgd with "
                            "objective sample, or on the population) | a registered name")
    lr: float | None = _field(None, "learning rate (a given value is obeyed exactly)",
                              "derived: eta_max/2 of the reduced dynamics, eta_max = "
                              "min(2q, 2n/(c^2(q-1)(q+d))); adam 0.02; see stsim.core.schedule")
    lr_decay: str | None = _field(None, "step-size schedule: none (constant) | linear (constant "
                                  "for the first half of the steps, then linearly towards 0)",
                                  "linear for adam with a derived lr, else none")
    steps: int | None = _field(None, "optimiser steps (a given value is obeyed exactly)",
                               "derived: 2x the step where the reduced dynamics reach 2 percent of "
                               "the initial loss; adam max(2000, 30 T); see stsim.core.schedule")
    batch: int = _field(256, "batch size")
    n_train: int | None = _field(None, "size of the fixed sample (objective sample)", "batch")
    init: str = _field("zero", "initialisation: zero | random (i.i.d. N(0, init_scale^2))")
    init_scale: float = _field(0.02, "std of the random initialisation")
    seed: int = _field(0, "seed of every random stream (Python: also a numpy SeedSequence or "
                       "Generator, recorded as JSON: stsim.core.seeds.seed_record)")
    T_test: tuple = _field((), "out-of-distribution validation lengths (comma list, e.g. 60,80)",
                           "none")
    q_test: tuple = _field((), "out-of-distribution validation subset sizes (comma list)",
                           "none")
    n_val: int = _field(128, "points per validation set (drawn once, before training)")
    eval_every: int | None = _field(None, "record metrics every k steps (and at the end)",
                                    "max(1, steps // 100)")
    arch: str = _field("transformer", "transformer | fcn (fully-connected baseline, "
                       "stsim.baselines.fcn) | a registered name")
    width: int | None = _field(None, "FCN hidden width", "64")
    depth: int = _field(1, "FCN number of hidden layers")

    @classmethod
    def from_options(cls, **options) -> "Config":
        """``Config(**options).resolve()``; ``ValueError`` for an unknown option name.

        >>> Config.from_options(T=10, q=2).d_e     # stochastic/slots: 2 T by default
        20
        """
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(options) - names)
        if unknown:
            raise ValueError(f"unknown option(s) {unknown}; allowed: {sorted(names)}")
        return cls(**options).resolve()

    def resolve(self) -> "Config":
        """Validate every field (``ValueError`` naming the parameter) and fill defaults."""
        c = dataclasses.replace(self)
        for name in ("lr", "init_scale"):       # numbers as numbers, as for the int fields
            if isinstance(getattr(c, name), (str, bytes)):
                raise ValueError(f"{name} must be a number, got the string "
                                 f"{getattr(c, name)!r}")
        c.T = check_int("T", c.T, 1)
        c.q = check_int("q", c.q, 1, c.T)
        c.d = check_int("d", c.d, 1)
        c.T_test = int_tuple("T_test", c.T_test, c.q)
        c.q_test = int_tuple("q_test", c.q_test, 1, c.T)
        c.objective = check_choice("objective", c.objective, OBJECTIVES, ignore_case=True)
        c.optimizer = check_choice("optimizer", c.optimizer, optimizer_names(),
                                   ignore_case=True)
        c.optimizer, c.objective = resolve_optimizer(c.optimizer, c.objective)  # "gd" alias
        c.model = check_choice("model", c.model, MODELS, ignore_case=True)
        c.query = check_choice("query", c.query, QUERIES, ignore_case=True)
        c.init = check_choice("init", c.init, INITS, ignore_case=True)
        c.sampler = check_choice("sampler", c.sampler, SAMPLERS, ignore_case=True)
        c.arch = check_choice("arch", c.arch, arch_names(), ignore_case=True)
        arch = arch_spec(c.arch)
        lr_given = c.lr is not None
        if c.lr is not None:
            c.lr = check_lr(c.lr)
        if c.steps is not None:
            c.steps = check_int("steps", c.steps, 0)
        c.batch = check_int("batch", c.batch, 1)
        c.n_train = check_int("n_train", c.batch if c.n_train is None else c.n_train, 1)
        c.n_val = check_int("n_val", c.n_val, 1)
        c.seed = seed_record(c.seed)
        c.init_scale = check_real("init_scale", c.init_scale, lo=0.0)
        c.depth = check_int("depth", c.depth, 1)
        if arch.resolve is not None:
            arch.resolve(c)
        elif c.width is not None or c.depth != 1:
            raise ValueError(f"width and depth are options of the FCN (arch='fcn'); "
                             f"arch={c.arch!r} has none: got width={c.width!r}, "
                             f"depth={c.depth!r}")
        if arch.encoding:     # really stochastic slots: each slot used w.p. T/d_e <= 1/2
            spec = encoding_spec(c.pe, T_max=c.T_max, d_e=c.d_e, sampler=c.sampler,
                                 slots_factor=2)
            c.pe, c.d_e = spec.name, spec.d_e
        if c.lr is None or c.steps is None:     # derived from the reduced dynamics
            sched = default_schedule(c)
            c.lr, c.steps = check_lr(sched.lr), check_int("steps", sched.steps, 0)
        if c.lr_decay is None:      # e.g. Adam's derived schedule anneals (stsim.core.schedule)
            c.lr_decay = optimizer_spec(c.optimizer).decay if not lr_given else "none"
        c.lr_decay = check_choice("lr_decay", c.lr_decay, LR_DECAYS, ignore_case=True)
        c.eval_every = check_int("eval_every", max(1, c.steps // 100) if c.eval_every is None
                                 else c.eval_every, 1)
        c.check_memory()
        return c

    def memory_estimate(self) -> dict:
        """Bytes of the largest arrays a run of this (resolved) config allocates, by name,
        and their ``total`` — an estimate made before anything is allocated: parameters
        (+ gradient and optimiser state), one training batch with its encodings and the
        forward/backward temporaries, the batches drawn ahead (``stsim.util.prefetch``: up
        to 2 more while one is computed, counted whenever each step draws a fresh batch),
        and the validation sets."""
        f8 = 8
        B, T, d = self.batch, self.T, self.d
        val_T = [T] * (1 + len(self.q_test)) + list(self.T_test)
        nb = self.n_train if self.objective != "online" else B
        out = {}
        own = arch_spec(self.arch).memory     # an architecture's own estimate (the FCN's)
        if own is not None:
            out.update(own(self))
        else:   # the transformer's (also for a registered architecture that gives none)
            # transformer (calibrated against the peak RSS measured by
            # benchmarks/bench_scaling.py and tracemalloc of one step, docs/model.md
            # "Scaling"): index encodings keep the gradient of W sparse (core/sparse_grad),
            # so SGD/GD hold W once; the per-step arrays are linear in the batch's tokens
            d_e = self.d_e
            D = d + d_e
            spec = encoding_spec(self.pe, T_max=self.T_max, d_e=d_e, sampler=self.sampler)
            dense = spec.dense
            per_sample = not spec.fixed              # a fixed family's encodings are shared
            draws = self.objective == "online"
            sparse = not dense and self.objective in ("online", "sample")
            # each token's encoding drawn per sample: a slot (one int64) or a d_e-vector
            per_enc = (d_e if dense else 1) if per_sample else 0
            per_tok = d + per_enc                    # with the token itself (d floats)
            out["interpreter and libraries (measured)"] = 100 * 2**20
            out["W, V"] = (D * D + d * D) * f8
            if self.init == "random":
                out["W while drawn at random (once)"] = D * D * f8
            if self.optimizer == "adam":
                out["Adam moments and update temporaries (4 x W)"] = 4 * D * D * f8
            if not sparse:
                out["dense gradient of W and its update (2 x W)"] = 2 * D * D * f8
            else:
                bq = nb * self.q
                out["sparse gradient: shared columns, update chunks"] = (
                    2 * min(d_e * D, bq * bq) + 3 * 2**17) * f8
            out["batch tokens and encodings"] = nb * T * per_tok * f8
            if spec.fixed and dense:                 # a fixed dense table (near-orthogonal)
                out["fixed encoding table"] = self.T_max * d_e * f8
            if draws:
                # the prefetch queue holds 2 and a third waits when drawing is the faster
                # part (index encodings); a dense per-sample draw (B·T·d_e normals) is the
                # slower part, so only the batch being drawn is alive besides the one in use
                ahead = 1 if dense and per_sample else 3
                out[f"batches drawn ahead (x{ahead})"] = ahead * nb * T * per_tok * f8
                if not dense and per_sample:      # slots: keys, their partition, a mask
                    # (d_e keys per row, or about 1.3 T when d_e >= 4T: encodings.
                    # _sparse_subsets); an upper bound of both
                    out["slots draw temporaries"] = 5 * nb * min(d_e, 2 * T) * f8
            n_tmp = 4 if dense else 12
            T_big = max(val_T)
            tmp = n_tmp * max(nb * T, self.n_val * T_big) * f8
            if dense:
                tmp += 6 * max(nb, self.n_val) * D * f8
            out["forward/backward temporaries"] = tmp
            out["validation sets"] = sum(self.n_val * t * per_tok for t in val_T) * f8
            # freed memory the allocator keeps (stsim.util.malloc): a batch's arrays under
            # the mmap threshold come from the heap and, once freed, stay resident for the
            # next batch; with batches drawn ahead the drawing thread's arena keeps one
            # too (a fixed training set frees none). Measured at slots T = 3200
            # (benchmarks/bench_scaling.py --traced): the peak RSS exceeds the arrays
            # traced by tracemalloc by 86 MiB, about two batches of 37.5 MiB
            heap = sum(a for a in (nb * T * d * f8, nb * T * per_enc * f8) if a < MMAP_THRESHOLD)
            out["freed batches kept by the allocator"] = (2 if draws else 0) * heap
            arrays = sum(v for k, v in out.items() if not k.startswith("interpreter"))
            # heap fragmentation beyond that: the rest of the excess measured at T = 6400
            # (1.8% of the arrays), rounded up
            out["allocator fragmentation (2% of the arrays)"] = int(0.02 * arrays)
        out["total"] = int(sum(out.values()))
        return out

    def check_memory(self, limit: float | None = None) -> None:
        """Refuse, before anything is allocated, a run whose :meth:`memory_estimate`
        exceeds ``limit`` bytes (default: 80% of this machine's physical memory)."""
        est = self.memory_estimate()
        if limit is None:
            limit = 0.8 * _physical_memory()
        if est["total"] > limit:
            parts = ", ".join(f"{k} {_gb(v)}" for k, v in est.items() if k != "total")
            raise ValueError(
                f"this run would need about {_gb(est['total'])} of memory (T={self.T}, "
                f"T_max={self.T_max}, d={self.d}, d_e={self.d_e}, batch={self.batch}, "
                f"n_train={self.n_train}, n_val={self.n_val}: {parts}), more than the "
                f"{_gb(limit)} allowed (80% of this machine's memory); reduce the sizes")

    @property
    def T_max(self) -> int:
        """The longest sequence any encoding must cover: ``max(T, *T_test)``."""
        return max((self.T,) + tuple(self.T_test))

    def to_dict(self) -> dict:
        """The fields as a JSON-ready dict (``T_test`` and ``q_test`` as lists)."""
        d = dataclasses.asdict(self)
        d["T_test"], d["q_test"] = list(self.T_test), list(self.q_test)
        return d


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


def field_help(f: dataclasses.Field) -> str:
    """``"<help> (default: <value>)"`` for a field of :class:`Config`."""
    text = f.metadata.get("default_text")
    if text is None:
        text = ",".join(map(str, f.default)) if isinstance(f.default, tuple) else str(f.default)
    return f"{f.metadata['help']} (default: {text})"


def _field_type(f: dataclasses.Field) -> str:
    """The type of a field as numpydoc writes it: ``int | None`` → ``int, optional``."""
    t = str(f.type).replace("'", "")
    return t[:-len(" | None")] + ", optional" if t.endswith(" | None") else t


if Config.__doc__:  # None under python -OO: one numpydoc entry per field, name : type
    Config.__doc__ += "\n    Attributes\n    ----------\n" + "".join(
        f"    {f.name} : {_field_type(f)}\n        {field_help(f)}\n"
        for f in dataclasses.fields(Config))


def _gb(nbytes) -> str:
    return f"{nbytes / 2**30:.3g} GiB"


def _physical_memory() -> float:
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        return 16.0 * 2**30
