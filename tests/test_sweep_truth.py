"""A sweep's journal is the truth: a rerun serves only rows of the journal it reads, a
journal of another root seed is refused, values a table cannot store and rows over the
time limit become error rows, and a full disk names the journal. docs/model.md, "Failure
behaviour"."""
import errno
import json
import os
import time

import pytest

import stsim.sweeps as sw
from stsim.sweeps import InlineExecutor, read_table, sweep
from stsim.sweeps.rows import call_with_timeout, result_row

GRID = {"a": [1, 2]}


def _v1(a, seed):
    return {"v": a}


def _v2(a, seed):
    return {"v": 10 * a}


def _lines(path):
    return [json.loads(x) for x in open(path, encoding="utf-8") if x.strip()]


def test_deleting_table_and_journal_computes_again_in_the_same_process(tmp_path):
    out = tmp_path / "t.csv"
    first = sweep(_v1, GRID, seeds=2, executor=InlineExecutor(), out=out)
    assert first.n_run == 4 and first.column("v") == [1, 1, 2, 2]
    os.unlink(out)
    os.unlink(first.journal)
    # the process-wide store of that journal still held the old rows: before, n_run=0
    # and the old values were written to the fresh table
    second = sweep(_v2, GRID, seeds=2, executor=InlineExecutor(), out=out)
    assert second.n_run == 4 and second.n_skipped == 0
    assert [r["v"] for r in read_table(out)] == [10, 10, 20, 20]
    assert len(_lines(second.journal)) == 4


def test_a_journal_edited_to_fewer_rows_serves_only_those(tmp_path):
    out = tmp_path / "t.csv"
    res = sweep(_v1, GRID, seeds=2, executor=InlineExecutor(), out=out)
    lines = open(res.journal, encoding="utf-8").readlines()
    with open(res.journal, "w", encoding="utf-8") as fh:
        fh.writelines(lines[:1])
    again = sweep(_v1, GRID, seeds=2, executor=InlineExecutor(), out=out)
    assert (again.n_skipped, again.n_run) == (1, 3)


def test_another_root_seed_on_resume_is_refused_naming_it(tmp_path):
    out = tmp_path / "t.csv"
    sweep(_v1, GRID, seeds=2, root_seed=0, executor=InlineExecutor(), out=out)
    before = open(out).read(), open(str(out) + ".journal.jsonl").read()
    calls = []

    def spy(a, seed):
        calls.append(a)
        return {"v": a}
    # before: n_skipped=4, the old rows with the old seeds
    with pytest.raises(ValueError, match=r"root_seed=0.*root_seed=5"):
        sweep(spy, GRID, seeds=2, root_seed=5, executor=InlineExecutor(), out=out)
    assert calls == []
    assert (open(out).read(), open(str(out) + ".journal.jsonl").read()) == before
    # the journal's own root seed resumes it; more replicates keep the finished rows
    res = sweep(spy, GRID, seeds=3, root_seed=0, executor=InlineExecutor(), out=out)
    assert (res.n_skipped, res.n_run) == (4, 2)


def test_root_seed_check_catches_a_record_of_an_old_journal_without_root_seed(tmp_path):
    out = tmp_path / "t.csv"
    res = sweep(_v1, GRID, seeds=1, root_seed=3, executor=InlineExecutor(), out=out)
    recs = _lines(res.journal)
    for r in recs:
        del r["root_seed"]                        # as written by earlier versions
    with open(res.journal, "w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in recs)
    assert sweep(_v1, GRID, seeds=1, root_seed=3, executor=InlineExecutor(),
                 out=out).n_skipped == 2
    with pytest.raises(ValueError, match="another root_seed"):
        sweep(_v1, GRID, seeds=1, root_seed=4, executor=InlineExecutor(), out=out)


class _Thing:
    pass


@pytest.mark.parametrize("bad, kind", [(1 + 2j, "complex"), ({1, 2}, "set"),
                                       (b"xy", "bytes"), (_Thing(), "_Thing"),
                                       ([1, object()], "list")])
def test_a_value_the_table_cannot_store_is_an_error_row_and_the_sweep_goes_on(
        tmp_path, bad, kind):
    def fn(a, seed):
        return {"v": bad if a == 1 else a}

    out = tmp_path / "t.csv"
    res = sweep(fn, GRID, executor=InlineExecutor(), out=out)
    rows = {r["a"]: r for r in res.rows}
    assert rows[2]["status"] == "ok" and rows[2]["v"] == 2
    assert rows[1]["status"] == "error"
    assert rows[1]["error"].startswith("TypeError: fn's result 'v' is a " + kind)
    # journal and table hold the same rows; a rerun in a new process would not stop
    assert len(_lines(res.journal)) == len(read_table(out)) == 2
    again = sweep(fn, GRID, executor=InlineExecutor(), out=out)
    assert (again.n_skipped, again.n_run, again.n_failed) == (1, 1, 1)


def test_two_keys_that_are_one_column_are_an_error_row(tmp_path):
    def fn(a, seed):
        return {1: "a", "1": "b"}

    res = sweep(fn, GRID, executor=InlineExecutor())
    assert {r["status"] for r in res.rows} == {"error"}
    assert "the keys 1 and '1'" in res.rows[0]["error"]
    assert result_row({1: "a", "2": "b"}) == {"1": "a", "2": "b"}


def _slow(a, seed):
    if a == 1:
        time.sleep(60)
    return {"v": a}


def test_a_row_over_timeout_is_an_error_row_inline(tmp_path):
    t0 = time.monotonic()
    res = sweep(_slow, GRID, executor=InlineExecutor(), out=tmp_path / "t.csv", timeout=0.5)
    assert time.monotonic() - t0 < 20
    rows = {r["a"]: r for r in res.rows}
    assert rows[1]["status"] == "error" and rows[1]["error"].startswith(
        "TimeoutError: fn ran longer than timeout=0.5 s")
    assert rows[2]["status"] == "ok"


@pytest.mark.pool
def test_a_row_over_timeout_is_an_error_row_in_the_pool(tmp_path):
    res = sweep(_slow, GRID, max_workers=2, out=tmp_path / "t.csv", timeout=1)
    assert [r["status"] for r in res.rows] == ["error", "ok"]
    assert "TimeoutError" in res.rows[0]["error"]


def test_timeout_in_a_thread_abandons_the_row():
    import threading
    box = {}

    def in_thread():
        try:
            call_with_timeout(lambda secs: time.sleep(secs), {"secs": 30}, 0.3)
        except TimeoutError as exc:
            box["exc"] = exc
    t = threading.Thread(target=in_thread)
    t.start()
    t.join(10)
    assert "abandoned" in str(box["exc"])
    assert call_with_timeout(lambda x: x + 1, {"x": 1}, 5) == 2


@pytest.mark.parametrize("bad", [0, -1, float("inf"), "5", True])
def test_bad_timeout_is_refused_before_any_work(tmp_path, bad):
    with pytest.raises(ValueError, match="timeout"):
        sweep(_v1, GRID, executor=InlineExecutor(), out=tmp_path / "t.csv", timeout=bad)
    assert os.listdir(tmp_path) == []


def test_full_disk_names_the_journal_not_the_table(tmp_path, monkeypatch):
    out = tmp_path / "t.csv"
    real = sw.runner.append_journal
    n = [0]

    def append(path, rec):
        n[0] += 1
        if n[0] == 2:
            raise OSError(errno.ENOSPC, "No space left on device", path)
        real(path, rec)

    def write_csv(path, *a, **k):
        raise OSError(errno.ENOSPC, "No space left on device", os.fspath(path))

    monkeypatch.setattr(sw.runner, "append_journal", append)
    monkeypatch.setattr(sw.runner, "write_csv", write_csv)
    with pytest.raises(OSError) as err:
        sweep(_v1, GRID, executor=InlineExecutor(), out=out)
    assert err.value.filename.endswith(".journal.jsonl")
    monkeypatch.undo()
    assert len(_lines(str(out) + ".journal.jsonl")) == 1    # the finished row is kept
    assert sweep(_v1, GRID, executor=InlineExecutor(), out=out).n_skipped == 1
