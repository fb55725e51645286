"""The dependency rule (DESIGN.md, Layout), read from every module's imports (ast): the engine
never imports attacks, defenses or reports; reports never imports the engine, attacks or defenses."""

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
COMPOSITION_ROOT = ("fltr_audit/cli/", "fltr_audit/runs/campaign.py", "fltr_audit/spec/campaign.py",
                    "fltr_audit/spec/grid.py", "fltr_audit/runs/executors.py", "fltr_audit/runs/audit.py", "fltr_audit/api.py",
                    "fltr_audit/runs/whole_run.py", "fltr_audit/runs/robustness.py",
                    "fltr_audit/spec/run.py", "fltr_audit/spec/poison.py",
                    "fltr_audit/plugins.py", "fltr_audit/flower/")
"""The modules of ``fltr_audit`` that wire the packages together and may import all of them."""


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


def modules(package: str) -> list[Path]:
    return sorted((REPO / package).rglob("*.py"))


def _rel(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


ENGINE = [p for p in modules("fltr_audit") if not _rel(p).startswith(COMPOSITION_ROOT)]


def test_the_scan_sees_imports_inside_functions(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("import os.path\n\ndef f():\n    from attacks.registry import make_attack\n")
    assert imported_packages(module) == {"os", "attacks"}


@pytest.mark.parametrize("path", ENGINE, ids=_rel)
def test_engine_never_imports_attacks_defenses_or_reports(path):
    assert not imported_packages(path) & {"attacks", "defenses", "reports"}


@pytest.mark.parametrize("path", [p for p in modules("fltr_audit") + modules("attacks") + modules("defenses")
                                  + modules("reports") if not _rel(p).startswith("fltr_audit/flower/")], ids=_rel)
def test_only_the_flower_integration_imports_flwr(path):
    """flwr is an optional extra: everything but ``fltr_audit/flower/`` works without it."""
    assert "flwr" not in imported_packages(path)


def test_the_flower_integration_is_composition_root():
    """It imports ``defenses`` (DefenseMod's defenses) and ``flwr``; the engine imports neither it nor them."""
    flower = [p for p in modules("fltr_audit") if _rel(p).startswith("fltr_audit/flower/")]
    assert flower and not set(ENGINE) & set(flower)
    assert any("flwr" in imported_packages(p) for p in flower)


SHARED_WITH_REPORTS = ("fltr_audit/privacy/claim_trials.py",)
"""Engine modules reports may import: plain formulas on numbers, needing no project module
(DESIGN.md: reports never import the engine's internals)."""


def imported_modules(path: Path) -> set[str]:
    """Dotted modules ``path`` imports anywhere (``from a.b import c``: ``a.b``)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
    return found


@pytest.mark.parametrize("path", modules("reports"), ids=_rel)
def test_reports_never_import_the_engine(path):
    shared = {p.removesuffix(".py").replace("/", ".") for p in SHARED_WITH_REPORTS}
    assert not imported_packages(path) & {"attacks", "defenses"}
    assert {m for m in imported_modules(path) if m.split(".")[0] == "fltr_audit"} <= shared


@pytest.mark.parametrize("path", SHARED_WITH_REPORTS)
def test_what_reports_share_with_the_engine_imports_no_project_module(path):
    assert not imported_packages(REPO / path) & set(PACKAGES)


PACKAGES = ("fltr_audit", "attacks", "defenses", "reports")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


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
