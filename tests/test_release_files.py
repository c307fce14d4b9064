"""What a released research tool carries: a LICENSE (the license setup.cfg names, shipped
with the package), a CITATION.cff citing the tool and the paper, a CHANGELOG; the version
in one place (``stsim.__version__``), repeated only where a file format needs it."""
import configparser
import re
from pathlib import Path

import pytest

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


def _citation():
    return (ROOT / "CITATION.cff").read_text()


def test_citation_cites_the_tool_and_the_paper_at_this_version():
    """The software is the main entry (what GitHub's "Cite" button and cffconvert give),
    with its version and release date; the paper is under ``references`` with its DOI."""
    text = _citation()
    assert re.search(r"^cff-version: 1\.2\.0$", text, flags=re.M)
    assert re.search(r"^type: software$", text, flags=re.M)
    assert re.search(rf"^version: {re.escape(stsim.__version__)}$", text, flags=re.M)
    released = re.search(r'^date-released: "(\d{4}-\d{2}-\d{2})"$', text, flags=re.M)
    assert released, "the software's release date"
    assert "preferred-citation:" not in text
    top, refs = text.split("\nreferences:\n", 1)
    assert "ICML 2024" in refs and "doi: 10.48550/arXiv.2406.06893" in refs
    assert "Transformers Provably Learn Sparse Token Selection While Fully-Connected Nets " \
           "Cannot" in refs and "Provably" not in top
    for name in ("Wang", "Wei", "Hsu", "Lee"):
        assert f"family-names: {name}" in refs


def test_the_release_date_is_the_changelogs():
    released = re.search(r'^date-released: "(\S+)"$', _citation(), flags=re.M).group(1)
    head = re.search(r"^## (\S+) — (\S+)$", (ROOT / "CHANGELOG.md").read_text(), flags=re.M)
    assert head.group(1) == stsim.__version__ and head.group(2) == released


def test_cffconvert_validates_it_and_its_bibtex_has_the_year(tmp_path):
    """With cffconvert (the extra "cite"): the file validates and the BibTeX it makes
    carries the release year. cffconvert's BibTeX is of the main entry only, so the paper
    is not in it (its entry is under ``references``)."""
    import shutil
    import subprocess
    exe = shutil.which("cffconvert")
    if exe is None:
        pytest.skip('needs cffconvert (the extra "cite")')
    path = str(ROOT / "CITATION.cff")
    ok = subprocess.run([exe, "--validate", "-i", path], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    bib = subprocess.run([exe, "-f", "bibtex", "-i", path], capture_output=True, text=True)
    year = re.search(r'^date-released: "(\d{4})', _citation(), flags=re.M).group(1)
    assert bib.returncode == 0 and f"year = {{{year}}}" in bib.stdout
    bad = tmp_path / "CITATION.cff"       # the check sees a seeded fault: no release date
    bad.write_text(re.sub(r"^date-released: .*\n", "", _citation(), flags=re.M))
    out = subprocess.run([exe, "-f", "bibtex", "-i", str(bad)], capture_output=True, text=True)
    assert "year =" not in out.stdout


def test_the_changelog_opens_with_this_version():
    text = (ROOT / "CHANGELOG.md").read_text()
    first = re.search(r"^## (\S+)", text, flags=re.M).group(1)
    assert first == stsim.__version__
