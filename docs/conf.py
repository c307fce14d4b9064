"""Sphinx configuration of the stsim documentation: the API reference generated from the
docstrings (autodoc + napoleon's NumPy-style sections) beside the Markdown documents
(myst-parser). Build: ``pip install ".[docs]" && sphinx-build -W -b html docs docs/_build/html``.
"""
import os
import sys

sys.path.insert(0, os.path.abspath(".."))
import stsim  # noqa: E402

project = "stsim"
author = "stsim developers"
version = release = stsim.__version__
extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon", "sphinx.ext.mathjax", "myst_parser"]
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
# the Markdown documents link to source files and use ``$…$`` only as plain text
suppress_warnings = ["myst.header", "myst.xref_missing"]
