r"""Attention mechanisms: the map from logits to attention weights, each forward formula
beside its derivative, and the key/query pair of rank r.

The model of :mod:`stsim.core.model` is ``f = V Z s`` with logits ``a = Zᵀ W z_q`` (one per
attended token: ``N = T`` in the theory model, ``T + 1`` in the practical one). Softmax
attention is one choice of ``s``; every mechanism here is a map ``l ↦ s`` of the scaled
logits ``l = a/τ`` (temperature ``τ > 0``; ``τ = 1`` is the paper's model), and enters the
backward only through the vector-Jacobian product ``δ = ∂ℓ/∂a`` from ``g = ∂ℓ/∂s``
(``g_i = z_iᵀ Vᵀ r``, module docstring of :mod:`stsim.core.model`)::

    mechanism          forward s_i                     backward δ_i = ∂ℓ/∂a_i
    softmax            e^{l_i} / Σ_k e^{l_k}           s_i (g_i − Σ_k s_k g_k) / τ
    linear             l_i                             g_i / τ
    relu               max(l_i, 0) / n                 g_i 1[s_i > 0] / (n τ)
    sigmoid            σ(l_i) / n                      g_i s_i (1 − n s_i) / τ
    sigmoid-bias       σ(l_i − ln N)                   g_i s_i (1 − s_i) / τ

``σ(l) = 1/(1 + e^{−l})``; ``n = 1`` for the unnormalised element-wise mechanisms
(``"relu"``, ``"sigmoid"``) and ``n = N`` (the number of attended tokens) for the
length-normalised ones (``"relu-norm"``, ``"sigmoid-norm"``, the ``relu(l)/N`` of the
ReLU-attention literature). The sigmoid's backward uses ``σ'(l) = σ(1 − σ)`` with
``σ = n s``, so every backward needs ``s`` only (``relu'(0)`` is taken as 0).
``"sigmoid-bias"`` carries the fixed logit bias ``β = −ln N`` of the sigmoid-attention
literature (:meth:`Attention.bias`): without it the unselected tokens' logits are centred
at 0 and keep weights near ½. A constant added to ``l_i`` leaves ``∂s_i/∂l_i = σ'(l_i + β)
= s_i (1 − s_i)``, so ``δ_i = g_i s_i (1 − s_i)/τ`` as for the unbiased sigmoid (β fixed:
no gradient of its own; float64 finite differences in ``tests/test_attention.py``). Linear
attention has no normalisation and no ``1/T`` scale: ``f = V Z (Zᵀ W z_q)``, so that
``W_ee = I/q``, ``V = [I 0]`` solves STS_q exactly with one-hot encodings and the sum query
(``W_ee = I`` with the mean query; docs/attention.md).

**Stationary zero initialisation.** ``linear`` and ``relu`` (normalised or not) give
``s = 0`` at ``W = 0``, so ``h = Z s = 0``, ``∂ℓ/∂V = r hᵀ = 0`` and, with ``V = 0``,
``g = 0`` and ``∂ℓ/∂W = 0``: zero is a stationary point (:attr:`Attention.zero_saddle`).
Softmax and sigmoid give ``s ≠ 0`` at zero (uniform; ``1/2``), so ``V`` gets a gradient.

**Temperature ↔ step.** With ``W' = W/τ`` the logits at temperature ``τ`` are those of
``W'`` at ``τ = 1``, so ``∇_W L_τ(W, V) = (1/τ) ∇L_1(W', V)`` and gradient descent on
``(W, V)`` with step ``η`` is gradient descent on ``(W', V)`` at ``τ = 1`` with step
``η/τ²`` on ``W'`` and ``η`` on ``V`` (any mechanism; tested trajectory against trajectory).

**Rank r.** ``W = W_Kᵀ W_Q`` with ``W_K, W_Q`` of shape ``(r, D)``. From
``dℓ = <G, dW_Kᵀ W_Q + W_Kᵀ dW_Q>``, ``G = ∂ℓ/∂W``::

    ∂ℓ/∂W_K = W_Q Gᵀ          ∂ℓ/∂W_Q = W_K G

so ``W_K = W_Q = 0`` is stationary for every mechanism (both gradients vanish).

**A mechanism is one class**: its map and derivative and all the schedule, the reduced
dynamics, the theory and the studies ask of it (:class:`Attention`). A built-in one is a
row of :data:`MECHANISMS`; one's own is an object passed in (docs/attention.md).
"""
from __future__ import annotations

import copy

import numpy as np

from stsim.core.kernels import _jacobian, _softmax_rows
from stsim.core.reduced import loss_grad
from stsim.util.validate import Steps, check_choice, check_int, check_real

__all__ = ["Attention", "Softmax", "Linear", "ReLU", "Sigmoid", "MECHANISMS", "ATTENTIONS",
           "make_attention", "DENSE_CAP", "TAU_RANGE", "check_temperature",
           "lowrank_W", "lowrank_grad", "check_rank", "resolve_mechanism"]

#: with dense encodings, sphere or near-orthogonal, a measured rule's lr is multiplied by
#: ``min(DENSE_CAP, d_e/(4T))`` — MEASURED (docs/attention.md, "Defaults of a run"; linear
#: attention with near-orthogonal encodings, d_e = 16, was stable at 0.15 at T = 12 and
#: 0.075 at T = 20): the tokens' positions leak into every logit
DENSE_CAP = 0.5
_PAPER_LR = "the paper model's derived lr (measured to be stable)"
#: the temperatures a mechanism takes: τ enters as ``1/τ`` in the logits and as ``τ^±2`` in
#: the steps (the equivalent W step ``η/τ²``, ``eta_max ∝ τ²``); within 1e-100 … 1e100 both
#: ``τ^±2`` stay within 1e±200, leaving 1e108 before float64 overflow (1.8e308) or
#: underflow (2.2e-308) for the steps and losses they multiply (beyond it, ``τ²`` is 0 or
#: inf: a division by zero or an overflow). Runs at both ends complete like τ = 1.
TAU_RANGE = (1e-100, 1e100)


def check_temperature(temperature, name="temperature") -> float:
    """``temperature`` as a float in :data:`TAU_RANGE` (``ValueError`` naming ``name``)."""
    return check_real(name, temperature, lo=TAU_RANGE[0], hi=TAU_RANGE[1])


class Attention:
    """A map from logits to attention weights with its vector-Jacobian product.

    Subclasses implement :meth:`phi` (the weights of scaled logits, vectorised, for the
    reduced dynamics too) and :meth:`dphi_from_s`; :meth:`weights` and :meth:`backward`
    apply them to a batch of logits ``(B, N)``. They declare the class attributes below
    (what the run, the theory and the studies read) and may override :meth:`default_lr`,
    :meth:`map_step`, :meth:`reduced`.

    Parameters
    ----------
    temperature : float
        ``τ`` in :data:`TAU_RANGE`: the logits are divided by ``τ`` before the map.
    """

    name = "attention"
    zero_saddle = False      # W = 0, V = 0 is a stationary point (module docstring)
    elementwise = True       # s_i depends on l_i only (and the constant n)
    normalised = False       # divided by n = N, the number of attended tokens
    homogeneous = False      # φ(kl) = kφ(l) for k > 0: the sphere family's ratio is scale-free
    paper = False            # the paper's model (softmax at τ = 1)
    #: the weights are ``softmax(l/τ)``: the sphere family's loss is softmax's at ``a/τ``
    #: (:func:`stsim.theory.family.best_family_loss`)
    softmax_family = False
    #: ``(k, cap)``: the MEASURED default step ``lr = min(cap, k/T)`` of an unnormalised
    #: element-wise mechanism (:meth:`default_lr`); None: none measured
    measured_lr = None

    def __init__(self, temperature: float = 1.0):
        self.temperature = check_temperature(temperature)

    def at(self, temperature):
        """This mechanism at ``temperature`` (a copy)."""
        new = copy.copy(self)
        new.temperature = check_temperature(temperature)
        return new

    # -- what the schedule and the reduced dynamics ask ----------------------------------
    def default_lr(self, T, q, d, n, c, paper_lr, rank=None, dense=False, d_e=None):
        """``(lr, words)``: the default SGD step of a run (``n``, ``c``: the reduced map's;
        ``paper_lr``: the paper model's derived step; ``dense``: dense encodings of width
        ``d_e``). Here MEASURED, the built-in rules calibrated on default runs at T = 8, 20,
        50, q = 2, 3, 3 seeds (docs/attention.md, "Defaults of a run"): ``paper_lr`` when
        normalised, else :attr:`measured_lr`, times ``min(DENSE_CAP, d_e/(4T))`` when
        ``dense``; ``ValueError`` naming ``lr`` for a subclass that declares neither."""
        if self.elementwise and self.normalised:
            return paper_lr, _PAPER_LR
        if self.measured_lr is None:
            raise ValueError(f"no default lr is known for the {self.label} mechanism: give lr, "
                             f"or declare a rule on its class (measured_lr = (k, cap), "
                             f"normalised = True or a default_lr method; docs/attention.md)")
        k, cap = self.measured_lr
        lr, why = min(cap, k / T), f"min({cap:g}, {k:g}/T) (measured)"
        if dense:
            lr *= min(DENSE_CAP, d_e / (4.0 * T))
            why += f" x min({DENSE_CAP:g}, d_e/(4T)) (dense encodings, measured)"
        return lr, why

    def map_step(self, lr):
        """The step of :func:`stsim.core.reduced.reduced_map` (softmax at τ = 1) that this
        mechanism's reduced GD at step ``lr`` is, or None when it is none: the default step
        count is then measured (:func:`stsim.core.attention_dynamics.mechanism_schedule`)."""
        return None

    def bias(self, N) -> float:
        """The fixed logit bias ``β`` added to the scaled logits when ``N`` tokens are
        attended (0 here; ``−ln N`` for ``"sigmoid-bias"``)."""
        return 0.0

    def reduced(self, a, b, g, T, q, d, c=1.0, practical=False):
        """``L`` and ``(∂L/∂a, ∂L/∂b, ∂L/∂γ)`` on ``W_ee = aI − bJ``, ``V_x = γI`` at
        ``τ = 1`` (arrays): for an element-wise mechanism the formula of
        :mod:`stsim.core.attention_dynamics` with ``l₊ = c(a − bq) + β``, ``l₋ = −cbq + β``
        (:meth:`bias` at ``N`` tokens; the temperature enters there,
        :func:`~stsim.core.attention_dynamics.reduced_loss_grad`)."""
        if not self.elementwise:
            raise ValueError(f"no reduced dynamics for the {self.label} mechanism")
        r = T - q
        N = T + 1 if practical else T
        nN = N if self.normalised else 1.0
        beta = self.bias(N)
        lp, lm = c * (a - b * q) + beta, -c * b * q + beta
        sp, sm = self.phi(lp) / nN, self.phi(lm) / nN
        S2 = q * sp * sp + r * sm * sm
        L = 0.5 * d * (S2 * g * g - 2.0 * sp * g + 1.0 / q)
        Dp = d * g * (q * g * sp - 1.0) * self.dphi(lp) / nN
        Dm = d * g * g * r * sm * self.dphi(lm) / nN
        return L, c * Dp, -c * q * (Dp + Dm), d * (S2 * g - sp)

    @property
    def label(self) -> str:
        """The mechanism's name, with the temperature when it is not 1."""
        t = self.temperature
        return self.name if t == 1.0 else f"{self.name}(temperature={t:g})"

    def __repr__(self):
        norm = f", normalised={self.normalised}" if "normalised" in vars(self) else ""
        norm += ", log_bias=True" if getattr(self, "log_bias", False) else ""
        return f"{type(self).__name__}(temperature={self.temperature!r}{norm})"

    def _key(self):
        return (type(self).__name__, self.temperature, self.normalised,
                getattr(self, "log_bias", False))

    def __eq__(self, other):
        return type(self) is type(other) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    # -- scaled logits (a/τ), and the backward's 1/τ, in place ------------------------
    def _scale(self, a):
        if self.temperature != 1.0:
            a /= self.temperature
        return a

    _unscale = _scale

    # -- the map, for subclasses ----------------------------------------------------
    def phi(self, l, n=1):
        """Weights of the scaled logits ``l`` (element-wise mechanisms: any shape;
        ``n``: the normalisation, 1 or the number of attended tokens)."""
        raise NotImplementedError

    def dphi_from_s(self, s, n=1):
        """``∂s_i/∂l_i`` written with ``s`` (element-wise mechanisms)."""
        raise NotImplementedError

    def dphi(self, l, n=1):
        """``∂s_i/∂l_i`` at the scaled logits ``l`` (element-wise mechanisms)."""
        return self.dphi_from_s(self.phi(l, n), n)

    # -- batch forward / backward ---------------------------------------------------
    def _n(self, a):
        return a.shape[-1] if self.normalised else 1

    def weights(self, a):
        """``s`` of logits ``a`` (B, N), in place on ``a`` (a fresh array of the caller)."""
        n = self._n(a)
        l = self._scale(a)
        beta = self.bias(a.shape[-1])
        if beta:
            l += beta
        s = self.phi(l, n)
        if s is not a:
            a[...] = s
        return a

    def backward(self, g, s):
        """``δ = ∂ℓ/∂a`` from ``g = ∂ℓ/∂s`` and the weights ``s``, in place on ``g``."""
        g *= self.dphi_from_s(s, self._n(s))
        return self._unscale(g)


class Softmax(Attention):
    """``s = softmax(a/τ)``; ``δ = s ⊙ (g − (sᵀg) 1)/τ``. At ``τ = 1`` the operations are
    those of the paper's model, bit for bit."""

    name = "softmax"
    elementwise = False
    normalised = True
    softmax_family = True

    @property
    def paper(self):
        """The paper's model: softmax itself (not a subclass) at ``τ = 1``."""
        return type(self) is Softmax and self.temperature == 1.0

    def eta_max(self, q, d, n, c):
        """``min(2q, τ² · 2n/(c²(q−1)(q+d)))``: the population bound of
        :func:`stsim.core.stability.eta_max` at temperature ``τ`` — the W directions'
        curvature scales as ``1/τ²``, V's does not (docs/attention.md §3)."""
        lam = c * c * (q - 1) * (q + d) / n / self.temperature ** 2
        return 2.0 * q if lam <= 0 else min(2.0 * q, 2.0 / lam)

    def default_lr(self, T, q, d, n, c, paper_lr, rank=None, dense=False, d_e=None):
        """DERIVED with the merged W: ``η_max(τ)/2`` (:meth:`eta_max`); with a rank the
        paper model's lr (measured to be stable)."""
        if rank is not None:
            return paper_lr, _PAPER_LR
        em = self.eta_max(q, d, n, c)
        return 0.5 * em, (f"eta_max(tau)/2 (eta_max(tau) = min(2q, tau^2 2n/(c^2(q-1)(q+d)))"
                          f" = {em:.4g}, n={n})")

    def map_step(self, lr):
        """``{"W": η_W/τ², "V": η_V}``: GD at temperature τ is GD at τ = 1 on ``W/τ`` with
        the W step divided by ``τ²`` (module docstring)."""
        lr_W, lr_V = Steps(lr, check=False).pair()
        return {"W": lr_W / self.temperature ** 2, "V": lr_V}

    def reduced(self, a, b, g, T, q, d, c=1.0, practical=False):
        """:func:`stsim.core.reduced.loss_grad` (only ``l₊ − l₋ = ca`` matters)."""
        return loss_grad(a, b, g, T, q, d, c=c, practical=practical)

    def weights(self, a):
        return _softmax_rows(self._scale(a))

    def backward(self, g, s):
        return self._unscale(_jacobian(g, s))


class Linear(Attention):
    """``s = a/τ``; ``δ = g/τ`` (no normalisation, no 1/T scale)."""

    name = "linear"
    zero_saddle = True
    homogeneous = True
    #: CALIBRATED (benchmarks/calibrate_attention_lr.py; docs/attention.md, "Defaults of a
    #: run"): no divergence in 18 runs, T = 8, 20, 50, q = 2, 3, seeds 0-2; 0.24 (T = 8)
    #: and 0.2 (T = 20), 0.15 (T = 50) diverged at q = 3
    measured_lr = (4.0, 0.125)

    def phi(self, l, n=1):
        return l

    def dphi_from_s(self, s, n=1):
        return np.ones_like(s)

    def backward(self, g, s):
        return self._unscale(g)


class _Normalisable(Attention):
    """An element-wise mechanism divided by ``n = N`` when ``normalised`` (name ``-norm``)."""

    def __init__(self, temperature: float = 1.0, normalised: bool = False):
        super().__init__(temperature)
        self.normalised = bool(normalised)
        if self.normalised:
            self.name += "-norm"


class ReLU(_Normalisable):
    """``s = max(a/τ, 0)/n``; ``δ = g 1[s > 0]/(n τ)`` (``n = 1``, or the number of attended
    tokens when ``normalised``)."""

    name = "relu"
    zero_saddle = True
    homogeneous = True
    #: unnormalised; CALIBRATED as Linear's: no divergence in the 18 runs; 0.25 (T = 20)
    #: and 0.1 (T = 50) diverged at q = 3
    measured_lr = (2.5, 0.3)

    def phi(self, l, n=1):
        s = np.maximum(l, 0.0)
        return s / n if n != 1 else s

    def dphi_from_s(self, s, n=1):
        return (s > 0) / float(n)


class Sigmoid(_Normalisable):
    """``s = σ(a/τ + β)/n``; ``δ = g s (1 − n s)/τ`` (``n = 1``, or the number of attended
    tokens when ``normalised``); ``σ`` overflow-safe (``scipy.special.expit``). ``β = 0``,
    or with ``log_bias`` (name ``"sigmoid-bias"``, unnormalised only) the fixed
    ``β = −ln N``, ``N`` the number of attended tokens: ``σ'(l + β) = s(1 − s)``, the same
    backward (module docstring). Its default step is the paper model's derived one, as for
    the normalised mechanisms: at zero its weights are ``1/(N + 1)``, near softmax's
    ``1/N``."""

    name = "sigmoid"
    #: unnormalised; CALIBRATED as Linear's: no divergence in the 18 runs
    measured_lr = (4.0, np.inf)

    def __init__(self, temperature: float = 1.0, normalised: bool = False,
                 log_bias: bool = False):
        super().__init__(temperature, normalised)
        self.log_bias = bool(log_bias)
        if self.log_bias:
            if self.normalised:
                raise ValueError("log_bias: the bias -ln N is for the unnormalised sigmoid; "
                                 "give normalised=False")
            self.name += "-bias"

    def bias(self, N) -> float:
        return -float(np.log(N)) if self.log_bias else 0.0

    def default_lr(self, T, q, d, n, c, paper_lr, rank=None, dense=False, d_e=None):
        if self.log_bias:
            return paper_lr, "the paper model's derived lr (weights 1/(N+1) at zero)"
        return super().default_lr(T, q, d, n, c, paper_lr, rank, dense, d_e)

    def phi(self, l, n=1):
        from scipy.special import expit     # here: scipy.special costs import stsim 0.18 s
        s = expit(l)
        return s / n if n != 1 else s

    def dphi_from_s(self, s, n=1):
        return s * (1.0 - n * s)


#: the built-in mechanisms by name, at τ = 1 (``attention=`` of :func:`stsim.run` and the
#: model functions; :func:`make_attention` builds one at a temperature)
MECHANISMS = {m.name: m for m in (Softmax(), Linear(), ReLU(), Sigmoid(),
                                  ReLU(normalised=True), Sigmoid(normalised=True),
                                  Sigmoid(log_bias=True))}
ATTENTIONS = tuple(MECHANISMS)


def make_attention(attention="softmax", temperature=1.0) -> Attention:
    """The :class:`Attention` object of a name (``ATTENTIONS``, case ignored) at
    ``temperature``, or ``attention`` itself when it is already one (then ``temperature``
    must be 1 or its own).

    >>> make_attention("sigmoid", 0.5).label
    'sigmoid(temperature=0.5)'
    """
    if attention is None:
        attention = "softmax"
    if isinstance(attention, Attention):
        t = check_temperature(temperature)
        if t != 1.0 and t != attention.temperature:
            raise ValueError(f"temperature={t:g} given with an attention object of temperature "
                             f"{attention.temperature:g}; set it on the object")
        return attention
    name = check_choice("attention", attention, ATTENTIONS, ignore_case=True)
    return MECHANISMS[name].at(temperature)


# --------------------------------------------------------------------------------------
# key and query of rank r
# --------------------------------------------------------------------------------------
def check_rank(rank, D: int | None = None):
    """``rank`` as an int in ``[1, D]`` (None stays None: the merged ``W``)."""
    if rank is None:
        return None
    return check_int("rank", rank, 1, D)


def lowrank_W(W_K, W_Q):
    """``W = W_Kᵀ W_Q`` (D, D) of a key/query pair ``(r, D)`` each."""
    W_K = np.asarray(W_K, dtype=np.float64)
    W_Q = np.asarray(W_Q, dtype=np.float64)
    if W_K.ndim != 2 or W_K.shape != W_Q.shape:
        raise ValueError(f"W_K and W_Q must both have shape (rank, D), got {W_K.shape} and "
                         f"{W_Q.shape}")
    return W_K.T @ W_Q


def lowrank_grad(W_K, W_Q, dW):
    """``(∂ℓ/∂W_K, ∂ℓ/∂W_Q) = (W_Q Gᵀ, W_K G)`` for ``G = ∂ℓ/∂W`` (dense, or anything
    ``np.asarray`` turns into the dense (D, D) gradient)."""
    G = np.asarray(dW, dtype=np.float64)
    return W_Q @ G.T, W_K @ G


def resolve_mechanism(c, objects: dict, inits) -> tuple:
    """For :meth:`stsim.Config.resolve` (``c``: the config being resolved, not changed;
    ``objects``: its objects given in place of names; ``inits``: the allowed ``init``
    values): resolve ``attention`` and ``temperature`` (a built-in object is recorded as its
    name and temperature, another one kept in ``objects``), ``rank`` and ``init`` (None:
    ``"random"`` where zero is stationary, :attr:`Attention.zero_saddle` or any rank, where
    an explicit ``"zero"`` is refused; else ``"zero"``). Returns the :class:`Attention` and
    the fields it decides, ``{"attention", "temperature", "rank", "init"}``."""
    att = c.attention
    if not isinstance(att, (Attention, str)):
        raise ValueError(f"attention must be one of {ATTENTIONS} or an Attention object "
                         f"(stsim.core.attention), got {att!r}")
    kind, A = type(att), Attention
    if isinstance(att, A) and not ((kind.weights is not A.weights or kind.phi is not A.phi) and
                                   (kind.backward is not A.backward
                                    or kind.dphi_from_s is not A.dphi_from_s)):
        raise ValueError(f"attention: {att!r} defines no map: a subclass of Attention "
                         f"implements phi and dphi_from_s (or weights and backward); "
                         f"docs/attention.md")
    if isinstance(att, Attention):      # one's own kept as the object; a built-in one is
        if type(MECHANISMS.get(att.name)) is type(att):     # its name and temperature
            objects.pop("attention", None)
        else:
            objects["attention"] = att
    att = make_attention(att, c.temperature)    # an object's temperature: 1 or its own
    rank = None if c.rank is None else check_int("rank", c.rank, 1)
    saddle = att.zero_saddle or rank is not None
    init = c.init if c.init is not None else "random" if saddle else "zero"
    v = {"attention": att.name, "temperature": att.temperature, "rank": rank, "init": init}
    if "init" in objects:       # a warm start (stsim.core.warm): the source's parameters
        return att, v
    v["init"] = init = check_choice("init", init, inits, ignore_case=True)
    if init == "random_rows0" and rank is not None:
        raise ValueError(f"init='random_rows0' sets W's token rows to 0: a key/query pair of "
                         f"rank {rank} has none (W_K, W_Q mix them); use init='random'")
    if init == "zero" and saddle:
        what = att.label if rank is None else f"a key/query pair of rank {rank}"
        raise ValueError(f"init='zero' is a stationary point of {what}: no gradient ever "
                         f"flows from it (docs/attention.md, §2); use init='random' (the "
                         f"default there: N(0, init_scale^2), init_scale {c.init_scale!r})")
    return att, v
