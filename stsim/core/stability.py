r"""How large a step of gradient descent may be: the stability bounds behind a run's
default step (:mod:`stsim.core.schedule` chooses the step from them; the measurements
behind the rules are in docs/model.md, "Stability with a batch" and "A step per block").

**Largest stable step** (``η_max``), population. In the coordinates ``(θ, γ)`` the map's
Jacobian is ``I − η diag(c²/(n−1), 1/d) H``; the γγ entry of the scaled Hessian is
``S₂ = |s|² ∈ [1/T, 1/q)``, largest at the solution, and the θθ entry is
``O(c² d/(q(n−1)))``, negligible. Hence ``η_max(reduced) = 2/sup S₂ = 2q``. Off the
invariant set, W's token rows ``W_xe`` have curvature ``λ_xe = c² (q−1)(q+d)/n`` at the
solution (scatter of the q selected tokens; checked by finite differences), so the
population bound is ``min(2q, 2n/(c²(q−1)(q+d)))``.

**Stability with a batch.** A step on the mean gradient of ``B`` samples uses the
minibatch curvature ``H_B = (1/B) Σ_b H_b``, which fluctuates around ``H``. Along a
direction ``u`` of population curvature ``λ`` the mean square of the deviation then obeys
``e² ← e² (1 − 2ηλ + η² (λ² + v/B))``, ``v = E[uᵀH_b²u] − λ²``, stable for
``η < 2λ/(λ² + v/B)``. With the Gauss–Newton ``H_b = J_bᵀ J_b`` (``J_b``: the sample's
output Jacobian), ``uᵀH_b²u = (J_b u)ᵀ (J_b J_bᵀ)(J_b u)``, so ``v ≈ κ λ`` with ``κ`` the
curvature one sample puts on its own output (per output dimension), summed over every
block the step moves. At the solution (``s = 1/q`` on the selected tokens, ``γ = 1``,
``X`` Gaussian):

* V: ``J_V J_Vᵀ = |h|² I`` with ``h = [X s; P s]``; the fourth Gaussian moment
  ``E[|h|² (h·e)²] = (d + 3) S₂²`` gives ``(d + 2)/q`` beyond ``λ = 1/q``;
* ``W_ee``: ``J_W J_Wᵀ = c² q γ² X Σ_s² Xᵀ`` (``Σ_s = diag s − s sᵀ``), trace
  ``c² d (q−1)/q``: ``c² (q−1)/q`` per output dimension;
* ``W_xe`` (when W's token rows move): ``c² q γ² (X Σ_s Xᵀ)²``, a Wishart square:
  ``c² (q−1)(q+d)/q`` per output dimension (= ``λ_xe n/q``: one sample loads the q query
  slots of the n).

So with ``κ`` their sum (:func:`sample_curvature`) the single step is stable for

    η < η_max(B) = 2 / (max(1/q, λ_xe) + κ/B),

which is ``min(2q, 2n/(c²(q−1)(q+d)))`` as ``B → ∞`` and falls to about ``2/κ`` at
``B = 1``. The default ``lr = η_max(B)/2`` (half, for the fluctuation of ``γ`` around 1
and of the curvature beyond its mean square). For the practical model with
``query="sum"`` a further factor 1/2 is applied: MEASURED, not derived (lr = q diverged at
T=50, q=3; the query token's own logit grows like ``c² q a``).

**A step per block** (the default for SGD with minibatches when it helps,
:func:`derived_steps`). The bound ``2q`` is V's; W's own reduced direction is stable to
``η_W ≈ 2(n−1)/(c² sup L_θθ)``, of order n. Three things keep SGD from using it. (i)
``W_xe``: its minibatch gradient makes it diffuse from zero, which holds the escape back,
and its bound ``η_xe(B)`` is small: holding W's token rows ``W_xx, W_xe`` at their
population value 0 removes both. (ii) The additive noise in ``W_ee`` on the plateau: a
sample's gradient has variance ``c² γ² d/(q T²)`` on each of its ``T q`` of the ``n²``
entries; over a plateau of ``∝ T n/(c² η_W)`` steps a token's logit noise grows to
``σ² ∝ c² q d η_W/(B n)`` (T cancels), and ``σ²`` among the selected logits costs ``≈ σ² L(0)``:
reaching 2% of L(0) caps ``η_W ∝ B n/(c² q d)`` (the constant :data:`NOISE_W` MEASURED).
(iii) The mean-square bound of *Stability with a batch* on ``W_ee``'s own directions,
``η_W < 2B/κ_W``, ``κ_W = c² q γ² tr Σ_s²`` (:func:`kappa_W`): ``c²(q−1)/q`` at the
solution, but γ overshoots while the attention concentrates and ``κ_W`` peaks near ``c²``
(the limit of a diffuse attention with γ at its optimum ``s₊/S₂``); as (ii) makes
``η_W ∝ n``, this bound binds at large T. The cap ``B/c²`` — half that bound with
``κ_W ≤ c²`` (:data:`KAPPA_W`) — is CALIBRATED, not derived: ``κ_W`` is the mean eigenvalue
of one sample's output Gram matrix, while a mean-square bound per direction needs
``E tr((JJᵀ)²)/E tr(JJᵀ)`` (about 2.7 ``κ_W`` at the T = 200 peak); the cap was set on
single-seed runs (docs/model.md, "A step per block": T = 500, n = 4000 failed at
``η_W = 400`` and reached 2% at 256; the T = 2000 default learned at 256 = ``B/c²``) and
its margin measured on 3 seeds at T = 1000 and 2000 (docs/model.md, "The cap's margin":
every seed reaches 2% at ``B/c²``, none at 1.5 ``B/c²``):

    η_W = min(NOISE_W · B n/(c² q d), B/c²),     η_V = η_max(B)/2 without the W_xe term,

the second binding for ``n > q d/NOISE_W`` (2 560 at q = 3, d = 5; any B, c). Used, with
``freeze = ("W_xx", "W_xe")``, when ``η_W`` exceeds the single step.

**Heavy tails** (another target's features ``φ``, ``m = dim φ``, ``E φ = 0``,
``E φφᵀ = I``: :func:`fourth_excess`). The Gaussian fourth moment above enters two batch
terms. (i) V: with independent tokens and weights ``s``,
``E[|h_φ|² (h_φ·e)²] = (m + 2) S₂² + S₄ (M_V − m − 2)``, ``M_V = E[|φ|² (eᵀφ)²]``
(largest over unit ``e``), ``S₄ = Σ s_i⁴ = 1/q³`` at the solution, so V's ``κ`` gains
``ε_V/q²``, ``ε_V = M_V − (m + 2)``. (ii) ``W_ee``: the mean square of one sample's output
Gram ``J Jᵀ = c² q γ² Φ A Φᵀ`` (``A = Σ_s²``, ``Φ`` the features of the tokens) per unit
of its mean, ``E tr((JJᵀ)²)/E tr(JJᵀ)``, is the Gaussian one plus
``c² q γ² ε₄ Σ_i A_ii²/(m tr A)``, ``ε₄ = E|φ|⁴ − m(m + 2)``; at the solution
(``A = (I − J/q)/q²`` on the selected tokens) that is ``c² ε_W``,
``ε_W = ε₄ (q − 1)/(m q²)``, added to W_ee's calibrated ``KAPPA_W`` in the cap. Both are
0 for Gaussian features (the mean: unchanged); ``moment:3`` (``E h_3⁴ = 93``):
``ε_V = 90``, ``ε_W = 20`` at ``d = 5``, ``q = 3``. Derived; the cap they scale stays
calibrated, and the plateau-noise rule (``NOISE_W``) keeps its Gaussian measurement.
"""
from __future__ import annotations

import math

__all__ = ["sample_curvature", "kappa_W", "eta_V_max", "eta_xe_max", "eta_max", "eta_W_block",
           "eta_W_cap", "fourth_excess", "SAFETY", "NOISE_W", "KAPPA_W"]

SAFETY = 0.5           # lr = SAFETY * eta_max
#: W's step per unit of B n/(c² q d) with its token rows held (eta_W_block): MEASURED
#: (docs/model.md, "A step per block"): n/10 at q = 3, d = 5, B = 256, half of n/5
NOISE_W = 0.00586
#: the bound on κ_W/c² along the descent (kappa_W; module docstring, *A step per block*):
#: the limit of a diffuse attention with γ at its optimum (map: 0.66-0.99); the cap B/c² it
#: gives is CALIBRATED (T = 500 on one seed; T = 1000 and 2000 on 3 seeds: docs/model.md,
#: "The cap's margin"), not derived
KAPPA_W = 1.0


def sample_curvature(q: int, d: int, c: float = 1.0, token_rows: bool = True,
                     excess: float = 0.0) -> float:
    """``κ``: the curvature one sample puts on the output at the solution, per output
    dimension, summed over the blocks a step moves (module docstring, *Stability with a
    batch*): ``(d + 2 + ε_V/q)/q`` (V; ``excess`` ``ε_V``: the features' fourth moment
    beyond the Gaussian's, :func:`fourth_excess`) ``+ c²(q−1)/q`` (``W_ee``)
    ``+ c²(q−1)(q+d)/q`` (``W_xe``, when W's token rows move)."""
    k = (d + 2.0 + excess / q) / q + c * c * (q - 1.0) / q
    return k + (c * c * (q - 1.0) * (q + d) / q if token_rows else 0.0)


def kappa_W(a: float, gamma: float, T: int, q: int, c: float = 1.0) -> float:
    """``κ_W``: the curvature one sample puts on its own output through ``W_ee`` (per
    output dimension) on the reduced state ``W_ee = a I − b J``, ``V_x = γ I`` of the
    theory model (module docstring, *A step per block*): ``c² q γ² tr Σ_s²`` with
    ``Σ_s = diag s − s sᵀ``, ``tr Σ_s² = S₂ − 2 S₃ + S₂²``, ``S_k = q s₊^k + (T − q) s₋^k``
    (``c²(q−1)/q`` at the solution)."""
    th = c * a
    m = max(th, 0.0)
    e_sel, e_dec = math.exp(th - m), math.exp(-m)
    Z = q * e_sel + (T - q) * e_dec
    sp, sm = e_sel / Z, e_dec / Z
    S2 = q * sp * sp + (T - q) * sm * sm
    S3 = q * sp ** 3 + (T - q) * sm ** 3
    return c * c * q * gamma * gamma * (S2 - 2.0 * S3 + S2 * S2)


def eta_V_max(q: int, d: int, batch: int | None = None, c: float = 1.0,
              token_rows: bool = True, excess: float = 0.0) -> float:
    """V's bound ``2/(1/q + κ/B)`` (``2q`` for the population, ``batch=None``; ``κ``:
    :func:`sample_curvature`, with ``excess``): the mean-square stability of the step
    along V at the solution, where V's population curvature is ``S₂ = 1/q``."""
    if batch is None:
        return 2.0 * q
    return 2.0 / (1.0 / q + sample_curvature(q, d, c, token_rows, excess) / batch)


def eta_xe_max(q: int, d: int, n: int, c: float = 1.0, batch: int | None = None,
               excess: float = 0.0) -> float:
    """W's transverse bound ``2/(λ_xe + κ/B)``, ``λ_xe = c²(q−1)(q+d)/n`` (``2/λ_xe`` for
    the population; ``κ`` with ``excess``); ``inf`` for ``q = 1`` (no transverse
    curvature)."""
    if q <= 1:
        return math.inf
    lam = c * c * (q - 1) * (q + d) / n
    return 2.0 / lam if batch is None else \
        2.0 / (lam + sample_curvature(q, d, c, excess=excess) / batch)


def eta_max(q: int, d: int, n: int, c: float = 1.0, batch: int | None = None,
            excess: float = 0.0) -> float:
    """The largest stable single step, ``min(η_V, η_xe)``: ``min(2q, 2n/(c²(q−1)(q+d)))``
    for the population (``batch=None``); for minibatches of ``B``,
    ``2/(max(1/q, λ_xe) + κ/B)`` (module docstring; ``κ`` with the features' ``excess``
    ``ε_V``, :func:`fourth_excess`); ``n = T`` (onehot) or ``d_e`` (slots)."""
    return min(eta_V_max(q, d, batch, c, excess=excess),
               eta_xe_max(q, d, n, c, batch, excess))


def eta_W_block(q: int, d: int, n: int, c: float = 1.0, batch: int | None = None,
                excess: float = 0.0) -> float:
    """W's own step when its token rows are held at 0 (module docstring, *A step per
    block*): ``min(NOISE_W · B n/(c² q d), SAFETY · 2B/(c² (KAPPA_W + ε_W)))`` — the
    smaller of the step whose minibatch noise in ``W_ee`` stays well below the 2% level
    over the plateau (MEASURED constant :data:`NOISE_W`) and half W_ee's mean-square bound
    ``2B/κ_W`` during the descent (``κ_W ≤ c² KAPPA_W``; the cap is calibrated, not
    derived, module docstring); ``excess`` ``ε_W``: what the features' fourth moment
    adds to it beyond the Gaussian's (:func:`fourth_excess`); ``inf`` for the
    population."""
    if batch is None:
        return math.inf
    return min(NOISE_W * batch * n / (c * c * q * d), eta_W_cap(batch, c, excess))


def eta_W_cap(batch: int, c: float = 1.0, excess: float = 0.0) -> float:
    """The cap of W's own step (:func:`eta_W_block`): ``SAFETY · 2B/(c² (KAPPA_W + ε_W))``,
    ``B/c²`` for Gaussian features (CALIBRATED, module docstring)."""
    return SAFETY * 2.0 * batch / (c * c * (KAPPA_W + excess))


def fourth_excess(target, d: int, q: int) -> tuple:
    """``(ε_V, ε_W)``: what the fourth moments of ``target``'s features (its
    :meth:`~stsim.core.targets.Target.fourth_moments` ``(M_V, M_4)``, ``m = dim φ``) add,
    beyond Gaussian features, to one sample's curvature at the solution (module docstring,
    *Heavy tails*): ``ε_V = M_V − (m + 2)`` to V's ``κ`` (as ``ε_V/q²``) and
    ``ε_W = (M_4 − m(m + 2))(q − 1)/(m q²)`` to W_ee's ``κ_W/c²``; ``(0, 0)`` for
    Gaussian features, or when the target does not know its moments (then assumed)."""
    mom = None if target is None else target.fourth_moments(d)
    if mom is None:
        return 0.0, 0.0
    m = target.feature_dim(d)
    return mom[0] - (m + 2.0), (mom[1] - m * (m + 2.0)) * (q - 1.0) / (m * q * q)
