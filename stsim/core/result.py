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
    status : ``"completed"`` | ``"diverged"``;  message : str (for a completed run that did
        not learn, the plateau diagnosis: "still on the initial plateau: loss 99.8% of
        initial; the reduced dynamics predict the escape near step N ...");  info : dict
        (wall time, ``assessment``, encoding description such as the near-orthogonal δ).
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

    @property
    def assessment(self) -> str:
        """``"learned"`` (validation loss <= 2% of its initial value), ``"plateau"`` (still
        > 90%: the run ended on the initial plateau), ``"not converged"``, or ``"unknown"``
        (diverged, or nothing recorded); see :func:`stsim.core.schedule.plateau_status`."""
        if "assessment" in self.info:
            return self.info["assessment"]
        from stsim.core.schedule import plateau_status
        return plateau_status(self.history, None)[0] if self.status == "completed" else "unknown"

    def summary(self) -> str:
        """A few lines: status and message (including the plateau diagnosis), the initial
        and final losses, the cosines with the ground truth, the wall time."""
        h = self.history
        cfg = self.config
        lines = [f"stsim run: T={cfg.get('T')} q={cfg.get('q')} pe={cfg.get('pe')} "
                 f"d_e={cfg.get('d_e')} model={cfg.get('model')} query={cfg.get('query')} "
                 f"optimizer={cfg.get('optimizer')} lr={cfg.get('lr'):.4g} "
                 f"steps={cfg.get('steps')}",
                 f"status: {self.status} ({self.assessment}) — {self.message}"]
        key = "val" if len(h.get("val", ())) else "loss"
        if len(h.get(key, ())):
            L0, L1 = float(h[key][0]), float(h[key][-1])
            lines.append(f"{key}: {L0:.4g} -> {L1:.4g} ({L1 / L0:.2%} of initial)"
                         if L0 > 0 else f"{key}: {L0:.4g} -> {L1:.4g}")
        cos = [f"{k}={float(h[k][-1]):.4f}" for k in ("cos_W", "cos_V") if len(h.get(k, ()))]
        if cos:
            lines.append("  ".join(cos))
        if "wall_time_s" in self.info:
            lines.append(f"wall time: {self.info['wall_time_s']:.1f} s")
        return "\n".join(lines)

    def __repr__(self):
        keys = ", ".join(self.history)
        last = f"{self.final('loss'):.4g}" if len(self.history.get("loss", [])) else "n/a"
        return (f"Result(status={self.status!r}, steps={self.config.get('steps')}, "
                f"final loss={last}, message={self.message!r}, history keys=[{keys}])")


def load(path) -> Result:
    """Load a :class:`Result` written by :meth:`Result.save`."""
    return Result.load(path)
