"""Legibility limits a newcomer can rely on: no module of the package over 400 lines and no function
over 80 (the compiled kernels of ``fltr_audit/engine/kernels`` excepted: a kernel is one loop kept
whole). A file that grows past them is split by job (as ``store/results.py`` into ``sqlite_file`` and
``table_rows``)."""

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("fltr_audit", "attacks", "defenses", "reports")
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 80


def _modules():
    return sorted(p for package in PACKAGES for p in (REPO / package).rglob("*.py"))


def test_no_module_is_over_400_lines():
    long = {str(p.relative_to(REPO)): n for p in _modules() if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert long == {}


def test_no_function_is_over_80_lines_outside_the_kernels():
    long = {}
    for p in _modules():
        if "kernels" in p.relative_to(REPO).parts:
            continue
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if (n := node.end_lineno - node.lineno + 1) > MAX_FUNCTION_LINES:
                    long[f"{p.relative_to(REPO)}:{node.name}"] = n
    assert long == {}


def test_the_walk_sees_the_package():
    assert len(_modules()) > 100
