"""benchmarks/long_sequences.py in its small setting (--quick): it trains, evaluates against
the reduced dynamics, tabulates the plateau and draws its figure."""
import csv
import os
import runpy
import sys

import pytest

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "benchmarks", "long_sequences.py")


@pytest.mark.slow
def test_long_sequences_quick(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    out = tmp_path / "out"
    monkeypatch.setattr(sys, "argv", [SCRIPT, "all", "--quick", "--out", str(out),
                                      "--result", str(tmp_path / "wv.npz"),
                                      "--checkpoint", str(tmp_path / "ck.npz")])
    runpy.run_path(SCRIPT, run_name="__main__")
    for name in ("history.csv", "run.json", "length.csv", "plateau.csv", "long.png"):
        assert (out / name).exists(), name
    with open(out / "length.csv") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["T_test"]) for r in rows] == [50, 100, 200, 400]
    # trained to <= 2% of L(0) in distribution; the loss grows with the test length
    L0 = 5 / 6
    assert float(rows[0]["measured_mean"]) <= 0.02 * L0 + 2 * float(rows[0]["measured_se"])
    assert all(float(a["reduced_prediction"]) < float(b["reduced_prediction"])
               for a, b in zip(rows, rows[1:]))
