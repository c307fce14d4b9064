"""Validation of user input: every check raises ``ValueError`` naming the parameter and
the allowed range, so bad values fail before any work starts.

The one place for these checks: the simulator, the theory tools, the studies and the
command line all call them. A run's step size ``lr`` is one type, :class:`Steps`, checked
once and then asked (the step of a parameter, the reduced map's pair, its record, its text).

>>> check_int("q", 3, 1, 10)
3
>>> check_real("lr", "0.5", lo=0, lo_open=True)
0.5
>>> check_choice("pe", "onehot", ("onehot", "stochastic"))
'onehot'
"""
from __future__ import annotations

import math
import numbers
import os

import numpy as np

__all__ = ["check_int", "check_real", "check_lr", "Steps", "lr_text", "check_choice", "as_rng",
           "int_tuple", "physical_memory", "check_memory", "check_state_dict"]

MEMORY_FRACTION = 0.8      # of physical memory: the most one computation may plan to use


def as_rng(seed_or_rng) -> np.random.Generator:
    """Return a ``numpy.random.Generator``: pass one through, or build one from a seed.

    ``None`` is refused on purpose: every random number in stsim comes from an explicit
    seed or generator, so that the same seed gives the same numbers.
    """
    if isinstance(seed_or_rng, np.random.Generator):
        return seed_or_rng
    if isinstance(seed_or_rng, (np.random.SeedSequence, numbers.Integral)) and \
            not isinstance(seed_or_rng, bool):
        return np.random.default_rng(seed_or_rng)
    raise ValueError(f"rng must be a numpy.random.Generator, a SeedSequence or an integer seed, "
                     f"got {type(seed_or_rng).__name__}")


def _range_text(lo, hi):
    return f"in [{lo}, {hi}]" if hi is not None else f">= {lo}"


def check_int(name: str, value, lo: int = 1, hi: int | None = None) -> int:
    """Validate an integer parameter ``lo <= value <= hi`` and return it as ``int``.

    Booleans are refused (``True`` is not a sequence length); an integral float such as
    ``30.0`` is accepted as ``30``. Raises ``ValueError`` naming the parameter and the
    allowed range.
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        if (isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))
                and math.isfinite(float(value)) and float(value).is_integer()):
            value = int(value)
        else:
            raise ValueError(f"{name} must be an integer {_range_text(lo, hi)}, got {value!r}")
    value = int(value)
    if value < lo or (hi is not None and value > hi):
        raise ValueError(f"{name} must be an integer {_range_text(lo, hi)}, got {value}")
    return value


def check_real(name: str, value, *, lo: float | None = None, hi: float | None = None,
               lo_open: bool = False, hi_open: bool = False, allow_none: bool = False):
    """Validate a finite real number in a (half-)open or closed interval; return a float.

    Strings holding a number are accepted (``"0.5"``), booleans are not.
    """
    if value is None and allow_none:
        return None
    try:
        if isinstance(value, (bool, np.bool_)):
            raise TypeError
        val = float(value)
    except (TypeError, ValueError):
        val = float("nan")
    ok = math.isfinite(val)
    if ok and lo is not None:
        ok = val > lo if lo_open else val >= lo
    if ok and hi is not None:
        ok = val < hi if hi_open else val <= hi
    if not ok:
        parts = []
        if lo is not None:
            parts.append(f"{'>' if lo_open else '>='} {lo:g}")
        if hi is not None:
            parts.append(f"{'<' if hi_open else '<='} {hi:g}")
        rng = (" " + " and ".join(parts)) if parts else ""
        raise ValueError(f"{name} must be a finite number{rng}, got {value!r}")
    return val


def _checked(v, names):
    """The step size ``v`` of :class:`Steps`, checked (``ValueError`` naming ``lr``)."""
    if not isinstance(v, dict):
        return _step(v, "lr")
    if not v:
        raise ValueError("lr must be a number > 0 or a dict {parameter: step > 0}, got {}")
    v = {str(k): _step(x, f"lr[{k!r}]") for k, x in v.items()}
    if names is not None and set(v) != set(names):
        raise ValueError(f"lr as a dict must give one step for each parameter "
                         f"{sorted(names)}, got {sorted(v)}")
    return v


class Steps:
    """A step size ``lr``: one number for every parameter, or a dict with one per parameter
    (``{"W": 200, "V": 5.5}``, ``{"W_K": …, "W_Q": …, "V": …}``, ...), or a :class:`Steps`,
    recorded in a config as that number or dict (:meth:`record`). Checked once: each step a
    finite number > 0 given as a number (not ``"0.5"``), a dict covering exactly ``names``
    if given (``ValueError`` naming ``lr``); ``check=False``: as it is (arrays included).

    >>> s = Steps({"W": 10.001066, "V": 2.8981132})
    >>> s.block("V"), s.pair()[0], s.uniform, str(s), Steps(0.5).scaled(0.5).record()
    (2.8981132, 10.001066, None, 'W 10, V 2.898', 0.25)
    """

    def __init__(self, value, names=None, check=True):
        if isinstance(value, Steps):        # checked when it was made; again against names
            value, check = value._v, check and names is not None
        self._v = _checked(value, names) if check else value

    @property
    def uniform(self):
        """The one step of every parameter, or None for a step per parameter."""
        return None if isinstance(self._v, dict) else self._v

    @property
    def names(self):
        """The parameters of a step per parameter (a tuple), or None for one step."""
        return tuple(self._v) if isinstance(self._v, dict) else None

    def block(self, name: str):
        """The step of the parameter ``name`` (``ValueError`` naming ``lr`` if it has none)."""
        if isinstance(self._v, dict) and name not in self._v:
            raise ValueError(f"lr gives no step for the parameter {name!r} (it gives "
                             f"{sorted(self._v)})")
        return self._v[name] if isinstance(self._v, dict) else self._v

    def pair(self) -> tuple:
        """``(η_W, η_V)`` of the reduced map (:func:`stsim.core.reduced.reduced_map`)."""
        v = self._v
        if isinstance(v, dict) and set(v) != {"W", "V"}:
            raise ValueError(f"lr per block must have the keys 'W' and 'V', got {sorted(v)}")
        return (v["W"], v["V"]) if isinstance(v, dict) else (v, v)

    def scaled(self, f) -> "Steps":
        """Every step times ``f`` (a decaying schedule's step)."""
        v = self._v
        return Steps({k: x * f for k, x in v.items()} if isinstance(v, dict) else v * f,
                     check=False)

    def record(self):
        """The JSON form a config records: the number, or a dict ``{parameter: step}``."""
        return dict(self._v) if isinstance(self._v, dict) else self._v

    def __str__(self):      # as people read it: "0.5", "W 10, V 2.898"
        if isinstance(self._v, dict):
            return ", ".join(f"{k} {v:.4g}" for k, v in self._v.items())
        return f"{self._v:.4g}" if isinstance(self._v, (int, float)) else str(self._v)

    def __repr__(self):
        return f"Steps({self._v!r})"

    def __eq__(self, other):     # a Steps, or its record (a number, a dict)
        return self.record() == (other.record() if isinstance(other, Steps) else other)


def _step(value, name):
    """One step: a finite number > 0, given as a number (``ValueError`` naming ``name``)."""
    if isinstance(value, (str, bytes)):
        raise ValueError(f"{name} must be a number, got the string {value!r}")
    return check_real(name, value, lo=0.0, lo_open=True)


def lr_text(lr) -> str:
    """A step size or its record as people read it (``"0.5"``, ``"W 10, V 2.898"``)."""
    return str(Steps(lr, check=False))


def check_lr(lr, name: str = "lr"):
    """Step sizes must be finite and > 0: the one check (and message) for a learning rate,
    of one number (returns a float) or an array of them (every entry; returns a float
    array)."""
    if np.ndim(lr) == 0:
        return check_real(name, lr, lo=0.0, lo_open=True)
    try:
        arr = np.asarray(lr, dtype=np.float64)
    except (TypeError, ValueError):
        arr = np.array([np.nan])
    if not (np.all(np.isfinite(arr)) and np.all(arr > 0)):
        raise ValueError(f"{name} must be a finite number > 0 (every entry), got {lr!r}")
    return arr


def check_choice(name: str, value, allowed, *, ignore_case: bool = False):
    """``value`` must be one of ``allowed``; returns it. With ``ignore_case``, a string
    matching one of them up to case is accepted and returned in the spelling of
    ``allowed`` (``"SGD"`` -> ``"sgd"``).

    >>> check_choice("optimizer", "Adam", ("sgd", "adam"), ignore_case=True)
    'adam'
    """
    if ignore_case and isinstance(value, str) and value not in allowed:
        match = [a for a in allowed if isinstance(a, str) and a.lower() == value.lower()]
        if len(match) == 1:
            return match[0]
    if value not in allowed:
        raise ValueError(f"{name} must be one of {tuple(allowed)}, got {value!r}")
    return value


def int_tuple(name: str, values, lo: int = 1, hi: int | None = None) -> tuple:
    """A tuple of validated integers ``lo <= v <= hi`` (each by :func:`check_int`: an
    integral ``30.0`` is 30) from ``None`` (empty), one integer, or a sequence of integers.
    A string is refused (``T_test="30"`` is more likely a slip than a list)."""
    if values is None:
        return ()
    if isinstance(values, (str, bytes, dict, set, frozenset)):    # a dict's keys, a set's
        raise ValueError(f"{name} must be a sequence of integers, got {values!r}")  # order
    if isinstance(values, (numbers.Real, np.number)) and not isinstance(values, bool):
        values = (values,)
    try:
        items = tuple(values)
    except TypeError:
        raise ValueError(f"{name} must be an integer or a sequence of integers, "
                         f"got {values!r}") from None
    return tuple(check_int(name, v, lo, hi) for v in items)


def physical_memory() -> float:
    """Bytes of physical memory of this machine (16 GiB where the OS does not say)."""
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        return 16.0 * 2**30


def check_memory(parts: dict, what: str, limit: float | None = None) -> int:
    """Refuse, before anything is allocated, a computation whose memory estimate exceeds
    ``limit`` bytes (default 80% of :func:`physical_memory`).

    Parameters
    ----------
    parts : dict
        Bytes of the largest arrays, by a name that says what they are.
    what : str
        The computation and the settings that size it, e.g. ``"a trial at T=10^9 (Ts)"``:
        the message starts with it, so that it names the parameter to reduce.
    limit : float, optional
        The most it may use, in bytes.

    Returns
    -------
    int
        The estimate (bytes) when it fits.

    Raises
    ------
    ValueError
        When it does not: one line naming ``what``, the estimate by part and the limit.

    Examples
    --------
    >>> check_memory({"table (N x m)": 8 * 10**6}, "a point at N=1000 (Ns)")
    8000000
    >>> check_memory({"table (N x m)": 8e15}, "a point at N=10^9 (Ns)")
    Traceback (most recent call last):
    ...
    ValueError: a point at N=10^9 (Ns) would need about 7.45e+06 GiB of memory (table ...
    """
    total = int(sum(parts.values()))
    if limit is None:
        limit = MEMORY_FRACTION * physical_memory()
    if total > limit:
        gib = lambda b: f"{b / 2**30:.3g} GiB"  # noqa: E731
        items = ", ".join(f"{k} {gib(v)}" for k, v in sorted(parts.items(), key=lambda kv: -kv[1]))
        raise ValueError(f"{what} would need about {gib(total)} of memory ({items}), more "
                         f"than the {gib(limit)} allowed ({MEMORY_FRACTION:.0%} of this "
                         f"machine's memory); reduce the sizes")
    return total


def check_state_dict(owner, state) -> dict:
    """``state``, the ``state_dict()`` of ``owner`` (an optimiser: a registered extension),
    checked where it enters a checkpoint: a dict of text keys to finite numeric arrays
    (or numbers). ``ValueError`` naming ``owner``'s class and the entry otherwise — a
    checkpoint holding it could not be resumed (or would pickle Python objects).

    >>> check_state_dict(object(), {"t": 3})["t"]
    array(3)
    >>> check_state_dict(object(), {"m": [1, None]})
    Traceback (most recent call last):
    ...
    ValueError: optimiser object: state_dict()['m'] is not a finite numeric array ([1, None])
    """
    who = f"optimiser {type(owner).__name__}: state_dict()"
    if not isinstance(state, dict):
        raise ValueError(f"{who} returned a {type(state).__name__}, not a dict of arrays")
    out = {}
    for k, v in state.items():
        if not isinstance(k, str) or not k:
            raise ValueError(f"{who} has the key {k!r}, not a name")
        try:
            arr = np.asarray(v)
            ok = arr.dtype.kind in "fiub" and bool(np.all(np.isfinite(arr)))
        except (TypeError, ValueError):
            ok = False
        if not ok:
            text = repr(v)
            raise ValueError(f"{who}[{k!r}] is not a finite numeric array "
                             f"({text if len(text) <= 60 else text[:57] + '...'})")
        out[k] = arr
    return out
