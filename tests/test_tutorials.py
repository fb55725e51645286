"""The first-hour tutorials' notebook finds what the tutorial says (issue 43 item 7): the buggy
defense's claim violated, the fixed one's consistent with no measurable leakage.

The notebook runs end to end in CI once, in ``tests/test_docs.py``: its page
(``docs/tutorials/your-own-defense-notebook.md``) is the executed notebook's cells and outputs,
and ``cog --check`` fails when an execution prints anything other than the page, or when a cell
raises (nbclient stops the execution there). This test
reads the verdicts off that page, so a page regenerated from a notebook whose fix no longer
works fails here even though it matches its execution. (It executed the notebook a second time
before, with the same kernel and audits: 2.5 s of CPU for nothing ``cog --check`` missed.)"""

from pathlib import Path

PAGE = Path(__file__).resolve().parents[1] / "docs" / "tutorials" / "your-own-defense-notebook.md"


def _rows(text: str, defense: str) -> list[list[str]]:
    """The whitespace-split rows of the page's ``print(....to_string())`` tables that start with ``defense``."""
    return [line.split() for line in text.splitlines() if line.strip().startswith(defense + " ")]


def test_the_notebook_page_shows_the_bug_violated_then_the_fix_consistent():
    text = PAGE.read_text()
    assert "[[[cog from docs.examples import notebook" in text  # the page is the executed notebook
    (buggy,) = _rows(text, "my-laplace(eps=1)")
    (fixed,) = _rows(text, "my-laplace-fixed(eps=1)")
    assert buggy[-2] == "violated" and buggy[1] == "leaks"
    assert fixed[-2] == "consistent" and " ".join(fixed[1:4]) == "no measurable leakage"
    assert float(buggy[-1]) > 1.0 >= float(fixed[-1])  # the lower bound above the claimed eps = 1, then below
