"""Sphinx configuration of the stsim documentation: the API reference generated from the
docstrings (autodoc + napoleon's NumPy-style sections) beside the Markdown documents
(myst-parser), with the mathematics typeset by a MathJax copied into the build
(sphinx-mathjax-offline): the pages load no script from the network. Build:
``pip install ".[docs]" && python -m sphinx -W --keep-going -b html docs docs/_build/html``.
"""
import os
import sys

sys.path.insert(0, os.path.abspath(".."))
import stsim  # noqa: E402

project = "stsim"
author = "stsim developers"
version = release = stsim.__version__
extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon", "sphinx.ext.mathjax",
              "sphinx-mathjax-offline", "myst_parser"]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build", "figures"]   # figures/: generated study reports
root_doc = "index"
html_theme = "alabaster"
autodoc_member_order = "bysource"
autodoc_default_options = {"members": True, "show-inheritance": True}
autodoc_typehints = "none"            # the docstrings state types and shapes
napoleon_numpy_docstring = True
napoleon_google_docstring = False
napoleon_use_ivar = True              # "Attributes" sections without duplicate targets
myst_heading_anchors = 3
# $…$ and $$…$$ are mathematics in the Markdown documents (typeset by the bundled MathJax)
myst_enable_extensions = ["dollarmath", "amsmath"]
myst_dmath_double_inline = True
html_static_path = ["_static"]
html_css_files = ["stsim.css"]
# the Markdown documents link to source files of the repository, which are not pages
suppress_warnings = ["myst.header", "myst.xref_missing"]
