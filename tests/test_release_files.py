"""What a released research tool carries: a LICENSE (the license setup.cfg names, shipped
with the package), a CITATION.cff citing the tool and the paper, a CHANGELOG; the version
in one place (``stsim.__version__``), repeated only where a file format needs it."""
import configparser
import re
from pathlib import Path

import stsim

ROOT = Path(__file__).resolve().parents[1]


def _setup():
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    return cfg


def test_the_license_is_the_one_setup_cfg_names_and_is_shipped():
    meta = _setup()["metadata"]
    assert meta["license"] == "MIT"
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")
    assert meta["license_files"].strip() == "LICENSE"
    assert meta["version"] == "attr: stsim.__version__"      # the one place


def test_citation_cites_the_tool_and_the_paper_at_this_version():
    text = (ROOT / "CITATION.cff").read_text()
    assert re.search(r"^cff-version: 1\.2\.0$", text, flags=re.M)
    assert re.search(rf"^version: {re.escape(stsim.__version__)}$", text, flags=re.M)
    assert "preferred-citation:" in text and "ICML 2024" in text
    assert "Transformers Provably Learn Sparse Token Selection While Fully-Connected Nets " \
           "Cannot" in text
    for name in ("Wang", "Wei", "Hsu", "Lee"):
        assert f"family-names: {name}" in text


def test_the_changelog_opens_with_this_version():
    text = (ROOT / "CHANGELOG.md").read_text()
    first = re.search(r"^## (\S+)", text, flags=re.M).group(1)
    assert first == stsim.__version__
