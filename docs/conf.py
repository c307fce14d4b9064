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
copyright = f"2026, {author}"     # the footer: "© 2026, stsim developers."
version = release = stsim.__version__
extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon", "sphinx.ext.mathjax",
              "sphinx-mathjax-offline", "myst_parser", "sphinx_gallery.gen_gallery"]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build", "figures"]   # figures/: generated study reports

# the gallery (sphinx-gallery): examples/*.py run at build time, with the figures they write
# (docs/gallery_scraper.py) into a folder of the build's own; the Dask example is shown
# without running (it needs the extra "dask", which the docs do not install)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tempfile  # noqa: E402
os.environ["STSIM_EXAMPLE_OUT"] = tempfile.mkdtemp(prefix="stsim-gallery-")
os.environ.setdefault("MPLBACKEND", "Agg")
sphinx_gallery_conf = {
    "examples_dirs": "../examples",
    "gallery_dirs": "gallery",
    "filename_pattern": r"/(?!dask_sweep)[^/]+\.py$",
    "image_scrapers": ("gallery_scraper.written_figures",),
    "abort_on_example_error": True,
    "download_all_examples": False,
    "show_signature": False,
    "min_reported_time": 0,
    "write_computation_times": False,   # its page loads DataTables from the network
}
root_doc = "index"
html_theme = "alabaster"
# room for the formulas and the code of the documents beside the navigation
html_theme_options = {"page_width": "1160px", "body_max_width": "none"}
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


# --------------------------------------------------------------------------------------
# cross-references: resolved where the name is defined (``nitpicky``: every unresolved
# reference of the API pages is a warning, i.e. an error under -W)
# --------------------------------------------------------------------------------------
import importlib  # noqa: E402
import re  # noqa: E402

nitpicky = True
napoleon_preprocess_types = True
# words of the docstrings' type lines that name no object: shapes, "optional", kinds of
# value, literal choices; and the types of other projects (no intersphinx: the build is
# offline)
nitpick_ignore_regex = [
    (r"py:.*", r"(numpy|np|scipy|matplotlib|pandas|concurrent|distributed|dask|loky|"
               r"threadpoolctl|tqdm|argparse|collections|os|io|types|typing|pathlib|json|"
               r"multiprocessing|threading|signal|warnings)(\..*)?"),
    (r"py:.*", r"(optional|default|array|arrays|array_like|ndarray|ndarrays|callable|sequence|iterable|"
               r"mapping|scalar|scalars|path|str|int|float|bool|dict|list|tuple|set|bytes|"
               r"object|None|True|False|file|function|generator|Generator|SeedSequence|"
               r"Executor|Future|DataFrame|Figure|Axes|module|class|type|any|of|or|and|the|"
               r"a|an|in|per|each|same|shape|like|float64|int64|integer|number|numbers|"
               r"string|strings|floats|ints|dicts|lists|tuples|bools|matrix|vector|row|rows|"
               r"column|columns|value|values|keys|key|name|names|entry|entries|or None)"),
    (r"py:.*", r".*[\s(){}\[\]\"'=,<>:;|×…+*/−].*"),     # shapes, choices, expressions
    (r"py:.*", r"[A-Za-z_]\w{0,3}"),                       # one-letter sizes: T, q, d, d_e, n
    (r"py:.*", r"\w+(\.\w+)*_(like|s)"),
]


def _find(path, module=None):
    """The object a dotted ``path`` names: from the top of ``stsim`` or from ``module``."""
    heads = [path] if path.startswith("stsim") else \
        ([f"{module}.{path}"] if module else []) + [f"stsim.{path}"]
    for full in heads:
        parts = full.split(".")
        for i in range(len(parts), 0, -1):
            try:
                obj = importlib.import_module(".".join(parts[:i]))
            except ImportError:
                continue
            try:
                for p in parts[i:]:
                    obj = getattr(obj, p)
            except AttributeError:
                break
            return obj
    return None


def _canonical(obj):
    mod = getattr(obj, "__module__", None)
    qual = getattr(obj, "__qualname__", None)
    if isinstance(obj, type(importlib)):
        return obj.__name__
    if mod and qual and mod.startswith("stsim"):
        return f"{mod}.{qual}"
    return None


def _resolve_alias(app, env, node, contnode):
    """A reference to ``stsim.run``, ``Config``, ``Result.info`` (a name as the package
    exports it, or as the referring module imports it) resolved to where it is defined."""
    if node.get("refdomain") != "py":
        return None
    target = node.get("reftarget", "").lstrip("~.")
    obj, attr = _find(target, node.get("py:module")), None
    if obj is None and "." in target:                       # an attribute of a class
        head, attr = target.rsplit(".", 1)
        obj = _find(head, node.get("py:module"))
    cls = _find(node["py:class"], node.get("py:module")) if node.get("py:class") else None
    if obj is None and cls is not None:                      # a member of the class at hand
        obj = _find(target, getattr(cls, "__module__", None)) or \
            getattr(cls, target, None)
        if obj is None and node["reftype"] in ("attr", "meth"):   # an instance attribute
            obj, target = cls, node["py:class"]
    if obj is None and "." not in target:    # a name of the package defined in one place
        import sys
        hits = {id(getattr(m, target)): getattr(m, target) for n, m in list(sys.modules.items())
                if n.startswith("stsim") and m is not None and hasattr(m, target)}
        obj = next(iter(hits.values())) if len(hits) == 1 else None
    if obj is None:
        return None
    canonical = _canonical(obj)
    owner = None
    if canonical is None:              # a constant or an instance: its module's page
        owner = _find(target.rsplit(".", 1)[0], node.get("py:module")) if "." in target \
            else importlib.import_module(node.get("py:module") or "stsim")
        canonical = f"{_canonical(owner) or 'stsim'}.{target.rsplit('.', 1)[-1]}"
    elif attr:
        canonical += "." + attr
    py = env.get_domain("py")
    # the object itself, else what holds it (an undocumented constant, a field listed under
    # its class's "Attributes"): the class, then the module
    candidates = [canonical]
    while "." in candidates[-1]:
        candidates.append(candidates[-1].rsplit(".", 1)[0])
    for target_name in candidates:
        for role in (node["reftype"], "obj", "mod"):
            new = node.deepcopy()
            new["reftarget"] = target_name
            res = py.resolve_xref(env, node["refdoc"], app.builder, role, target_name, new,
                                  contnode)
            if res is not None:
                return res
    return None


def _drop_generated_gallery(app, exc):
    """The gallery's generated sources (``docs/gallery``: rST, notebooks, images with their
    data) are an intermediate of the build, not kept in the tree: the HTML holds the pages,
    the figures and, as downloads, their data."""
    import shutil
    shutil.rmtree(os.path.join(app.srcdir, sphinx_gallery_conf["gallery_dirs"]),
                  ignore_errors=True)


def setup(app):
    app.connect("missing-reference", _resolve_alias)
    app.connect("build-finished", _drop_generated_gallery)
