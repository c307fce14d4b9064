"""A run's step size ``lr`` as one type, :class:`Steps`: built and checked once, then asked
(the step of a parameter, the reduced map's pair, the record a config keeps, the text)."""
from __future__ import annotations

from stsim.util.validate import check_real

__all__ = ["Steps", "lr_text"]


class Steps:
    """A step size ``lr``: one number for every parameter, or a dict with one per parameter
    (``{"W": 200, "V": 5.5}``, ``{"W_K": …, "W_Q": …, "V": …}``, any architecture's
    parameters), or another :class:`Steps`; recorded in a config as that number or dict
    (:meth:`record`). Checked once, here: each step a finite number > 0 given as a number
    (``"0.5"`` is refused, in a dict too), a dict covering exactly ``names`` when given;
    ``ValueError`` naming ``lr``. ``check=False`` takes ``lr`` as it is (the reduced map's
    settings, which may be arrays: their callers check them).

    >>> s = Steps({"W": 10.001066, "V": 2.8981132})
    >>> s.block("V"), s.pair()[0], s.uniform, str(s), Steps(0.5).scaled(0.5).record()
    (2.8981132, 10.001066, None, 'W 10, V 2.898', 0.25)
    """

    def __init__(self, lr, names=None, check=True):
        lr = lr._v if isinstance(lr, Steps) else lr
        if check and isinstance(lr, dict):
            if not lr:
                raise ValueError("lr must be a number > 0 or a dict {parameter: step > 0}, got {}")
            lr = {str(k): _step(v, f"lr[{k!r}]") for k, v in lr.items()}
            if names is not None and set(lr) != set(names):
                raise ValueError(f"lr as a dict must give one step for each parameter "
                                 f"{sorted(names)}, got {sorted(lr)}")
        self._v = _step(lr, "lr") if check and not isinstance(lr, dict) else lr

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

    __hash__ = None


def _step(value, name):
    """One step: a finite number > 0, given as a number (``ValueError`` naming ``name``)."""
    if isinstance(value, (str, bytes)):
        raise ValueError(f"{name} must be a number, got the string {value!r}")
    return check_real(name, value, lo=0.0, lo_open=True)


def lr_text(lr) -> str:
    """A step size or its record as people read it, ``str(Steps(lr))``: ``"0.5"``,
    ``"W 10, V 2.898"``."""
    return str(Steps(lr, check=False))
