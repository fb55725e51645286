"""tests/slow_tests.txt names tests that exist: an entry left behind by a renamed test marks nothing,
and the renamed test runs in the quick subset (two such entries had put 18 s back into it)."""

import ast
import functools
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


@functools.cache
def _functions(source: Path) -> frozenset[str]:
    return frozenset(node.name for node in ast.parse(source.read_text()).body
                     if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)))


def test_every_slow_list_entry_names_an_existing_file_or_test_function():
    stale = []
    for line in (REPO / "tests" / "slow_tests.txt").read_text().splitlines():
        entry = line.split("#")[0].strip()
        if not entry:
            continue
        path, _, function = entry.partition("::")
        source = REPO / path
        if not source.is_file():
            stale.append(entry)
            continue
        if function:
            if function.split("[")[0] not in _functions(source):
                stale.append(entry)
    assert stale == []
