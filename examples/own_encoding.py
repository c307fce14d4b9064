"""An encoding of your own: the smallest code that adds a positional-encoding family
=================================================================================

Subclass stsim.Encoding, implement sample(rng, B, T) -> PEBatch (dense P, (T, d_e) or
(B, T, d_e), or one-hot slots idx); pass an instance to stsim.run, or register it by name
(stsim.register_encoding: pe="dft" in Config, run, sweeps, Result.attention). Of two
sinusoidal families "dft" learns like one-hot, "sinusoid" (Vaswani et al.) does not: why.
"""
import os

import numpy as np

import stsim

SMOKE = os.environ.get("STSIM_EXAMPLE_SMOKE") == "1"


class Sinusoid(stsim.Encoding):
    """Fixed rows of unit norm p_t = [sin(w_k t), cos(w_k t)]_k, K = d_e/2 frequencies
    w_k = base^(-k/K) (Vaswani et al. 2017: geometric)."""

    name = "sinusoid"
    index = False                                     # dense: P, not one-hot slots
    base = 30.0

    def frequencies(self):
        K = self.d_e // 2
        return 1.0 / self.base ** (np.arange(K) / K)

    def sample(self, rng, B, T):
        pos = np.arange(T)[:, None]
        w = self.frequencies()
        P = np.concatenate([np.sin(pos * w), np.cos(pos * w)], axis=1)
        return stsim.PEBatch(d_e=self.d_e, P=P / np.linalg.norm(P, axis=1, keepdims=True))


class DFT(Sinusoid):
    """w_k = 2 pi k/K: sum_k cos(w_k (s - t)) = 0 for s != t (mod K), so the rows of any K
    consecutive positions are orthonormal (coherence 0)."""

    name = "dft"

    def frequencies(self):
        K = self.d_e // 2
        return 2 * np.pi * np.arange(K) / K


stsim.register_encoding("sinusoid", Sinusoid)        # pe="sinusoid" from now on
stsim.register_encoding("dft", DFT)

T, d_e = 16, 32
for enc in (DFT(d_e), Sinusoid(d_e)):
    P = enc.sample(None, 1, T).P
    ev = np.linalg.eigvalsh(P @ P.T)
    print(f"{enc.name:9s} coherence max|<p_i, p_j>| over {T} positions: "
          f"{stsim.coherence(P):.3f}; eigenvalues of the Gram matrix P P': largest "
          f"{ev.max():.3g}, {np.sum(ev < 1e-3)} of {T} below 1e-3")
steps = 100 if SMOKE else 2000
for pe, opts in (("dft", {"d_e": d_e}), ("sinusoid", {"d_e": d_e}),
                 ("near-orthogonal", {"d_e": d_e}), ("onehot", {})):
    res = stsim.run(T=T, q=2, pe=pe, steps=steps, batch=256, lr=1.0, seed=0, **opts)
    s, X, y = res.attention(n=200, seed=1, return_inputs=True)
    print(f"{pe:16s} final val loss {res.final('val'):.4f}   attention on the selected "
          f"positions {np.take_along_axis(s, y, 1).sum(1).mean():.2f}")
print("""
Why "sinusoid" does not learn: the logit of position i is p_i' W_ee p_q (p_q: the sum of the
selected p_j), and gradient descent first grows W_ee ~ a I; with coherent rows a neighbour
of a selected position scores nearly as much as it does. To separate them W_ee must undo the
Gram matrix P P', whose small eigenvalues (above) put that out of gradient descent's reach.
"dft" (the discrete Fourier basis) has orthonormal rows: it learns like one-hot (and repeats after d_e/2 positions).""")
