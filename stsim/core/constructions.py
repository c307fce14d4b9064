"""The parameters that represent a target (:meth:`stsim.core.targets.Target.exact`) and
the cosines of a run's parameters to them: the exact construction of each target, the
metrics ``cos_W`` and ``cos_V`` (docs/targets.md, "The exact constructions")."""
from __future__ import annotations

import numpy as np

from stsim.core.targets import make_target

__all__ = ["construction", "target_params", "unique_V", "cosine_to_target", "NO_COS_V",
           "NO_COS_W"]


def construction(target, d: int, d_e: int, beta: float = 800.0) -> dict:
    """The parameters that represent ``target`` (a name or a
    :class:`~stsim.core.targets.Target`) with tokens of
    dimension ``d`` and encodings of width ``d_e``: ``W = β [[0, 0], [0, I_{d_e}]]``
    (selected logits ``β c`` above the others: at ``β = 800`` the attention is ``1/q`` on
    the selected tokens to the last bit for one-hot encodings), ``V = [V_x, 0]`` and, for
    the quadratic readout, ``b`` and ``Q`` (:meth:`~stsim.core.targets.Target.exact`)."""
    t = make_target(target)
    ex = t.exact(d)
    m = t.feature_dim(d)
    W = np.zeros((m + d_e, m + d_e))
    W[m:, m:] = beta * np.eye(d_e)
    V = np.zeros((t.dim(d), m + d_e))
    V[:, :m] = ex.pop("V_x")
    return {"W": W, "V": V, **ex}


def target_params(d: int, d_e: int, target="mean"):
    """The ``target``'s exact construction at unit scale (:func:`stsim.core.constructions.construction`
    with ``β = 1``): ``W* = [[0,0],[0,I_{d_e}]]`` and ``V* = [V_x*, 0]`` (``V_x*`` of
    :meth:`~stsim.core.targets.Target.exact`, on the features); for the mean, the ground
    truth of the paper's figures, ``V* = [I_d, 0]``. The quadratic readout's ``b*``,
    ``Q*``: ``construction``."""
    p = construction(target, d, d_e, beta=1.0)
    return p["W"], p["V"]


#: why a run records no ``cos_V`` for some targets (:func:`cosine_to_target`)
#: why no ``cos_W`` is recorded for a target whose attention is not on the named positions
NO_COS_W = ("no cos_W: the target's attention is not on the named position (the masked "
            "character is read from its neighbours), so W* = [[0,0],[0,I]] is not its "
            "construction")
NO_COS_V = ("no cos_V: the target's readout has no unique construction (the quadratic "
            "readout's constant b trades with V_e h_e, whose encoding weights sum to 1), "
            "or none is known")


def unique_V(target, d: int):
    """``V_x*`` of the ``target``'s construction (:meth:`~stsim.core.targets.Target.exact`)
    when it is the only ``V`` that represents the target given the ideal attention — the
    linear readout —, else None (:data:`NO_COS_V`)."""
    t = make_target(target)
    if not t.linear_readout:
        return None
    try:
        return t.exact(d)["V_x"]
    except NotImplementedError:
        return None


def cosine_to_target(W, V, d: int, target="mean"):
    """``(cos(W, W*), cos(V, V*))`` against the ``target``'s construction (``cos_W`` None,
    :data:`NO_COS_W`, for a target whose attention is not on the named positions)
    (:func:`target_params`; tokens of dimension ``d``, features ``φ`` of ``m`` numbers),
    ``cos(A, B) = <A,B>/(|A|_F |B|_F)`` (0 if A = 0, NaN if A holds a non-finite entry).

    ``W* = [[0,0],[0,I]]`` for every target, so ``<W, W*> = tr W_ee``; for the mean
    ``<V, V*> = tr V_x`` (no target matrix is built), for another target
    ``<V_φ, V_x*>``. ``cos_V`` is None (:data:`NO_COS_V`) where the construction of ``V``
    is not unique — the quadratic readout (``Σ_k (h_e)_k = 1`` for the one-hot and slot
    encodings, so ``V_e = u 1ᵀ`` with ``b − u`` represents the same function; the
    variance's V stays near 0.73 of its construction's direction while its loss falls) —
    or the target has no construction.
    """
    t = make_target(target)
    m = t.feature_dim(d)
    d_e = W.shape[0] - m
    nW, nV = np.linalg.norm(W), np.linalg.norm(V)

    def cos(tr, n, k):
        if not np.isfinite(n):
            return float("nan")
        return 0.0 if n == 0 else float(tr / (n * np.sqrt(k)))

    cos_W = cos(np.trace(W[m:, m:]), nW, d_e) if t.attends_to_named else None
    if t.paper:
        return cos_W, cos(np.trace(V[:, :d]), nV, d)
    Vx = unique_V(t, d)
    if Vx is None:
        return cos_W, None
    if not np.isfinite(nV):
        return cos_W, float("nan")
    return cos_W, 0.0 if nV == 0 else float(np.sum(V[:, :m] * Vx) / (nV * np.linalg.norm(Vx)))
