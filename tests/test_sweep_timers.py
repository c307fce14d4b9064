"""Sweep timers compose: a sweep's row limit, a nested sweep's limit and a caller's own
``SIGALRM`` timer each keep their deadline, and a limit the timer cannot hold is refused."""
import signal
import time

import pytest

import stsim

pytestmark = pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="needs SIGALRM")


def test_a_nested_sweep_keeps_the_outer_rows_deadline():
    def inner(x, seed):
        return x

    def outer(x, seed):
        stsim.sweep(inner, {"x": [1]}, seeds=1, max_workers=1, timeout=30)
        time.sleep(4)       # past the outer limit, after the inner sweep ended
        return x

    t0 = time.monotonic()
    res = stsim.sweep(outer, {"x": [1]}, seeds=1, max_workers=1, timeout=1)
    assert time.monotonic() - t0 < 3
    (row,) = res.rows
    assert row["status"] == "error" and row["error"].startswith("TimeoutError")
    assert "timeout=1 s" in row["error"]


def test_the_outer_deadline_ends_the_outer_row_inside_the_inner_sweep():
    def inner(x, seed):
        time.sleep(4)       # the outer limit comes inside this row
        return x

    def outer(x, seed):
        stsim.sweep(inner, {"x": [1]}, seeds=1, max_workers=1, timeout=30)
        return x

    t0 = time.monotonic()
    res = stsim.sweep(outer, {"x": [1]}, seeds=1, max_workers=1, timeout=1)
    assert time.monotonic() - t0 < 3
    (row,) = res.rows
    assert row["status"] == "error" and "timeout=1 s" in row["error"]


def test_a_callers_alarm_fires_during_a_sweep_with_timeout_and_its_handler_is_back():
    calls = []

    def handler(signum, frame):
        calls.append(time.monotonic())

    def fn(x, seed):        # the sweep takes 1.6 s or more: past the 1.5 s bound below
        time.sleep(0.4)
        return x

    previous = signal.signal(signal.SIGALRM, handler)
    try:
        t0 = time.monotonic()
        signal.alarm(1)
        res = stsim.sweep(fn, {"x": [1, 2, 3, 4]}, seeds=1, max_workers=1, timeout=20)
        assert [r["status"] for r in res.rows] == ["ok"] * 4
        assert len(calls) == 1 and 0.9 < calls[0] - t0 < 1.5
        assert signal.getsignal(signal.SIGALRM) is handler
        assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def test_a_callers_timer_due_after_the_sweep_is_rearmed_with_the_time_left():
    calls = []
    previous = signal.signal(signal.SIGALRM, lambda signum, frame: calls.append(1))
    try:
        signal.setitimer(signal.ITIMER_REAL, 2)
        stsim.sweep(lambda x, seed: x, {"x": [1, 2]}, seeds=1, max_workers=1, timeout=20)
        left, _ = signal.getitimer(signal.ITIMER_REAL)
        assert 1 < left <= 2 and not calls
        deadline = time.monotonic() + left + 0.5
        while not calls and time.monotonic() < deadline:    # (was: always slept it out)
            time.sleep(0.01)
        assert calls == [1] and signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize("timeout", [1e308, 1e10])
def test_a_timeout_the_timer_cannot_hold_is_refused_before_any_row(timeout):
    ran = []
    with pytest.raises(ValueError, match=r"timeout must be None \(no limit\) or seconds in"):
        stsim.sweep(lambda x, seed: ran.append(x), {"x": [1]}, seeds=1, max_workers=1,
                    timeout=timeout)
    assert not ran


def test_the_largest_timeout_is_accepted_and_its_row_runs():
    from stsim.sweeps.rows import MAX_TIMEOUT

    res = stsim.sweep(lambda x, seed: x, {"x": [1]}, seeds=1, max_workers=1,
                      timeout=MAX_TIMEOUT)
    assert [r["status"] for r in res.rows] == ["ok"]
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
