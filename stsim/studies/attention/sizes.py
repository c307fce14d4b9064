"""The attention study's sizes, checked before any work: each part's largest run resolved as
a :class:`~stsim.core.config.Config` (its options and memory), the width family's and the
reduced map's arrays (:func:`check_sizes`, called by :func:`stsim.studies.attention.study.check`)."""
from __future__ import annotations

from stsim.core.config import Config
from stsim.studies.attention.runs import mechanism_label, parse_mechanism
from stsim.util.validate import check_memory

__all__ = ["check_sizes"]


def check_sizes(cfg) -> None:
    """Refuse, before any work, a part whose largest run does not fit: each mechanism's run
    (:meth:`stsim.core.config.Config.resolve`: its options, e.g. ``rank <= d + d_e``, and
    its memory), the largest rank run, each trained mechanism at the largest width, the
    family at each ``width_T`` and the reduced map (their largest arrays, by name, in the
    message); the message names the setting."""
    from stsim.studies.widths import Precision
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
