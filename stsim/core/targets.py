r"""What the task asks of the selected tokens: the target object (docs/targets.md).

The paper's task is the mean ``(1/q) Σ_{j∈y} x_j`` of the selected tokens. A *target* is
one object holding every fact about another choice: its name and settings (recorded in a
run's config as its :attr:`Target.label`, checked on resume), how a batch is drawn and
its target computed from ``(X, y)`` (:meth:`Target.draw`), its output dimension, the fixed
value feature map ``φ`` the tokens carry and its dimension (the model's token is
``z_i = [φ(x_i); p_i]``; the query token's content part stays 0), the readout after the
attention, whether it is separable, the population moments of ``φ``, the exact
construction that represents it, and the facts its run's default step is derived from
(its effective ``d``, its features' fourth moments, its readout's steps; the step itself
is decided by :func:`stsim.core.schedule.plan`). Nothing else branches on its name.
Built-ins (:data:`TARGETS`; ``target=`` of :func:`stsim.run` takes ``"mean"``,
``"moment:k"``, ``"variance"`` or an object)::

    target      value (elementwise)                      φ(x)             dim φ  readout
    mean        (1/q) Σ_j x_j                            x                d      linear
    moment:k    (1/q) Σ_j h_k(x_j)                       h_k(x)           d      linear
    variance    (1/q) Σ_j x_j² − ((1/q) Σ_j x_j)²        [h_1(x), h_2(x)]  2d     quadratic

``h_k = He_k/√(k!)`` is the normalised (probabilists') Hermite polynomial,
``He_{k+1}(x) = x He_k(x) − k He_{k−1}(x)``, ``He_0 = 1``, ``He_1 = x``: under
``x ~ N(0, 1)``, ``E h_k h_l = δ_{kl}`` and ``E h_k = 0`` (``k ≥ 1``), so every built-in
``φ`` has ``E φ = 0`` and ``E φφᵀ = I``. A *separable* target is the mean over the selected
tokens of ``φ`` itself: the paper's task on the tokens ``φ(x)``.

The readouts (the model's, :mod:`stsim.core.model`): ``"linear"``, ``f = V h``;
``"quadratic"``, ``f_o = (V h)_o + b_o + h_φᵀ Q_o h_φ`` with ``h_φ`` the feature part of
the attended vector ``h``. The variance is then exact: with the attention at ``1/q`` on
the selected tokens, ``h_φ = [m_1; m_2]``, ``m_k = (1/q) Σ_j h_k(x_j)``, and
``(1/q) Σ x² − ((1/q) Σ x)² = √2 m_2 + 1 − m_1²`` (``x² = √2 h_2 + 1``).
"""
from __future__ import annotations

import math

import numpy as np

from stsim.core.corpus import load_corpus
from stsim.core.target_checks import check_target
from stsim.core.task import Batch, draw_subsets, sts_target
from stsim.util.validate import check_choice, check_int

__all__ = ["Target", "Mean", "Moment", "Variance", "TextSelection", "MaskedChar", "TARGETS",
           "READOUTS", "LOSSES", "EMBEDDINGS", "MAX_ORDER", "make_target", "target_of",
           "resolve_target", "hermite", "HEAD_STEPS"]

READOUTS = ("linear", "quadratic")
LOSSES = ("squared", "xent")
MAX_ORDER = 8      # the highest Hermite order of "moment:k" (E h_k⁴ grows like 3^k)
#: the quadratic readout's b and Q at 1/20 of V's step: MEASURED on the variance (T = 50,
#: q = 3, seeds 0-1; docs/targets.md, "Default step")
HEAD_STEPS = {"b": 0.05, "Q": 0.05}


def hermite(X: np.ndarray, k: int) -> np.ndarray:
    """``h_k(X) = He_k(X)/√(k!)`` elementwise (module docstring); ``h_1(X)`` is ``X``'s
    values (a copy)."""
    prev, cur = np.ones_like(X), X
    for j in range(1, k):
        prev, cur = cur, X * cur - j * prev
    return cur / math.sqrt(math.factorial(k))


class Target:
    """A target of the task (module docstring). A subclass sets the class attributes and
    implements :meth:`value`; it overrides :meth:`features` and :meth:`feature_dim` for a
    feature map other than ``φ(x) = x``, :meth:`dim` for an output other than ``d``
    numbers, :meth:`settings` when it has any, :meth:`exact` to have a construction and
    :meth:`fourth_moments` for features of its own.
    """

    name = "target"
    readout = "linear"        # READOUTS: f = V h, or f = V h + b + [h_φᵀ Q_o h_φ]_o
    #: the tokens are N(0, I_d) (:meth:`tokens`): what the reduced dynamics and the default
    #: step are derived for; a target drawing its tokens elsewhere sets False
    gaussian_tokens = True
    #: the ideal attention is on the named positions (the construction's W*, what
    #: ``cos_W`` compares with); the masked character is read from the neighbours instead
    attends_to_named = True
    #: LOSSES: "squared", ½|f − target|², or "xent", the cross entropy of the logits f
    #: against a class distribution (the masked character, :mod:`stsim.core.text`)
    loss = "squared"
    separable = False         # the value is (1/q) Σ_{j∈y} φ(x_j): the mean task on φ(x)
    orthonormal = False       # E φ = 0, E φφᵀ = I under x ~ N(0, I_d)
    paper = False             # the paper's task (its metrics, its population objective)
    #: the readout's own blocks' steps as factors of V's (the quadratic readout's ``b``,
    #: ``Q``): the variance's measured ones unless a target gives its own
    head_steps = HEAD_STEPS
    #: where the default step was measured (docs/targets.md, "Default step"); None: not
    #: measured
    measured = None
    #: the smallest subset size at which the target is not identically 0
    min_q = 1

    def __setattr__(self, name, value):
        # a target is immutable: a run records its label, which must stay what it trained
        if name in self.__dict__:
            raise AttributeError(f"{type(self).__name__}.{name} cannot be changed: a target "
                                 f"is immutable; make a new one (e.g. Moment(4))")
        super().__setattr__(name, value)

    def settings(self) -> dict:
        """The target's settings (recorded in its :attr:`label`)."""
        return {}

    @property
    def linear_readout(self) -> bool:
        """The readout is ``f = V h`` (``readout == "linear"``): no blocks ``b``, ``Q`` of
        its own, its regressors are the attended vector, and a construction's ``V`` is the
        only one that represents the target; else the quadratic readout."""
        return self.readout == "linear"

    @property
    def mean_on_features(self) -> bool:
        """The mean task on the tokens ``φ(x)``: separable, orthonormal features and the
        linear readout, so its population loss, reduced dynamics and default step are the
        mean task's with ``d`` replaced by ``dim φ`` (docs/targets.md)."""
        return self.separable and self.orthonormal and self.linear_readout

    @property
    def label(self) -> str:
        """``name`` and the settings' values: what a config records (``"moment:3"``)."""
        return ":".join([self.name] + [str(v) for v in self.settings().values()])

    def __repr__(self):
        return f"{type(self).__name__}({self.label!r})"

    def __eq__(self, other):
        return type(self) is type(other) and self.settings() == other.settings()

    def __hash__(self):
        return hash((type(self).__name__, self.label))

    def dim(self, d: int) -> int:
        """The output dimension for tokens of dimension ``d``."""
        return d

    def feature_dim(self, d: int) -> int:
        """``dim φ`` for tokens of dimension ``d``."""
        return d

    def features(self, X: np.ndarray) -> np.ndarray:
        """``φ(X)``: (B, T, d) -> (B, T, dim φ) (here ``φ(x) = x``: ``X`` itself)."""
        return X

    def value(self, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        """The target of each sample: ``X`` (B, T, d), ``y`` (B, q) -> (B, dim)."""
        raise NotImplementedError

    def zero_loss(self, d: int, q: int) -> float:
        """``L(0) = ½ E‖target‖²``, the loss of the output 0 (x ~ N(0, I_d)): ``dim/(2q)``
        for a separable target with orthonormal features; ``NotImplementedError`` else."""
        if self.separable and self.orthonormal:
            return self.dim(d) / (2 * q)
        raise NotImplementedError(f"the target {self.label!r} gives no L(0)")

    def constant_loss(self, d: int, q: int) -> float:
        """``L_c = ½ E‖target − E target‖²``, the loss of the best constant output: the
        footing on which every target is judged (docs/targets.md, "One footing"). For a
        separable target with orthonormal features ``E target = E φ = 0``, so ``L_c =
        L(0)``; ``NotImplementedError`` for a target that gives neither."""
        if self.separable and self.orthonormal:
            return self.zero_loss(d, q)
        raise NotImplementedError(f"the target {self.label!r} gives no best-constant loss")

    def moments(self, d: int):
        """``(E φ, E φφᵀ)`` under ``x ~ N(0, I_d)`` when :attr:`orthonormal` (zeros and the
        identity), else None."""
        m = self.feature_dim(d)
        return (np.zeros(m), np.eye(m)) if self.orthonormal else None

    def check(self, d: int, T_max: int, q: int) -> None:
        """The run's sizes checked against the target before any work (``ValueError``
        naming the setting): here ``q >= min_q``; a subclass with more to check calls this
        one too."""
        if q < self.min_q:
            raise ValueError(f"target={self.label!r} needs q >= {self.min_q} (its value is "
                             f"identically 0 below), got q={q}")

    def tokens(self, rng: np.random.Generator, B: int, T: int, d: int,
               part: str = "train") -> np.ndarray:
        """The tokens of ``B`` sequences, (B, T, d): ``X ~ N(0, I_d)`` (``part`` is for a
        target whose tokens come from a corpus, :mod:`stsim.core.text`: ``"train"`` or
        ``"held"``)."""
        return rng.standard_normal((B, T, d))

    def draw(self, rng: np.random.Generator, B: int, T: int, q: int, d: int,
             features: bool = False, part: str = "train") -> Batch:
        """A batch: the tokens (:meth:`tokens`; Gaussian ``X ~ N(0, I_d)``, (B, T, d)),
        then the subsets (the draws of :func:`stsim.core.task.draw_batch`), and the
        target; with ``features`` the batch's ``X`` is ``φ(X)`` (what the model reads)."""
        X = self.tokens(rng, B, T, d, part)
        y = draw_subsets(rng, B, T, q)
        return Batch(X=self.features(X) if features else X, y=y, target=self.value(X, y))

    def exact(self, d: int) -> dict:
        """The readout that represents the target given attention ``1/q`` on the selected
        tokens: ``{"V_x": (dim, dim φ)}`` (and ``"b"``, ``"Q"`` for the quadratic
        readout); the positional part of ``V`` is 0. ``NotImplementedError``: none known."""
        raise NotImplementedError(f"the target {self.label!r} gives no exact construction")

    def effective_dim(self, d: int) -> int:
        """``‖A‖²_F``, ``A = E[ψ φᵀ]``: the ``d`` of the mean task whose population loss and
        reduced dynamics are this target's (docs/targets.md, "The exact side"): ``dim φ``
        for a separable target with orthonormal features (and, not derived, the variance's)."""
        return self.feature_dim(d)

    def fourth_moments(self, d: int):
        """``(M_V, M_4) = (max_{|e|=1} E[|φ|² (eᵀφ)²], E|φ|⁴)`` under ``x ~ N(0, I_d)``: what
        the batch terms of a run's step need (:func:`stsim.core.stability.fourth_excess`);
        ``(m + 2, m(m + 2))``, ``m = dim φ``, for Gaussian features (here ``φ(x) = x``). None
        when unknown (a subclass with features of its own that does not override this)."""
        if type(self).features is not Target.features:
            return None
        return float(d + 2), float(d * (d + 2))


class Mean(Target):
    """The paper's target ``(1/q) Σ_{j∈y} x_j``; ``φ(x) = x``, the linear readout."""

    name = "mean"
    separable = orthonormal = paper = True

    def value(self, X, y):
        return sts_target(X, y)

    def exact(self, d):
        return {"V_x": np.eye(d)}


class Moment(Target):
    """``(1/q) Σ_{j∈y} h_k(x_j)`` elementwise, ``h_k = He_k/√(k!)`` (the normalised
    Hermite polynomial, not the power ``x^k``: its features are orthonormal); separable,
    ``φ(x) = h_k(x)``, the linear readout. ``k = 1`` is the mean's numbers."""

    name = "moment"
    separable = orthonormal = True

    def __init__(self, k: int):
        self.k = check_int("target moment order k", k, 1, MAX_ORDER)

    def settings(self):
        return {"k": self.k}

    def features(self, X):
        return hermite(X, self.k)

    def value(self, X, y):
        return sts_target(hermite(X, self.k), y)

    def fourth_moments(self, d):
        """``μ = E h_k⁴ = Σ_{j=0}^{k} C(k, j)² C(2j, j)`` (3, 15, 93, 639, … for k = 1, 2, 3,
        4: ``h_k² = Σ_r r! C(k, r)² He_{2k−2r}/k!`` and ``E He_{2j}² = (2j)!``); the
        coordinates are independent, so ``E[|φ|² φφᵀ] = (μ + d − 1) I`` and
        ``E|φ|⁴ = d μ + d(d − 1)``."""
        mu = float(sum(math.comb(self.k, j) ** 2 * math.comb(2 * j, j)
                       for j in range(self.k + 1)))
        return mu + d - 1, d * mu + d * (d - 1.0)

    def exact(self, d):
        return {"V_x": np.eye(d)}


class Variance(Target):
    """``(1/q) Σ_{j∈y} x_j² − ((1/q) Σ_{j∈y} x_j)²`` elementwise; not separable (it holds
    products ``x_i x_j`` of two selected tokens, which an average of per-token features
    cannot); ``φ = [h_1, h_2]``, the quadratic readout. Exact: ``V_x = [0, √2 I]``,
    ``b = 1``, ``Q_o = −e_o e_oᵀ`` (on ``h_1``'s block)."""

    name = "variance"
    readout = "quadratic"
    orthonormal = True
    min_q = 2               # the variance of one token is 0
    #: MEASURED at T = 50, q = 3, seeds 0 and 1 (docs/targets.md, "Default step"): W and
    #: V at the plan's steps on dim φ, b and Q at 1/20 of V's
    measured = "T=50, q=3, seeds 0-1 (docs/targets.md)"

    def feature_dim(self, d):
        return 2 * d

    def features(self, X):
        return np.concatenate([X, hermite(X, 2)], axis=2)

    def value(self, X, y):
        sel = np.take_along_axis(X, y[:, :, None], axis=1)
        m1 = sel.mean(axis=1)
        return (sel * sel).mean(axis=1) - m1 * m1

    def fourth_moments(self, d):
        """Per coordinate ``u = h_1² + h_2²`` with ``E h_1⁴ = 3``, ``E h_1² h_2² = 5``,
        ``E h_2⁴ = 15`` and the odd ``E h_1³ h_2 = E h_1 h_2³ = 0``: ``E[u φ_a φ_aᵀ] =
        diag(8, 20)``, so ``E[|φ|² φφᵀ]`` has the largest eigenvalue ``20 + (2d − 2)``;
        ``E u² = 28``, ``E u = 2``, so ``E|φ|⁴ = 28 d + 4 d(d − 1)``."""
        return 2.0 * d + 18.0, 28.0 * d + 4.0 * d * (d - 1.0)

    def zero_loss(self, d, q):
        """``½ d (q²−1)/q²``: ``q·value ~ χ²_{q−1}`` elementwise, ``E v² = (q²−1)/q²``."""
        return 0.5 * d * (q * q - 1) / (q * q)

    def constant_loss(self, d, q):
        """``d (q−1)/q²``: ``E v = (q−1)/q`` and ``Var v = 2(q−1)/q²`` elementwise (``q·v ~
        χ²_{q−1}``), so the best constant output ``E v`` leaves ``½ d Var v``; it is
        ``2/(q+1)`` of ``L(0)``."""
        return d * (q - 1) / (q * q)

    def exact(self, d):
        V = np.zeros((d, 2 * d))
        V[:, d:] = math.sqrt(2.0) * np.eye(d)
        Q = np.zeros((d, 2 * d, 2 * d))
        Q[np.arange(d), np.arange(d), np.arange(d)] = -1.0
        return {"V_x": V, "b": np.ones(d), "Q": Q}


EMBEDDINGS = ("onehot", "gaussian")
EMBED_ROOT = 4          # root seed of a Gaussian character embedding (with its seed)


class _OnText(Target):
    """What the two tasks on real text share (docs/text.md): the tokens of a window of
    ``T`` consecutive characters of ``corpus`` (:func:`stsim.core.corpus.load_corpus`:
    a built-in name or the path of a UTF-8 file) are fixed embeddings of its characters —
    ``"onehot"`` over the vocabulary (then ``d`` is the vocabulary's size) or
    ``"gaussian"``, a fixed N(0, I_d) row per character drawn from ``seed``. Training
    draws come from the corpus's first 90%, validation draws from the rest (``part``)."""

    readout = "linear"
    gaussian_tokens = False

    def __init__(self, corpus="tinyshakespeare", embedding="onehot", seed=0):
        self.corpus = load_corpus(corpus)
        self.embedding = check_choice("embedding", embedding, EMBEDDINGS)
        self.seed = check_int("seed", seed, 0)
        self._tables = {}

    def settings(self):
        return {"corpus": self.corpus.label, "embedding": self.embedding, "seed": self.seed}

    def vocab_size(self) -> int:
        return len(self.corpus.vocab)

    def feature_dim(self, d):
        """The embedding's width: the vocabulary's size (one-hot), else ``d``."""
        return self.vocab_size() if self.embedding == "onehot" else d

    def table(self, d: int) -> np.ndarray:
        """The embedding, (vocabulary, width) (read-only; a Gaussian one drawn once per
        ``d`` from ``(EMBED_ROOT, seed)``)."""
        if d not in self._tables:
            V = self.vocab_size()
            E = np.eye(V) if self.embedding == "onehot" else \
                np.random.default_rng([EMBED_ROOT, self.seed]).standard_normal((V, d))
            E.flags.writeable = False
            self._tables[d] = E
        return self._tables[d]

    def check(self, d: int, T_max: int, q: int) -> None:
        """The run's sizes against the text (``ValueError`` naming each): ``d`` the
        vocabulary's size for the one-hot embedding; a window of ``T_max`` characters
        within each part of the corpus."""
        super().check(d, T_max, q)
        if self.embedding == "onehot" and d != self.vocab_size():
            raise ValueError(f"target {self.label!r}: d must be the vocabulary's size "
                             f"{self.vocab_size()} for the one-hot embedding, got {d}")
        self.corpus.check_window(T_max, "T")

    def ids(self, rng, B, T, part):
        return self.corpus.windows(rng, B, T, part)

    def tokens(self, rng, B, T, d, part="train"):
        return self.table(self.feature_dim(d))[self.ids(rng, B, T, part)]

    def fourth_moments(self, d):
        return None             # not Gaussian tokens: unknown (the plan says so)


class TextSelection(_OnText):
    """The paper's task on real tokens: the mean of the ``q`` named tokens of a window of
    text (:class:`_OnText`: its corpus, embedding and seed). Separable, the linear
    readout; nothing of the Gaussian task's reductions or default step is derived for it
    (its tokens are neither Gaussian nor orthonormal: the run's message says "neither")."""

    name = "text"
    separable = True

    def dim(self, d):
        return self.feature_dim(d)

    def value(self, X, y):
        return sts_target(X, y)


class MaskedChar(_OnText):
    """The masked character: a window of ``T`` characters of which one position ``m``
    (uniform) is masked — its token's content is 0, its position kept — and named alone
    (``q = 1``: the query is ``m``'s positional encoding, no content); ``V`` maps the
    attended vector to logits over the vocabulary, and the loss is their cross entropy
    with ``m``'s character (``loss = "xent"``, :func:`stsim.core.model.forward_backward`;
    the target of a sample is the one-hot row of that character)."""

    name = "masked"
    loss = "xent"
    attends_to_named = False

    def dim(self, d):
        return self.vocab_size()

    def check(self, d, T_max, q):
        super().check(d, T_max, q)
        if q != 1:
            raise ValueError(f"target {self.label!r}: q must be 1 (the masked position is the "
                             f"one named), got {q}")

    def value(self, X, y):
        """The one-hot rows of the named tokens' characters (``X`` unmasked: each token is
        its character's embedding row, found by the nearest row of the table)."""
        sel = np.take_along_axis(X, y[:, :1, None], axis=1)[:, 0]      # (B, width)
        E = self.table(X.shape[2])
        return np.eye(self.vocab_size())[np.argmin(
            ((sel[:, None, :] - E[None]) ** 2).sum(axis=2), axis=1)]

    def draw(self, rng, B, T, q, d, features=False, part="train"):
        ids = self.ids(rng, B, T, part)
        m = rng.integers(T, size=B)
        X = self.table(self.feature_dim(d))[ids]
        X[np.arange(B), m] = 0.0                          # the mask: no content at m
        target = np.eye(self.vocab_size())[ids[np.arange(B), m]]
        return Batch(X=X, y=m[:, None], target=target)


#: the built-in targets by name (``"moment"`` takes its order: ``"moment:3"``; ``"text"``
#: and ``"masked"`` their corpus, embedding and seed: ``"text:tinyshakespeare:onehot:0"``)
TARGETS = {"mean": Mean, "moment": Moment, "variance": Variance, "text": TextSelection,
           "masked": MaskedChar}


def make_target(target="mean") -> Target:
    """The :class:`Target` of a name (``"mean"``, ``"moment:k"``, ``"variance"``; case
    ignored) or ``target`` itself when it is one; ``ValueError`` naming ``target`` and
    the allowed values otherwise."""
    if isinstance(target, Target):
        return target
    name, _, arg = target.strip().lower().partition(":") if isinstance(target, str) else \
        ("", "", "")
    if name in ("text", "masked"):
        parts = arg.split(":") if arg else []
        if parts[:1] == ["file"]:
            raise ValueError(f"target {target!r} names a text of your own by its hash: pass "
                             f"the object, target={TARGETS[name].__name__}('<path>', ...)")
        if len(parts) <= 3 and (len(parts) < 3 or parts[2].isdigit()):
            return TARGETS[name](*parts[:2], *map(int, parts[2:]))
    elif name in TARGETS and (name == "moment") == bool(arg) and (
            not arg or arg.isascii() and arg.isdigit() and 1 <= int(arg) <= MAX_ORDER):
        return Moment(int(arg)) if arg else TARGETS[name]()
    raise ValueError(f"target must be 'mean', 'moment:k' (1 <= k <= {MAX_ORDER}), "
                     f"'variance', 'text[:corpus[:embedding[:seed]]]', "
                     f"'masked[:corpus[:embedding[:seed]]]' or a Target object, got "
                     f"{target!r}")


def target_of(cfg) -> Target:
    """The target of a config, resolved or not (its object, or its recorded label)."""
    r = cfg.__dict__.get("_resolved")
    return r.target if r is not None and r.target is not None else \
        make_target(getattr(cfg, "target", "mean"))


def resolve_target(c, objects: dict) -> Target:
    """For :meth:`stsim.Config.resolve`: the target object of ``c.target`` (one's own kept
    in ``objects``; a built-in one recorded as its label).
    ``ValueError`` naming ``target`` for a bad value, an object of no class of its own
    that defines no value, or an objective that is the mean task's (``population``)."""
    t = make_target(c.target)
    if type(t).value is Target.value:
        raise ValueError(f"target: {t!r} defines no value: a subclass of Target implements "
                         f"value(X, y) (docs/targets.md)")
    if t.readout not in READOUTS:
        raise ValueError(f"target: {t!r} has readout={t.readout!r}, not one of {READOUTS}")
    if type(t) is TARGETS.get(t.name):      # a built-in: recorded as its label
        objects.pop("target", None)
    t.check(c.d, max((c.T, *c.T_test)), c.q)
    if type(t) is not TARGETS.get(t.name):  # one's own: its methods checked once, here
        check_target(t, c.d, c.q, c.T)
    paper = t.paper and all(getattr(type(t), m) is getattr(Mean, m)
                            for m in ("value", "features", "feature_dim", "dim"))
    if c.objective == "population" and not paper:
        own = (f" ({type(t).__name__} has a value or features of its own, which it does "
               f"not train on)" if t.paper else "")
        raise ValueError(f"target={t.label!r}: objective='population' is the mean task's "
                         f"exact population loss{own}; use objective 'online' or 'sample'")
    return t
