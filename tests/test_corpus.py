"""The corpus loader (stsim.core.corpus): the packaged text is the recorded one, a modified
copy is refused, a user's text goes through the same checks, and windows never cross the
split."""
import gzip
import hashlib

import numpy as np
import pytest

from stsim.core import corpus as C
from stsim.core.corpus import CORPORA, TRAIN_SHARE, load_corpus


def test_the_packaged_text_is_tiny_shakespeare():
    c = load_corpus("tinyshakespeare")
    raw = C._read_builtin("tinyshakespeare")
    assert hashlib.sha256(raw).hexdigest() == CORPORA["tinyshakespeare"]["sha256"]
    assert (len(c), len(c.vocab), c.label) == (1_115_394, 65, "tinyshakespeare")
    assert "".join(c.vocab[i] for i in c.ids[:14]) == "First Citizen:"
    assert c.vocab == "".join(sorted(set(raw.decode("utf-8"))))
    assert c.split_at == int(TRAIN_SHARE * len(c)) and not c.ids.flags.writeable
    with pytest.raises(AttributeError, match="read-only"):
        c.vocab = "abc"


def test_a_modified_packaged_file_is_refused(monkeypatch, tmp_path):
    """One byte changed in the packaged text: the loader refuses it, naming the hashes."""
    raw = bytearray(C._read_builtin("tinyshakespeare"))
    raw[100] = ord("#")
    monkeypatch.setattr(C, "_read_builtin", lambda name: bytes(raw))
    C._builtin.cache_clear()
    try:
        with pytest.raises(ValueError, match="packaged file is modified"):
            load_corpus("tinyshakespeare")
    finally:
        monkeypatch.undo()
        C._builtin.cache_clear()
    assert len(load_corpus("tinyshakespeare")) == 1_115_394


def test_a_users_text_is_loaded_by_path_and_labelled_by_its_hash(tmp_path):
    p = tmp_path / "t.txt"
    p.write_text("abcabcabcd" * 10, encoding="utf-8")
    c = load_corpus(str(p))
    assert c.vocab == "abcd" and c.label == "file:" + hashlib.sha256(p.read_bytes()).hexdigest()
    assert load_corpus(p).label == c.label                         # a Path as well
    q = tmp_path / "same.txt"
    q.write_bytes(p.read_bytes())
    assert load_corpus(str(q)).label == c.label                    # the text, not the path


def _file(d, data):
    (d / "f.txt").write_bytes(data)
    return str(d / "f.txt")


@pytest.mark.parametrize("make, match", [
    (lambda d: "no-such-corpus", "corpus must be one of .*no such file"),
    (lambda d: str(d), "a folder"),
    (lambda d: _file(d, b""), "is empty"),
    (lambda d: _file(d, b"ab\xff\xfe"), "not UTF-8 text .byte 2"),
    (lambda d: 3, "corpus must be one of"),
])
def test_bad_corpora_are_refused_naming_corpus(tmp_path, make, match):
    with pytest.raises(ValueError, match=match):
        load_corpus(make(tmp_path))


def test_windows_lie_inside_their_part_and_follow_the_seed():
    c = load_corpus("tinyshakespeare")
    T = 64
    for part, lo, hi in (("train", 0, c.split_at), ("held", c.split_at, len(c))):
        ids = c.part(part)
        rng = np.random.default_rng(3)
        w = c.windows(rng, 500, T, part)
        # each window is T consecutive characters of its part (found at its start)
        starts = np.random.default_rng(3).integers(0, ids.size - T + 1, size=500)
        assert np.array_equal(w, ids[starts[:, None] + np.arange(T)])
        assert lo + starts.max() + T <= hi
    assert np.array_equal(c.windows(np.random.default_rng(5), 4, 8),
                          c.windows(np.random.default_rng(5), 4, 8))
    with pytest.raises(ValueError, match="T must be"):
        c.windows(np.random.default_rng(0), 1, c.longest_window() + 1, "held")
    with pytest.raises(ValueError, match="part must be one of"):
        c.part("test")


def test_a_short_text_refuses_a_window_longer_than_its_held_part(tmp_path):
    p = tmp_path / "short.txt"
    p.write_text("x" * 100, encoding="utf-8")
    c = load_corpus(str(p))
    assert c.longest_window() == 10
    c.check_window(10)
    with pytest.raises(ValueError, match="T must be .*10"):
        c.check_window(11)


def test_the_packaged_file_is_compressed_once():
    """The shipped file decompresses to the recorded text (what the docs quote)."""
    from importlib import resources
    blob = resources.files("stsim").joinpath("data", "tinyshakespeare.txt.gz").read_bytes()
    assert len(blob) < 450_000 and hashlib.sha256(gzip.decompress(blob)).hexdigest() == \
        CORPORA["tinyshakespeare"]["sha256"]
