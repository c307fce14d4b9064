"""The index of every module in docs/architecture.md, made from the modules' own docstrings.

``python docs/module_index.py`` rewrites the section between the two markers of
docs/architecture.md; ``--check`` only says whether it is current (exit 1 if not).
Each row is a module's dotted name and the first paragraph of its docstring (cut at a
clause near 170 characters), so the docstring stays the one place a module says what it
holds; ``tests/test_architecture.py`` holds the page to it.
"""
from __future__ import annotations

import ast
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "architecture.md"
BEGIN = "<!-- every module: written by docs/module_index.py from the docstrings -->"
END = "<!-- end of every module -->"
WIDTH = 170


def modules(package=ROOT / "stsim") -> list:
    """``(dotted name, file)`` of every module and subpackage under ``package``, sorted."""
    out = []
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if len(parts) > 1:                        # the top package is the README's
            out.append((".".join(parts), path))
    return out


def summary(path) -> str:
    """The first paragraph of the module's docstring, as Markdown on one line."""
    doc = ast.get_docstring(ast.parse(pathlib.Path(path).read_text(encoding="utf-8"))) or ""
    text = " ".join(doc.split("\n\n")[0].split())
    text = re.sub(r":(?:func|mod|class|meth|data|attr):`~?\.?([^`]+)`", r"`\1`", text)
    text = text.replace("``", "`")
    if len(text) > WIDTH:
        head = text[:WIDTH]
        cut = max(head.rfind(sep) for sep in ("; ", ". ", ", ", ": "))
        text = (head[:cut] if cut > WIDTH // 3 else head.rsplit(" ", 1)[0]).rstrip(",;:") + " …"
    if text.count("`") % 2:                       # a cut inside a code span: close it
        text = text.replace(" …", "` …") if text.endswith(" …") else text + "`"
    return text.replace("|", "\\|")


def section(package=ROOT / "stsim") -> str:
    """The section's text: the markers and the table between them."""
    rows = [f"| `{name}` | {summary(path) or '(no docstring)'} |"
            for name, path in modules(package)]
    return "\n".join([BEGIN, "", "| module | what it holds (its docstring) |", "|---|---|",
                      *rows, "", END])


def current(page_text: str, package=ROOT / "stsim") -> bool:
    """Whether ``page_text`` holds the section exactly as the docstrings give it."""
    return section(package) in page_text


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    text = PAGE.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        print(f"{PAGE}: the markers of the module index are missing", file=sys.stderr)
        return 1
    new = text[:text.index(BEGIN)] + section() + text[text.index(END) + len(END):]
    if "--check" in argv:
        if new != text:
            print(f"{PAGE}: the module index is stale: run python docs/module_index.py",
                  file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
