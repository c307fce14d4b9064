r"""Fully-connected baseline: a ReLU MLP on the flattened input ``[vec(X); 1_y]``.

The paper's separation: a one-layer transformer learns STS_q with width
``O(d + q log T)``, while any fully-connected net needs first-layer width ``Ω(T d)``.
This module is the other side of that comparison, trained on the same online stream,
with the same optimisers, loop and :class:`stsim.core.run.Result` as the transformer::

    >>> import stsim
    >>> res = stsim.run(T=8, q=2, arch="fcn", width=32, d=2, steps=20, batch=16,
    ...                 optimizer="adam", lr=1e-3)
    >>> res.status, sorted(res.params)
    ('completed', ['A', 'W1', 'b1', 'c'])

Model (one sample; ``L = depth`` hidden layers of ``k = width`` units)::

    u   = [vec(X); 1_y] ∈ R^n,   n = T d + T       (X row-major: token after token)
    z_l = W_l h_{l-1} + b_l,     h_l = relu(z_l),    h_0 = u,   l = 1..L
    f   = A h_L + c ∈ R^d
    r   = f − STS_q(X, y),       ℓ = ½ ‖r‖²    (or another target: stsim.core.targets)

Backward (beside the forward formulas; batch rows, every gradient is a batch mean)::

    ∂ℓ/∂A = r h_Lᵀ,              ∂ℓ/∂c = r
    g_L   = Aᵀ r                  (∂ℓ/∂h_L)
    e_l   = g_l ⊙ 1[z_l > 0]      (∂ℓ/∂z_l; relu'(0) := 0)
    ∂ℓ/∂W_l = e_l h_{l-1}ᵀ,       ∂ℓ/∂b_l = e_l,    g_{l-1} = W_lᵀ e_l

Parameter shapes: ``W1`` (k, n), ``W_l`` (k, k) for l ≥ 2, ``b_l`` (k,), ``A`` (d, k),
``c`` (d,).

Initialisation (C): hidden weights He-scaled, ``W_l ~ N(0, 2/fan_in)`` i.i.d., biases 0
(zero hidden weights would leave every unit identical and dead: ReLU(0) has zero
derivative). The read-out ``A, c`` is 0 for ``init="zero"`` (the default), so ``f ≡ 0`` and
the initial loss is ``d/(2q)``, exactly the transformer's zero-init loss; with
``init="random"`` the read-out is ``N(0, init_scale²)`` i.i.d. The hidden layers are
drawn from the init generator (SeedSequence child 2, as for the transformer).
"""
from __future__ import annotations

import numpy as np

from stsim.core.problem import Problem, register_arch
from stsim.core.targets import target_of
from stsim.util.validate import check_int

__all__ = ["fcn_input", "fcn_forward_backward", "mlp_forward", "mlp_backward", "fcn_init",
           "fcn_construction", "FCNProblem", "param_names", "fcn_param_count", "fcn_memory",
           "fcn_seconds_per_step", "fcn_shapes", "fcn_default_lr"]


def param_names(depth: int) -> list:
    """Names of the parameters, in order: ``W1, b1, ..., WL, bL, A, c``."""
    depth = check_int("depth", depth, 1)
    return [f"{p}{l}" for l in range(1, depth + 1) for p in "Wb"] + ["A", "c"]


def fcn_param_count(T: int, d: int, width: int, depth: int = 1) -> int:
    """Parameters of the FCN on ``[vec(X); 1_y]`` (input ``n = T d + T``): ``W1, b1``
    (``k(n + 1)``), ``depth − 1`` hidden layers (``k(k + 1)`` each), read-out ``A, c``
    (``d(k + 1)``), ``k = width``. The one count (memory estimate, ``Result.info``, the
    separation study).

    >>> fcn_param_count(8, 2, 5)      # 5 (24 + 1) + 2 (5 + 1)
    137
    """
    n_in = T * d + T
    return width * (n_in + 1) + (depth - 1) * width * (width + 1) + d * (width + 1)


def fcn_input(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The FCN input ``u = [vec(X); 1_y]`` for a batch.

    Parameters
    ----------
    X : (B, T, d) array
        Tokens.
    y : (B, q) int array
        Selected positions.

    Returns
    -------
    (B, T d + T) array
        The tokens flattened token after token, then the indicator of the selected
        positions (float64).
    """
    B, T, d = X.shape
    ind = np.zeros((B, T))
    np.put_along_axis(ind, y, 1.0, axis=1)
    return np.concatenate([X.reshape(B, T * d), ind], axis=1)


def fcn_init(rng: np.random.Generator, n_in: int, d: int, width: int, depth: int = 1,
             init: str = "zero", init_scale: float = 0.02) -> dict:
    """Initial parameters (see the module docstring): He-scaled hidden layers, read-out
    zero (``init="zero"``) or ``N(0, init_scale²)`` (``init="random"``)."""
    n_in = check_int("n_in", n_in, 1)
    width = check_int("width", width, 1)
    depth = check_int("depth", depth, 1)
    if init not in ("zero", "random"):
        raise ValueError(f"init must be one of ('zero', 'random'), got {init!r}")
    params, fan_in = {}, n_in
    for l in range(1, depth + 1):
        params[f"W{l}"] = rng.standard_normal((width, fan_in)) * np.sqrt(2.0 / fan_in)
        params[f"b{l}"] = np.zeros(width)
        fan_in = width
    if init == "zero":
        params["A"], params["c"] = np.zeros((d, width)), np.zeros(d)
    else:
        params["A"] = init_scale * rng.standard_normal((d, width))
        params["c"] = init_scale * rng.standard_normal(d)
    return params


def mlp_forward(params: dict, u: np.ndarray):
    """The MLP ``f = A h_L + c`` of the module docstring on a batch ``u`` (B, n).

    Returns ``(f, cache)``: outputs (B, d_out) and what :func:`mlp_backward` needs. Shared
    by the STS baseline below and the readouts of :mod:`stsim.studies.sparse.boolean`.
    """
    depth = sum(1 for k in params if k.startswith("W"))
    if u.ndim != 2 or params["W1"].shape[1] != u.shape[1]:
        raise ValueError(f"u must have shape (B, {params['W1'].shape[1]}), got {u.shape}")
    hs, zs = [u], []
    for l in range(1, depth + 1):
        z = hs[-1] @ params[f"W{l}"].T + params[f"b{l}"]          # z_l = W_l h_{l-1} + b_l
        zs.append(z)
        hs.append(np.maximum(z, 0.0))                             # h_l = relu(z_l)
    f = hs[-1] @ params["A"].T + params["c"]                      # f = A h_L + c
    return f, (hs, zs)


def mlp_backward(params: dict, cache, g: np.ndarray, need_input_grad: bool = False):
    """Gradients of ``Σ_b <g_b, f_b>`` for ``g = ∂loss/∂f`` (B, d_out), batch weights
    already folded into ``g``. Returns ``(grads, g_u)`` with ``g_u = ∂/∂u`` (B, n) if
    ``need_input_grad`` else ``None``."""
    hs, zs = cache
    depth = len(zs)
    grads = {"A": g.T @ hs[-1], "c": g.sum(axis=0)}               # r h_Lᵀ, r
    g = g @ params["A"]                                           # g_L = Aᵀ r
    for l in range(depth, 0, -1):
        e = g * (zs[l - 1] > 0)                                   # e_l = g_l ⊙ relu'(z_l)
        grads[f"W{l}"] = e.T @ hs[l - 1]                          # e_l h_{l-1}ᵀ
        grads[f"b{l}"] = e.sum(axis=0)
        if l > 1 or need_input_grad:
            g = e @ params[f"W{l}"]                               # g_{l-1} = W_lᵀ e_l
    return grads, (g if need_input_grad else None)


def fcn_forward_backward(params: dict, u: np.ndarray, target: np.ndarray, need_grad=True):
    """Batch-mean loss ``mean_b ½‖f(u_b) − target_b‖²`` and its analytic gradients.

    Parameters
    ----------
    params : dict
        ``W1, b1, ..., WL, bL, A, c`` (shapes in the module docstring).
    u : (B, n) array
        Inputs (:func:`fcn_input`).
    target : (B, d) array
        Targets.
    need_grad : bool
        If False, return ``(loss, None)``.

    Returns
    -------
    loss : float
        The batch-mean loss.
    grads : dict or None
        Gradients with the keys and shapes of ``params``.
    """
    B = u.shape[0]
    if target.shape != (B, params["A"].shape[0]):
        raise ValueError(f"target must have shape (B, d) = ({B}, {params['A'].shape[0]}), "
                         f"got {target.shape}")
    f, cache = mlp_forward(params, u)
    r = f - target                                                # r = A h_L + c − target
    loss = 0.5 * float(np.einsum("bi,bi->", r, r)) / B
    if not need_grad:
        return loss, None
    grads, _ = mlp_backward(params, cache, r / B)                 # batch mean folded in
    return loss, grads


def fcn_construction(T: int, d: int, q: int, M: float = 6.0) -> dict:
    """An explicit one-hidden-layer ReLU net of width ``2 T d`` computing STS_q (D).

    For a bit ``b ∈ {0, 1}`` and ``|x| ≤ M``::

        relu(x − M(1−b)) − relu(−x − M(1−b)) = b · x

    so one pair of units per (token j, coordinate k), reading ``x_{jk}`` and ``1[j∈y]``
    with bias ``−M``, gives ``x_{jk} 1[j∈y]``; the read-out sums the pairs over j with
    weight ``1/q``. The output is exact unless some unselected ``|x_{jk}| > M``; the
    population loss is ``½ d (T−q)/q² · E[(|x|−M)₊²]`` (x ~ N(0,1); about 1e-11 for
    M = 6). Hence width ``2 T d`` suffices to *represent* STS_q, and with the paper's
    ``Ω(T d)`` lower bound the representational width of an FCN is ``Θ(T d)``.

    Returns
    -------
    dict
        ``W1`` (2Td, Td+T), ``b1`` (2Td,), ``A`` (d, 2Td), ``c`` (d,) for
        :func:`fcn_forward_backward`; unit ``2 (j d + k) + {0: +, 1: −}``.
    """
    T = check_int("T", T, 1)
    d = check_int("d", d, 1)
    q = check_int("q", q, 1, T)
    M = float(M)
    if not M > 0:
        raise ValueError(f"M must be > 0, got {M}")
    n, k = T * d + T, 2 * T * d
    W1, A = np.zeros((k, n)), np.zeros((d, k))
    for j in range(T):
        for kk in range(d):
            for s, sign in enumerate((1.0, -1.0)):
                unit = 2 * (j * d + kk) + s
                W1[unit, j * d + kk] = sign          # ± x_{jk}
                W1[unit, T * d + j] = M              # + M 1[j∈y]
                A[kk, unit] = sign / q
    return {"W1": W1, "b1": np.full(k, -M), "A": A, "c": np.zeros(d)}


class FCNProblem(Problem):
    """The FCN baseline as a training problem for :func:`stsim.core.run.run`.

    The skeleton of :class:`stsim.core.problem.Problem` (as the transformer): validation
    sets drawn once before training, the initialisation, the training stream (fresh batches
    for ``objective="online"``; a fixed sample of ``n_train`` points for ``"sample"``, i.e.
    ``optimizer="gd"``). The encoding stream is unused: the FCN has no positional encoding,
    the positions are the coordinates of its input.

    Metrics: ``val`` (in-distribution validation loss) and ``val/q=<q_test>`` (unseen
    subset sizes; the input size does not depend on q). ``T_test`` is refused: the input
    size ``T d + T`` is fixed by the training length.
    """

    def __init__(self, cfg, streams):
        _resolve_fcn(cfg)         # also for a config that was not resolved by Config
        self.target = target_of(cfg)    # its output: the target's dimension
        super().__init__(cfg, streams)

    def _draw(self, rng, B, T, q, part="train"):
        b = self.target.draw(rng, B, T, q, self.cfg.d, part=part)
        return fcn_input(b.X, b.y), b.target

    @property
    def n_in(self) -> int:
        """Input width of the network, ``T d + T`` (the tokens, then the mask of the
        selected positions)."""
        return self.cfg.T * self.cfg.d + self.cfg.T

    def init_params(self, rng):
        """Initial weights of the MLP (:func:`fcn_init`, drawn from ``rng``): dict of arrays."""
        c = self.cfg
        return fcn_init(rng, self.n_in, self.target.dim(c.d), c.width, c.depth, c.init,
                        c.init_scale)

    def batch_loss_grad(self, params, data, need_grad=True):
        """``(loss, grads)`` of :func:`fcn_forward_backward` on ``data = (u, y_true)`` (the
        batch's target values)."""
        u, y_true = data
        return fcn_forward_backward(params, u, y_true, need_grad=need_grad)

    def info(self):
        """For :attr:`Result.info`: ``arch``, ``n_in``, ``width``, ``depth``, ``n_params``."""
        c = self.cfg
        return {"arch": "fcn", "n_in": self.n_in, "width": c.width, "depth": c.depth,
                "n_params": fcn_param_count(c.T, c.d, c.width, c.depth)}


#: the transformer's options and their defaults: an FCN run refuses other values, which
#: it would otherwise ignore silently
TRANSFORMER_ONLY = {"pe": "stochastic", "d_e": None, "sampler": "slots", "model": "theory",
                    "query": "sum"}


def _resolve_fcn(cfg) -> dict:
    """The FCN's fields of a config being resolved, every check before any work:
    ``width`` (default 64; returned, the field it decides); ``objective`` online or sample;
    no ``T_test`` (the input size is fixed by ``T``); the transformer's options
    (:data:`TRANSFORMER_ONLY`) at their defaults. ``ValueError`` naming the option
    otherwise."""
    width = check_int("width", 64 if cfg.width is None else cfg.width, 1)
    if cfg.T_test:
        raise ValueError(f"T_test={list(cfg.T_test)} is not supported for arch='fcn': the "
                         f"FCN input size T*d + T is fixed by the training length T={cfg.T}; "
                         f"use T_test=() (q_test is supported)")
    if cfg.objective not in ("online", "sample"):
        raise ValueError(f"objective must be 'online' or 'sample' for arch='fcn', got "
                         f"{cfg.objective!r}")
    given = []
    for name, default in TRANSFORMER_ONLY.items():
        v = getattr(cfg, name)
        if not (v == default or (isinstance(v, str) and isinstance(default, str)
                                 and v.lower() == default)):
            given.append(f"{name}={v!r}")
    if given:
        raise ValueError(f"{', '.join(given)}: options of the transformer, which "
                         f"arch='fcn' does not use (it has no positional encoding or "
                         f"attention); leave them out, or use width and depth")
    return {"width": width}


def fcn_memory(cfg) -> dict:
    """Bytes of the largest arrays of an FCN run (see :meth:`Config.memory_estimate`): the
    parameters with gradient and optimiser state, the batch input with its hidden
    activations, the batches drawn ahead (online), the validation sets."""
    f8, n_in = 8, cfg.T * cfg.d + cfg.T
    nb = cfg.n_train if cfg.objective != "online" else cfg.batch
    out = {"parameters (x4: gradient, optimiser)":
           4 * fcn_param_count(cfg.T, cfg.d, cfg.width or 1, cfg.depth) * f8,
           "batch input (x3)": 3 * nb * n_in * f8}
    if cfg.objective == "online":
        out["batches drawn ahead (x2)"] = 2 * nb * (n_in + cfg.d) * f8
    val_T = [cfg.T] * (1 + len(cfg.q_test)) + list(cfg.T_test)
    out["validation sets"] = sum(cfg.n_val * (t * cfg.d + t) for t in val_T) * f8
    return out


#: seconds per multiply-add of the FCN's forward + backward pass (MEASURED, one BLAS
#: thread, shared machine at load ~4.4: 0.44e-10 to 1.4e-10 over T 16-1024, width 64-512,
#: batch 64-256; benchmarks/bench_fcn_cost.py). A rough model: within ~3x.
SECONDS_PER_MAC = 1.0e-10


def fcn_seconds_per_step(cfg) -> float:
    """Rough seconds of one FCN step on one core: ``SECONDS_PER_MAC`` × 3 (forward, and
    the two products of the backward pass) × points × parameters."""
    nb = cfg.n_train if cfg.objective != "online" else cfg.batch
    return SECONDS_PER_MAC * 3 * nb * fcn_param_count(cfg.T, cfg.d, cfg.width or 1, cfg.depth)


def fcn_shapes(cfg) -> dict:
    """``{name: shape}`` of the FCN's parameters (:func:`fcn_init`): ``W1`` (k, T d + T),
    ``b1`` (k,), ``Wl`` (k, k), ``bl`` (k,), ``A`` (o, k), ``c`` (o,), ``k = width``, ``o``
    the target's dimension (``d`` for the mean; :mod:`stsim.core.targets`)."""
    k, n_in = int(cfg.width), int(cfg.T) * (int(cfg.d) + 1)
    o = target_of(cfg).dim(int(cfg.d))
    shape = {"W": (k, k), "b": (k,), "A": (o, k), "c": (o,)}
    return {name: (k, n_in) if name == "W1" else shape[name[0]]
            for name in param_names(cfg.depth)}


def fcn_default_lr(cfg) -> float:
    r"""The FCN's default SGD step: half the mean-square stability bound of its read-out
    ``(A, c)`` at initialisation (the bound :mod:`stsim.core.schedule` derives for V).

    With ``A = 0`` the first steps move only the read-out, a least-squares problem on the
    features ``h̃ = [h_L; 1]``. He initialisation keeps every hidden pre-activation
    ``N(0, σ²)`` with ``σ² = 2 E|u|²/n_in = 2(T d + q)/(T (d + 1))`` (``E|u|² = T d + q``;
    each layer keeps it, ``E relu(z)² = σ²/2``), so a unit has mean ``μ = σ/√(2π)`` and
    second moment ``σ²/2``. The population curvature ``E[h̃ h̃ᵀ] ≈ m mᵀ + diag`` has its
    top eigenvalue along the mean ``m = [μ 1_k; 1]``: ``λ = k μ² + 1 + σ²/2 − μ²``; one
    sample's curvature is ``κ = |h̃|² ≈ k σ²/2 + 1``. The mean square of a step on ``B``
    samples is stable for ``η < 2/(λ + κ/B)``; the default is half of it::

        lr = 1 / (λ + κ/B),   B = batch (online) or n_train (a fixed sample).

    Example: T = 16, d = 5, q = 3, width 64, batch 256: ``lr ≈ 0.052`` (the fixed 1.0 it
    replaces diverged at step 4).
    """
    k = int(cfg.width or 64)
    sigma2 = 2.0 * (cfg.T * cfg.d + cfg.q) / (cfg.T * (cfg.d + 1))
    mu2 = sigma2 / (2.0 * np.pi)
    lam = k * mu2 + 1.0 + sigma2 / 2.0 - mu2
    kappa = k * sigma2 / 2.0 + 1.0
    B = cfg.n_train if cfg.objective != "online" else cfg.batch
    return float(1.0 / (lam + kappa / B))


register_arch("fcn", FCNProblem, encoding=False, resolve=_resolve_fcn, memory=fcn_memory,
              seconds_per_step=fcn_seconds_per_step, shapes=fcn_shapes, lr=fcn_default_lr)
