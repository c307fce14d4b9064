"""Tokens drawn through their statistics (stsim.core.token_stats): the loss and every
gradient have the law of a draw of all T·d token entries (a Monte-Carlo check of the first
two moments, failing on seeded faults), where the draws hold and are refused elsewhere."""
import functools

import numpy as np
import pytest
from scipy.stats import norm

import stsim
from stsim.core.config import Config
from stsim.core.encodings import PEBatch
from stsim.core.model import forward_backward
from stsim.core.token_stats import TokenStats

T, Q, D_TOK, D_E = 7, 2, 3, 10
Y = np.array([[1, 4]])
N = 6000            # replicates per arm
FAMILY_ALPHA = 1e-3  # the chance that the check fails on a correct sampler (Bonferroni)


def _setup(seed=1):
    rng = np.random.default_rng(seed)
    D = D_TOK + D_E
    W = 0.7 * rng.standard_normal((D, D))
    W[:D_TOK, :] = 0.0                      # W's token rows at 0: the logits are positional
    V = 0.5 * rng.standard_normal((D_TOK, D))
    pes = {"index": PEBatch(D_E, idx=rng.permutation(D_E)[:T]),
           "dense": PEBatch(D_E, P=rng.standard_normal((T, D_E)) / np.sqrt(D_E))}
    return W, V, pes


def _samples(W, V, pe, model, stats, rng, n, cls=TokenStats):
    """Per-sample (loss, dW, dV) flattened, ``n`` draws (B = 1 each)."""
    out = np.empty((n, 1 + W.size + V.size))
    for k in range(n):
        if stats:
            X = cls.draw(rng, Y, T, D_TOK)
            tgt = X.target
        else:
            X, tgt = rng.standard_normal((1, T, D_TOK)), None
        L, dW, dV = forward_backward(W, V, X, Y, pe, model=model, target=tgt)
        out[k, 0] = L
        out[k, 1:1 + W.size] = np.asarray(dW).ravel()
        out[k, 1 + W.size:] = dV.ravel()
    return out


def _max_z(a, b):
    """The largest |z| of the differences of the means of the entries and of their
    squares, and the Bonferroni critical value for that many comparisons."""
    keep = (a.std(axis=0) > 0) | (b.std(axis=0) > 0)
    zs = []
    for f in (lambda x: x, np.square):
        fa, fb = f(a[:, keep]), f(b[:, keep])
        se = np.sqrt(fa.var(axis=0, ddof=1) / len(fa) + fb.var(axis=0, ddof=1) / len(fb))
        zs.append(np.abs(fa.mean(axis=0) - fb.mean(axis=0)) / se)
    k = 2 * int(keep.sum())
    return float(max(z.max() for z in zs)), float(norm.ppf(1 - FAMILY_ALPHA / (2 * k)))


@functools.lru_cache(maxsize=None)
def _full_draws(seed, form, model):
    """The arm that draws every token, ``N`` draws from ``seed`` (the same for the law test
    of ``form, model`` and each seeded fault), and the state of its generator after it."""
    W, V, pes = _setup()
    rng = np.random.default_rng(seed)
    a = _samples(W, V, pes[form], model, False, rng, N)
    a.flags.writeable = False
    return a, rng.bit_generator.state


@pytest.mark.parametrize("form,model", [("index", "theory"), ("index", "practical"),
                                        ("dense", "theory")])
def test_statistics_give_the_law_of_full_draws(form, model):
    """Loss and gradient entries: the same means and second moments within the
    critical value (family-wise 1e-3 over every entry) as drawing all tokens."""
    W, V, pes = _setup()
    a, state = _full_draws(7, form, model)
    rng = np.random.default_rng()
    rng.bit_generator.state = state             # as if drawn right after the first arm
    b = _samples(W, V, pes[form], model, True, rng, N)
    z, crit = _max_z(a, b)
    assert z < crit, (z, crit)


class _NoPerp(TokenStats):
    """Seeded fault: the projection ``X w`` without its part orthogonal to span B."""

    def project(self, w):
        c = super().project(w)
        if self._state["phase"][0] == 2:
            nw = self._state["coef"][2]
            q1, q2 = self._state["Q"]
            p = self.zeta - (q1 * self._state["coef"][0][:, None]
                             + q2 * self._state["coef"][1][:, None])
            c -= nw[:, None] * p
        return c


class _NoCross(TokenStats):
    """Seeded fault: the target drawn independent of the attended sum (r_12 = 0)."""

    def _attend(self, s):
        m = super()._attend(s)
        nu2 = self.nu[1]
        self.target[...] = nu2 / np.sqrt(self.y.shape[1])
        return m


class _NoXi(TokenStats):
    """Seeded fault: ``Xᵀδ`` without its fresh part (``ξ`` dropped)."""

    def __init__(self, nu, zeta, xi, y, **kw):
        super().__init__(nu, zeta, np.zeros_like(xi), y, **kw)


@pytest.mark.parametrize("fault", [_NoPerp, _NoCross, _NoXi])
def test_the_check_fails_on_a_seeded_fault(fault):
    W, V, pes = _setup()
    a, state = _full_draws(7, "index", "theory")    # that of the index-theory law test
    rng = np.random.default_rng()
    rng.bit_generator.state = state             # as if drawn right after the first arm
    b = _samples(W, V, pes["index"], "theory", True, rng, N, cls=fault)
    z, crit = _max_z(a, b)
    assert z > crit, (fault.__name__, z, crit)


def test_W_xe_not_zero_is_refused_at_the_step():
    W, V, pes = _setup()
    W[0, T] = 0.3
    X = TokenStats.draw(np.random.default_rng(0), Y, T, D_TOK)
    with pytest.raises(ValueError, match="W_xe"):
        forward_backward(W, V, X, Y, pes["dense"], target=X.target)


def test_a_batch_serves_one_step():
    W, V, pes = _setup()
    X = TokenStats.draw(np.random.default_rng(0), Y, T, D_TOK)
    forward_backward(W, V, X, Y, pes["index"], target=X.target)
    with pytest.raises(RuntimeError, match="one step"):
        forward_backward(W, V, X, Y, pes["index"], target=X.target)


def test_auto_resolves_where_they_hold_and_is_recorded():
    assert Config.from_options(T=20, q=2).draws == "statistics"
    for opts, why in [(dict(freeze=()), "W_xe"), (dict(target="variance"), "target"),
                      (dict(objective="sample", optimizer="gd"), "objective"),
                      (dict(rank=4), "rank"), (dict(init="random", freeze=("W_xx", "W_xe")),
                                               "init")]:
        assert Config.from_options(T=20, q=2, steps=5, **opts).draws == "tokens", opts
        with pytest.raises(ValueError, match=f"draws='statistics'.*{why}"):
            Config.from_options(T=20, q=2, steps=5, draws="statistics", **opts)
    with pytest.raises(ValueError, match="draws must be one of"):
        Config.from_options(T=20, q=2, draws="some")


def test_a_run_with_statistics_learns_and_records_them():
    res = stsim.run(T=50, q=3, seed=0, draws="statistics", progress=False)
    assert res.config["draws"] == "statistics"
    assert res.history["val"][-1] / res.history["val"][0] <= 0.02
    assert res.history["cos_W"][-1] > 0.9
    # (5 steps: the record is written from the config, whatever the run's length)
    tok = stsim.run(T=50, q=3, seed=0, draws="tokens", progress=False, steps=5)
    assert "draws" not in tok.config            # the value meant where absent (older files)


def test_the_held_rows_gradient_is_not_formed_and_the_rest_is_unchanged():
    """token_rows=False leaves dW's token rows 0 and every other entry bit for bit."""
    from stsim.core.model import forward_backward_unchecked
    W, V, pes = _setup()
    rng = np.random.default_rng(3)
    X = rng.standard_normal((4, T, D_TOK))
    y = np.array([[1, 4], [0, 2], [3, 6], [5, 1]])
    for pe in pes.values():
        full = forward_backward_unchecked(W, V, X, y, pe, False, "sum", None, None, True,
                                          False, None, False)
        part = forward_backward_unchecked(W, V, X, y, pe, False, "sum", None, None, True,
                                          False, None, False, token_rows=False)
        assert part[0] == full[0] and np.array_equal(part[2], full[2])
        dW, dW0 = np.asarray(full[1]), np.asarray(part[1])
        assert np.array_equal(dW0[D_TOK:], dW[D_TOK:]) and not dW0[:D_TOK].any()
        assert dW[:D_TOK].any()


@pytest.mark.parametrize("model", ["theory", "practical"])
def test_a_batch_in_parts_gives_the_numbers_of_one_part(model, monkeypatch):
    """The index form cuts a long batch into parts (``_PART`` token numbers each); drawn
    through their statistics, a sample's part holds T numbers per sample, and the step's
    loss and gradients are those of the batch in one part, bit for bit. (The seeded fault,
    a part built with the statistics' width 1 as its token dimension, reads W at the wrong
    offsets: the default call at T = 4000 was the first to cut its batch and diverged.)"""
    from stsim.core import index_form
    W, V, _ = _setup()
    rng = np.random.default_rng(5)
    B = 8
    idx = np.stack([rng.permutation(D_E)[:T] for _ in range(B)])
    y = np.stack([rng.permutation(T)[:Q] for _ in range(B)])
    pe = PEBatch(D_E, idx=idx)
    base = TokenStats.draw(rng, y, T, D_TOK)

    def step():
        X = TokenStats(base.nu.copy(), base.zeta.copy(), base.xi.copy(), y)
        L, dW, dV = forward_backward(W, V, X, y, pe, model=model, target=X.target)
        return L, np.asarray(dW), dV

    one = step()
    monkeypatch.setattr(index_form, "_PART", 4)       # parts of one sample each
    ops = index_form._IndexOps(idx, D_E, y, 1.0, D_TOK, model == "practical", None)
    assert len(ops.parts(TokenStats(base.nu, base.zeta, base.xi, y))) == B
    cut = step()
    assert cut[0] == one[0]
    assert np.array_equal(cut[1], one[1]) and np.array_equal(cut[2], one[2])
