"""The built documentation loads nothing from the network: docs/check_offline.py (run by
.ci/run after the Sphinx build) finds a remote script and a page of mathematics without the
bundled MathJax, shown here on seeded pages; docs/conf.py bundles MathJax."""
import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("check_offline", ROOT / "docs" / "check_offline.py")
check_offline = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check_offline)

HEAD = '<html><head><link rel="stylesheet" href="_static/a.css">{}</head><body>{}</body></html>'
MATH = '<div class="math notranslate nohighlight">\\[x^2\\]</div>'


def _site(tmp_path, pages):
    (tmp_path / "_static" / "mathjax").mkdir(parents=True)
    (tmp_path / "_static" / "mathjax" / "tex-chtml.js").write_text("//")
    for name, text in pages.items():
        (tmp_path / name).write_text(text)
    return tmp_path


def test_a_local_mathjax_page_passes(tmp_path):
    site = _site(tmp_path, {"t.html": HEAD.format(
        '<script defer src="_static/mathjax/tex-chtml.js?v=1"></script>', MATH),
        "plain.html": HEAD.format("", "<p>see https://example.org</p>")})
    assert check_offline.faults(site) == []
    assert check_offline.main([str(site)]) == 0


def test_seeded_faults_are_found(tmp_path):
    site = _site(tmp_path, {
        "cdn.html": HEAD.format('<script src="https://cdn.example/mathjax/tex-chtml.js">'
                                '</script>', MATH),
        "font.html": HEAD.format('<link rel="stylesheet" href="//fonts.example/css">', ""),
        "nomj.html": HEAD.format("", MATH),
        "gone.html": HEAD.format('<script src="_static/mathjax/missing.js"></script>', MATH)})
    found = "\n".join(check_offline.faults(site))
    assert "cdn.html: loads https://cdn.example/mathjax/tex-chtml.js" in found
    assert "cdn.html: has mathematics but loads no local MathJax" in found
    assert "font.html: loads //fonts.example/css" in found
    assert "nomj.html: has mathematics but loads no local MathJax" in found
    assert "gone.html: its MathJax _static/mathjax/missing.js is not in the build" in found
    assert check_offline.main([str(site)]) == 1


def test_the_docs_bundle_mathjax_and_ci_checks_the_build():
    conf = (ROOT / "docs" / "conf.py").read_text()
    assert '"sphinx-mathjax-offline"' in conf and not re.search(r"mathjax_path\s*=\s*['\"]http",
                                                                 conf)
    assert "sphinx-mathjax-offline" in (ROOT / "setup.cfg").read_text()
    assert "python docs/check_offline.py docs/_build/html" in (ROOT / ".ci" / "run").read_text()
