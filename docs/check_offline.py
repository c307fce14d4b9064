"""Check a built HTML documentation folder: no page loads a script, a style sheet or a font
from the network, and every page with mathematics loads the MathJax copied into the build.

    python docs/check_offline.py docs/_build/html      # exit 1, one line per fault

(.ci/run calls it after the Sphinx build.)
"""
from __future__ import annotations

import os
import re
import sys

_REMOTE = re.compile(r"""<(script|link|img|iframe)\b[^>]*?\b(?:src|href)\s*=\s*["']((?:https?:)?//[^"']+)""",
                     re.I)
_MATHJAX = re.compile(r"""<script\b[^>]*\bsrc\s*=\s*["']([^"']*mathjax[^"']*)["']""", re.I)


def faults(folder) -> list:
    """``["page: what"]`` for every remote resource a page loads (a ``<link>`` counts only
    as a style sheet, icon or preload) and every page whose mathematics has no local
    MathJax."""
    out = []
    for root, _, files in os.walk(folder):
        for name in files:
            if not name.endswith(".html"):
                continue
            path = os.path.join(root, name)
            text = open(path, encoding="utf-8", errors="replace").read()
            rel = os.path.relpath(path, folder)
            for tag, url in _REMOTE.findall(text):
                if tag.lower() == "link" and not re.search(
                        r"""<link\b[^>]*rel\s*=\s*["'][^"']*(stylesheet|icon|preload)""",
                        text[text.find(url) - 300:text.find(url)], re.I):
                    continue
                out.append(f"{rel}: loads {url} from the network")
            if 'class="math' in text:
                local = [u for u in _MATHJAX.findall(text) if not re.match(r"(https?:)?//", u)]
                if not local:
                    out.append(f"{rel}: has mathematics but loads no local MathJax")
                for u in local:
                    target = os.path.normpath(os.path.join(root, u.split("?")[0]))
                    if not os.path.exists(target):
                        out.append(f"{rel}: its MathJax {u} is not in the build")
    return out


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    folder = args[0] if args else os.path.join(os.path.dirname(__file__), "_build", "html")
    if not os.path.isdir(folder):
        print(f"check_offline: {folder!r} is not a built documentation folder", file=sys.stderr)
        return 2
    bad = faults(folder)
    for line in bad:
        print(f"check_offline: {line}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
