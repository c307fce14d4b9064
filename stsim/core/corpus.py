r"""Real text: a corpus of characters whose windows are a task's tokens (docs/text.md).

A :class:`Corpus` is a text read once, checked and held read-only: its characters, its
vocabulary (the sorted distinct characters; a character's index is its id), the ids of
the whole text, and a split by position — the first ``TRAIN_SHARE`` (90%) of the
characters for training draws, the rest for validation and test. A window of ``T``
consecutive characters (:meth:`Corpus.windows`) lies inside one part and never crosses
the split.

The built-in corpus (:data:`CORPORA`) is Tiny Shakespeare: the file
``data/tinyshakespeare/input.txt`` of the public repository karpathy/char-rnn, 1 115 394
characters over 65 symbols, shipped gzip-compressed in ``stsim/data/`` (no network at run
time). The loader checks the decompressed text's SHA-256 against the one recorded here and
refuses a modified file. A user's own text goes through the same loader by its path
(UTF-8); its label records its SHA-256, so a config names the exact text it ran on.

>>> c = load_corpus("tinyshakespeare")
>>> len(c), len(c.vocab), c.split_at, c.label
(1115394, 65, 1003854, 'tinyshakespeare')
>>> bool(c.windows(np.random.default_rng(0), 2, 5, "held").min() >= 0)
True
"""
from __future__ import annotations

import functools
import gzip
import hashlib
import os
from importlib import resources

import numpy as np

from stsim.util.validate import check_int

__all__ = ["Corpus", "CORPORA", "PARTS", "TRAIN_SHARE", "load_corpus"]

#: the built-in corpora: the packaged file, the SHA-256 of its decompressed text, the source
CORPORA = {
    "tinyshakespeare": {
        "file": "tinyshakespeare.txt.gz",
        "sha256": "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed",
        "source": "https://github.com/karpathy/char-rnn, data/tinyshakespeare/input.txt",
    },
}
TRAIN_SHARE = 0.9          # the first 90% of the characters: training draws
PARTS = ("train", "held")  # the training part, and the held-out one (validation and test)


class Corpus:
    """A checked text and its character ids (module docstring). Built by
    :func:`load_corpus`; ``name`` is the built-in name or the path, ``sha256`` the text's
    (UTF-8 bytes) hash, ``vocab`` the sorted distinct characters and ``ids`` (read-only,
    ``int16``) each character's index in ``vocab``."""

    __slots__ = ("name", "sha256", "vocab", "ids", "split_at")

    def __init__(self, name: str, text: str, sha256: str):
        if not text:
            raise ValueError(f"corpus {name!r} is empty: it needs at least one character")
        points = np.frombuffer(text.encode("utf-32-le"), dtype="<u4")   # code points
        symbols, inverse = np.unique(points, return_inverse=True)
        if symbols.size > np.iinfo(np.int16).max:
            raise ValueError(f"corpus {name!r} has {symbols.size} distinct characters; at "
                             f"most {np.iinfo(np.int16).max} are supported")
        vocab = "".join(map(chr, symbols.tolist()))       # sorted: ids follow code points
        ids = inverse.astype(np.int16).reshape(-1)
        ids.flags.writeable = False
        for k, v in (("name", name), ("sha256", sha256), ("vocab", vocab), ("ids", ids),
                     ("split_at", int(TRAIN_SHARE * len(text)))):
            object.__setattr__(self, k, v)

    def __setattr__(self, key, value):
        raise AttributeError(f"a Corpus is read-only (its {key!r} cannot be set)")

    def __len__(self) -> int:
        return int(self.ids.size)

    def __repr__(self):
        return (f"Corpus({self.label!r}: {len(self)} characters, {len(self.vocab)} symbols, "
                f"split at {self.split_at})")

    @property
    def label(self) -> str:
        """What a config records: the built-in name, or ``"file:<sha256>"`` for a user's
        text (the hash, not the path: the same text anywhere is the same corpus)."""
        return self.name if self.name in CORPORA else f"file:{self.sha256}"

    def part(self, part: str = "train") -> np.ndarray:
        """The ids of ``part``: ``"train"`` (the first :data:`TRAIN_SHARE`) or ``"held"``
        (the rest)."""
        if part not in PARTS:
            raise ValueError(f"part must be one of {PARTS}, got {part!r}")
        return self.ids[:self.split_at] if part == "train" else self.ids[self.split_at:]

    def longest_window(self) -> int:
        """The longest window both parts hold (the held part's length)."""
        return int(min(self.split_at, len(self) - self.split_at))

    def check_window(self, T: int, name: str = "T") -> int:
        """``T`` checked against the corpus: ``ValueError`` naming ``name`` when a window of
        ``T`` characters does not fit in each part."""
        check_int(name, T, 1, self.longest_window())
        return int(T)

    def windows(self, rng: np.random.Generator, B: int, T: int, part: str = "train"):
        """``(B, T)`` ids: ``B`` windows of ``T`` consecutive characters of ``part``, each
        starting uniformly at random where it fits (so no window crosses the split)."""
        ids = self.part(part)
        if not 1 <= T <= ids.size:          # a run checked T once (check_window): no
            self.check_window(T)            # validation on the per-step path otherwise
        start = rng.integers(0, ids.size - T + 1, size=B)
        return ids[start[:, None] + np.arange(T)]


def _read_builtin(name: str) -> bytes:
    with resources.files("stsim").joinpath("data").joinpath(CORPORA[name]["file"]).open("rb") as fh:
        return gzip.decompress(fh.read())


@functools.lru_cache(maxsize=4)
def _builtin(name: str) -> Corpus:
    raw = _read_builtin(name)
    digest = hashlib.sha256(raw).hexdigest()
    if digest != CORPORA[name]["sha256"]:
        raise ValueError(f"corpus {name!r}: the packaged file is modified (SHA-256 {digest}, "
                         f"recorded {CORPORA[name]['sha256']}); reinstall stsim")
    return Corpus(name, raw.decode("utf-8"), digest)


def load_corpus(corpus="tinyshakespeare") -> Corpus:
    """The :class:`Corpus` of ``corpus``: a built-in name (:data:`CORPORA`), or the path
    of a UTF-8 text file. ``ValueError`` naming ``corpus`` for an unknown name, a missing,
    empty or non-UTF-8 file, before any work."""
    if isinstance(corpus, Corpus):
        return corpus
    if isinstance(corpus, str) and corpus in CORPORA:
        return _builtin(corpus)
    if not isinstance(corpus, (str, os.PathLike)):
        raise ValueError(f"corpus must be one of {sorted(CORPORA)} or the path of a UTF-8 "
                         f"text file, got {corpus!r}")
    path = os.fspath(corpus)
    if not os.path.isfile(path):
        why = "a folder" if os.path.isdir(path) else "no such file"
        raise ValueError(f"corpus must be one of {sorted(CORPORA)} or the path of a UTF-8 "
                         f"text file, got {path!r} ({why})")
    with open(path, "rb") as fh:
        raw = fh.read()
    if not raw:
        raise ValueError(f"corpus {path!r} is empty: it needs at least one character")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"corpus {path!r} is not UTF-8 text (byte {exc.start}: "
                         f"{raw[exc.start:exc.start + 1]!r})") from None
    return Corpus(path, text, hashlib.sha256(raw).hexdigest())
