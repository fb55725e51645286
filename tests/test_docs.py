"""Every documented example is current (the strict site build is in tests/test_docs_render.py,
built once there for the build check and the screenshots).

``cog --check`` re-runs every example of README.md and
docs/ (commands and the tutorials, at the reduced size CI affords) and fails when what they
print differs from what is documented (wall-clock figures masked: ``docs/examples.py``). The
pages are checked by two cog processes at once: the pages that show the demo (the costliest
example, run once for all of them) and the rest.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import MQ2008

ROOT = Path(__file__).resolve().parent.parent

mkdocs = pytest.importorskip("mkdocs", reason="the docs extra is not installed (pip install -e '.[docs]')")
cogapp = pytest.importorskip("cogapp", reason="the docs extra is not installed (pip install -e '.[docs]')")


def documented_pages() -> list[str]:
    """README.md and every Markdown page of docs/ that holds a cog block."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    return [str(p.relative_to(ROOT)) for p in pages if "[[[cog" in p.read_text()]


def reads_mq2008(page: str) -> bool:
    """Whether a page's examples read the real MQ2008 folds: a cog block naming ``shared/data``, or
    running a script of the tree that does."""
    blocks = " ".join(re.findall(r"\[\[\[cog(.*?)\]\]\]", (ROOT / page).read_text(), flags=re.S))
    scripts = [ROOT / name for name in re.findall(r"(docs/[\w/-]+\.py)", blocks)]
    return "shared/data" in blocks or any(s.is_file() and '"shared"' in s.read_text() for s in scripts)


def _check(pages: list[str]) -> None:
    """``cog --check`` of ``pages``: the ones that show the demo in one process (the demo runs once
    for them all), the rest in another, both at once."""
    demo = [p for p in pages if "console(\"fltr-audit demo" in (ROOT / p).read_text()]
    groups = [demo, [p for p in pages if p not in demo]]
    checks = [subprocess.Popen([sys.executable, "-m", "cogapp", "--check", "--verbosity=1", *group], cwd=ROOT,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
              for group in groups if group]
    for check in checks:
        output, _ = check.communicate(timeout=1200)
        assert check.returncode == 0, output[-3000:]


@pytest.mark.slow
def test_every_documented_example_prints_what_the_docs_show():
    pages = documented_pages()
    assert "README.md" in pages
    _check([p for p in pages if not reads_mq2008(p)])


@pytest.mark.slow
def test_the_examples_on_the_real_mq2008_print_what_the_docs_show():
    """The pages whose examples read ../shared/data/letor/MQ2008 (data info, the MQ2008 tutorial):
    checked where the folds are, skipped with the reason elsewhere (a clone away from the data)."""
    pages = [p for p in documented_pages() if reads_mq2008(p)]
    assert {"docs/commands/data.md", "docs/tutorials/audit-a-defense.md"} <= set(pages)
    if not MQ2008.is_dir():
        pytest.skip(f"MQ2008 not found at {MQ2008} (set FLTR_MQ2008 to its folder)")
    _check(pages)


def test_ci_runs_exactly_the_readmes_test_command():
    """.ci/run's last line is the README's second set-up command, and getting started shows the
    same one (a test command changed in one place only fails here)."""
    readme = (ROOT / "README.md").read_text()
    commands = [line for line in readme.split("```bash", 1)[1].split("```", 1)[0].splitlines() if line.strip()]
    ci = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line.strip()][-1]
    assert len(commands) == 2 and commands[0].endswith("fltr-audit demo")
    assert ci == commands[1]
    assert commands[1] in (ROOT / "docs" / "getting-started.md").read_text()
