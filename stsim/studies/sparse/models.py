r"""The two models of the sparse-Boolean study: one attention head with an MLP readout, and
an FCN on the flattened input; their analytic gradients and the norm projection (the
task and the trial are in :mod:`stsim.studies.sparse.boolean`).

Attention model (one head, [CLS]-style learned query)
-----------------------------------------------------
Token ``t`` is the token embedding ``b_t ∈ R`` (a ±1 token's embedding is affine in
``b_t``; the constant is absorbed in the biases) concatenated with a position embedding
``p_t ∈ R^k``: one-hot (``pos="onehot"``, ``k = T``, fixed ``P = I``) or learned
(``pos="learned"``, ``P ∈ R^{T×k}`` trained, initialised ``N(0, 1/k)``). The query is a
learned vector; as everywhere in stsim it is merged with the key matrix (the
reparameterisation ``a = K^T q_CLS``), so the logits are linear in the token::

    z_t = a_b b_t + <a_p, p_t>,            α = softmax(z)                 (T,)
    h   = Σ_t α_t (v_b b_t + V_p p_t) = v_b S + V_p P^T α,   S = <α, b>   (d_v,)
    f   = A relu(W1 h + b1) + c                                            (scalar)

Keys always see token and position. Values: ``values="token"`` (default) drops the
positional part (``V_p ≡ 0``, not a parameter); ``values="token+position"`` learns ``V_p``.
Both give the same success counts on the cells of ``benchmarks/bench_sparse_protocol.py``;
the default is the smaller model.

Parameters ``a_b`` (1,), ``a_p`` (k,), ``v_b`` (d_v,), ``V_p`` (d_v, k) if
``values="token+position"``, ``P`` (T, k) if learned, and the readout ``W1`` (r, d_v), ``b1`` (r,), ``A`` (1, r), ``c`` (1,) of
:func:`stsim.baselines.fcn.mlp_forward`. Representation: ``a_p`` large on S makes ``α ≈ 1/s`` there,
so ``S`` is the mean of the relevant bits and the MLP reads any symmetric function
(AND, parity, majority) off it; unequal weights ``α_{i_j} ∝ 2^j`` make ``S`` injective
in the relevant bits, so any truth table is representable by the same head.

FCN baseline: the MLP ``f = A relu(W1 b + b1) + c`` on the flattened input ``b ∈ R^T``.

Loss and gradients (``m`` samples; ``σ`` the logistic function)::

    L = (1/m) Σ_n log(1 + exp(−y_n f_n)) + (λ/2) Σ_blocks ‖θ‖²
    g_n = ∂L/∂f_n = −y_n σ(−y_n f_n) / m

    δh_n  = W1^T (g_n A^T ⊙ 1[W1 h_n + b1 > 0])        (mlp_backward, input gradient)
    ∂v_b  = Σ_n δh_n S_n,     δS_n = <δh_n, v_b>
    ∂(V_p P^T) = Σ_n δh_n α_n^T                          (d_v, T)
    δα_nt = δS_n b_nt + (P V_p^T δh_n)_t
    δz_nt = α_nt (δα_nt − Σ_u α_nu δα_nu)                 (softmax backward)
    ∂a_b  = Σ_{n,t} δz_nt b_nt,     ∂(P a_p) = Σ_n δz_n   (T,)
    one-hot:  ∂a_p = ∂(P a_p),  ∂V_p = ∂(V_p P^T)
    learned:  ∂a_p = P^T ∂(P a_p),  ∂V_p = ∂(V_p P^T) P,
              ∂P = ∂(P a_p) a_p^T + ∂(V_p P^T)^T V_p

plus ``λ θ`` for every block. Cost O(m T (d_v + k)) per step (one-hot: O(m T d_v); no
one-hot matrix is built).
"""
from __future__ import annotations

import math

import numpy as np
from scipy.special import expit, log_expit, softmax

from stsim.baselines.fcn import fcn_init, mlp_backward, mlp_forward
from stsim.util.validate import as_rng, check_int

__all__ = ["BOOL_MODELS", "POSITIONS", "VALUES", "MLP_KEYS", "init_bool_params",
           "bool_forward_backward", "predict", "attention_weights", "project"]

BOOL_MODELS = ("attention", "fcn")
POSITIONS = ("onehot", "learned")
VALUES = ("token", "token+position")
MLP_KEYS = ("W1", "b1", "A", "c")


# --------------------------------------------------------------------------------------
# models
# --------------------------------------------------------------------------------------
def init_bool_params(rng, T: int, model: str = "attention", *, d_v: int = 4, hidden: int = 16,
                pos: str = "onehot", k: int | None = None, values: str = "token",
                init_scale: float = 0.1) -> dict:
    """Initial parameters.

    attention: ``a_b = a_p = 0`` (uniform attention), ``v_b ~ N(0, I)``, ``V_p = 0``, learned
    ``P ~ N(0, 1/k)``; readout ``W1 ~ N(0, 2/d_v)`` (He), ``b1 = 0``, ``A, c ~ N(0,
    init_scale²)``. fcn: ``W1 ~ N(0, 2/T)``, ``b1 = 0``, ``A, c ~ N(0, init_scale²)``.
    """
    rng = as_rng(rng)
    T = check_int("T", T, 1)
    hidden = check_int("hidden", hidden, 1)
    if model == "fcn":
        return fcn_init(rng, T, 1, hidden, 1, init="random", init_scale=init_scale)
    if model != "attention":
        raise ValueError(f"model must be one of {BOOL_MODELS}, got {model!r}")
    d_v = check_int("d_v", d_v, 1)
    if pos not in POSITIONS:
        raise ValueError(f"pos must be one of {POSITIONS}, got {pos!r}")
    params = {"a_b": np.zeros(1), "v_b": rng.standard_normal(d_v)}
    if pos == "learned":
        k = check_int("k", k if k is not None else 16, 1)
        params["P"] = rng.standard_normal((T, k)) / math.sqrt(k)
    else:
        if k not in (None, T):
            raise ValueError(f"k must equal T={T} for pos='onehot' (or be omitted), got {k}")
        k = T
    if values not in VALUES:
        raise ValueError(f"values must be one of {VALUES}, got {values!r}")
    params["a_p"] = np.zeros(k)
    if values == "token+position":
        params["V_p"] = np.zeros((d_v, k))
    params.update(fcn_init(rng, d_v, 1, hidden, 1, init="random", init_scale=init_scale))
    return params


def _check_batch(params, b):
    b = np.asarray(b, dtype=float)
    T = params["P"].shape[0] if "P" in params else (
        params["a_p"].shape[0] if "a_p" in params else params["W1"].shape[1])
    if b.ndim != 2 or b.shape[1] != T:
        raise ValueError(f"b must have shape (m, T) = (m, {T}), got {b.shape}")
    return b


def _attention_forward(params, b):
    """Logits, weights and head output (see the module docstring)."""
    P = params.get("P")
    Pa = params["a_p"] if P is None else P @ params["a_p"]                 # (T,)
    z = params["a_b"][0] * b + Pa                                          # (m, T)
    alpha = softmax(z, axis=1)
    S = np.einsum("nt,nt->n", alpha, b)
    h = S[:, None] * params["v_b"]                                         # (m, d_v)
    VP = None
    if "V_p" in params:                                                    # values="token+position"
        VP = params["V_p"] if P is None else params["V_p"] @ P.T           # (d_v, T)
        h = h + alpha @ VP.T
    return alpha, S, VP, h


def attention_weights(params, b) -> np.ndarray:
    """The attention weights ``α`` (m, T) of the attention model on inputs ``b``."""
    return _attention_forward(params, _check_batch(params, b))[0]


def predict(params, b) -> np.ndarray:
    """Scores ``f`` (m,) of either model (attention if ``params`` has ``a_p``)."""
    b = _check_batch(params, b)
    u = _attention_forward(params, b)[3] if "a_p" in params else b
    return mlp_forward({k: params[k] for k in MLP_KEYS}, u)[0][:, 0]


def bool_forward_backward(params: dict, b, y, weight_decay: float = 0.0, need_grad: bool = True):
    """Regularised mean logistic loss of either model and its analytic gradients.

    Returns ``(loss, grads, f)``: ``grads`` has the keys of ``params`` (``None`` if not
    ``need_grad``), ``f`` (m,) the scores, so a trainer gets margins for free.
    """
    b = _check_batch(params, b)
    y = np.asarray(y, dtype=float)
    m = b.shape[0]
    if y.shape != (m,):
        raise ValueError(f"y must have shape (m,) = ({m},), got {y.shape}")
    attn = "a_p" in params
    mlp = {k: params[k] for k in MLP_KEYS}
    if attn:
        alpha, S, VP, u = _attention_forward(params, b)
    else:
        u = b
    f2, cache = mlp_forward(mlp, u)
    f = f2[:, 0]
    lam = float(weight_decay)
    loss = -float(np.mean(log_expit(y * f)))                              # log(1+e^{-yf})
    if lam:
        loss += 0.5 * lam * sum(float(np.sum(v * v)) for v in params.values())
    if not need_grad:
        return loss, None, f
    g = (-y * expit(-y * f) / m)[:, None]                                 # ∂L/∂f
    grads, dh = mlp_backward(mlp, cache, g, need_input_grad=attn)
    if attn:
        P = params.get("P")
        grads["v_b"] = dh.T @ S                                           # Σ δh S
        dS = dh @ params["v_b"]
        dalpha = dS[:, None] * b                                          # δS b (+ P V_pᵀ δh)
        if VP is not None:
            dVP = dh.T @ alpha                                            # (d_v, T)
            dalpha = dalpha + dh @ VP
        dz = alpha * (dalpha - np.einsum("nt,nt->n", alpha, dalpha)[:, None])
        grads["a_b"] = np.array([np.einsum("nt,nt->", dz, b)])
        dPa = dz.sum(axis=0)                                              # (T,)
        if P is None:
            grads["a_p"] = dPa
            if VP is not None:
                grads["V_p"] = dVP
        else:
            grads["a_p"] = P.T @ dPa
            grads["P"] = np.outer(dPa, params["a_p"])
            if VP is not None:
                grads["V_p"] = dVP @ P
                grads["P"] += dVP.T @ params["V_p"]
    if lam:
        for key, v in params.items():
            grads[key] = grads[key] + lam * v
    return loss, grads, f


def project(params: dict, max_norm) -> float:
    """Project every block onto ``‖θ‖_F ≤ max_norm`` in place (no-op for ``None``);
    return the largest block norm after projection."""
    worst = 0.0
    for v in params.values():
        nrm = float(np.linalg.norm(v))
        if max_norm is not None and nrm > max_norm:
            v *= max_norm / nrm
            nrm = float(max_norm)
        worst = max(worst, nrm)
    return worst
