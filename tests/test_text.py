"""The tasks on real text (stsim.core.targets: TextSelection, MaskedChar): their draws,
labels, checks and runs; the selection task with Gaussian tokens in place of the corpus is
the Gaussian task through the same code path."""
import numpy as np
import pytest

import stsim
from stsim.core.corpus import load_corpus
from stsim.core.targets import MaskedChar, Target, TextSelection, make_target


def test_selection_draws_windows_of_the_text_and_averages_the_named_tokens():
    t = TextSelection()                                  # Tiny Shakespeare, one-hot
    c = load_corpus()
    b = t.draw(np.random.default_rng(0), 8, 20, 3, 65)
    ids = b.X.argmax(axis=2)
    assert np.allclose(b.X.sum(axis=2), 1.0)             # one-hot rows
    starts = np.random.default_rng(0).integers(0, c.split_at - 20 + 1, size=8)
    assert np.array_equal(ids, c.ids[starts[:, None] + np.arange(20)])
    want = np.take_along_axis(b.X, b.y[:, :, None], axis=1).mean(axis=1)
    assert np.allclose(b.target, want)
    held = t.draw(np.random.default_rng(0), 8, 20, 3, 65, part="held").X.argmax(axis=2)
    hs = np.random.default_rng(0).integers(0, len(c) - c.split_at - 20 + 1, size=8)
    assert np.array_equal(held, c.ids[c.split_at + hs[:, None] + np.arange(20)])


def test_a_gaussian_embedding_is_fixed_by_its_seed():
    a, b = TextSelection(embedding="gaussian", seed=1), TextSelection(embedding="gaussian",
                                                                      seed=1)
    assert np.array_equal(a.table(8), b.table(8)) and a.table(8).shape == (65, 8)
    assert not np.array_equal(a.table(8), TextSelection(embedding="gaussian").table(8))
    X = a.draw(np.random.default_rng(2), 4, 10, 2, 8).X
    assert X.shape == (4, 10, 8) and all(any(np.allclose(x, r) for r in a.table(8))
                                         for x in X[0])


def test_masked_draw_hides_the_named_character_and_asks_for_it():
    t = MaskedChar()
    b = t.draw(np.random.default_rng(3), 16, 24, 1, 65)
    m = b.y[:, 0]
    assert b.y.shape == (16, 1) and np.all(b.X[np.arange(16), m] == 0)
    c = load_corpus()
    starts = np.random.default_rng(3).integers(0, c.split_at - 24 + 1, size=16)
    window = c.ids[starts[:, None] + np.arange(24)]
    assert np.array_equal(b.target.argmax(axis=1), window[np.arange(16), m])
    assert np.allclose(b.target.sum(axis=1), 1.0) and t.loss == "xent" and t.dim(65) == 65
    # value() of an unmasked window names the same characters
    full = np.eye(65)[window]
    assert np.array_equal(t.value(full, b.y), b.target)


def test_labels_round_trip_and_a_users_text_is_named_by_its_hash(tmp_path):
    for label in ("text:tinyshakespeare:onehot:0", "masked:tinyshakespeare:gaussian:3"):
        assert make_target(label).label == label and make_target(label) == make_target(label)
    assert make_target("text").label == "text:tinyshakespeare:onehot:0"
    p = tmp_path / "mine.txt"
    p.write_text("to be or not to be, " * 40, encoding="utf-8")
    t = TextSelection(str(p), "gaussian")
    assert t.label.startswith("text:file:") and len(t.label.split(":")[2]) == 64
    with pytest.raises(ValueError, match="pass the object"):
        make_target(t.label)
    with pytest.raises(ValueError, match="target must be"):
        make_target("text:tinyshakespeare:onehot:x")


@pytest.mark.parametrize("kw, match", [
    (dict(T=20, q=3, d=5, target="text"), "d must be the vocabulary's size 65"),
    (dict(T=20, q=2, d=65, target="masked"), "q must be 1"),
    (dict(T=20, q=3, d=65, target="text:nowhere"), "corpus must be one of"),
    (dict(T=20, q=3, d=8, target="text:tinyshakespeare:dense"), "embedding must be one of"),
    (dict(T=200_000, q=3, d=65, target="text"), "T must be"),
])
def test_bad_text_settings_are_refused_before_work(kw, match, tmp_path):
    with pytest.raises(ValueError, match=match):
        stsim.run(steps=1, progress=False, **kw)


def test_selection_and_masked_runs_train_and_rerun_bit_for_bit():
    plain = stsim.run(T=16, q=3, d=65, target="text", steps=5, batch=32, progress=False)
    assert "neither derived nor measured" in plain.message           # the default step
    r = stsim.run(T=16, q=3, d=65, target="text", steps=60, batch=32, lr=1.0,
                  progress=False)
    assert r.config["target"] == "text:tinyshakespeare:onehot:0"
    assert r.history["val"][-1] < 0.9 * r.history["val"][0]
    again = stsim.run(**r.config)
    assert np.array_equal(again.params["V"], r.params["V"])
    m = stsim.run(T=16, q=1, d=65, target="masked", steps=60, batch=32, lr=1.0,
                  progress=False)
    assert m.params["V"].shape[0] == 65
    assert m.history["val"][0] == pytest.approx(np.log(65), rel=1e-9)   # zero init: uniform
    assert m.history["val"][-1] < m.history["val"][0]


def test_gaussian_tokens_in_place_of_the_corpus_give_the_gaussian_task():
    """The selection task's code path with the corpus replaced by Gaussian tokens gives the
    Gaussian mean task's numbers bit for bit (same draws, same step, same model; the mean
    task's tokens drawn as tokens, as the text target's are, not through their statistics)."""
    class GaussianText(TextSelection):
        tokens = Target.tokens
        gaussian_tokens = True

        def check(self, d, T_max, q):
            pass

        def feature_dim(self, d):
            return d

    kw = dict(T=12, q=3, d=5, steps=40, batch=16, lr={"W": 2.0, "V": 1.0},
              freeze=("W_xx", "W_xe"), draws="tokens", progress=False)
    ours = stsim.run(target=GaussianText(embedding="gaussian"), **kw)
    mean = stsim.run(target="mean", **kw)
    for k in ("W", "V"):
        assert np.array_equal(ours.params[k], mean.params[k])
    assert np.array_equal(ours.history["val"], mean.history["val"])


def _dict_ce(fit, score, beta, p_uni, key):
    """The smoothed conditional cross entropy by dictionaries (independent of numpy
    bincounts): ``key(x, i) -> context or None``."""
    from collections import Counter
    joint, ctx = Counter(), Counter()
    for i in range(len(fit)):
        k = key(fit, i)
        if k is not None:
            joint[(k, fit[i])] += 1
            ctx[k] += 1
    tot, n = 0.0, 0
    for i in range(len(score)):
        k = key(score, i)
        if k is not None:
            p = (joint[(k, score[i])] + beta * p_uni[score[i]]) / (ctx[k] + beta)
            tot -= np.log(p)
            n += 1
    return tot / n


def test_baselines_against_an_independent_count(tmp_path):
    """The unigram and the neighbour baselines on a small text, recomputed with
    dictionaries, and the window's mix of one- and two-sided contexts (the one-sided
    conditional entropies are equal up to edge terms on a stationary text, so only the
    two-sided one, far below them, tells the contexts apart)."""
    from stsim.baselines import text as BT
    rng = np.random.default_rng(0)
    words = ["the ", "cat ", "sat ", "on ", "a ", "mat. ", "and ", "ran "]
    p = tmp_path / "small.txt"
    p.write_text("".join(rng.choice(words, 3000)), encoding="utf-8")
    c = load_corpus(str(p))
    V, train, held = len(c.vocab), list(c.part("train")), list(c.part("held"))
    p_uni = BT.unigram(np.array(train), V)
    assert BT.unigram_bits(str(p)) == pytest.approx(
        -np.mean(np.log(p_uni[held])) / np.log(2), rel=1e-12)
    out = BT.neighbour_bits(str(p), T=10)
    both = _dict_ce(train, held, out["beta"], p_uni,
                    lambda x, i: (x[i - 1], x[i + 1]) if 0 < i < len(x) - 1 else None)
    left = _dict_ce(train, held, out["beta"], p_uni, lambda x, i: x[i - 1] if i > 0 else None)
    right = _dict_ce(train, held, out["beta"], p_uni,
                     lambda x, i: x[i + 1] if i < len(x) - 1 else None)
    ln2 = np.log(2)
    assert (out["both"], out["left"], out["right"]) == pytest.approx(
        (both / ln2, left / ln2, right / ln2), rel=1e-10)
    assert out["bits"] == pytest.approx((right + left + 8 * both) / 10 / ln2, rel=1e-10)
    assert out["both"] < out["left"] < BT.unigram_bits(str(p))


def test_tiny_shakespeare_baselines():
    """The numbers docs/text.md quotes."""
    from stsim.baselines.text import neighbour_bits, unigram_bits
    assert unigram_bits() == pytest.approx(4.8292, abs=1e-4)
    nb = neighbour_bits(T=64)
    assert (round(nb["both"], 4), round(nb["left"], 4), round(nb["right"], 4),
            round(nb["bits"], 4), nb["beta"]) == (2.346, 3.5883, 3.5856, 2.3848, 10.0)


def test_the_masked_task_records_no_cos_W_and_says_why():
    """Its ideal attention is on the neighbours, not the named position: no cos_W against
    the named-position construction (which a selection run keeps)."""
    m = stsim.run(T=12, q=1, d=65, target="masked", pe="onehot", lr=8, steps=5,
                  progress=False)
    assert "cos_W" not in m.history and m.info["cos_W"].startswith("no cos_W")
    s = stsim.run(T=12, q=3, d=65, target="text", pe="onehot", lr=8, steps=5, progress=False)
    assert "cos_W" in s.history and "cos_W" not in s.info
