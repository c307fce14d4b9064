"""The outcome of a run: :class:`Result` (config, final parameters, history, status) and
:func:`load` (a result file, or a checkpoint as the run so far)."""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field

import numpy as np

from stsim.core.assessment import plateau_status
from stsim.core.config import ADDED_LATER, Config, recorded_shapes
from stsim.core.encodings import sample_checked
from stsim.core.families import canonical_pe
from stsim.core.model import attention_weights
from stsim.core.optim import optimizer_spec
from stsim.core.problem import arch_spec, is_transformer
from stsim.core.records import STATUSES, check_result_records, options_from_record, upgrade_config
from stsim.core.seeds import Streams
from stsim.core.state import RunState, check_history, check_params
from stsim.core.targets import make_target, target_of
from stsim.core.task import sample_batch
from stsim.util.io import load_npz, save_npz, write_csv
from stsim.util.validate import lr_text
from stsim.util.manifest import MANIFEST, check_manifest
from stsim.util.warn import warn

__all__ = ["Result", "load", "STATUSES"]


@dataclass
class Result:
    """Outcome of :func:`run`.

    Attributes
    ----------
    config : dict
        The resolved configuration.
    params : dict of arrays
        The final parameters (``W`` (D, D) and ``V`` (d, D) for the transformer).
    history : dict of 1-D arrays
        Arrays of equal length: ``step``; ``loss`` (mean training loss over the steps
        since the previous record, the record step included); ``val`` (in-distribution
        validation loss); ``val/T=<T_test>``, ``val/q=<q_test>``; ``cos_W``, ``cos_V``;
        plus objective-specific metrics.
    status : str
        ``"completed"``, ``"diverged"``, ``"interrupted"`` (Ctrl-C: the run so far),
        ``"stopped"`` (by the ``callback`` of :func:`~stsim.core.run.run`: the run so far) or
        ``"checkpoint"`` (:func:`load` of a checkpoint: the run so far).
    message : str
        What happened; for a completed run that did not learn, the plateau diagnosis
        ("still on the initial plateau: loss 99.8% of initial; the reduced dynamics
        predict the escape near step N ...").
    info : dict
        Wall time, ``assessment``, the encoding's description (such as the
        near-orthogonal δ).

    Notes
    -----
    In a notebook a ``Result`` shows its summary and its figure; ``res.plot()`` (the
    figure), ``res.attention()`` (attention weights of the trained model),
    ``res.to_pandas()`` (the history as a ``DataFrame`` indexed by step),
    ``res.history_array()`` / ``res.history_csv(path)`` (the history as a table).
    """

    config: dict
    params: dict
    history: dict
    status: str = "completed"
    message: str = ""
    info: dict = field(default_factory=dict)

    def _param(self, name):
        if name not in self.params:
            arch = self.config.get("arch", "transformer")
            raise AttributeError(f"{name} is a parameter of the transformer; this is an "
                                 f"arch={arch!r} run, whose parameters are res.params "
                                 f"{sorted(self.params)}")
        return self.params[name]

    @property
    def W(self):
        """Final key-query matrix ``W``, (D, D) (transformer runs; ``AttributeError``
        naming ``res.params`` otherwise); for a key/query pair of rank r (``rank=r``),
        ``W_Kᵀ W_Q``."""
        if "W" not in self.params and "W_K" in self.params and "W_Q" in self.params:
            return self.params["W_K"].T @ self.params["W_Q"]
        return self._param("W")

    @property
    def V(self):
        """Final value-output matrix ``V``, (d, D) (transformer runs; ``AttributeError``
        naming ``res.params`` otherwise)."""
        return self._param("V")

    @property
    def target(self):
        """The run's target (:class:`~stsim.core.targets.Target`, whose facts — its
        ``zero_loss`` L(0) — the studies ask): the object of a run of this process, else
        the built-in one its config records (the mean when it records none)."""
        cfg = self.__dict__.get("_config")
        return target_of(cfg) if cfg is not None else \
            make_target(self.config.get("target", ADDED_LATER["target"]))

    @property
    def transformer(self) -> bool:
        """The run's architecture is the transformer or built on it
        (:func:`stsim.core.problem.is_transformer` of its recorded ``arch``)."""
        return is_transformer(self.config.get("arch", "transformer"))

    @property
    def success(self) -> bool:
        """``True`` if the run completed (did not diverge, was not interrupted)."""
        return self.status == "completed"

    def final(self, key="loss"):
        """Last recorded value of a history entry (NaN if nothing was recorded)."""
        values = self.history.get(key, ())
        if key not in self.history and self.history:
            raise KeyError(f"no history entry {key!r}; recorded: {list(self.history)}")
        return float(values[-1]) if len(values) else float("nan")

    def history_array(self) -> np.ndarray:
        """The history as a NumPy structured array, one record per recorded step: field
        ``step`` (int) and one float field per history key (``loss``, ``val``, ...).

        >>> import stsim
        >>> h = stsim.run(T=8, q=2, steps=4, batch=8, eval_every=2).history_array()
        >>> h.shape, h.dtype.names[:2], int(h["step"][-1])
        ((3,), ('step', 'loss'), 4)
        """
        keys = list(self.history)
        n = len(self.history[keys[0]]) if keys else 0
        dtype = [(k, np.int64 if k == "step" else np.float64) for k in keys]
        out = np.empty(n, dtype=dtype)
        for k in keys:
            out[k] = self.history[k]
        return out

    def history_csv(self, path):
        """Write the history to ``path`` as CSV (header: the history keys; one line per
        record, ``step`` a whole number, floats round-trip exact), atomically; returns
        ``path``. The same file as ``stsim run``'s ``history.csv``."""
        keys = list(self.history)
        cols = [np.asarray(self.history[k]).astype(np.int64).tolist() if k == "step"
                else self.history[k] for k in keys]
        return write_csv(path, keys, zip(*cols))

    to_csv = history_csv

    def to_pandas(self):
        """The history as a ``pandas.DataFrame`` indexed by ``step``, one column per
        history key (``loss``, ``val``, ``val/T=…``, ``cos_W``, ...); pandas is the
        optional extra ``stsim[pandas]``.

        >>> import stsim
        >>> df = stsim.run(T=8, q=2, steps=4, batch=8, eval_every=2).to_pandas()
        >>> df.index.name, list(df.index), list(df.columns[:2])
        ('step', [0, 2, 4], ['loss', 'val'])
        """
        from stsim.util.frames import pandas
        pd = pandas()
        cols = {k: np.asarray(v) for k, v in self.history.items() if k != "step"}
        step = np.asarray(self.history.get("step", np.arange(len(next(iter(cols.values()), [])))))
        return pd.DataFrame(cols, index=pd.Index(step.astype(np.int64), name="step"))

    def plot(self, path=None):
        """The run's figure (``stsim run``'s ``loss.png``): loss (log), 1/loss (linear
        growth = the O(1/t) rate) and the cosines to the target, as a
        ``matplotlib.figure.Figure`` that a notebook shows (as a PNG, with or without
        ``%matplotlib inline``). With ``path``, it is also written there (format from the
        extension), and its data beside it, ``<stem>.csv`` (:meth:`history_csv`). It never
        selects or changes matplotlib's backend: a script's later ``plt.show()`` shows its
        own figures as before."""
        from stsim.util.figure import history_figure, save_figure
        fig = history_figure(self)
        if path is not None:
            save_figure(fig, path)
            self.history_csv(os.path.splitext(os.fspath(path))[0] + ".csv")
        return fig

    def plot_attention(self, path=None, **options):
        """The attention weights of :meth:`attention` (``options``: its ``n``, ``seed``,
        ``T``, ...) as an image, each sample's selected positions marked: a matplotlib
        ``Figure``, also written to ``path`` if given (as :meth:`plot`), with its data
        beside it, ``<stem>.csv``: ``sample, position, weight, selected``."""
        from stsim.util.figure import attention_figure, save_figure
        s, _, y = self.attention(return_inputs=True, **options)
        fig = attention_figure(s, y)
        if path is not None:
            save_figure(fig, path)
            sel = np.zeros(s.shape, dtype=int)
            np.put_along_axis(sel, y, 1, axis=1)
            write_csv(os.path.splitext(os.fspath(path))[0] + ".csv",
                      ["sample", "position", "weight", "selected"],
                      [(b, i, float(s[b, i]), int(sel[b, i])) for b in range(s.shape[0])
                       for i in range(s.shape[1])])
        return fig

    def attention(self, X=None, y=None, *, n=4, seed=0, T=None, return_inputs=False,
                  mechanism=None):
        """Attention weights of the trained transformer on given or fresh inputs.

        The encoding and the mechanism are the run's own: those it trained with (a result
        of :func:`stsim.run` in this process, also when ``pe`` or ``attention`` was an
        object), else rebuilt from the config exactly as in the run (the fixed
        near-orthogonal table drawn from its ``seed``; a config whose ``pe`` was an object
        cannot be rebuilt: ``ValueError`` saying so; a mechanism of one's own is given
        again as ``mechanism``). Stochastic encodings are drawn for these samples from
        ``seed``.

        Parameters
        ----------
        X : (B, T, d) array, optional
            Tokens, given with ``y``. Default: ``n`` fresh samples of length ``T``
            drawn from ``seed``.
        y : (B, q) int array, optional
            The selected positions of each sample.
        n : int
            Number of fresh samples.
        seed : int
            Seed of the fresh samples (it also draws the stochastic encodings).
        T : int, optional
            Length of the fresh samples (default the training length).
        return_inputs : bool
            Also return ``X`` and ``y``.
        mechanism : Attention, optional
            The run's mechanism object, for a loaded result whose ``attention`` was an
            object of one's own (its config records only the name: ``attention_object``).

        Returns
        -------
        s : (B, T) or (B, T + 1) array
            The run's mechanism's weights (softmax: rows summing to 1): (B, T) for the
            theory model, (B, T + 1) for the practical one (last column the query token);
            ``(s, X, y)`` with ``return_inputs``.

        Examples
        --------
        >>> import stsim
        >>> res = stsim.run(T=10, q=2, pe="onehot", steps=200, batch=64)
        >>> s, X, y = res.attention(n=3, return_inputs=True)
        >>> s.shape, bool(np.all(np.take_along_axis(s, y, 1).sum(1) > 0.5))
        ((3, 10), True)
        """
        cfg = self.__dict__.get("_config")      # the run's own (stsim.run in this process)
        if cfg is None:
            missing = unregistered(self.config)
            if missing:
                raise ValueError(f"attention weights need {_register_hint(missing)}")
            kind = self.config.get("attention_object")
            if kind is not None and mechanism is None:
                raise ValueError(
                    f"this result's mechanism was an object ({kind}, recorded as attention="
                    f"{self.config.get('attention')!r}), which a config does not hold: pass "
                    f"it again, res.attention(..., mechanism=<the {kind}>)")
            given = {} if mechanism is None else {"attention": mechanism}
            names = {f.name for f in dataclasses.fields(Config)}
            opts = {**options_from_record(self.config, given), **given}
            cfg = Config(**{k: v for k, v in opts.items() if k in names}).resolve()
        if not cfg.resolved.arch.transformer:
            raise ValueError(f"attention weights need a transformer run, this is arch={cfg.arch!r}")
        enc = cfg.resolved.encoding.build(Streams(cfg.seed).encoding())
        rng = np.random.default_rng(seed)
        if X is None:
            if y is not None:
                raise ValueError("y was given without X")
            b = sample_batch(rng, n, cfg.T if T is None else T, cfg.q, cfg.d)
            X, y = b.X, b.y
        elif y is None:
            raise ValueError("X was given without y (the selected positions)")
        X, y = np.asarray(X, dtype=np.float64), np.asarray(y)
        if X.ndim != 3 or X.shape[2] != cfg.d or y.ndim != 2 or y.shape[0] != X.shape[0]:
            raise ValueError(f"X must have shape (B, T, d={cfg.d}) and y (B, q), got "
                             f"{X.shape} and {y.shape}")
        pe = sample_checked(enc, rng, X.shape[0], X.shape[1])
        s = attention_weights(self.W, cfg.resolved.target.features(X), y, pe, model=cfg.model,
                              query=cfg.query,
                              attention=cfg.resolved.attention)    # at its temperature
        return (s, X, y) if return_inputs else s

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
        """Read a file written by :meth:`save`, or a checkpoint (``stsim run
        --checkpoint_every``, ``run(checkpoint=…)``) as the run so far (``status
        "checkpoint"``; resume it with ``stsim.run(config=res.config, checkpoint=path)``).

        ``ValueError`` naming the file and the defect when it is incomplete or
        inconsistent (its records: :mod:`stsim.core.records`; its parameters and history:
        :func:`~stsim.core.state.check_params`, :func:`~stsim.core.state.check_history`);
        a CSV or other text file is named as such. ``path`` may be a run's output folder
        (its ``result.npz`` is read); when that folder has a ``manifest.json`` the file
        must be the one it records (:func:`stsim.util.manifest.check_manifest`: never a
        folder mixing two runs).
        """
        if os.path.isdir(path) and os.path.lexists(os.path.join(path, MANIFEST)):
            path = os.path.join(path, "result.npz")      # a run's output folder
            if not os.path.lexists(path):
                raise ValueError(f"{os.path.dirname(path)!r} is the folder of an incomplete "
                                 f"run: it has no result.npz (the run could not write it, "
                                 f"e.g. a full disk, or was stopped first); rerun the command "
                                 f"that wrote it")
        if os.path.isdir(path) and os.path.isfile(os.path.join(path, "result.npz")):
            path = os.path.join(path, "result.npz")      # a run's output folder
        arrays, meta = load_npz(path, what="result")
        check_manifest(path)      # a folder left mixing two runs is refused
        if "status" not in meta and {"rng", "step", "acc"} <= set(meta):
            return cls._from_checkpoint(path, arrays, meta)
        check_result_records(path, meta, arrays)    # status, message, config, history_keys
        params = {k[6:]: v for k, v in arrays.items() if k.startswith("param/")}
        if not params:
            raise ValueError(f"result file {os.fspath(path)!r} lacks ['param/*']: not a "
                             f"complete stsim result")
        check_params(path, "result file", params, recorded_shapes(meta["config"]), finite=False)
        history = {k: arrays[f"history/{k}"] for k in meta["history_keys"]}
        check_history(path, "result file", history)
        _warn_unregistered(path, meta["config"])
        return cls(config=meta["config"], params=params, history=_int_steps(history),
                   status=meta["status"], message=meta["message"], info=meta.get("info", {}))

    @classmethod
    def _from_checkpoint(cls, path, arrays, meta) -> "Result":
        cfg = meta.get("config")        # read_checked refuses a missing or non-dict one
        cfg = upgrade_config(cfg) if isinstance(cfg, dict) else None
        params = RunState.read_checked(path, arrays, meta,
                                     None if cfg is None else recorded_shapes(cfg))
        history = {k: arrays[f"history/{k}"] for k in meta["history_keys"]}
        step, steps = meta["step"], cfg.get("steps")
        return cls(config=cfg, params=params, history=_int_steps(history), status="checkpoint",
                   message=f"checkpoint at step {step} of {steps}: the run so far (resume: "
                           f"stsim.run(config=res.config, checkpoint={os.fspath(path)!r}))",
                   info={"checkpoint_step": step})

    @property
    def assessment(self) -> str:
        """``"learned"``, ``"overfitting"``, ``"diverging"``, ``"plateau"``, ``"not
        converged"`` or ``"unknown"`` (diverged, or nothing recorded): the diagnosis of
        :func:`stsim.core.assessment.plateau_status`."""
        if "assessment" in self.info:
            return self.info["assessment"]
        return plateau_status(self.history, None)[0] if self.status == "completed" else "unknown"

    def summary(self) -> str:
        """A few lines: the run's settings (an FCN's width and depth, a transformer's
        encoding and model), status and message (including the plateau diagnosis), the
        initial and final losses, the cosines with the ground truth, the wall time."""
        h = self.history
        cfg = self.config
        arch = cfg.get("arch", "transformer")
        lr = cfg.get("lr")
        common = (f"optimizer={cfg.get('optimizer')} "
                  f"lr={lr_text(lr)} "
                  f"steps={cfg.get('steps')} batch={cfg.get('batch')}")
        if self.transformer:
            what = (f"stsim run: T={cfg.get('T')} q={cfg.get('q')} d={cfg.get('d')} "
                    f"pe={cfg.get('pe')} d_e={cfg.get('d_e')} model={cfg.get('model')} "
                    f"query={cfg.get('query')} "
                    + "".join(f"{k}={','.join(map(str, v)) if isinstance(v, list) else v} "
                              for k, v in cfg.items() if k in ADDED_LATER)
                    + common)
        else:
            n = sum(int(np.size(v)) for v in self.params.values())
            what = (f"stsim run: arch={arch} T={cfg.get('T')} q={cfg.get('q')} "
                    f"d={cfg.get('d')} width={cfg.get('width')} depth={cfg.get('depth')} "
                    f"({n} parameters) {common}")
        lines = [what, f"status: {self.status} ({self.assessment}) — {self.message}"]
        key = "val" if len(h.get("val", ())) else "loss"
        if len(h.get(key, ())):
            L0, L1 = float(h[key][0]), float(h[key][-1])
            lines.append(f"{key}: {L0:.4g} -> {L1:.4g} ({L1 / L0:.2%} of initial)"
                         if L0 > 0 else f"{key}: {L0:.4g} -> {L1:.4g}")
        cos = [f"{k}={float(h[k][-1]):.4f}" for k in ("cos_W", "cos_V") if len(h.get(k, ()))]
        if cos:
            lines.append("  ".join(cos) + (f"  ({self.info['cos_V']})" if "cos_V" in self.info
                                           else ""))
        if "wall_time_s" in self.info:
            lines.append(f"wall time: {self.info['wall_time_s']:.1f} s")
        return "\n".join(lines)

    def __repr__(self):
        cfg, h = self.config, self.history
        what = " ".join(f"{k}={cfg[k]}" for k in ("arch", "T", "q", "pe") if k in cfg
                        and not (k == "arch" and cfg[k] == "transformer"))
        key = "val" if len(h.get("val", ())) else "loss"
        if len(h.get(key, ())):
            L0, L1 = float(h[key][0]), float(h[key][-1])
            loss = f"{key} {L1:.4g}" + (f" ({L1 / L0:.2%} of initial)" if L0 > 0 else "")
        else:
            loss = "nothing recorded"
        steps = int(h["step"][-1]) if len(h.get("step", ())) else 0
        return (f"<stsim.Result {self.status}, {self.assessment}: {what}, {steps} steps, "
                f"{loss}>")

    def _repr_html_(self):
        """A notebook shows the summary and the figure of :meth:`plot`, as HTML (the PNG
        inline, nothing loaded). The HTML is the only rich form, so that a notebook stores
        the PNG once (a ``_repr_png_`` beside it would be stored a second time)."""
        import base64
        import html
        from stsim.util.figure import history_figure, png_bytes
        png = png_bytes(history_figure(self))
        return (f"<pre>{html.escape(self.summary())}</pre>"
                f'<img alt="loss, inverse loss and cosines of the run" style="max-width:100%" '
                f'src="data:image/png;base64,{base64.b64encode(png).decode()}"/>')


#: the extension tables a config names: (config key, what, how to register it)
_EXTENSIONS = (("pe", "encoding", "stsim.register_encoding({name!r}, YourEncoding)"),
               ("optimizer", "optimiser", "stsim.register_optimizer({name!r}, factory, lr=…)"),
               ("arch", "architecture", "stsim.register_arch({name!r}, factory)"))


def unregistered(config: dict) -> list:
    """``[(key, name, what, how)]`` for the names of ``config`` (``pe``, ``optimizer``,
    ``arch``) that this process does not know: extensions registered where the run was
    made and not (yet) here."""
    check = {"pe": canonical_pe, "optimizer": optimizer_spec, "arch": arch_spec}
    out = []
    for key, what, how in _EXTENSIONS:
        name = config.get(key)
        if not isinstance(name, str):
            continue
        try:
            check[key](name)
        except ValueError:
            out.append((key, name, what, how.format(name=name)))
    return out


def _register_hint(missing) -> str:
    return "; ".join(f"the {what} {key}={name!r}, which is not registered in this process: "
                     f"register it as the run did, e.g. {how}" for key, name, what, how in missing)


def _warn_unregistered(path, config) -> None:
    """Warn, naming how to register them, when a loaded result's extensions are unknown here
    (its history and parameters are read all the same)."""
    missing = unregistered(config) if isinstance(config, dict) else []
    if missing:
        warn(f"{os.fspath(path)!r} was made with {_register_hint(missing)} (its history, "
             f"plot and parameters need nothing; attention weights and resuming do)")


def _int_steps(history: dict) -> dict:
    """The history with ``step`` as whole numbers (files of earlier versions hold floats)."""
    if "step" in history:
        history = dict(history, step=np.asarray(history["step"]).astype(np.int64))
    return history


def load(path) -> Result:
    """Load a :class:`Result` written by :meth:`Result.save` (``stsim run``'s
    ``result.npz``), or a checkpoint as the run so far (:meth:`Result.load`)."""
    return Result.load(path)
