"""Screenshot every page of the documentation site with headless Chromium, to look at what a reader sees.

    python tools/screenshot_docs.py [--out docs-screenshots] [--site DIR] [--width 1280] [--height 2000]

Builds the site strictly (``mkdocs build --strict``) into a temporary folder unless ``--site`` names a
built one, then loads each page of the navigation (``mkdocs.yml``) by its ``file://`` URL in one tab of
Debian's ``chromium`` (``apt-get install chromium``; one browser for every page, ``tools/chromium_pages.py``)
and writes ``OUT/<page>.png``. It prints one line per page, and
checks what a screenshot cannot show by itself: that every page is in the navigation exactly once and
that no page holds a table or code block wider than its column (read from the built HTML: a console
block longer than ``WIDEST`` characters would be clipped at the right). Exit 1 when a check fails, 2
when Chromium is absent. Run by hand, or in CI where Chromium is installed (``tests/test_docs_render.py``).
"""

from __future__ import annotations

import argparse
import html
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Iterable

import yaml
from chromium_pages import Browser

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = ("chromium", "chromium-browser", "google-chrome")
WIDEST = 104
"""The widest console-table line (box drawing) a code block may hold and still show whole in the
content column at 1280 pixels, beside the page's table of contents (``docs/stylesheets/extra.css``
sizes code for it; the CLI prints its tables 100 columns wide). Other long lines (a Markdown table
printed by ``compare``) scroll."""
WIDE_TABLES = {
    "commands/defenses.md": "defenses list prints 120 columns (min_width: each defense's parameters on one line)",
    "commands/audit-defense.md": "audit-defense prints 190 columns (min_width: one row per audit and its figures)",
    "flower-audit.md": "tools/flower_verdicts.py prints its audit table at 190 columns",
}
"""Pages whose console tables are knowingly wider than ``WIDEST``: they scroll, reported, not failed."""
TABLE = re.compile("[│┃┏┗┡└]")


def nav_pages(config: Path = ROOT / "mkdocs.yml") -> list[str]:
    """The Markdown pages of the navigation, in order (a page listed twice appears twice)."""
    class Loader(yaml.SafeLoader):
        pass

    Loader.add_multi_constructor("tag:yaml.org,2002:python/name:", lambda loader, suffix, node: None)
    Loader.add_multi_constructor("!", lambda loader, suffix, node: None)
    nav = yaml.load(config.read_text(), Loader=Loader)["nav"]
    pages: list[str] = []

    def walk(items) -> None:
        for item in items:
            value = next(iter(item.values())) if isinstance(item, dict) else item
            if isinstance(value, list):
                walk(value)
            elif isinstance(value, str) and value.endswith(".md"):
                pages.append(value)

    walk(nav)
    return pages


def nav_problems(pages: list[str], docs: Path = ROOT / "docs") -> list[str]:
    """Pages listed twice, and Markdown pages of ``docs`` the navigation never reaches."""
    twice = sorted({p for p in pages if pages.count(p) > 1})
    missing = sorted(str(p.relative_to(docs)) for p in docs.rglob("*.md") if str(p.relative_to(docs)) not in pages)
    return [f"{p}: in the navigation twice" for p in twice] + [f"{p}: not in the navigation" for p in missing]


def built_file(site: Path, page: str) -> Path:
    """The HTML file the page ``page`` (``concepts/verdicts.md``) builds to (directory URLs)."""
    stem = page.removesuffix(".md")
    return site / "index.html" if stem == "index" else site / stem.removesuffix("/index") / "index.html"


def wide_blocks(text: str) -> list[str]:
    """Console-table lines of a built page wider than ``WIDEST`` characters (they would be clipped)."""
    lines = []
    for block in re.findall(r"<pre[^>]*>(.*?)</pre>", text, flags=re.S):
        for line in html.unescape(re.sub(r"<[^>]+>", "", block)).splitlines():
            if TABLE.search(line) and len(line.rstrip()) > WIDEST:
                lines.append(line.rstrip()[:60] + "…")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("docs-screenshots"))
    parser.add_argument("--site", type=Path, help="a site already built (default: build one now)")
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=2000)
    args = parser.parse_args(argv)
    browser = next((b for b in CHROMIUM if shutil.which(b)), None)
    if browser is None:
        print("no Chromium on this machine (apt-get install chromium)", file=sys.stderr)
        return 2
    pages = nav_pages()
    problems = nav_problems(pages)
    with tempfile.TemporaryDirectory() as tmp:
        site = args.site or Path(tmp) / "site"
        if args.site is None:
            subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)], cwd=ROOT,
                           check=True, capture_output=True)
        args.out.mkdir(parents=True, exist_ok=True)
        with Browser(browser, args.width, args.height) as tab:
            problems += _shoot(tab, site, dict.fromkeys(pages), args.out)
    for problem in problems:
        print(f"problem: {problem}", file=sys.stderr)
    return 1 if problems else 0


def _shoot(tab: Browser, site: Path, pages: Iterable[str], out: Path) -> list[str]:
    """Each page's screenshot in ``out``, a line printed per page; the pages' too-wide tables."""
    problems = []
    for page in pages:
        built = built_file(site, page)
        png = out / (page.removesuffix(".md").replace("/", "__") + ".png")
        tab.screenshot(built.as_uri(), png)
        wide = wide_blocks(built.read_text(encoding="utf-8"))
        if page not in WIDE_TABLES:
            problems += [f"{page}: console table wider than {WIDEST} characters: {line}" for line in wide]
        known = f"; known: {WIDE_TABLES[page]}" if page in WIDE_TABLES and wide else ""
        scroll = f" ({len(wide)} lines wider than {WIDEST}, they scroll{known})" if wide else ""
        print(f"{page} -> {png}{scroll}")
    return problems


if __name__ == "__main__":
    sys.exit(main())
