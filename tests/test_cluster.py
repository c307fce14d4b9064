"""The study commands on a Dask cluster from the command line: ``--scheduler ADDRESS``
(tested against a ``distributed.LocalCluster`` in this process: its worker threads run
the study's rows)."""
import contextlib
import os

import pytest

from stsim.cli import main

distributed = pytest.importorskip("distributed", reason='needs Dask, the extra "dask"')


@pytest.fixture(scope="module")
def cluster():
    with contextlib.redirect_stderr(open(os.devnull, "w")):
        c = distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                     dashboard_address=None)
    yield c
    c.close()


def _rows_on(cluster) -> int:
    """Rows the cluster finished (tasks of the sweeps' row function ``_call``: Dask names
    its prefix ``call``)."""
    prefix = cluster.scheduler.task_prefixes.get("call")
    return 0 if prefix is None else prefix.state_counts["memory"]


def test_sparse_quick_on_a_scheduler(cluster, tmp_path, capsys):
    out = tmp_path / "sparse"
    before = _rows_on(cluster)
    rc = main(["sparse", "--quick", "--scheduler", cluster.scheduler_address, "--out",
               str(out), "--quiet", "--Ts", "4", "--fns", "and:2", "--models", "attention",
               "--seeds", "2"])
    text = capsys.readouterr()
    assert rc == 0, text.err
    assert (out / "trials.csv").exists() and "m*" in text.out
    assert _rows_on(cluster) > before          # the rows ran on the cluster


def test_a_scheduler_that_does_not_answer_is_refused_before_any_file(tmp_path, capsys,
                                                                      monkeypatch):
    import stsim.cli.common
    monkeypatch.setattr(stsim.cli.common, "SCHEDULER_TIMEOUT_S", 2.0)
    out = tmp_path / "never"
    rc = main(["sparse", "--quick", "--scheduler", "tcp://127.0.0.1:9", "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 2 and "--scheduler tcp://127.0.0.1:9: no Dask scheduler answered" in err
    assert err.count("\n") == 1 and not out.exists()


@pytest.mark.parametrize("bad", ["", "nonsense", "http://x"])
def test_a_scheduler_address_is_checked(tmp_path, capsys, bad):
    rc = main(["sparse", "--scheduler", bad, "--out", str(tmp_path / "o")])
    assert rc == 2 and "--scheduler must be a Dask scheduler address" in capsys.readouterr().err


@pytest.mark.slow
def test_figures_quick_on_a_scheduler(cluster, tmp_path, capsys):
    """``stsim figures --quick --scheduler <LocalCluster>``: every figure drawn from rows
    the cluster ran."""
    out = tmp_path / "figures"
    before = _rows_on(cluster)
    rc = main(["figures", "--quick", "--scheduler", cluster.scheduler_address, "--out",
               str(out), "--quiet"])
    text = capsys.readouterr()
    assert rc == 0, text.err
    assert "NOT drawn" not in text.out and (out / "fig1.png").exists()
    assert _rows_on(cluster) - before >= 10
