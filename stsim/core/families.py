"""Encoding families by name: the registry (:func:`register_encoding`), the one place a
family's name is resolved (:func:`encoding_spec` → :class:`EncodingSpec`, nothing drawn)
and the one builder (:func:`make_encoding`). The families themselves are the classes of
:mod:`stsim.core.encodings` (where these names can also be imported from).

Callers ask the spec (its attributes and methods) or the built
:class:`~stsim.core.encodings.Encoding`, never the name.
"""
from __future__ import annotations

import inspect

import numpy as np

from stsim.core.encodings import (_ALIASES, PE_NAMES, SAMPLERS, Encoding, NearOrthogonal,
                                  OneHot, PEBatch, StochasticSinusoid, StochasticSlots,
                                  StochasticSphere, _check_width)
from stsim.util.validate import check_int

__all__ = ["register_encoding", "canonical_pe", "encoding_spec", "EncodingSpec", "is_dense",
           "resolve_encoding", "make_encoding", "family_reduced_n", "DEFAULT_DENSE_D_E",
           "PE_NAMES", "SAMPLERS"]

DEFAULT_DENSE_D_E = 64

def _near_orthogonal(d_e, T_max, rng):
    """The built-in near-orthogonal table: ``T_max`` rows drawn from ``rng``."""
    if rng is None:
        raise ValueError("rng is required to draw the near-orthogonal encoding")
    return NearOrthogonal(d_e, T_max, rng)


#: the built-in families: name -> (Encoding subclass, factory); ``stochastic``: per sampler
_BUILTIN = {"onehot": (OneHot, OneHot), "near-orthogonal": (NearOrthogonal, _near_orthogonal),
            ("stochastic", "slots"): (StochasticSlots, StochasticSlots),
            ("stochastic", "sphere"): (StochasticSphere, StochasticSphere),
            ("stochastic", "sinusoid"): (StochasticSinusoid, StochasticSinusoid)}
_REGISTERED: dict = {}   # name -> (factory, index, default_d_e)


def register_encoding(name: str, factory, *, index: bool | None = None,
                      default_d_e: int | None = None) -> None:
    """Make ``pe=name`` (in :func:`stsim.run`, :class:`Config`, :func:`make_encoding`)
    build an encoding of your own.

    Parameters
    ----------
    name : str
        The family's name (not one of the built-in :data:`PE_NAMES`).
    factory : callable
        An :class:`Encoding` subclass or any callable returning an Encoding; it is called
        with those of the keywords ``d_e``, ``T_max``, ``rng`` (the run's encoding stream,
        for tables drawn once) and ``sampler`` that it accepts. A subclass's facts
        (``index``, ``fixed``, :meth:`Encoding.reduced_n`, ...) are read before anything
        is built (:func:`encoding_spec`); of another callable only ``index`` is known.
    index : bool, optional
        One-hot at slots (needs ``d_e >= T``; width default ``T``) or dense (width default
        ``default_d_e`` or 64). Default: ``factory.index`` if it is a class, else False.
    default_d_e : int, optional
        The width when ``d_e`` is not given.

    Notes
    -----
    An instance needs no registration: ``pe=MyEncoding(d_e)`` is used as it is and
    registers nothing (:func:`encoding_spec`).

    A sweep's workers (the default pool, any process pool, a Dask cluster) do not run the
    calling script or notebook; :func:`stsim.sweep` sends the registrations made in the
    calling process with every task (:mod:`stsim.sweeps.carry`), so ``pe=name`` works in
    its rows too. A :func:`stsim.load` in a process where ``name`` is not registered warns
    how to register it.

    Examples
    --------
    >>> class Reversed(OneHot):               # one-hot, last position first
    ...     name = "reversed"
    ...     def sample(self, rng, B, T):
    ...         return PEBatch(d_e=self.d_e, idx=np.arange(T)[::-1].copy())
    >>> register_encoding("reversed", Reversed)
    >>> make_encoding("reversed", T_max=5).sample(None, 1, 5).idx
    array([4, 3, 2, 1, 0])
    """
    name = str(name).lower()
    if name in PE_NAMES or name in _ALIASES:
        raise ValueError(f"{name!r} is a built-in encoding; choose another name")
    if not callable(factory):
        raise ValueError(f"factory must be callable (an Encoding subclass), got {factory!r}")
    if index is None:
        index = bool(getattr(factory, "index", False)) if isinstance(factory, type) else False
    if default_d_e is not None:
        default_d_e = check_int("default_d_e", default_d_e, 1)
    _REGISTERED[name] = (factory, bool(index), default_d_e)


def canonical_pe(pe: str) -> str:
    """The canonical family name of ``pe`` (aliases such as ``one-hot`` accepted, and
    names added by :func:`register_encoding`); ``ValueError`` for an unknown name."""
    key = _ALIASES.get(str(pe).lower(), str(pe).lower())
    if key not in PE_NAMES and key not in _REGISTERED:
        raise ValueError(f"pe must be one of {PE_NAMES + tuple(_REGISTERED)}, got {pe!r}")
    return key


class EncodingSpec:
    """An encoding family resolved from its name, before anything is drawn: what
    :class:`~stsim.core.config.Config`, the schedule and the cost and memory models ask
    (:func:`encoding_spec` builds it; :meth:`build` makes the :class:`Encoding`).

    Attributes
    ----------
    name : str
        Canonical family name (what a config's ``pe`` holds).
    label : str
        Name shown in results (e.g. ``stochastic/slots``).
    d_e : int
        The resolved width.
    sampler : str
        Law of the stochastic family (as given).
    kind : type or None
        The :class:`Encoding` subclass (None: a registered factory function).
    index : bool
        One-hot at slots (``idx``) rather than dense (``P``); see :attr:`dense`.
    fixed : bool
        The same encodings for every sample.
    instance : Encoding or None
        The object passed as ``pe`` (it is the encoding: :meth:`build` returns it, and the
        family's facts are asked of it); None for a family resolved from its name.

    Notes
    -----
    The facts that depend on the family (:meth:`reduced_n`, :meth:`approx_reduced_n`,
    :meth:`n_configurations`) are its class's methods, evaluated with this spec in place of
    an instance: they may use ``d_e`` and class attributes only (nothing drawn).
    """

    def __init__(self, name, *, d_e, sampler, kind, index, fixed, label, factory, T_max,
                 instance=None):
        self.name, self.d_e, self.sampler, self.kind = name, d_e, sampler, kind
        self.index, self.fixed, self.label = index, fixed, label
        self._factory, self._T_max = factory, T_max
        self.instance = instance

    @property
    def dense(self) -> bool:
        """A ``d_e``-vector per position (``P``), not a slot index."""
        return not self.index

    def _ask(self, method, *args):
        if self.instance is not None:
            return getattr(self.instance, method)(*args)
        return None if self.kind is None else getattr(self.kind, method)(self, *args)

    def reduced_n(self, T: int) -> int | None:
        """``n`` of the family's exact two-scalar reduction at length ``T``
        (:meth:`Encoding.reduced_n`), or None."""
        return self._ask("reduced_n", T)

    def approx_reduced_n(self, T: int) -> int | None:
        """``n`` of the reduced map the default schedule runs as an approximation when there
        is no exact reduction (:meth:`Encoding.approx_reduced_n`), or None."""
        return self._ask("approx_reduced_n", T)

    def n_configurations(self, T: int, q: int) -> int | None:
        """:meth:`Encoding.n_configurations` of the family."""
        return self._ask("n_configurations", T, q)

    def build(self, rng: np.random.Generator | None = None) -> "Encoding":
        """The :class:`Encoding` (``rng``: the stream that draws a fixed table); the object
        itself when one was passed as ``pe``."""
        if self.instance is not None:
            return self.instance
        offered = {"d_e": self.d_e, "T_max": self._T_max, "rng": rng, "sampler": self.sampler}
        try:
            params = inspect.signature(self._factory).parameters
        except (TypeError, ValueError):  # pragma: no cover - builtins without a signature
            params = offered
        if any(p.kind == p.VAR_KEYWORD for p in getattr(params, "values", lambda: [])()):
            kwargs = offered
        else:
            kwargs = {k: v for k, v in offered.items() if k in params}
        enc = self._factory(**kwargs)
        if not isinstance(enc, Encoding) or enc.d_e != self.d_e:
            raise ValueError(f"the factory of encoding {self.name!r} must return an Encoding "
                             f"of width d_e={self.d_e}, got {enc!r}")
        return enc

    def __repr__(self):
        return f"EncodingSpec({self.label!r}, d_e={self.d_e})"


def _family(key: str, sampler: str):
    """``(factory, kind, index, fixed, label, default_d_e)`` of a canonical name."""
    if key in _REGISTERED:
        factory, index, default = _REGISTERED[key]
        kind = factory if isinstance(factory, type) and issubclass(factory, Encoding) else None
        fixed = bool(getattr(kind, "fixed", True))
        label = getattr(kind, "label", key)
        return factory, kind, index, fixed, label if isinstance(label, str) else key, default
    kind, factory = _BUILTIN[(key, sampler) if key == "stochastic" else key]
    label = kind.label if isinstance(kind.label, str) else key
    return factory, kind, kind.index, kind.fixed, label, None


def encoding_spec(pe, *, T_max: int, d_e: int | None = None, sampler: str = "slots",
                  slots_factor: int = 1) -> EncodingSpec:
    """Resolve an encoding family by name (or instance), validate its width, and return
    its :class:`EncodingSpec` — the one place a family's name is read. Nothing is drawn.

    Parameters
    ----------
    pe : str or Encoding
        A built-in name (aliases such as ``one-hot`` accepted), a registered name, or an
        :class:`Encoding` object, built-ins included (used as it is, named by its
        ``name``; nothing is registered).
    T_max : int
        Largest sequence length that will be encoded.
    d_e : int, optional
        Width. Default: a registered ``default_d_e``; else 64 for dense families,
        ``slots_factor * T_max`` for per-sample index families, ``T_max`` for fixed ones.
    sampler : {"slots", "sphere", "sinusoid"}
        Law of the stochastic family (validated for every family, used by that one).
    slots_factor : int
        See ``d_e`` (:class:`Config` passes 2: each slot is then used with probability
        ``T/d_e <= 1/2``, so the law really is stochastic).

    Returns
    -------
    EncodingSpec
        The resolved family.

    Raises
    ------
    ValueError
        Naming the parameter (unknown ``pe`` or ``sampler``; ``d_e < T_max`` for an
        index family).

    Examples
    --------
    >>> s = encoding_spec("stochastic", T_max=10, slots_factor=2)
    >>> s.label, s.d_e, s.dense, s.fixed, s.reduced_n(10)
    ('stochastic/slots', 20, False, False, 20)
    """
    if sampler not in SAMPLERS:
        raise ValueError(f"sampler must be one of {SAMPLERS}, got {sampler!r}")
    T_max = check_int("T", T_max, 1)
    if isinstance(pe, Encoding):
        return _instance_spec(pe, T_max, d_e, sampler)
    key = canonical_pe(pe)
    factory, kind, index, fixed, label, default = _family(key, sampler)
    if default is None:
        default = DEFAULT_DENSE_D_E if not index else T_max * (1 if fixed else slots_factor)
    d_e = check_int("d_e", default if d_e is None else d_e, 1)
    if index:
        _check_width(d_e, label, T_max)
    return EncodingSpec(key, d_e=d_e, sampler=sampler, kind=kind, index=index, fixed=fixed,
                        label=label, factory=factory, T_max=T_max)


def _instance_spec(enc: Encoding, T_max: int, d_e, sampler: str) -> EncodingSpec:
    """The spec of an :class:`Encoding` object passed as ``pe``: the object itself (built
    once, asked its facts), named by its ``name``; a built-in stochastic object sets the
    sampler (its law). Nothing is registered."""
    if d_e is not None and check_int("d_e", d_e, 1) != enc.d_e:
        raise ValueError(f"d_e={d_e} differs from the width {enc.d_e} of the encoding object "
                         f"passed as pe; leave d_e out (it is the object's)")
    law = {StochasticSlots: "slots", StochasticSphere: "sphere"}.get(type(enc))
    sampler = law or sampler
    enc.check_length(T_max)
    label = enc.label if isinstance(enc.label, str) else enc.name
    return EncodingSpec(str(enc.name), d_e=enc.d_e, sampler=sampler, kind=type(enc),
                        index=bool(enc.index), fixed=bool(enc.fixed), label=label,
                        factory=None, T_max=T_max, instance=enc)


def family_reduced_n(pe, T, d_e=None, sampler: str = "slots"):
    """``n`` of the exact two-scalar reduction of the family ``pe`` (a name) at lengths
    ``T`` and widths ``d_e`` (arrays allowed, for grids of settings; ``d_e`` defaults to
    ``T``), asked of the family's class (:meth:`Encoding.reduced_n`) without building it,
    or None when the family has none.

    >>> family_reduced_n("onehot", np.array([5, 9])), family_reduced_n("stochastic", 5, 8)
    (array([5, 9]), 8)
    """
    key = canonical_pe(pe)
    factory, kind, index, fixed, label, _ = _family(key, sampler)
    spec = EncodingSpec(key, d_e=T if d_e is None else d_e, sampler=sampler, kind=kind,
                        index=index, fixed=fixed, label=label, factory=factory, T_max=None)
    return spec.reduced_n(T)


def is_dense(pe: str, sampler: str = "slots") -> bool:
    """Whether the family ``pe`` (a canonical or registered name) carries dense encodings
    (a ``d_e``-vector per position: ``near-orthogonal``, ``stochastic`` with the sphere
    sampler, a family registered with ``index=False``) rather than slot indices."""
    return not _family(canonical_pe(pe), sampler)[2]


def resolve_encoding(pe: str, *, T_max: int, d_e: int | None = None,
                     sampler: str = "slots") -> tuple:
    """``(name, d_e)`` of :func:`encoding_spec` (canonical name, width filled in)."""
    spec = encoding_spec(pe, T_max=T_max, d_e=d_e, sampler=sampler)
    return spec.name, spec.d_e


def make_encoding(pe: str, *, T_max: int, d_e: int | None = None, sampler: str = "slots",
                  rng: np.random.Generator | None = None) -> Encoding:
    """Build an encoding family by name: ``encoding_spec(...).build(rng)``.

    Parameters
    ----------
    pe, T_max, d_e, sampler
        As for :func:`encoding_spec` (an :class:`Encoding` object is returned as it is).
    rng : Generator
        Needed to draw the fixed near-orthogonal table.
    """
    return encoding_spec(pe, T_max=T_max, d_e=d_e, sampler=sampler).build(rng)
