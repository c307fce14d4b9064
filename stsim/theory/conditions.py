"""The theorems' hypotheses (docs/theory.md §6), each reported as holding or failing by
:func:`stsim.theory.checks.check_theorem`: Theorem 1 (one-hot) as the paper states them,
and Theorem 2 (stochastic PE, slots law) as far as the sources give them, with the
conditions derived here marked D."""
from __future__ import annotations

__all__ = ["theorem1_conditions", "theorem2_conditions"]


def theorem1_conditions(T, q, d, lr, eps) -> dict:
    """Theorem 1's hypotheses on the sizes and step, each as
    ``{"holds": bool, "detail": str}``. ``x_query = 0``, ``W(0) = V(0) = 0`` hold by
    construction in :func:`check_theorem` and are listed too."""
    eps_max = d * T / (100.0 * (T - q) * q) if T > q else float("nan")
    lr_max = 1.0 / (20.0 * d * d)
    return {
        "2 <= q < T/4": {"holds": bool(2 <= q < T / 4),
                         "detail": f"q={q}, T/4={T / 4:g}"},
        "eps < dT/(100(T-q)q)": {"holds": bool(0 < eps < eps_max),
                                 "detail": f"eps={eps:g}, bound={eps_max:.6g}"},
        "lr <= 1/(20 d^2)": {"holds": bool(lr <= lr_max),
                             "detail": f"lr={lr:g}, bound={lr_max:.6g}"},
        "x_query = 0, W(0) = 0, V(0) = 0": {"holds": True, "detail": "by construction"},
    }


def theorem2_conditions(T, q, d, d_e, lr, eps, T_test=()) -> dict:
    r"""Theorem 2 (joint training with the stochastic PE) for the slots law: the conditions
    that can be stated, each ``{"holds": bool | None, "source": "P" | "D", "detail"}``.

    P (the paper, as far as the project's sources give it): the summaries call Theorem 2
    Theorem 1 "with stochastic PE" (so ``2 <= q < T/4``, ``ε < dT/(100(T−q)q)``,
    ``η <= 1/(20d²)``, zero init, ``x_query = 0``); they give its title and the width
    ``Õ(d + q log T)`` of the paper's encoding, not its exact statement.
    D (derived here): ``d_e > T`` (with ``d_e = T`` every slot is used, in order: the fixed
    one-hot law); ``d_e >= T_test`` (every test slot was trained, so the OOD loss has no
    floor, docs/theory.md §5); ``η < 2q`` (stability of the reduced map,
    :mod:`stsim.core.schedule`); the rate law with divisor ``d_e − 1`` (docs/theory.md §3–4).
    """
    t1 = theorem1_conditions(T, q, d, lr, eps)
    out = {f"{k} (Theorem 1's: 'the same')": dict(v, source="P") for k, v in t1.items()}
    out["width O~(d + q log T)"] = {
        "holds": None, "source": "P",
        "detail": f"the paper's encoding width, NOT checked here: the slots law needs d_e >= T "
                  f"(here d_e={d_e}); at d_e ~ q log T < T (sphere, near-orthogonal) the "
                  "dynamics have no exact reduction or enumeration to check against "
                  "(docs/theory.md, section 6)"}
    out["d_e > T (law really stochastic)"] = {
        "holds": bool(d_e > T), "source": "D",
        "detail": f"d_e={d_e}, T={T}; each slot used w.p. T/d_e = {T / d_e:.3g}"
                  + ("" if d_e > T else ": d_e = T is the fixed one-hot law")}
    if T_test:
        out["d_e >= max T_test (no OOD floor)"] = {
            "holds": bool(d_e >= max(T_test)), "source": "D",
            "detail": f"d_e={d_e}, max T_test={max(T_test)}"}
    out["lr < 2q (reduced-map stability)"] = {
        "holds": bool(lr < 2 * q), "source": "D", "detail": f"lr={lr:g}, 2q={2 * q}"}
    out["rate 1/L ~ 4 lr c^2 t/(d_e - 1)"] = {
        "holds": None, "source": "D", "detail": "checked below (t_eps and slope checks)"}
    return out
