"""Encodings of one's own: register_encoding, or an Encoding instance passed as pe; and
their batches checked where they enter the core (``check_batch``): a bad batch (a slot
out of range, the wrong shape or dtype, not a PEBatch) or bad values (NaN, a slot twice in
a sample) are refused before training, naming the encoding's class and the field."""
import numpy as np
import pytest

import stsim
from stsim.core.encodings import Encoding, OneHot, PEBatch, check_batch
from stsim.core.families import _REGISTERED, make_encoding, register_encoding


class Sinusoid(Encoding):
    """Fixed dense sinusoidal encodings (Vaswani et al.), normalised rows."""
    name = "sinusoid-test"
    index = False

    def sample(self, rng, B, T):
        pos = np.arange(T)[:, None]
        freq = 1.0 / 50.0 ** (np.arange(self.d_e // 2) / max(self.d_e // 2, 1))
        P = np.concatenate([np.sin(pos * freq), np.cos(pos * freq)], axis=1)
        return PEBatch(d_e=self.d_e, P=P / np.linalg.norm(P, axis=1, keepdims=True))


class Shifted(OneHot):
    name = "shifted-test"

    def __init__(self, d_e, T_max):
        super().__init__(d_e)
        self.shift = d_e - T_max

    def sample(self, rng, B, T):
        self.check_length(T)
        return PEBatch(d_e=self.d_e, idx=np.arange(T) + self.shift)


@pytest.fixture(autouse=True)
def _clean():
    yield
    for k in [k for k in _REGISTERED if k.endswith("-test")]:
        del _REGISTERED[k]


def test_registered_dense_family_trains_and_attends():
    register_encoding("sinusoid-test", Sinusoid)
    res = stsim.run(T=8, q=2, pe="sinusoid-test", d_e=16, steps=50, batch=32)
    assert res.success and res.config["pe"] == "sinusoid-test" and res.W.shape == (21, 21)
    assert res.attention(n=2).shape == (2, 8)
    # default width of a dense family
    assert stsim.Config.from_options(T=8, pe="sinusoid-test").d_e == 64


def test_registered_index_family_gets_keywords_and_width_check():
    register_encoding("shifted-test", Shifted)
    enc = make_encoding("shifted-test", T_max=5, d_e=7)
    assert list(enc.sample(None, 1, 5).idx) == [2, 3, 4, 5, 6]
    assert stsim.run(T=5, q=2, pe="shifted-test", d_e=7, steps=5, batch=4).success
    with pytest.raises(ValueError, match="d_e=3 is too small"):
        stsim.Config.from_options(T=5, pe="shifted-test", d_e=3)


def test_instance_as_pe_is_used_as_is_and_registers_nothing():
    enc = Sinusoid(12)
    enc.name = "inst-test"
    res = stsim.run(T=6, q=2, pe=enc, steps=5, batch=4)
    assert res.config["pe"] == "inst-test" and res.config["d_e"] == 12
    assert res.config["pe_object"] == "Sinusoid"
    assert "inst-test" not in _REGISTERED
    with pytest.raises(ValueError, match="pe must be one of"):
        make_encoding("inst-test", T_max=6)
    with pytest.raises(ValueError, match="width"):
        stsim.run(T=6, q=2, pe=enc, d_e=10, steps=1)


def test_bad_registrations():
    with pytest.raises(ValueError, match="built-in"):
        register_encoding("onehot", OneHot)
    with pytest.raises(ValueError, match="callable"):
        register_encoding("x-test", 3)
    with pytest.raises(ValueError, match="pe must be one of"):
        stsim.Config.from_options(pe="nope")


def test_memory_estimate_counts_a_registered_dense_family_as_dense():
    # a dense family carries d_e numbers per position; an index family one slot
    # per sample; a fixed family's encodings are one shared table (the spec, not the name)
    class Drawn(Sinusoid):
        name, fixed = "drawn-test", False

    register_encoding("sinusoid-test", Sinusoid)
    register_encoding("drawn-test", Drawn)
    register_encoding("shifted-test", Shifted)
    opts = dict(T=50, q=2, d=3, d_e=64, batch=32)
    drawn = stsim.Config.from_options(pe="drawn-test", **opts).memory_estimate()
    sphere = stsim.Config.from_options(pe="stochastic", sampler="sphere", **opts).memory_estimate()
    index = stsim.Config.from_options(pe="stochastic", **opts).memory_estimate()
    shifted = stsim.Config.from_options(pe="shifted-test", **opts).memory_estimate()
    fixed = stsim.Config.from_options(pe="sinusoid-test", **opts).memory_estimate()
    key = "batch tokens and encodings"
    assert drawn[key] == sphere[key] == 32 * 50 * (3 + 64) * 8
    assert index[key] == 32 * 50 * (3 + 1) * 8
    assert fixed[key] == shifted[key] == 32 * 50 * 3 * 8 and "fixed encoding table" not in shifted
    assert fixed["fixed encoding table"] == 50 * 64 * 8 and "fixed encoding table" not in drawn


# ---- an encoding's batches, checked where they enter the core --------------------------
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
    for pe, sampler in [("onehot", "slots"), ("near-orthogonal", "slots"),
                        ("stochastic", "slots"), ("stochastic", "sphere")]:
        enc = make_encoding(pe, T_max=12, d_e=16, sampler=sampler, rng=rng)
        check_batch(enc, enc.sample(rng, 3, 12), 3, 12)
    with pytest.raises(ValueError, match="idx with slot 5"):
        check_batch(OneHot(5), PEBatch(5, idx=np.array([0, 5])), 1, 2)


class _NaNs(Encoding):
    name, index = "nans", False

    def sample(self, rng, B, T):
        P = np.zeros((T, self.d_e))
        P[1, 0] = np.nan
        return PEBatch(self.d_e, P=P)


class _SlotTwice(Encoding):
    name = "slot-twice"

    def sample(self, rng, B, T):
        idx = np.tile(np.arange(T), (B, 1))
        idx[B - 1, 2] = idx[B - 1, 0]
        return PEBatch(self.d_e, idx=idx)


@pytest.mark.parametrize("enc, words", [
    (_NaNs(8), r"P with non-finite entries \(1 NaN, 0 inf\): a bad encoding"),
    (_SlotTwice(10), r"idx with slot 0 twice in sample \d+: each position of a sample needs "
                     r"a slot of its own"),
])
def test_bad_encoding_values_refused_before_training(tmp_path, enc, words):
    """Not "diverged at step 0": the encoding's values are checked where they enter the
    core (the validation sets are drawn before the first step)."""
    out = tmp_path / "c.npz"
    with pytest.raises(ValueError, match=words):
        stsim.run(T=6, q=2, pe=enc, steps=5, lr=0.1, checkpoint=out, progress=False)
    assert not out.exists()
