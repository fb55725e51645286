"""The docs render as intended (issue 43, item 3): every page in the navigation once, the install
command on the landing page, the API example a code block, console tables narrow enough to show
whole, no verdict broken inside a table cell; and, where Chromium is installed, a screenshot of every
page (``tools/screenshot_docs.py``)."""

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytest.importorskip("mkdocs", reason="the docs extra is not installed (pip install -e '.[docs]')")
spec = importlib.util.spec_from_file_location("screenshot_docs", ROOT / "tools" / "screenshot_docs.py")
shots = importlib.util.module_from_spec(spec)
sys.path.insert(0, str(ROOT / "tools"))  # it imports tools/chromium_pages.py, as it does run as a script
try:
    spec.loader.exec_module(shots)
    import chromium_pages as pages
finally:
    sys.path.remove(str(ROOT / "tools"))


@pytest.fixture(scope="module")
def strict_site(tmp_path_factory):
    """The site built once with ``mkdocs build --strict`` (it fails on a broken reference or link,
    and ``docs/hooks.py`` fails it on a public API name without a docstring): the build check and the
    screenshots read the same build (the screenshot tool built its own, a second ~50 s build)."""
    site = tmp_path_factory.mktemp("site") / "site"
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    return site, done


@pytest.mark.slow
def test_the_site_builds_in_strict_mode(strict_site):
    site, done = strict_site
    assert done.returncode == 0, done.stderr[-3000:]
    assert (site / "index.html").is_file()
    assert (site / "reference" / "api" / "index.html").is_file()


def test_every_page_is_in_the_navigation_exactly_once():
    assert shots.nav_problems(shots.nav_pages()) == []


def test_the_landing_page_shows_how_to_install_and_no_mkdocs_aside():
    """The landing page installs as README's first command does (through the lock)."""
    index = (ROOT / "docs" / "index.md").read_text()
    readme = (ROOT / "README.md").read_text()
    first = next(line for line in readme.splitlines() if line.startswith("python3 -m venv"))
    assert first in index.splitlines() and "Why MkDocs" not in index


def test_the_commands_page_lists_every_top_level_command_once():
    from fltr_audit.cli.quick import top_level_commands

    page = (ROOT / "docs" / "commands" / "index.md").read_text()
    assert page.count("# Commands") == 1
    for name, _ in top_level_commands():
        assert f"`{name}" in page, name


def test_getting_started_counts_the_demos_defenses():
    from fltr_audit.api.demo_run import VECTOR_DEFENSES

    assert f"{['no', 'one', 'two', 'three', 'four', 'five', 'six'][len(VECTOR_DEFENSES)]} defenses" in \
        (ROOT / "docs" / "getting-started.md").read_text()


def test_table_cells_never_break_inside_code_and_console_tables_fit():
    css = (ROOT / "docs" / "stylesheets" / "extra.css").read_text()
    assert "td code" in css and "nowrap" in css
    assert shots.wide_blocks("<pre><code>┃ " + "x" * 200 + "</code></pre>") and \
        not shots.wide_blocks("<pre><code>" + "x" * 200 + "</code></pre>")  # only tables must fit


def test_the_api_example_is_a_code_block():
    import fltr_audit.api

    doc = fltr_audit.api.__doc__
    assert "```python" in doc and "fltr_audit.audit(" in doc and ">>>" not in doc


@pytest.mark.slow
@pytest.mark.skipif(not any(shutil.which(b) for b in shots.CHROMIUM), reason="no Chromium (apt-get install chromium)")
def test_every_page_screenshots_and_no_console_table_is_clipped(tmp_path, strict_site):
    site, built = strict_site
    assert built.returncode == 0, built.stderr[-3000:]
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "screenshot_docs.py"), "--out", str(tmp_path),
                           "--site", str(site)],
                          cwd=ROOT, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    pngs = sorted(tmp_path.glob("*.png"))
    assert len(pngs) == len(set(shots.nav_pages()))
    sizes = {(int.from_bytes(p.read_bytes()[16:20], "big"), int.from_bytes(p.read_bytes()[20:24], "big")) for p in pngs}
    assert sizes == {(1280, 2000)}  # the PNG header's width and height: the tab's viewport, every page


def test_the_docstring_hook_names_each_public_name_without_one(tmp_path):
    """docs/hooks.py, which fails the strict build: every undocumented public function, class and
    method of a module, none of the private or documented ones, read from one package load."""
    griffe = pytest.importorskip("griffe")
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    (tmp_path / "pkgx").mkdir()
    (tmp_path / "pkgx" / "__init__.py").write_text('"""A package."""\n')
    (tmp_path / "pkgx" / "mod.py").write_text(
        '"""A module."""\n\ndef bare(): pass\n\ndef _private(): pass\n\ndef told():\n    """Told."""\n\n'
        'class Kind:\n    """A class."""\n\n    def method(self): pass\n\n    def _hidden(self): pass\n')
    loader = griffe.GriffeLoader(search_paths=[str(tmp_path)])
    assert hooks.missing_docstrings("pkgx.mod", loader) == ["pkgx.mod.bare", "pkgx.mod.Kind.method"]
    assert hooks.missing_docstrings("pkgx", loader) == []


def test_a_browser_that_does_not_come_up_is_one_error_and_is_not_left_running(tmp_path, monkeypatch):
    """tools/chromium_pages.py: a program that exits instead of speaking the protocol is named by its
    exit code, whether it ends before or after the first command is written; one that never answers,
    by the timeout, and it is killed (its pid gone) with its profile folder removed."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))  # where the profile folder goes
    (tmp_path / "tmp").mkdir()
    with pytest.raises(pages.BrowserError, match=r"closed the protocol pipe \(exit 1\)"):
        pages.Browser("false", 100, 100, timeout=10)
    popen = subprocess.Popen

    def popen_and_wait_for_the_end(*args, **kwargs):  # the browser certainly gone before the first write
        process = popen(*args, **kwargs)
        process.wait()
        return process

    monkeypatch.setattr(pages.subprocess, "Popen", popen_and_wait_for_the_end)
    with pytest.raises(pages.BrowserError, match=r"closed the protocol pipe \(exit 1\)"):
        pages.Browser("false", 100, 100, timeout=10)
    monkeypatch.setattr(pages.subprocess, "Popen", popen)
    mute = tmp_path / "mute"
    mute.write_text(f"#!/bin/sh\necho $$ > {tmp_path / 'pid'}\nexec sleep 60\n")
    mute.chmod(0o755)
    with pytest.raises(pages.BrowserError, match="no answer from the browser within 1 s"):
        pages.Browser(str(mute), 100, 100, timeout=1)
    with pytest.raises(ProcessLookupError):
        os.kill(int((tmp_path / "pid").read_text()), 0)
    assert list((tmp_path / "tmp").iterdir()) == []
