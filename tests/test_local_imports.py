"""Imports inside functions are only for start-up time, each with a one-line reason
(``docs/reference/layout.md``): an import inside a function of ``fltr_audit/``, ``attacks/``,
``defenses/`` or ``reports/`` needs a comment on its own line (``# start-up: ...``,
``# optional extra: ...``) or on a comment line directly above it, within the contiguous block of
imports it belongs to (blank lines and other imports in between; one comment line may stand for a
group). Anything else belongs at module level.

The planted change it catches: an import added inside a function with no reason, such as
``from attacks.olsr import OLSR`` moved back into ``Bayes._several_lists``, or an uncommented
import appended below a commented group after a line of code; the failure lists every such
``file:line``."""

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("fltr_audit", "attacks", "defenses", "reports")


def unexplained(source: str) -> list[int]:
    """Line numbers of the imports inside functions of ``source`` that have no reason."""
    tree = ast.parse(source)
    lines = source.splitlines()
    import_lines: set[int] = set()  # every line of every import statement (continuations too)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            import_lines |= set(range(node.lineno, node.end_lineno + 1))
    local = {}
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(fn):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    local[node.lineno] = node
    found = []
    for lineno, node in sorted(local.items()):
        if any("#" in lines[i - 1] for i in range(node.lineno, node.end_lineno + 1)):
            continue  # a trailing comment on the statement itself
        i = node.lineno - 1
        while i >= 1 and (i in import_lines or not lines[i - 1].strip()):
            i -= 1  # up through the block: other imports and blank lines
        if not (i >= 1 and lines[i - 1].strip().startswith("#")):
            found.append(lineno)
    return found


def offenders() -> list[str]:
    out = []
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            rel = path.relative_to(REPO).as_posix()
            out += [f"{rel}:{line}" for line in unexplained(path.read_text(encoding="utf-8"))]
    return out


def test_the_scan_catches_a_planted_import_without_a_reason():
    planted = (
        "import os\n"
        "\n"
        "def f():\n"
        "    '''doc'''\n"
        "    from attacks.olsr import OLSR\n"            # 5: no reason
        "    return OLSR\n"
        "\n"
        "def g():\n"
        "    # start-up: statsmodels costs a second\n"
        "    import statsmodels.api as sm\n"             # 10: under the group's comment
        "    from a import (b,\n"
        "                   c)\n"                         # 11: a continued import in the same group
        "\n"
        "    import numpy as np\n"                       # 14: same block, after a blank line
        "    x = 1\n"
        "    import pandas as pd\n"                      # 16: after code: a new block, no reason
        "    import scipy  # start-up: only here\n"      # 17: its own comment
        "\n"
        "class C:\n"
        "    def m(self):\n"
        "        import json\n"                          # 21: a method's import, no reason
        "        return json\n")
    assert unexplained(planted) == [5, 16, 21]


def test_every_import_inside_a_function_gives_its_reason():
    found = offenders()
    assert not found, ("imports inside functions without a one-line reason (move them to module level, "
                       "or say why: '# start-up: ...', '# optional extra: ...'):\n  " + "\n  ".join(found))
