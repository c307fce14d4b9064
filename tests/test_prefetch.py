"""stsim.util.prefetch: the drawn-ahead stream equals the foreground stream; errors reach
the consumer; the automatic choice follows the environment."""
import numpy as np
import pytest

from stsim.util.prefetch import Prefetch, prefetch_default


def test_same_numbers_and_state_as_foreground():
    draw = lambda r: (r.standard_normal((4, 3)), r.integers(0, 10, 5))   # noqa: E731
    fg = np.random.default_rng(7)
    with Prefetch(draw, np.random.default_rng(7), depth=3) as p:
        for _ in range(20):
            a, b = p.next(), draw(fg)
            np.testing.assert_array_equal(a[0], b[0])
            np.testing.assert_array_equal(a[1], b[1])
            # the state to checkpoint is the foreground state after the same draws
            assert p.state() == fg.bit_generator.state


def test_state_before_any_batch_is_the_initial_state():
    rng = np.random.default_rng(3)
    s0 = rng.bit_generator.state
    with Prefetch(lambda r: r.random(2), rng) as p:
        assert p.state() == s0


def test_error_in_draw_is_raised_by_next_in_order():
    calls = []

    def draw(r):
        calls.append(1)
        if len(calls) == 3:
            raise ValueError("bad draw")
        return len(calls)

    p = Prefetch(draw, np.random.default_rng(0))
    assert p.next() == 1 and p.next() == 2
    with pytest.raises(ValueError, match="bad draw"):
        p.next()
    with pytest.raises(RuntimeError, match="closed"):
        p.next()


def test_close_stops_the_thread():
    p = Prefetch(lambda r: r.random(10), np.random.default_rng(0), depth=1)
    p.next()
    p.close()
    assert not p._thread.is_alive()


def test_default_follows_environment(monkeypatch):
    for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "STSIM_PREFETCH"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("STSIM_PREFETCH", "1")
    assert prefetch_default() is True
    monkeypatch.setenv("STSIM_PREFETCH", "0")
    assert prefetch_default() is False
    monkeypatch.delenv("STSIM_PREFETCH")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")      # a pinned pool worker
    assert prefetch_default() is False
    monkeypatch.setenv("STSIM_PREFETCH", "yes")
    with pytest.raises(ValueError, match="STSIM_PREFETCH"):
        prefetch_default()
