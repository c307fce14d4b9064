"""Separation experiment: the bracket search, the growth-law fits, and the quick run end to
end (direction of the claim, files, resumability, CLI errors)."""
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

from stsim import cli
from stsim.cli import main as cli_main
from stsim.studies.separation.study import fit_laws, train_point, width_grid
from stsim.util.stats import WidthSearch
from stsim.sweep import read_table


def test_width_grid():
    assert width_grid(16) == [1, 2, 3, 4, 6, 8, 11, 16]
    g = width_grid(1024)
    assert g[-1] == 1024 and all(b > a for a, b in zip(g, g[1:]))
    assert max(b / a for a, b in zip(g[4:], g[5:])) < 1.5
    with pytest.raises(ValueError, match="max_width"):
        width_grid(0)


@pytest.mark.parametrize("start", [1, 5, 40, 1000])
def test_bracket_search_finds_every_threshold(start):
    grid = width_grid(256)
    for thr in grid:
        s = WidthSearch(grid, start)
        n = 0
        while not s.done:
            w = s.propose()
            s.update(w, w >= thr)
            n += 1
        assert s.result == thr and not s.censored
        assert n <= 2 + 2 * math.ceil(math.log2(len(grid)))
    s = WidthSearch(grid, start)         # nothing passes: censored
    while not s.done:
        s.update(s.propose(), False)
    assert s.result is None and s.censored


def test_bracket_search_refuses_contradictions():
    s = WidthSearch([1, 2, 4, 8], 2)
    s.update(4, True)
    with pytest.raises(RuntimeError, match="non-monotone"):
        s.update(8, False)


def test_fit_laws_recovers_exact_laws():
    Ts = [8, 16, 32, 64]
    searches = ([dict(arch="fcn", d=2, T=T, width=3 * T * 2 + 5, censored=False) for T in Ts]
                + [dict(arch="transformer", d=2, T=T, width=int(4 * np.log2(T) - 2),
                        censored=False) for T in Ts]
                + [dict(arch="fcn", d=2, T=128, width=None, censored=True)])
    fits = fit_laws(searches)
    lin = fits["fcn"]["2"]["linear_Td"]
    assert lin["a"] == pytest.approx(3) and lin["b"] == pytest.approx(5)
    assert max(map(abs, lin["residuals"])) < 1e-9
    log = fits["transformer"]["2"]["log_T"]
    assert log["a"] == pytest.approx(4) and log["b"] == pytest.approx(-2)
    # the wrong law fits worse
    assert fits["fcn"]["2"]["log_T"]["rel_rms"] > 10 * lin["rel_rms"] + 1e-3
    assert fits["fcn"]["2"]["T"] == Ts   # the censored point is left out


def test_train_point_reports_target():
    kw = dict(T=4, d=1, width=16, steps=200, batch=32, lr=1e-2, n_val=128, seed=1)
    r = train_point("fcn", target=0.5, **kw)
    L0 = 1 / (2 * 2)                                     # d/(2q): the loss of f ≡ 0
    # the zero-initialised read-out starts at the zero function's loss, and training helps
    assert r["init_val"] == pytest.approx(L0, rel=0.3)
    assert r["final_val"] < 0.8 * r["init_val"] and r["diverged"] == 0
    assert 0 < r["rel"] < 1
    # the same run (same seed) reaches a target just above its relative loss, not one
    # just below it; and the relative loss does not depend on the target
    above = train_point("fcn", target=min(r["rel"] * 1.01, 0.999), **kw)
    below = train_point("fcn", target=r["rel"] * 0.99, **kw)
    assert (above["reached"], below["reached"]) == (1, 0)
    assert above["final_val"] == below["final_val"] == r["final_val"]
    with pytest.raises(ValueError, match="arch"):
        train_point("mlp", T=4, d=1, width=4)
    with pytest.raises(ValueError, match="target"):
        train_point("fcn", T=4, d=1, width=4, target=1.5)


def test_quick_experiment_shows_the_separation(tmp_path):
    out = str(tmp_path / "sep")
    assert cli_main(["separation", "--quick", "--workers", "0", "--out", out, "--quiet"]) == 0
    for f in ("points.csv", "searches.csv", "fits.json", "summary.json", "separation.png",
              "report.md"):
        assert os.path.getsize(os.path.join(out, f)) > 0
    summary = json.load(open(os.path.join(out, "summary.json")))
    found = {(s["arch"], s["T"]): s["width"] for s in summary["searches"]}
    Ts = summary["config"]["Ts"]
    fcn = [found[("fcn", T)] for T in Ts]
    tf = [found[("transformer", T)] for T in Ts]
    assert None not in fcn and None not in tf
    # the claim's direction: the FCN needs more width at larger T, and its width grows
    # faster with T than the transformer's d_e
    assert all(b > a for a, b in zip(fcn, fcn[1:])), fcn
    assert fcn[-1] / fcn[0] > 2 * tf[-1] / tf[0], (fcn, tf)
    # every recorded run is in the table; each probe used the configured seeds
    rows = read_table(os.path.join(out, "points.csv"))
    assert len(rows) == summary["n_runs"] and all(r["status"] == "ok" for r in rows)
    assert {r["seed_index"] for r in rows} == set(range(summary["config"]["seeds"]))
    # resumable: the same command again trains nothing and finds the same widths
    assert cli_main(["separation", "--quick", "--workers", "0", "--out", out, "--quiet"]) == 0
    again = json.load(open(os.path.join(out, "summary.json")))
    assert again["n_runs"] == 0 and again["searches"] == summary["searches"]


def test_cli_prints_widths_and_rejects_bad_input(tmp_path, capsys):
    out = str(tmp_path / "ex")
    proc = subprocess.run([sys.executable, "-m", "stsim", "separation", "--workers", "1",
                           "--Ts", "4,8", "--out", out], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "fcn d=1 T=   8" in proc.stdout
    assert os.path.getsize(os.path.join(out, "separation.png")) > 0
    assert cli.main(["separation", "--quick", "--Ts", "1", "--out", str(tmp_path / "x")]) == 2
    assert "T must be an integer" in capsys.readouterr().err
    assert cli.main(["separation", "--quick", "--max-width-fcn", "0",
                     "--out", str(tmp_path / "y")]) == 2


def test_process_pool_gives_the_same_searches(tmp_path):
    args = ["separation", "--quick", "--Ts", "4,8", "--quiet"]
    assert cli_main(args + ["--workers", "0", "--out", str(tmp_path / "a")]) == 0
    assert cli_main(args + ["--workers", "2", "--out", str(tmp_path / "b")]) == 0
    a = json.load(open(tmp_path / "a" / "summary.json"))["searches"]
    b = json.load(open(tmp_path / "b" / "summary.json"))["searches"]
    assert a == b

    def untimed(path):
        return [{k: v for k, v in r.items() if not k.endswith("time_s")}
                for r in read_table(path)]
    assert untimed(tmp_path / "a" / "points.csv") == untimed(tmp_path / "b" / "points.csv")


def test_power_law_fit_recovers_exponent():
    searches = [dict(arch="fcn", d=1, T=T, width=int(3 * T ** 2), censored=False)
                for T in (4, 8, 16)]
    f = fit_laws(searches)["fcn"]["1"]["power_Td"]
    assert f["a"] == pytest.approx(2) and 2 ** f["b"] == pytest.approx(3)
    assert f["rms_log2"] < 1e-9
