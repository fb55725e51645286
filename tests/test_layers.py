"""The layers (DESIGN.md, Layout; ``docs/reference/layout.md``), read from every module's imports
(ast, module level and inside functions): imports point down only; the engine never imports
attacks, defenses or reports; attacks never import reports; reports import only the shared
privacy formulas; nothing outside ``cli/`` imports typer or click; no import circles."""

import ast
from pathlib import Path


REPO = Path(__file__).resolve().parents[1]

LAYERS = ("base", "engine", "privacy", "store", "attacks", "defenses", "reports", "spec", "flower", "runs", "api",
          "cli")
"""Bottom to top. ``base``: the modules directly in ``fltr_audit/`` (errors, the constraint
language, atomic writes, plug-in discovery); ``attacks`` and ``defenses`` share a level and never
import each other."""
RANK = {"base": 0, "engine": 1, "privacy": 2, "store": 3, "attacks": 4, "defenses": 4, "reports": 5, "spec": 6,
        "flower": 7, "runs": 8, "api": 9, "cli": 10}
FOLDERS = ("engine", "privacy", "spec", "runs", "store", "flower", "api", "cli")
MAX_TOP_MODULES = 12
"""Modules and packages directly in ``fltr_audit/`` besides ``__init__``, ``__main__`` and ``_version``."""


def layer(module: str) -> str | None:
    """The layer of a dotted project module (None: not a project module)."""
    parts = module.split(".")
    if parts[0] in ("attacks", "defenses", "reports"):
        return parts[0]
    if parts[0] != "fltr_audit":
        return None
    if module == "fltr_audit.__main__":  # python -m fltr_audit: the command line
        return "cli"
    return parts[1] if len(parts) > 1 and parts[1] in FOLDERS else "base"


def imported_packages(path: Path) -> set[str]:
    """Top-level packages ``path`` imports anywhere (module level or inside functions)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def imported_modules(path: Path) -> set[str]:
    """Dotted modules ``path`` imports anywhere (``from a.b import c``: ``a.b``)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
    return found


def modules(package: str) -> list[Path]:
    return sorted((REPO / package).rglob("*.py"))


def _rel(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


SOURCES = [p for package in ("fltr_audit", "attacks", "defenses", "reports") for p in modules(package)]


def test_the_scan_sees_imports_inside_functions(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("import os.path\n\ndef f():\n    from attacks.registry import make_attack\n")
    assert imported_packages(module) == {"os", "attacks"}


def upward_imports(path: Path) -> list[str]:
    """The project modules ``path`` imports from a higher layer (or across attacks and defenses);
    the package face ``fltr_audit/__init__.py`` (the API's names, loaded on first use) excepted."""
    name = _module_name(path)
    here = layer(name)
    if name == "fltr_audit":
        return []
    out = []
    for module in imported_modules(path):
        there = layer(module)
        if there is None or there == here:
            continue
        if RANK[there] > RANK[here] or {here, there} == {"attacks", "defenses"}:
            out.append(module)
    return sorted(out)


def test_the_layer_check_catches_a_planted_upward_import():
    planted = REPO / "fltr_audit" / "engine" / "planted_for_the_test.py"
    try:
        planted.write_text("def f():\n    from fltr_audit.runs.audit import run_audit\n    import reports.plots\n")
        assert upward_imports(planted) == ["fltr_audit.runs.audit", "reports.plots"]
    finally:
        planted.unlink()


def test_imports_point_down():
    """Every module at once (a test per module was 270 collected items per rule); each offender named."""
    assert {_rel(p): up for p in SOURCES if (up := upward_imports(p))} == {}


def test_only_the_command_line_imports_typer_or_click():
    assert [_rel(p) for p in SOURCES
            if not _rel(p).startswith("fltr_audit/cli/") and imported_packages(p) & {"typer", "click"}] == []


def test_only_the_flower_integration_imports_flwr():
    """flwr is an optional extra: everything but ``fltr_audit/flower/`` works without it."""
    assert [_rel(p) for p in SOURCES
            if not _rel(p).startswith("fltr_audit/flower/") and "flwr" in imported_packages(p)] == []


def test_the_package_shows_its_layers():
    top = [p for p in (REPO / "fltr_audit").iterdir()
           if (p.suffix == ".py" and p.stem not in ("__init__", "__main__", "_version")) or (p / "__init__.py").is_file()]
    assert len(top) <= MAX_TOP_MODULES, sorted(p.name for p in top)
    assert {p.name for p in top if p.is_dir()} >= set(FOLDERS)


PACKAGES = ("fltr_audit", "attacks", "defenses", "reports")


def import_graph() -> dict[str, set[str]]:
    """Project module -> the project modules it imports anywhere (module level or in functions;
    ``from pkg import name`` counts as an import of ``pkg.name`` when that is a module)."""
    paths = [p for package in PACKAGES for p in modules(package)]
    known = {_module_name(p) for p in paths}
    graph: dict[str, set[str]] = {}
    for path in paths:
        name = _module_name(path)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                edges |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(anchor + ([base] if base else []))
                for alias in node.names:
                    edges.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base)
        graph[name] = {e for e in edges if e in known and e != name}
    return graph


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return circles


def test_the_circle_finder_finds_a_planted_circle():
    assert import_circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert import_circles({"a": {"b"}, "b": set()}) == []


def test_no_import_circles():
    assert import_circles(import_graph()) == []


def test_no_module_class_tricks():
    """No module swaps its own class (``sys.modules[__name__].__class__ = ...``) or another's:
    a name is a module or a function, never both."""
    offenders = []
    for package in PACKAGES:
        for path in modules(package):
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                if isinstance(node, ast.Assign) and any(isinstance(t, ast.Attribute) and t.attr == "__class__"
                                                        for t in node.targets):
                    offenders.append(f"{_rel(path)}:{node.lineno}")
    assert offenders == []
