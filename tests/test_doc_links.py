"""README.md, docs/ and mkdocs.yml point only at files a user of the repository has: every relative
link stays inside the repository and names a file there, and so does every ``../`` path in the text.

A Markdown link resolves from its page's folder; a path in the text (a command's argument, a file
named in passing) from the page's folder or from the repository's root, where commands run. The
one place outside named on purpose is the MQ2008 folder the user downloads and the tests look for
(``tests/conftest.py``: ``$FLTR_MQ2008``, by default ``../shared/data/letor/MQ2008``)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DATA = (ROOT.parent / "shared" / "data").resolve()
"""Where the user's LETOR data sets go, by default (the tests' MQ2008 folder is inside)."""
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?[^)]*\)|href=\"([^\"]+)\"")
UP_PATH = re.compile(r"(?<![\w./-])((?:\.\./)+[\w.-][\w./-]*)")


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), ROOT / "mkdocs.yml"]


def inside(path: Path, folder: Path = ROOT) -> bool:
    return path.resolve().is_relative_to(folder)


def link_problems(page: Path, text: str) -> list[str]:
    """One line per link or ``../`` path of ``text`` (the page ``page``) that leaves the repository
    or names no file."""
    problems = []
    where = page.relative_to(ROOT)
    for number, line in enumerate(text.splitlines(), 1):
        for match in LINK.finditer(line):
            target = (match.group(1) or match.group(2)).split("#", 1)[0]
            if not target or re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("/"):
                continue  # an anchor on the page, a URL (https:, mailto:), a site-absolute path
            resolved = page.parent / target
            if not inside(resolved):
                problems.append(f"{where}:{number}: the link {target} leaves the repository")
            elif not resolved.exists():
                problems.append(f"{where}:{number}: the link {target} names no file")
        for match in UP_PATH.finditer(LINK.sub("", line)):
            path = match.group(1).rstrip(".")
            if not any(inside(base / path) and (base / path).exists() or inside(base / path, DATA)
                       for base in (page.parent, ROOT)):
                problems.append(f"{where}:{number}: the path {path} is no file of the repository")
    return problems


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_and_path_stays_in_the_repository(page):
    problems = link_problems(page, page.read_text())
    assert problems == [], "\n".join(problems)


@pytest.mark.parametrize("text, problem", [
    ("The design is in `../shared/DESIGN.md`.", "README.md:1: the path ../shared/DESIGN.md is no file of the repository"),
    ("See [the design](../shared/DESIGN.md#conventions).",
     "README.md:1: the link ../shared/DESIGN.md leaves the repository"),
    ("x\nSee [layout](docs/reference/no-such-page.md).", "README.md:2: the link docs/reference/no-such-page.md names no file"),
    ('<a href="../../x.html">x</a>', "README.md:1: the link ../../x.html leaves the repository"),
    ("Figures: ../shared/REFERENCE-FIGURES.md.", "README.md:1: the path ../shared/REFERENCE-FIGURES.md is no file"),
    ("Text: `../shared/papers/fedips.txt`.", "README.md:1: the path ../shared/papers/fedips.txt is no file"),
])
def test_a_link_leaving_the_repository_is_named(text, problem):
    problems = link_problems(ROOT / "README.md", text)
    assert len(problems) == 1 and problems[0].startswith(problem), problems


def test_links_inside_the_repository_and_the_data_folder_pass():
    text = ("[layout](docs/reference/layout.md), [site](https://example.org/a/../b), [top](#where-to-go-next), "
            "`--data ../shared/data/letor/MQ2008`, `../wt/README.md`")
    assert link_problems(ROOT / "README.md", text.replace("../wt/", f"../{ROOT.name}/")) == []
    assert link_problems(ROOT / "docs" / "tutorials" / "plugins.md", "[guide](../reference/plugins.md)") == []
