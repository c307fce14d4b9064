"""Lifecycle: a run's folder whose manifest.json is not a readable file is refused (never
read as absent), a dropped Session leaks no prefetch thread, a callback's return value is
checked and a KeyboardInterrupt or SystemExit it raises keeps the run's result and
checkpoint. docs/model.md, "Failure behaviour"."""
import gc
import os
import threading

import numpy as np
import pytest

import stsim
from stsim.cli import main as cli

QUICK = ["--T", "8", "--q", "2", "--steps", "4", "--batch", "8", "--quiet"]


# ---- a manifest.json in any form is a manifest to verify ---------------------------------
@pytest.fixture(scope="module")
def two_folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    for name, seed in (("A", 1), ("B", 2)):
        assert cli(["run", *QUICK, "--seed", str(seed), "--out", str(root / name)]) == 0
    return root


@pytest.mark.parametrize("kind", ["folder", "dangling link", "link to a folder"])
def test_a_manifest_that_is_not_a_file_is_refused_not_read_as_absent(two_folders, tmp_path,
                                                                     kind):
    out = tmp_path / "OUT"
    out.mkdir()
    for f in os.listdir(two_folders / "A"):
        if f != "manifest.json":
            (out / f).write_bytes((two_folders / "A" / f).read_bytes())
    (out / "result.npz").write_bytes((two_folders / "B" / "result.npz").read_bytes())
    man = out / "manifest.json"
    if kind == "folder":
        man.mkdir()
    elif kind == "dangling link":
        os.symlink(tmp_path / "gone.json", man)
    else:
        (tmp_path / "d").mkdir()
        os.symlink(tmp_path / "d", man)
    # before: the seed-2 result.npz loaded as the folder's one run
    for path in (out / "result.npz", out):
        with pytest.raises(ValueError, match="manifest.json.*not a manifest"):
            stsim.load(path)


def test_a_folder_without_a_manifest_still_loads(two_folders, tmp_path):
    res = stsim.load(two_folders / "A")
    path = tmp_path / "r.npz"
    res.save(path)
    assert stsim.load(path).config["seed"] == 1
