"""An encoding of your own: the smallest code that adds a positional-encoding family.

Subclass stsim.Encoding, implement sample(rng, B, T) -> PEBatch (dense P of shape (T, d_e)
or (B, T, d_e), or one-hot slots idx), and pass it to stsim.run — as an instance, or
registered by name with stsim.register_encoding (then pe="sinusoid" works in Config, run,
sweeps and Result.attention).
"""
import os

import numpy as np

import stsim

SMOKE = os.environ.get("STSIM_EXAMPLE_SMOKE") == "1"


class Sinusoid(stsim.Encoding):
    """Fixed sinusoidal encodings (Vaswani et al. 2017), rows of unit norm."""

    name = "sinusoid"
    index = False                                     # dense: P, not one-hot slots

    def sample(self, rng, B, T):
        pos = np.arange(T)[:, None]
        freq = 1.0 / 30.0 ** (np.arange(self.d_e // 2) / (self.d_e // 2))
        P = np.concatenate([np.sin(pos * freq), np.cos(pos * freq)], axis=1)
        return stsim.PEBatch(d_e=self.d_e, P=P / np.linalg.norm(P, axis=1, keepdims=True))


stsim.register_encoding("sinusoid", Sinusoid)        # pe="sinusoid" from now on

P = Sinusoid(32).sample(None, 1, 16).P
print(f"coherence max|<p_i, p_j>| of 16 positions: {stsim.coherence(P):.3f}")
steps = 100 if SMOKE else 2000
for pe, opts in (("sinusoid", {"d_e": 32}), ("near-orthogonal", {"d_e": 32}),
                 ("onehot", {})):
    res = stsim.run(T=16, q=2, pe=pe, steps=steps, batch=256, lr=1.0, seed=0, **opts)
    s, X, y = res.attention(n=200, seed=1, return_inputs=True)
    print(f"{pe:16s} final val loss {res.final('val'):.4f}   attention on the selected "
          f"positions {np.take_along_axis(s, y, 1).sum(1).mean():.2f}")
