r"""Drawing only what the gradient needs: a batch's tokens through their statistics.

**Where it holds.** The mean task (``target="mean"``, Gaussian tokens ``x_i ~ N(0, I_d)``),
the query token's feature part 0 (``x_q = 0``, the paper's), W's token rows
``W_xe = 0`` (held: ``"W_xe"`` in ``freeze``, from an initialisation where they are 0),
the merged ``W`` (no ``rank``), the online objective, either model, any encoding and any
mechanism whose weights are a function of the logits. Then every logit is positional,
``a_i = x_iᵀ W_xe p_q + p_iᵀ W_ee p_q = p_iᵀ W_ee p_q``, so the weights ``s`` (the
practical model's token part ``s_{1..T}``) do not depend on the tokens.

**What the step reads of the tokens.** Write ``X`` for the (T, d) token matrix of one
sample and ``B = [s, u/q]`` (T × 2) with ``u = 1_y``. The loss and ``∂ℓ/∂V`` read the
tokens through ``m = Xᵀ s`` (the attended sum, ``h``'s token part) and the target
``t = Xᵀ u / q``; ``∂ℓ/∂W``'s positional part reads ``c = X w`` with ``w = V_xᵀ r``
(``g_i = c_i + p_iᵀ V_eᵀ r``), a function of ``(m, t)`` and the parameters; W's token rows
read ``Xᵀ δ`` (``δ`` the weights' Jacobian applied to ``g``).

**The law.** Let ``Q = [q_1, q_2]`` be an orthonormal basis of a space containing
``span B`` (Gram–Schmidt: ``q_1 = s/|s|``, ``q_2`` ∝ ``u/q − (q_1·u/q) q_1``, 0 when that
is 0), ``R = Qᵀ B``. The columns of ``X`` are i.i.d. ``N(0, I_T)``, so
``X = Q ν + (I − QQᵀ) Ξ`` in law, with ``ν = QᵀX`` (2 × d) and ``Ξ`` (T × d) independent
i.i.d. standard normals. Then, exactly:

* ``[m, t] = νᵀ R``: ``m = |s| ν_1``, ``t = r_12 ν_1 + r_22 ν_2``
  (``r_12 = Σ_{j∈y} s_j / (q |s|)``, ``r_22 = |u/q − r_12 q_1|``) — covariances ``|s|²``,
  ``1/q`` and ``Σ_{j∈y} s_j / q``;
* ``w`` is a function of ``ν`` and the parameters, and ``Ξ w ~ |w| ζ`` with ``ζ ~ N(0, I_T)``
  independent of ``ν``: ``c = Q (ν w) + |w| (I − QQᵀ) ζ``;
* with ``v = (I − QQᵀ) δ``: ``Xᵀ δ = νᵀ Qᵀ δ + Ξᵀ v``, and given ``Ξ w = |w| ζ``,
  ``Ξᵀ v = ŵ (ζ·v) + |v| (I − ŵŵᵀ) ξ`` with ``ŵ = w/|w|`` (0 when ``w = 0``) and
  ``ξ ~ N(0, I_d)`` independent (the Gaussian conditional of ``Ξᵀ v`` on ``Ξ w``).

So the joint law of ``(m, t, c, Xᵀ δ)`` given the positions, the subset and the
parameters is that of a draw of all ``T·d`` token entries: the loss and every gradient
have the same distribution, step after step (the next parameters are a function of these
and of the positional draws). A sample costs ``T + 3d`` normals instead of ``T·d``, and
no (T, d) array is formed. It is exact in distribution, not bit for bit (other normals
are drawn), so a run records its ``draws``. It does not hold with W's token rows free
(the logits then read the tokens: the weights are no function of the positions alone),
for another target (the variance's is not linear in the tokens) or with ``x_q ≠ 0``.
The derivation is in docs/model.md, "Drawing only what the gradient needs".

:class:`TokenStats` stands in the place of the (B, T, d) token array in the step's
kernels (:mod:`stsim.core.kernels`): its :meth:`TokenStats.combine` is ``Σ_i s_i x_i`` and its
:meth:`TokenStats.project` is ``X w``, in the order the step calls them (the weights' combination
first, then the projection, then the combination of ``δ``).
"""
from __future__ import annotations

import numpy as np

from stsim.util.validate import check_choice

__all__ = ["TokenStats", "DRAWS", "resolve_draws"]

#: the values of a run's ``draws``
DRAWS = ("auto", "tokens", "statistics")
#: below this |u/q − r_12 q_1| (relative to |u/q|) ``u`` lies in span(s): q_2 = 0
_RANK_TOL = 1e-13


class TokenStats:
    """The tokens of a batch of ``B`` sequences of length ``T`` in ``d`` dimensions,
    drawn through their statistics (module docstring): ``ν`` (2, B, d), ``ζ`` (B, T),
    ``ξ`` (B, d) and the subsets ``y`` (B, q). ``shape`` is the token array's,
    ``target`` the (B, d) array ``t`` that :meth:`combine` fills. A basic slice of the
    batch (``stats[a:b]``) is a view whose computed arrays are the batch's."""

    def __init__(self, nu, zeta, xi, y, *, _state=None):
        B, T = zeta.shape
        self.nu, self.zeta, self.xi, self.y = nu, zeta, xi, y
        self.shape = (B, T, nu.shape[2])
        if _state is None:
            d = nu.shape[2]
            _state = {"target": np.empty((B, d)), "Q": np.empty((2, B, T)),
                      "coef": np.empty((3, B)), "w": np.empty((B, d)),
                      "phase": np.zeros(B, dtype=np.int8)}
        self._state = _state
        self.target = _state["target"]

    @classmethod
    def draw(cls, rng: np.random.Generator, y: np.ndarray, T: int, d: int) -> "TokenStats":
        """Fresh normals for the subsets ``y`` (B, q): ``ν``, then ``ζ``, then ``ξ``."""
        B = y.shape[0]
        nu = rng.standard_normal((2, B, d))
        zeta = rng.standard_normal((B, T))
        xi = rng.standard_normal((B, d))
        return cls(nu, zeta, xi, y)

    def __getitem__(self, sl):
        if not isinstance(sl, slice):
            raise TypeError("a TokenStats takes a basic slice of its batch")
        st = self._state
        part = {"target": st["target"][sl], "Q": st["Q"][:, sl], "coef": st["coef"][:, sl],
                "w": st["w"][sl], "phase": st["phase"][sl]}
        return type(self)(self.nu[:, sl], self.zeta[sl], self.xi[sl], self.y[sl], _state=part)

    # ---- the two maps of the step, in its order (phases 0 -> 1 -> 2 -> 3) ------------
    def _phase(self, allowed, what):
        ph = self._state["phase"]
        p = int(ph[0]) if ph.size else allowed[0]
        if p not in allowed:
            raise RuntimeError(f"TokenStats: {what} out of the step's order (phase {p}): a "
                               f"batch drawn through its statistics serves one step")
        return p

    def combine(self, s: np.ndarray) -> np.ndarray:
        """``Σ_i s_i x_i``, (B, T) -> (B, d). The first call (the weights) draws ``m`` and
        fills :attr:`target`; the call after :meth:`project` (``δ``) gives ``Xᵀ δ``."""
        if self._phase((0, 2), "combine") == 0:
            return self._attend(s)
        return self._transpose(s)

    def _attend(self, s):
        st, y = self._state, self.y
        q = y.shape[1]
        q1, q2 = st["Q"][0], st["Q"][1]
        n1 = np.sqrt(np.einsum("bt,bt->b", s, s))
        np.divide(s, n1[:, None], out=q1)
        r12 = np.take_along_axis(q1, y, axis=1).sum(axis=1) / q      # q_1·u/q
        np.multiply(q1, -r12[:, None], out=q2)                        # u/q − r_12 q_1
        rows = np.arange(y.shape[0])[:, None]
        q2[rows, y] += 1.0 / q
        q2 -= np.einsum("bt,bt->b", q1, q2)[:, None] * q1            # again: orthogonal
        r22 = np.sqrt(np.einsum("bt,bt->b", q2, q2))
        full = r22 > _RANK_TOL / np.sqrt(q)
        q2 *= np.where(full, 1.0 / np.where(full, r22, 1.0), 0.0)[:, None]
        r22 = np.where(full, r22, 0.0)
        nu1, nu2 = self.nu
        self.target[...] = r12[:, None] * nu1 + r22[:, None] * nu2
        coef = st["coef"]
        coef[0] = np.einsum("bt,bt->b", q1, self.zeta)                # q_1·ζ
        coef[1] = np.einsum("bt,bt->b", q2, self.zeta)                # q_2·ζ
        st["phase"][...] = 1
        return n1[:, None] * nu1

    def project(self, w: np.ndarray) -> np.ndarray:
        """``X w``, (B, d) -> (B, T): ``Q (ν w) + |w| (I − QQᵀ) ζ``. Before the weights
        are combined it is the logits' token term ``x_iᵀ W_xe p_q``, which must be 0
        (``ValueError`` otherwise: the statistics do not hold)."""
        st = self._state
        if self._phase((0, 1), "project") == 0:
            if np.any(w):
                raise ValueError("draws='statistics' needs W's token rows W_xe = 0 (the "
                                 "logits then read no token): W_xe is not 0; use "
                                 "draws='tokens'")
            return np.zeros(self.shape[:2])
        nu1, nu2 = self.nu
        q1, q2 = st["Q"]
        coef = st["coef"]
        nw = np.sqrt(np.einsum("bd,bd->b", w, w))
        a1 = np.einsum("bd,bd->b", nu1, w) - nw * coef[0]
        a2 = np.einsum("bd,bd->b", nu2, w) - nw * coef[1]
        c = nw[:, None] * self.zeta
        c += a1[:, None] * q1
        c += a2[:, None] * q2
        st["w"][...] = w
        coef[2] = nw
        st["phase"][...] = 2
        return c

    def _transpose(self, delta):
        st = self._state
        nu1, nu2 = self.nu
        q1, q2 = st["Q"]
        w, nw = st["w"], st["coef"][2]
        b1 = np.einsum("bt,bt->b", q1, delta)
        b2 = np.einsum("bt,bt->b", q2, delta)
        v = delta - b1[:, None] * q1
        v -= b2[:, None] * q2
        nv = np.sqrt(np.einsum("bt,bt->b", v, v))
        zv = np.einsum("bt,bt->b", self.zeta, v)
        wh = w * np.where(nw > 0, 1.0 / np.where(nw > 0, nw, 1.0), 0.0)[:, None]
        perp = self.xi - np.einsum("bd,bd->b", wh, self.xi)[:, None] * wh
        st["phase"][...] = 3
        return b1[:, None] * nu1 + b2[:, None] * nu2 + zv[:, None] * wh + nv[:, None] * perp



def _why_not(cfg, freeze=None) -> str:
    """Why a run of the resolved ``cfg`` (its plan made) cannot draw its tokens through
    their statistics (module docstring, *Where it holds*), or ``""``; ``freeze``: the blocks
    held, when the plan deciding them is being made (None: ``cfg.freeze``)."""
    r = cfg.resolved
    freeze = cfg.freeze if freeze is None else freeze
    if not r.arch.transformer:
        return f"arch={cfg.arch!r} reads every token (the statistics are the attention model's)"
    if cfg.objective != "online":
        return (f"objective={cfg.objective!r} (the statistics are drawn afresh for each step's "
                f"weights: only the online objective draws a fresh batch every step)")
    if r.target is None or not r.target.paper:
        return (f"target={cfg.target!r} (the statistics are those of the mean of Gaussian "
                f"tokens)")
    if cfg.rank is not None:
        return "rank is given (W = W_K^T W_Q: its token rows W_xe cannot be held at 0)"
    if "W_xe" not in (freeze or ()):
        return ("W's token rows W_xe are trained (freeze does not hold W_xe): the logits then "
                "read the tokens")
    if cfg.init not in (None, "zero", "random_rows0"):
        return (f"init={cfg.init!r} (W_xe must start at 0: init zero or random_rows0)")
    return ""


def resolve_draws(cfg, freeze=None) -> str:
    """The run's ``draws`` from its config's (``"auto"``: ``"statistics"`` where they hold,
    else ``"tokens"``); ``ValueError`` naming ``draws`` for ``"statistics"`` where they do
    not hold, saying why. ``freeze``: as :func:`_why_not`'s."""
    draws = check_choice("draws", cfg.draws, DRAWS, ignore_case=True)
    if draws == "tokens":
        return draws
    why = _why_not(cfg, freeze)
    if draws == "statistics" and why:
        raise ValueError(f"draws='statistics' does not hold for this run: {why}; use "
                         f"draws='tokens' (or 'auto')")
    return "tokens" if why else "statistics"
