"""The documents typeset their mathematics ($…$ and $$…$$, MathJax bundled by the Sphinx
build) rather than writing formulas as Unicode in code spans; every inline formula is
closed in its paragraph; the documents cite no internal tracker numbers."""
import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"
MATH_PAGES = ["theory", "model", "getting-started", "attention", "expressivity", "separation"]
#: the pages rich in formulas
TYPESET = ["theory", "model", "attention", "expressivity", "separation"]


def _prose(text):
    """The paragraphs outside fenced code blocks, code spans and ``$$`` removed."""
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    return [re.sub(r"`[^`]*`", "", par).replace("$$", "") for par in re.split(r"\n\s*\n", text)]


def unclosed(text):
    return [line for line in _prose(text) if line.count("$") % 2]


@pytest.mark.parametrize("page", MATH_PAGES)
def test_every_inline_formula_is_closed_in_its_paragraph(page):
    assert unclosed((DOCS / f"{page}.md").read_text(encoding="utf-8")) == []


@pytest.mark.parametrize("page", TYPESET)
def test_the_pages_typeset_their_formulas(page):
    text = (DOCS / f"{page}.md").read_text(encoding="utf-8")
    inline = re.findall(r"(?<!\$)\$[^$]+\$(?!\$)", "\n\n".join(_prose(text)))
    assert len(inline) >= 100, (page, len(inline))
    # few formulas left as Unicode in code spans (sums, partial derivatives)
    spans = [s for s in re.findall(r"`([^`\n]+)`", text) if re.search(r"[Σ∂]", s)]
    assert len(spans) <= 0.2 * len(inline), (page, spans[:5])


def test_the_checks_see_an_unclosed_formula():
    assert unclosed("a $x = 1 and `code $` b\n\nc $y$") == ["a $x = 1 and  b"]


@pytest.mark.parametrize("path", sorted(DOCS.glob("*.md")), ids=lambda p: p.name)
def test_no_tracker_numbers(path):
    assert not re.search(r"\b[Ii]ssue[ -]?\d+|\bSPEC\b", path.read_text(encoding="utf-8"))
