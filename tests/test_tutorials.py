"""The first-hour tutorials' notebook runs end to end in CI (nbclient, issue 43 item 7) and finds
what the tutorial says: the buggy defense's claim violated, the fixed one's consistent. The two
tutorial pages themselves are executed by ``tests/test_docs.py`` (cog)."""

import re
from pathlib import Path

import pytest

pytest.importorskip("nbclient", reason="the docs extra is not installed (pip install -e '.[docs]')")

NOTEBOOK = Path(__file__).resolve().parents[1] / "docs" / "tutorials" / "your_own_defense.ipynb"
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def executed(path: Path):
    """The notebook executed in its own folder, as a reader runs it (the docs page runs it alike)."""
    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.read(path, as_version=4)
    NotebookClient(notebook, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
                   ).execute()
    return notebook


@pytest.mark.slow
def test_the_notebook_runs_and_the_audit_finds_the_bug_then_accepts_the_fix():
    notebook = executed(NOTEBOOK)
    outputs = ["".join(o.get("text", "") for o in cell.outputs) for cell in notebook.cells if cell.cell_type == "code"]
    assert not any(o.get("output_type") == "error" for cell in notebook.cells if cell.cell_type == "code"
                   for o in cell.outputs)
    buggy, fixed = ANSI.sub("", outputs[3]), ANSI.sub("", outputs[4])
    assert "my-laplace(eps=1)" in buggy and "violated" in buggy
    line = next(row for row in fixed.splitlines() if row.strip().startswith("my-laplace-fixed"))
    assert "consistent" in line and "no measurable leakage" in line
