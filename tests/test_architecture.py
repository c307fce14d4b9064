"""The layers of docs/architecture.md: every import inside the package goes to the same or
a lower layer (util → core → theory → baselines → sweeps → studies → cli)."""
import ast
import pathlib
import re

import stsim

LAYERS = ["util", "core", "theory", "baselines", "sweeps", "studies", "cli"]
ROOT = pathlib.Path(stsim.__file__).parent


def _layer(module: str):
    parts = module.split(".")
    if parts[0] != "stsim" or len(parts) < 2:
        return None
    return parts[1] if parts[1] in LAYERS else None


def _imports(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.level:
                raise AssertionError(f"{path}: relative import (use absolute stsim.* imports)")
            yield node.module
            for a in node.names:
                yield f"{node.module}.{a.name}"
        elif isinstance(node, ast.Import):
            for a in node.names:
                yield a.name


def test_every_module_lives_in_a_layer():
    loose = [p.name for p in ROOT.glob("*.py") if p.name not in ("__init__.py", "__main__.py")]
    assert loose == [], f"modules outside the layer folders: {loose}"
    code = [p.name for p in ROOT.iterdir() if p.is_dir() and any(p.rglob("*.py"))]
    assert sorted(code) == sorted(LAYERS)          # stsim/data holds data only (no code)


def test_no_upward_imports():
    bad = []
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT).parts
        if len(rel) == 1:          # stsim/__init__.py, __main__.py: the public face
            continue
        own = LAYERS.index(rel[0])
        for mod in _imports(path):
            layer = _layer(mod)
            if layer is not None and LAYERS.index(layer) > own:
                bad.append(f"{'/'.join(rel)} imports {mod} ({layer} is above {rel[0]})")
    assert not bad, "\n".join(sorted(set(bad)))


def test_one_process_pool():
    # built or subclassed (not merely named in a docstring) in one place only
    hits = [str(p.relative_to(ROOT)) for p in ROOT.rglob("*.py")
            if re.search(r"ProcessPoolExecutor\s*[()]", p.read_text(encoding="utf-8"))]
    assert hits == ["sweeps/pool.py"], hits


def test_architecture_doc_examples_run():
    """docs/architecture.md's examples (a new encoding, optimiser, architecture) are
    doctests: if one goes stale, this fails. Their registrations are removed after."""
    import doctest

    from stsim.core import families, optim, problem
    doc = pathlib.Path(__file__).resolve().parents[1] / "docs" / "architecture.md"  # the
    # repository's: ROOT is the imported package, site-packages' after `pip install ".[test]"`
    try:
        res = doctest.testfile(str(doc), module_relative=False, optionflags=doctest.ELLIPSIS)
    finally:
        for table in (families._REGISTERED, optim._OPTIMIZERS, problem._ARCHS):
            for k in [k for k in table if k.endswith("-doc")]:
                del table[k]
    assert res.attempted >= 15 and res.failed == 0, res


def _module_of(path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _graph() -> dict:
    """Module → the package modules it imports, function-local imports included (``from
    M import a`` goes to ``M.a`` where that is a module, else to ``M``)."""
    mods = {_module_of(p): p for p in ROOT.rglob("*.py")}
    graph = {}
    for m, p in mods.items():
        out = set()
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module in mods:
                for a in node.names:
                    sub = f"{node.module}.{a.name}"
                    out.add(sub if sub in mods else node.module)
            elif isinstance(node, ast.Import):
                out |= {a.name for a in node.names if a.name in mods}
        graph[m] = out - {m}
    return graph


def _cycles(graph) -> list:
    """The strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles_counting_function_local_imports():
    assert _cycles(_graph()) == []


def test_the_cycle_check_finds_a_seeded_cycle():
    g = _graph()
    g["stsim.util.stats"] = g["stsim.util.stats"] | {"stsim.studies.widths"}   # a seeded fault
    assert any("stsim.util.stats" in c for c in _cycles(g))


def _studies():
    return sorted(p.name for p in (ROOT / "studies").iterdir() if (p / "__init__.py").exists())


def test_no_study_imports_another_study():
    studies, bad = _studies(), []
    for m, deps in _graph().items():
        parts = m.split(".")
        if len(parts) < 3 or parts[1] != "studies" or parts[2] not in studies:
            continue
        for d in deps:
            dp = d.split(".")
            if len(dp) > 2 and dp[1] == "studies" and dp[2] in studies and dp[2] != parts[2]:
                bad.append(f"{m} imports {d}")
    assert not bad, "\n".join(sorted(bad))


def test_import_stsim_and_a_study_command_load_no_scipy_statistics():
    """scipy and matplotlib are imported where they are used: ``import stsim`` loads no
    scipy module, nor do the commands (with their studies, which a pool worker imports to
    run a point) of the studies whose models are stsim's own; those of the sparse and
    expressivity studies (their models use scipy.special) load no ``scipy.stats``; none
    loads matplotlib (each took 0.1-0.8 s of every command's and every pool worker's
    start)."""
    import subprocess
    import sys
    from stsim.cli.study import STUDIES
    STUDIES = STUDIES + ("figures",)
    own = [s for s in STUDIES if s not in ("sparse", "expressivity")]
    code = ("import sys, stsim; from stsim.cli import build_parser; "
            "scipy = lambda: sorted(m for m in sys.modules if m.startswith('scipy.')); "
            f"print(scipy()); [build_parser(s) for s in {own!r}]; print(scipy()); "
            f"[build_parser(s) for s in {STUDIES!r}]; "
            "print('scipy.stats' in sys.modules, 'matplotlib' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    assert out == ["[]", "[]", "False False"], out


def test_the_architecture_page_names_every_module_as_its_docstring_says():
    """docs/architecture.md's module index is every module of the package with the first
    paragraph of its docstring (``python docs/module_index.py`` writes it); a module left
    out, or a docstring changed without the page, is seen."""
    import importlib.util
    root = pathlib.Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("module_index", root / "docs" /
                                                  "module_index.py")
    mi = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mi)
    page = (root / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert mi.main(["--check"]) == 0 and mi.current(page)
    names = {n for n, _ in mi.modules()}
    assert {"stsim.core.reduced", "stsim.studies.text.study", "stsim.cli"} <= names
    for name in names:
        assert f"| `{name}` |" in page, name
    # seeded faults: a row removed, and a docstring that says something else
    row = next(line for line in page.splitlines() if line.startswith("| `stsim.core.warm` |"))
    assert not mi.current(page.replace(row + "\n", ""))
    assert not mi.current(page.replace("| `stsim.core.warm` | A warm start",
                                       "| `stsim.core.warm` | A cold start"))
