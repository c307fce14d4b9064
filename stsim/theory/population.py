r"""Exact population objective on the invariant set (derived in ``docs/theory.md``).

Blocks: ``W = [[W_xx, W_xe], [W_ex, W_ee]]`` (rows key side, columns query side),
``V = [V_x, V_e]``. With ``x_query = 0`` the query is ``z_q = [0; p_q]``,
``p_q = c Σ_{j∈y} p_j`` (``c = 1`` for ``query="sum"``, ``1/q`` for ``"mean"``), so
``W_xx`` and ``W_ex`` never enter the loss and get zero gradient. On the set
``W_xe = 0, V_e = 0`` the logits ``a_i = p_iᵀ W_ee p_q`` do not depend on X, and with
``s = softmax(a)`` (over the T tokens; the practical model adds the query logit
``a_q = p_qᵀ W_ee p_q``, whose value ``V z_q = V_e p_q = 0``; another mechanism of
:mod:`stsim.core.attention` replaces softmax and its Jacobian below: the expectation over X
holds for any weights that do not depend on X), ``u = 1_y/q``::

    r = V_x X s − X u = Σ_i (s_i V_x − u_i I) x_i,     x_i ~ N(0, I_d) i.i.d.
    E_X ℓ = ½ Σ_i ‖s_i V_x − u_i I‖_F² = ½ (‖s‖² ‖V_x‖_F² − 2 (s·u) tr V_x + d ‖u‖²).

Gradients of one configuration (``‖u‖² = 1/q``; ``s_i`` only over tokens)::

    ∂/∂V_x = ‖s‖² V_x − (s·u) I
    g_i = ∂/∂s_i = ‖V_x‖_F² s_i − (tr V_x) u_i        (g_q = 0 for the query column)
    δ   = s ⊙ (g − (sᵀg) 1)                            (softmax Jacobian)
    ∂/∂W_ee = Σ_i δ_i p_i p_qᵀ  (+ δ_q p_q p_qᵀ, practical)

The invariant blocks' population gradients vanish (odd moments in X: docs/theory.md §2;
checked against the Monte-Carlo average of :func:`stsim.forward_backward` in
``tests/test_population.py``).

The remaining expectation — over the subset y and, for stochastic families, the
encodings — is taken by ``"enumerate"`` (exact: every equally likely configuration, at
most ``max_enum``; docs/theory.md §1 lists them per family) or ``"mc"``: the sample average
over ``n_mc`` configurations drawn ONCE, when the objective is built, from an explicit
``numpy.random.Generator`` (common random numbers: a deterministic function of (W, V), an
unbiased estimate of the population loss, with the exact gradient of that estimate; for
``stochastic/sphere`` the selected tokens are the first q, the encodings being i.i.d.).

Built by :func:`make_population_objective` (used by ``stsim.run(objective="population")``).
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from stsim.core.attention import make_attention
from stsim.core.encodings import Encoding, sample_checked
from stsim.core.families import make_encoding
from stsim.core.kernels import _softmax_rows
from stsim.core.model import MODELS, QUERIES, query_coef
from stsim.core.problem import register_objective
from stsim.core.seeds import Streams
from stsim.core.task import sample_subsets
from stsim.util.validate import as_rng, check_choice, check_int

__all__ = ["PopulationObjective", "make_population_objective", "METHODS", "MAX_ENUM"]

METHODS = ("auto", "enumerate", "mc")
MAX_ENUM = 10 ** 7
_CHUNK_ELEMS = 2 ** 21          # configurations per chunk ≈ _CHUNK_ELEMS / (T · q)


def _combos(n, k):
    N = math.comb(n, k)
    flat = np.fromiter(itertools.chain.from_iterable(itertools.combinations(range(n), k)),
                       dtype=np.int64, count=N * k)
    return flat.reshape(N, k)


def _with_complement(sel, T):
    """Rows ``[sel, the other positions of range(T) in increasing order]``, shape (n, T)."""
    n = sel.shape[0]
    mask = np.ones((n, T), dtype=bool)
    np.put_along_axis(mask, sel, False, axis=1)
    rest = np.broadcast_to(np.arange(T), (n, T))[mask].reshape(n, T - sel.shape[1])
    return np.concatenate([sel, rest], axis=1)


class PopulationObjective:
    """Population loss and its analytic gradient on the invariant set. Use
    :func:`make_population_objective` rather than this constructor.

    Parameters
    ----------
    d, d_e, T, q : int
        Token dimension, encoding width, sequence length, subset size.
    family : str
        Encoding label (``onehot``, ``stochastic/slots``, ``stochastic/sphere``,
        ``near-orthogonal``).
    source : list of tuple
        The configurations, in chunks: ``("index", tok)`` with ``tok`` (n, T) slot
        numbers, ``("table", pos)`` with ``pos`` (n, T) rows of ``table``, or
        ``("dense", P)`` with ``P`` (n, T, d_e) encodings; the q selected tokens come first
        in every row. Every configuration has weight ``1/N``.
    query, model : str
        The query convention (``"sum"``, ``"mean"``) and the model (``"theory"``,
        ``"practical"``).
    method : {"enumerate", "mc"}
        How ``source`` was made (recorded for reporting).
    table : (n_positions, d_e) array, optional
        The fixed near-orthogonal encodings (``"table"`` chunks).
    span_n : int, optional
        ``n`` of the structure ``W_ee = a (I_n − J_n/n)`` the dynamics keeps
        (:meth:`~stsim.core.encodings.Encoding.reduced_n`), or None (``I`` is used).
    """

    def __init__(self, d, d_e, T, q, family, source, *, query="sum", model="theory",
                 method="enumerate", table=None, span_n=None, attention=None):
        check_choice("query", query, QUERIES)
        check_choice("model", model, MODELS)
        self.d, self.d_e, self.T, self.q = d, d_e, T, q
        self.family, self.source, self.query, self.model = family, source, query, model
        self.method, self.table = method, table
        self.c = query_coef(query, q)
        self.N = sum(len(ch[1]) for ch in source)
        # None: softmax, as scipy computes it (the numbers of before mechanisms existed)
        att = None if attention is None else make_attention(attention)
        self.att = None if att is None or att.paper else att
        # span of the W_ee structure the dynamics keeps from zero init (see metrics)
        self.span_n = span_n

    def _check(self, W, V):
        d, D = self.d, self.d + self.d_e
        W, V = np.asarray(W, dtype=np.float64), np.asarray(V, dtype=np.float64)
        if W.shape != (D, D) or V.shape != (d, D):
            raise ValueError(f"W must be ({D}, {D}) and V ({d}, {D}) (D = d + d_e = {d} + "
                             f"{self.d_e}), got {W.shape} and {V.shape}")
        wxe = float(np.abs(W[:d, d:]).max(initial=0.0))
        ve = float(np.abs(V[:, d:]).max(initial=0.0))
        if wxe != 0.0 or ve != 0.0:
            raise ValueError(
                "the population objective is exact only on the invariant set W_xe = 0, V_e = 0 "
                f"(got max|W_xe| = {wxe:.3g}, max|V_e| = {ve:.3g}); start from init='zero' or "
                "use objective='online'")
        return W, V

    def _chunk(self, kind, arr, Wee, Vx, nV, trV, want_grad):
        """Sums over one chunk of: loss, ‖s‖², s·u, and the W_ee gradient."""
        c, q, d_e = self.c, self.q, self.d_e
        practical = self.model == "practical"
        n = arr.shape[0]
        if kind == "index":
            tok, sel = arr, arr[:, :q]
            a = c * Wee[tok[:, :, None], sel[:, None, :]].sum(axis=2)         # (n, T)
            if practical:
                aq = c * c * Wee[sel[:, :, None], sel[:, None, :]].sum(axis=(1, 2))
        else:
            P = arr if kind == "dense" else self.table[arr]                    # (n, T, d_e)
            pq = c * P[:, :q].sum(axis=1)                                      # (n, d_e)
            wq = pq @ Wee.T                                                    # W_ee p_q
            a = np.einsum("nte,ne->nt", P, wq)
            if practical:
                aq = np.einsum("ne,ne->n", pq, wq)
        if practical:
            a = np.concatenate([a, aq[:, None]], axis=1)
        s = _softmax_rows(a) if self.att is None else self.att.weights(a)     # a is fresh
        st = s[:, :self.T]
        S2 = np.einsum("nt,nt->n", st, st)
        su = st[:, :q].sum(axis=1) / q
        loss = 0.5 * (S2 * nV - 2.0 * su * trV + self.d / q)
        out = [loss.sum(), S2.sum(), su.sum(), None]
        if not want_grad:
            return out
        g = nV * s
        g[:, :q] -= trV / q
        if practical:
            g[:, -1] = 0.0
        if self.att is None:
            delta = s * (g - np.einsum("nt,nt->n", s, g)[:, None])
        else:
            delta = self.att.backward(g, s)
        if kind == "index":
            dt = delta[:, :self.T]
            flat = (tok[:, :, None] * d_e + sel[:, None, :]).ravel()
            wts = np.broadcast_to(c * dt[:, :, None], (n, self.T, q)).ravel()
            if practical:
                flat = np.concatenate([flat, (sel[:, :, None] * d_e + sel[:, None, :]).ravel()])
                wts = np.concatenate([wts, np.broadcast_to(
                    (c * c * delta[:, -1])[:, None, None], (n, q, q)).ravel()])
            G = np.bincount(flat, weights=wts, minlength=d_e * d_e).reshape(d_e, d_e)
        else:
            U = np.einsum("nte,nt->ne", P, delta[:, :self.T])                  # P_nᵀ δ_n
            if practical:
                U += delta[:, -1:] * pq
            G = U.T @ pq
        out[3] = G
        return out

    def loss_grad(self, W, V):
        """Population loss and its gradient on the FULL matrices.

        Parameters
        ----------
        W, V : arrays
            ``(D, D)`` with ``W_xe = 0`` and ``(d, D)`` with ``V_e = 0`` (else ``ValueError``).

        Returns
        -------
        loss : float
            The population loss.
        dW : (D, D) array
            Its gradient in ``W``, nonzero only in the ``W_ee`` block.
        dV : (d, D) array
            Its gradient in ``V``, nonzero only in the ``V_x`` block.
        """
        return self._eval(W, V, True)

    def loss(self, W, V) -> float:
        """Population loss only."""
        return self._eval(W, V, False)[0]

    def _eval(self, W, V, want_grad):
        W, V = self._check(W, V)
        d = self.d
        Wee, Vx = W[d:, d:], V[:, :d]
        nV, trV = float(np.sum(Vx * Vx)), float(np.trace(Vx))
        L = S2 = su = 0.0
        G = np.zeros((self.d_e, self.d_e)) if want_grad else None
        for kind, arr in self.source:
            l, s2, u, g = self._chunk(kind, arr, Wee, Vx, nV, trV, want_grad)
            L, S2, su = L + l, S2 + s2, su + u
            if want_grad:
                G += g
        L, S2, su = L / self.N, S2 / self.N, su / self.N
        if not want_grad:
            return float(L), None, None
        dW = np.zeros_like(W)
        dW[d:, d:] = G / self.N
        dV = np.zeros_like(V)
        dV[:, :d] = S2 * Vx - su * np.eye(d)
        return float(L), dW, dV

    def span_coefficient(self, Wee):
        """``(a, ‖W_ee − a B‖_F)`` for the structure ``B`` the dynamics keeps:
        ``B = I_T − J_T/T`` on the trained block (onehot), ``I − J/d_e`` (slots), ``I``
        otherwise (sphere: exact by rotation invariance of the population; near-orthogonal:
        no exact structure, reported for information). ``a = <W_ee, B>/‖B‖²``."""
        n = self.span_n
        if n is None:
            a = float(np.trace(Wee)) / self.d_e
            R = Wee - a * np.eye(self.d_e)
            return a, float(np.linalg.norm(R))
        blk = Wee[:n, :n]
        a = (float(np.trace(blk)) - float(blk.sum()) / n) / (n - 1)
        R = Wee.copy()
        R[:n, :n] -= a * (np.eye(n) - 1.0 / n)
        return a, float(np.linalg.norm(R))

    def metrics(self, W, V) -> dict:
        """Invariants recorded by ``run()`` at every record step.

        ``inv/W_xx``, ``inv/W_xe``, ``inv/W_ex``, ``inv/V_e`` : largest absolute entry of the blocks that
        stay 0 from zero init; ``inv/W_ee_offspan`` : ‖W_ee − a B‖_F (see
        :meth:`span_coefficient`); ``inv/V_x_offspan`` : ‖V_x − γ I‖_F; ``a``; ``gamma`` =
        tr V_x / d.
        """
        d = self.d
        W, V = np.asarray(W, dtype=np.float64), np.asarray(V, dtype=np.float64)
        a, off = self.span_coefficient(W[d:, d:])
        Vx = V[:, :d]
        gamma = float(np.trace(Vx)) / d
        return {"inv/W_xx": float(np.abs(W[:d, :d]).max()),
                "inv/W_xe": float(np.abs(W[:d, d:]).max(initial=0.0)),
                "inv/W_ex": float(np.abs(W[d:, :d]).max(initial=0.0)),
                "inv/V_e": float(np.abs(V[:, d:]).max(initial=0.0)),
                "inv/W_ee_offspan": off,
                "inv/V_x_offspan": float(np.linalg.norm(Vx - gamma * np.eye(d))),
                "a": a, "gamma": gamma}

    def describe(self) -> dict:
        """``{"family", "method", "configurations", "query", "model"}``: how the expectation
        is taken."""
        return {"family": self.family, "method": self.method, "configurations": self.N,
                "query": self.query, "model": self.model}


def _chunks(arr, per_row):
    """Split rows into chunks of about ``_CHUNK_ELEMS`` working elements."""
    step = max(1, _CHUNK_ELEMS // max(1, per_row))
    return [arr[i:i + step] for i in range(0, len(arr), step)]


def make_population_objective(cfg, enc: Encoding | None = None, *, method="auto", n_mc=4096,
                              rng=None, max_enum=MAX_ENUM) -> PopulationObjective:
    """Build the population objective for a resolved :class:`stsim.Config`.

    Parameters
    ----------
    cfg : Config or dict
        A resolved config (``T, q, d, d_e, pe, sampler, query, model``), or a dict of
        the same keys.
    enc : Encoding, optional
        Built from ``cfg`` if omitted (the near-orthogonal table must then be the run's:
        pass ``enc``).
    method : {"auto", "enumerate", "mc"}
        ``"auto"``: enumerate for onehot / slots, and for near-orthogonal when
        ``C(T, q) <= 10⁵``; Monte-Carlo otherwise.
    n_mc : int
        Monte-Carlo sample size (configurations drawn once).
    rng : Generator or int, optional
        Generator or seed of the Monte-Carlo draws; default
        ``Streams(cfg.seed).population()``, independent of the other streams of
        :func:`stsim.run` (:mod:`stsim.core.seeds`).
    max_enum : int
        Largest number of configurations enumerated (default 10⁷).

    Raises
    ------
    ValueError
        enumeration of more than ``max_enum`` configurations (suggesting
        :mod:`stsim.theory.reduced` or ``method="mc"``); enumeration of the sphere family.
    """
    get = (lambda k: cfg[k]) if isinstance(cfg, dict) else (lambda k: getattr(cfg, k))
    opt = cfg.get if isinstance(cfg, dict) else (lambda k, v: getattr(cfg, k, v))
    T, q, d, query, model = (get(k) for k in ("T", "q", "d", "query", "model"))
    if opt("rank", None) is not None:
        raise ValueError("the population objective takes the merged W (rank=None); a key/query "
                         "pair of rank r starts off the invariant set W_xe = 0 it is exact on")
    att = make_attention(opt("attention", None), opt("temperature", 1.0))
    if enc is None:
        enc = make_encoding(get("pe"), T_max=T, d_e=get("d_e"), sampler=get("sampler"),
                            rng=np.random.default_rng(0))
    check_choice("method", method, METHODS)
    n_mc = check_int("n_mc", n_mc, 1)
    # the encoding's facts decide (never its name): enumerate an index family's
    # configurations (a fixed one's C(T, q) subsets through its slots, a per-sample one's by
    # the slots law), a fixed dense table's subsets when few; Monte-Carlo otherwise
    family, d_e, span_n = enc.label, enc.d_e, enc.reduced_n(T)
    enc.check_length(T)
    count = enc.n_configurations(T, q)
    if method == "auto":
        enumerable = count is not None and (enc.index or (enc.fixed and count <= 10 ** 5))
        method = "enumerate" if enumerable else "mc"
    if method == "enumerate":
        if count is None:
            raise ValueError(f"the {family} encoding has no finite enumeration; "
                             "use method='mc'")
        if count > max_enum:
            raise ValueError(
                f"exact enumeration needs {count:.3g} configurations of the {family} encoding "
                f"(T={T}, q={q}, d_e={d_e}), more than max_enum={max_enum:.0e}; use the "
                "closed-form reduced dynamics (stsim.theory.reduced) for onehot/slots from zero init, "
                "or method='mc' (Monte-Carlo)")
        if count * T > 5 * 10 ** 7:
            raise ValueError(
                f"exact enumeration of {count:.3g} configurations x T={T} positions needs more "
                "than 5e7 stored indices; use stsim.theory.reduced (onehot/slots from zero init) or "
                "method='mc'")
        if enc.fixed:      # the C(T, q) subsets of the positions, through the fixed slots
            tok = _with_complement(_combos(T, q), T)
            if enc.index:
                tok = np.ascontiguousarray(sample_checked(enc, None, 1, T).idx)[tok]
        else:   # the slots law: selected S, then unselected U ⊂ [d_e] \ S
            S = _combos(d_e, q)
            comp = _with_complement(S, d_e)[:, q:]                      # (C(d_e,q), d_e − q)
            pick = _combos(d_e - q, T - q)                              # (C(d_e−q, T−q), T−q)
            U = comp[np.arange(len(S))[:, None, None], pick[None, :, :]]         # (nS, nU, T−q)
            tok = np.concatenate([np.repeat(S, len(pick), axis=0), U.reshape(-1, T - q)], axis=1)
    else:
        if rng is None:
            rng = Streams(opt("seed", 0)).population()
        rng = as_rng(rng)
        if not enc.index and not enc.fixed:      # per-sample dense (sphere)
            P = sample_checked(enc, rng, n_mc, T).P                              # selected = first q
            return PopulationObjective(d, d_e, T, q, family,
                                       [("dense", c) for c in _chunks(P, T * d_e)],
                                       query=query, model=model, method="mc", span_n=span_n,
                                       attention=att)
        y = sample_subsets(rng, n_mc, T, q)
        pe = sample_checked(enc, rng, n_mc, T)
        base = np.broadcast_to(pe.idx, (n_mc, T)) if pe.is_index else \
            np.broadcast_to(np.arange(T), (n_mc, T))
        tok = np.take_along_axis(np.ascontiguousarray(base), _with_complement(y, T), axis=1)
    table = None
    if not enc.index:      # fixed dense: positions into its table, gathered per chunk
        table = sample_checked(enc, None, 1, T).P
        src = [("table", c) for c in _chunks(tok, T * d_e)]
    else:
        src = [("index", c) for c in _chunks(tok, T * q)]
    return PopulationObjective(d, d_e, T, q, family, src, query=query, model=model,
                               method=method, table=table, span_n=span_n, attention=att)


def check_population(cfg) -> None:
    """``objective="population"`` of :func:`stsim.run`, checked when its config is resolved
    (before any work or file): the exact expectation the run uses must be enumerable —
    for an index family (onehot, stochastic/slots) its configurations number at most
    ``MAX_ENUM`` (and their stored indices 5e7). ``ValueError`` naming the sizes and what
    to do instead (a run has no Monte-Carlo option)."""
    spec = cfg.resolved.encoding
    T, q = cfg.T, cfg.q
    count = spec.n_configurations(T, q)
    if count is None or not (spec.index or (spec.fixed and count <= 10 ** 5)):
        return                                     # Monte-Carlo: any size
    if count > MAX_ENUM or count * T > 5 * 10 ** 7:
        raise ValueError(
            f"objective='population' takes the exact expectation over the {spec.label} "
            f"encoding's {count:.3g} configurations at T={T}, q={q} (d_e={spec.d_e}), more "
            f"than a run can enumerate ({MAX_ENUM:.0e}, and 5e7 stored indices): use a "
            f"smaller T or q, pe='onehot' (C(T, q) configurations), the reduced dynamics of "
            f"onehot/slots from zero init (stsim theory; stsim.theory.reduced), or objective='online'")


register_objective("population", make_population_objective, check=check_population)
