"""util.io.FileLock shared by the threads of one process: a thread that
enters while another releases the last hold must never see its own process as "another
process"."""
import fcntl
import threading
import time

from stsim.util.io import FileLock


def test_threads_of_one_process_never_refuse_each_other(tmp_path, monkeypatch):
    real = fcntl.flock

    def slow_unlock(fd, op):            # the releasing thread is descheduled just before
        if op == fcntl.LOCK_UN:         # it unlocks: the window of the race, made wide
            time.sleep(0.005)
        return real(fd, op)

    monkeypatch.setattr(fcntl, "flock", slow_unlock)
    path = tmp_path / "table.csv"
    errors, entered = [], [0]

    def worker():
        for _ in range(40):
            try:
                with FileLock(path):
                    entered[0] += 1
            except RuntimeError as exc:
                errors.append(str(exc))
            time.sleep(0.002)

    threads = [threading.Thread(target=worker) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and entered[0] == 120     # before the fix: ~100 refusals of itself
    with FileLock(path):                          # and the lock is free again afterwards
        pass
