"""The outcome of a run: :class:`Result` (config, final parameters, history, status) and
:func:`load`."""
from __future__ import annotations

import os
from dataclasses import dataclass, field

from stsim.util.io import load_npz, save_npz

__all__ = ["Result", "load"]


@dataclass
class Result:
    """Outcome of :func:`run`.

    Attributes
    ----------
    config : dict — the resolved configuration.
    params : dict of arrays — final parameters (``W`` (D, D) and ``V`` (d, D) for the
        transformer).
    history : dict of 1-D arrays of equal length — ``step``; ``loss`` (mean training loss
        over the steps since the previous record, the record step included); ``val``
        (in-distribution validation loss); ``val/T=<T_test>``, ``val/q=<q_test>``;
        ``cos_W``, ``cos_V``; plus objective-specific metrics.
    status : ``"completed"`` | ``"diverged"``;  message : str;  info : dict (wall time,
        encoding description such as the near-orthogonal δ).
    """

    config: dict
    params: dict
    history: dict
    status: str = "completed"
    message: str = ""
    info: dict = field(default_factory=dict)

    @property
    def W(self):
        return self.params["W"]

    @property
    def V(self):
        return self.params["V"]

    @property
    def success(self) -> bool:
        return self.status == "completed"

    def final(self, key="loss"):
        """Last recorded value of a history entry (NaN if nothing was recorded)."""
        values = self.history.get(key, ())
        if key not in self.history and self.history:
            raise KeyError(f"no history entry {key!r}; recorded: {list(self.history)}")
        return float(values[-1]) if len(values) else float("nan")

    def save(self, path):
        """Write ``path`` (npz: params, history and the JSON metadata), atomically."""
        arrays = {f"param/{k}": v for k, v in self.params.items()}
        arrays.update({f"history/{k}": v for k, v in self.history.items()})
        meta = {"config": self.config, "status": self.status, "message": self.message,
                "info": self.info, "history_keys": list(self.history)}
        save_npz(path, arrays, meta)
        return path

    @classmethod
    def load(cls, path) -> "Result":
        arrays, meta = load_npz(path, what="result")
        missing = [k for k in ("config", "status", "message") if k not in meta]
        missing += [f"history/{k}" for k in meta.get("history_keys", [])
                    if f"history/{k}" not in arrays]
        params = {k[6:]: v for k, v in arrays.items() if k.startswith("param/")}
        if not params:
            missing.append("param/*")
        if missing:
            raise ValueError(f"result file {os.fspath(path)!r} lacks {missing}: not a complete "
                             f"stsim result")
        history = {k: arrays[f"history/{k}"] for k in meta.get("history_keys", [])}
        return cls(config=meta["config"], params=params, history=history,
                   status=meta["status"], message=meta["message"], info=meta.get("info", {}))

    def __repr__(self):
        keys = ", ".join(self.history)
        last = f"{self.final('loss'):.4g}" if len(self.history.get("loss", [])) else "n/a"
        return (f"Result(status={self.status!r}, steps={self.config.get('steps')}, "
                f"final loss={last}, history keys=[{keys}])")


def load(path) -> Result:
    """Load a :class:`Result` written by :meth:`Result.save`."""
    return Result.load(path)
