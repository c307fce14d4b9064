"""The documentation as readers get it: every public docstring read
through napoleon (as the API reference renders it) without a misread entry; the API
reference lists every module; every relative link and quoted section of README.md and
docs/*.md exists."""
import importlib
import inspect
import pathlib
import pkgutil
import re

import pytest

import stsim

napoleon = pytest.importorskip("sphinx.ext.napoleon")
from sphinx.ext.napoleon.docstring import NumpyDocstring  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
MODULES = sorted(m.name for m in pkgutil.walk_packages(stsim.__path__, "stsim.")
                 if not m.name.endswith("__main__"))
CONFIG = napoleon.Config(napoleon_use_param=True, napoleon_use_rtype=True,
                         napoleon_use_ivar=True, napoleon_numpy_docstring=True,
                         napoleon_google_docstring=False)
NAME = re.compile(r"^(\\?\*){0,2}[A-Za-z_][A-Za-z0-9_]*$")
EXCEPTION = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*$")
# napoleon's sections whose entries are "name : type" (the Returns/Yields names optional)
NAMED = ("parameters", "other parameters", "attributes", "keyword arguments")


class Recording(NumpyDocstring):
    """napoleon's NumPy reader, recording the (section, name, type, description) of every
    entry it reads."""

    def __init__(self, *args, **kwargs):
        self.entries, self._section = [], ""
        super().__init__(*args, **kwargs)

    def _consume_fields(self, parse_type=True, prefer_type=False, multiple=False):
        fields = super()._consume_fields(parse_type, prefer_type, multiple)
        for name, typ, desc in fields:
            self.entries.append((self._section or "", name, typ, desc))
        return fields

    def _parse_returns_section(self, section):
        self._section = "returns"
        return super()._parse_returns_section(section)

    def _parse_yields_section(self, section):
        self._section = "returns"
        return super()._parse_yields_section(section)

    def _parse_parameters_section(self, section):
        self._section = "parameters"
        return super()._parse_parameters_section(section)

    def _parse_other_parameters_section(self, section):
        self._section = "other parameters"
        return super()._parse_other_parameters_section(section)

    def _parse_keyword_arguments_section(self, section):
        self._section = "keyword arguments"
        return super()._parse_keyword_arguments_section(section)

    def _parse_attributes_section(self, section):
        self._section = "attributes"
        return super()._parse_attributes_section(section)

    def _parse_raises_section(self, section):
        self._section = "raises"
        return super()._parse_raises_section(section)

    def _parse_warns_section(self, section):
        self._section = "warns"
        return super()._parse_warns_section(section)


def prose_type(typ: str) -> str:
    """Why a type read by napoleon looks like a description ("" when it looks like a
    type): a dash or a semicolon (two entries on one line, or a description after the
    type), a trailing full stop or colon, ``name : type`` inside it, or more than 12 words."""
    t = typ.strip()
    if "—" in t or ";" in t:
        return "a dash or semicolon in the type (a description or a second entry on its line)"
    if t.endswith((".", ":")):
        return "the type ends like a sentence"
    if re.search(r"\w \: ", t):
        return "a 'name : type' inside the type"
    if len(t.split()) > 12:
        return "more than 12 words"
    return ""


def misread(doc: str, what: str, obj) -> list:
    """The entries of one docstring that napoleon misreads."""
    rec = Recording(doc, CONFIG, what=what, obj=obj)
    bad = []
    for section, name, typ, desc in rec.entries:
        name, typ = name.strip(), typ.strip()
        where = f"{section} entry {name or typ!r}"
        if section in NAMED:
            if not NAME.match(name):
                bad.append(f"{where}: the name is not one identifier")
            if not "".join(desc).strip():
                bad.append(f"{where}: no description (an indented line under 'name : type')")
        if section in ("returns",) and name and not NAME.match(name):
            bad.append(f"{where}: the name is not one identifier")
        if section in ("raises", "warns"):
            if not EXCEPTION.match(typ or name):
                bad.append(f"{where}: not an exception class")
            continue
        why = prose_type(typ)
        if why:
            bad.append(f"{where}: type {typ!r}: {why}")
    return bad


def public_objects(mod):
    """The module and every name of its ``__all__`` defined in it, with the public
    methods of its classes: ``(qualified name, object, napoleon's 'what')``."""
    yield mod.__name__, mod, "module"
    for name in getattr(mod, "__all__", ()):
        obj = getattr(mod, name, None)
        if not (inspect.isfunction(obj) or inspect.isclass(obj)) \
                or getattr(obj, "__module__", None) != mod.__name__:
            continue
        yield f"{mod.__name__}.{name}", obj, "class" if inspect.isclass(obj) else "function"
        if inspect.isclass(obj):
            for attr, member in vars(obj).items():
                if attr.startswith("_"):
                    continue
                if isinstance(member, (staticmethod, classmethod)):
                    member = member.__func__
                if isinstance(member, property):
                    member = member.fget
                if inspect.isfunction(member):
                    yield f"{mod.__name__}.{name}.{attr}", member, "method"


@pytest.mark.parametrize("module", MODULES)
def test_napoleon_reads_every_public_docstring(module):
    bad = []
    for name, obj, what in public_objects(importlib.import_module(module)):
        doc = inspect.getdoc(obj)
        if doc:
            bad += [f"{name}: {b}" for b in misread(doc, what, obj)]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("doc, why", [
    ("Parameters\n----------\nT : int — sequence length\n", "dash"),
    ("Parameters\n----------\nW : (D, D);  V : (d, D)\n    The parameters.\n", "dash or semicolon"),
    ("Parameters\n----------\nx : int\n    The x.\n\nA paragraph (after the list)\nof prose.\n",
     "not one identifier"),
    ("Parameters\n----------\nx : int\n", "no description"),
    ("Returns\n-------\nloss : float;  dW : (D, D)\n    The loss.\n", "dash or semicolon"),
    ("Returns\n-------\n(B, T) array for the theory model, (B, T + 1) for the practical:\n",
     "more than 12 words"),
    ("Raises\n------\nValueError — before any work\n", "not an exception"),
    ("Attributes\n----------\nrows, columns : list\n    Two names.\n", "not one identifier"),
])
def test_the_reader_sees_a_seeded_misread_entry(doc, why):
    """Each misreading the issue found, seeded: the check fails on it; the same entry
    written as numpydoc wants passes."""
    assert any(why in b for b in misread(doc, "function", None)), misread(doc, "function", None)
    good = ("Parameters\n----------\nT : int\n    Sequence length.\n\nReturns\n-------\n"
            "loss : float\n    The loss.\n\nRaises\n------\nValueError\n    Bad input.\n")
    assert misread(good, "function", None) == []


def missing_exports(mod) -> list:
    """The names of ``mod.__all__`` that the module does not define (``from mod import *``
    would raise on them)."""
    return [n for n in getattr(mod, "__all__", ()) if not hasattr(mod, n)]


def test_every_exported_name_exists():
    """Every name in every module's ``__all__`` exists; a seeded stale name is seen."""
    bad = {m: missing_exports(importlib.import_module(m)) for m in MODULES}
    assert {m: v for m, v in bad.items() if v} == {}
    fake = type(stsim)("fake")
    fake.__all__, fake.NAME = ["NAME", "TABLES"], "x"
    assert missing_exports(fake) == ["TABLES"]


def test_api_reference_lists_every_module():
    """The reference is one page per layer (docs/api/*.rst); together they list every
    module, each once."""
    text = "\n".join(p.read_text(encoding="utf-8")
                     for p in sorted((ROOT / "docs" / "api").glob("*.rst")))
    found = re.findall(r"^\.\. automodule:: (\S+)", text, flags=re.M)
    missing = [m for m in MODULES if m not in found]
    assert not missing, f"docs/api/*.rst lack {missing}"
    assert len(found) == len(set(found)), "a module is on two pages"
    assert "being rewritten" not in text


# --------------------------------------------------------------------------------------
# the documents' internal references
# --------------------------------------------------------------------------------------
DOCS = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))


def _headings(path) -> set:
    """The sections of a Markdown file: its headings, and the bold titles that open a
    paragraph (``**Defaults.** …``, ``**Where the plateau ends: …**``)."""
    text = path.read_text(encoding="utf-8")
    text = re.sub(r"```.*?```", "", text, flags=re.S)          # not inside code blocks
    heads = {re.sub(r"[*`]", "", h).strip() for h in re.findall(r"^#{1,6}\s+(.+?)\s*#*$",
                                                                text, flags=re.M)}
    for lead in re.findall(r"^\*\*([^*\n]+?)\*\*", text, flags=re.M):
        lead = lead.strip().rstrip(".")
        heads |= {lead, lead.split(":")[0].strip()}
    return heads


def _slug(heading) -> str:
    s = re.sub(r"[^\w\- ]", "", heading.lower()).strip()
    return re.sub(r" ", "-", s)


def references(path):
    """``(target file, quoted section or anchor or None, how it was written)`` of every
    relative link ``[..](file#anchor)`` and every prose reference ``file, "Section"`` /
    ``file "Section"`` in ``path`` (README.md and docs/*.md)."""
    text = path.read_text(encoding="utf-8")
    for m in re.finditer(r"\]\(([^)\s]+)\)", text):
        target = m.group(1)
        if re.match(r"^[a-z]+:", target):          # http:, https:, mailto:
            continue
        file, _, anchor = target.partition("#")
        yield (path.parent / file) if file else path, ("#" + anchor) if anchor else None, \
            m.group(0)
    for m in re.finditer(r"`?((?:docs/)?[\w.-]+\.md)`?,?\s+(?:section\s+)?[\"“]([^\"”]+)[\"”]",
                         text):
        file, section = m.groups()
        base = ROOT if file.startswith("docs/") or path.name == "README.md" else path.parent
        target = base / file if (base / file).exists() else ROOT / "docs" / file
        yield target, " ".join(section.split()), m.group(0)     # a line break is a space
    for m in re.finditer(r"[\"“]([^\"”\n]{3,80})[\"”] below", text):
        yield path, m.group(1), m.group(0)


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.name)
def test_every_internal_reference_of_the_docs_exists(path):
    bad = []
    for target, section, how in references(path):
        if not target.exists():
            bad.append(f"{how}: no file {target.relative_to(ROOT)}")
            continue
        if section is None or target.suffix != ".md":
            continue
        heads = _headings(target)
        if section.startswith("#"):
            ok = section[1:] in {_slug(h) for h in heads}
        else:
            ok = any(h == section or h.startswith(section) or _slug(h) == _slug(section)
                     for h in heads)
        if not ok:
            bad.append(f"{how}: {target.relative_to(ROOT)} has no section {section!r}")
    assert not bad, "\n".join(bad)


def test_reference_check_sees_a_seeded_dead_reference(tmp_path):
    doc = tmp_path / "a.md"
    (tmp_path / "b.md").write_text("# Title\n\n## Failure behaviour\n\ntext\n")
    doc.write_text('See b.md, "Failure behaviour" and [b](b.md#failure-behaviour).\n')
    assert len(list(references(doc))) == 2
    for target, section, _ in references(doc):
        heads = _headings(target)
        assert section.lstrip("#") in heads | {_slug(h) for h in heads}
    doc.write_text('See b.md, "Failure modes" and [c](c.md).\n')
    found = list(references(doc))
    assert not found[0][0].exists()                                   # c.md: no such file
    assert "Failure modes" not in _headings(found[1][0])              # no such section
