"""What an extension hands to the core is checked where it enters, with an error naming
the extension and the field: an encoding's batches, an optimiser's state."""
import os

import numpy as np
import pytest

import stsim
from stsim.core import optim
from stsim.core.encodings import Encoding, PEBatch, check_batch, OneHot
from stsim.core.optim import SGD, register_optimizer


class Bad(Encoding):
    name = "bad-test"

    def __init__(self, d_e=10, mode="ok"):
        super().__init__(d_e)
        self.mode = mode

    def sample(self, rng, B, T):
        m = self.mode
        idx = np.tile(np.arange(T), (B, 1))
        if m == "negative":            # before: trained, "completed", then heap corruption
            idx[:, 0] = -1
        return {"ok": PEBatch(self.d_e, idx=idx),
                "negative": PEBatch(self.d_e, idx=idx),
                "too large": PEBatch(self.d_e, idx=idx + self.d_e),
                "wrong T": PEBatch(self.d_e, idx=np.arange(T + 1)),
                "wrong d_e": PEBatch(self.d_e + 1, idx=np.arange(T)),
                "complex": PEBatch(self.d_e, P=np.ones((B, T, self.d_e), complex)),
                "dense shape": PEBatch(self.d_e, P=np.ones((B, T, self.d_e + 1))),
                "a list": [0, 1],
                "None": None,
                "float idx": PEBatch(self.d_e, idx=np.arange(T, dtype=float)),
                "list idx": PEBatch(self.d_e, idx=list(range(T))),
                "both": PEBatch(self.d_e, idx=np.arange(T), P=np.ones((T, self.d_e))),
                "bool idx": PEBatch(self.d_e, idx=np.ones(T, bool)),
                }[m]


@pytest.mark.parametrize("mode, field", [
    ("negative", "slot -1 outside"), ("too large", "slot 17 outside"),
    ("wrong T", r"idx of shape \(9,\)"), ("wrong d_e", "d_e=11"),
    ("complex", "dtype complex128"), ("dense shape", r"P of shape \(\d+, 8, 11\)"),
    ("a list", "a list, not"), ("None", "a NoneType, not"), ("float idx", "dtype float64"),
    ("list idx", "idx as a list"), ("both", "both idx and P"), ("bool idx", "dtype bool")])
def test_a_bad_encoding_batch_is_refused_naming_the_class_and_field(tmp_path, mode, field):
    ckpt = tmp_path / "c.npz"
    with pytest.raises(ValueError, match=r"encoding Bad \('bad-test'\).*" + field):
        stsim.run(T=8, q=2, pe=Bad(10, mode), steps=5, batch=8, checkpoint=ckpt)
    assert not ckpt.exists()


def test_a_good_extension_encoding_trains():
    res = stsim.run(T=8, q=2, pe=Bad(10, "ok"), steps=5, batch=8)
    assert res.status == "completed"


def test_check_batch_accepts_what_the_builtin_families_draw():
    rng = np.random.default_rng(0)
    from stsim.core.families import make_encoding
    for pe, sampler in [("onehot", "slots"), ("near-orthogonal", "slots"),
                        ("stochastic", "slots"), ("stochastic", "sphere")]:
        enc = make_encoding(pe, T_max=12, d_e=16, sampler=sampler, rng=rng)
        check_batch(enc, enc.sample(rng, 3, 12), 3, 12)
    with pytest.raises(ValueError, match="idx with slot 5"):
        check_batch(OneHot(5), PEBatch(5, idx=np.array([0, 5])), 1, 2)


@pytest.fixture
def _clean():
    yield
    for k in [k for k in optim._OPTIMIZERS if k.endswith("-test")]:
        del optim._OPTIMIZERS[k]


@pytest.mark.parametrize("state, what", [
    ({"t": np.array(1), "m": object()}, r"\['m'\] is not a finite numeric array"),
    ({"t": np.array(np.nan)}, r"\['t'\] is not a finite"),
    ([1, 2], " returned a list"),
    ({1: np.zeros(2)}, " has the key 1"),
])
def test_an_optimiser_state_no_checkpoint_can_hold_is_refused_before_training(
        tmp_path, _clean, state, what):
    class Odd(SGD):
        def state_dict(self):
            return state

    register_optimizer("odd-test", Odd, lr=0.1)
    ckpt = tmp_path / "c.npz"
    with pytest.raises(ValueError, match=r"optimiser Odd: state_dict\(\)" + what):
        stsim.run(T=8, q=2, pe="onehot", optimizer="odd-test", steps=5, batch=8,
                  checkpoint=ckpt, checkpoint_every=2)
    assert os.listdir(tmp_path) == []


def test_an_optimiser_state_that_fails_later_names_the_optimiser(tmp_path, _clean):
    class Late(SGD):
        def state_dict(self):
            return {"t": np.array(self.t), **({"x": "text"} if self.t >= 2 else {})}

    register_optimizer("late-test", Late, lr=0.1)
    ckpt = tmp_path / "c.npz"
    with pytest.raises(ValueError, match=r"optimiser Late: state_dict\(\)\['x'\]"):
        stsim.run(T=8, q=2, pe="onehot", optimizer="late-test", steps=5, batch=8,
                  checkpoint=ckpt, checkpoint_every=2)
