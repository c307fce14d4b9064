r"""When a run may end before its step count: the stop rule on the validation curve.

A run whose step count is derived (:mod:`stsim.core.schedule`: twice the step where the
reduced dynamics reach 2% of L(0)) spends its second half at a constant step near SGD's
noise floor. :class:`Settled` ends it there, in the spirit of ``scipy.optimize``'s ``tol``:
at a record ``k`` (every ``eval_every`` steps) the run stops when

* the last ``patience`` records of the validation loss are all at or below
  ``level · L_1`` (``L_1`` the first record, the loss a run's message calls "initial": at
  the zero initialisation it is L(0) of the validation set), and
* over those records the loss has stopped falling fast: its mean relative decrease per
  record, ``(L_{k-p+1} − L_k) / ((p − 1) L_k)``, is at most ``tol`` (a rise counts as 0).

Both hold only on recorded numbers, so the rule is deterministic given the records: a run
resumed from its checkpoint stops at the same record. The final loss is then at most
``level · L_1`` by construction; what the rule saves is the steps after that.

Which runs use it (:func:`resolve_stop`, called once by the plan): ``stop="auto"`` (the
default) applies :class:`Settled` with its default settings when the step count is left to
the plan and the step is constant (``lr_decay="none"``: an annealed schedule's end is part
of it); a given ``steps`` is obeyed exactly (no rule) unless a rule is given as well;
``stop="none"`` runs every step; ``stop="settled"`` or a :class:`Settled` (or its dict)
applies that rule, also with a given ``steps``, which is then the most the run takes.
The config records the rule as a dict, or ``"none"``.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from stsim.util.validate import check_int, check_real

__all__ = ["Settled", "resolve_stop", "STOP_CHOICES"]

#: the names ``stop`` takes besides a :class:`Settled` or its dict
STOP_CHOICES = ("auto", "none", "settled")


@dataclass(frozen=True)
class Settled:
    """The stop rule of the module docstring: ``level`` (a fraction of the first record,
    0 < level < 1), ``patience`` (records, ≥ 2) and ``tol`` (relative decrease per record,
    ≥ 0). The defaults: 1% of the initial loss on 3 records falling by at most 2% per
    record — a choice, not derived: the derived schedules' runs at T = 2000 sit at
    0.72–0.98% of L(0) over their last 20 records (docs/model.md, "Stopping when
    settled")."""

    level: float = 0.01
    patience: int = 3
    tol: float = 0.02

    def __post_init__(self):
        object.__setattr__(self, "level", check_real("stop level", self.level, lo=0.0,
                                                     hi=1.0, lo_open=True, hi_open=True))
        object.__setattr__(self, "patience", check_int("stop patience", self.patience, 2))
        object.__setattr__(self, "tol", check_real("stop tol", self.tol, lo=0.0))

    def holds(self, values) -> bool:
        """Whether the rule holds at the last of the recorded losses ``values`` (the
        first is ``L_1``)."""
        p = self.patience
        if len(values) < p + 1 or not values[0] > 0:
            return False
        last = values[-p:]
        if not all(v <= self.level * values[0] for v in last):
            return False
        drop = (last[0] - last[-1]) / ((p - 1) * last[-1]) if last[-1] > 0 else 0.0
        return max(drop, 0.0) <= self.tol

    def record(self) -> dict:
        """The config's record: ``{"rule": "settled", "level", "patience", "tol"}``."""
        return {"rule": "settled", **asdict(self)}

    def __str__(self) -> str:
        return (f"validation loss <= {self.level:.3g} x initial on {self.patience} records, "
                f"falling by at most {self.tol:.3g} per record")


def _rule(stop):
    """A :class:`Settled` from ``stop`` (``"settled"``, a Settled, its dict), else None."""
    if isinstance(stop, Settled):
        return stop
    if isinstance(stop, dict):
        keys = dict(stop)
        if keys.pop("rule", "settled") != "settled":
            raise ValueError(f"stop: a rule dict's 'rule' must be 'settled', got {stop!r}")
        bad = sorted(set(keys) - {"level", "patience", "tol"})
        if bad:
            raise ValueError(f"stop: unknown setting(s) {bad} of the settled rule; allowed: "
                             f"level, patience, tol")
        return Settled(**keys)
    return Settled() if stop == "settled" else None


def resolve_stop(stop, steps_given: bool, lr_decay: str):
    """The rule a run applies, from its config's ``stop`` (module docstring): a
    :class:`Settled`, or None. ``ValueError`` naming ``stop`` and what it takes."""
    if isinstance(stop, str):
        low = stop.lower()
        if low not in STOP_CHOICES:
            raise ValueError(f"stop must be one of {STOP_CHOICES}, a Settled(level, patience, "
                             f"tol) or its dict, got {stop!r}")
        if low == "none":
            return None
        if low == "auto":
            return None if steps_given or lr_decay != "none" else Settled()
        return Settled()
    if stop is None:
        return None
    if not isinstance(stop, (Settled, dict)):
        raise ValueError(f"stop must be one of {STOP_CHOICES}, a Settled(level, patience, "
                         f"tol) or its dict, got {type(stop).__name__} {stop!r}")
    return _rule(stop)
