"""Examples that cannot go stale: the helper every ``cog`` block of README.md and docs/ calls.

A documented example is written as a cog block whose generator runs the command and pastes
what it printed::

    <!-- [[[cog from docs.examples import console; console("fltr-audit train fpdgd --rounds 3") ]]] -->
    ```console
    $ fltr-audit train fpdgd --rounds 3
    ...the output, as printed...
    ```
    <!-- [[[end]]] -->

``python -m cogapp -r README.md docs/*.md docs/*/*.md`` regenerates every example;
``python -m cogapp --check ...`` (``tests/test_docs.py``) fails when an output changed.
Wall-clock figures are the only run-to-run noise the project has (the same seed gives the same
numbers), so they are masked before comparing: ``in 28 s`` -> ``in … s``, and so are the
throughputs, memory peaks and timestamps that ``bench`` and ``campaign status`` print.

Each command runs once per cog process (the README and the demo page share the demo), in a
child forked from this process after it imported the CLI and the API modules once: an example
costs what its command computes, not the 1.5-3 s of CPU that importing numpy, scipy, sklearn,
pandas and matplotlib takes.
"""

from __future__ import annotations

import atexit
import functools
import gc
import importlib
import os
import pkgutil
import re
import runpy
import shlex
import shutil
import sys
import tempfile
from pathlib import Path

import cog

ROOT = Path(__file__).resolve().parent.parent
TIMES = re.compile(r"\b\d+(?:\.\d+)?\s?(?:s|ms|min)\b(?=[\s).,;]|$)")
"""Wall-clock figures (``28 s``, ``0.4 s``, ``120 ms``): masked, they vary from run to run."""
RATES = re.compile(r"\b\d[\d,]*(?:\.\d+)?/s\b")
"""Throughputs (``15,262/s``): masked for the same reason."""
MEASURED = re.compile(r"(\b\w*(?:_seconds|seconds_per_\w+|_per_second|rss_mb)\b\s*│\s*)([\d,.]+)")
"""A ``bench`` table row whose figure is a time, a rate or a memory peak: its value is masked."""
MEASURED_COLUMNS = ("seconds",)
"""Table columns of wall-clock figures (``campaign status``, ``audit-defense``): masked."""
COLUMNS = "100"
ENVIRONMENT = {"COLUMNS": COLUMNS, "NO_COLOR": "1", "TERM": "dumb"}


def masked(text: str) -> str:
    """``text`` with every wall-clock figure, throughput and memory peak replaced by ``…``."""
    text = MEASURED.sub(lambda m: m.group(1) + "…".rjust(len(m.group(2))), text)
    return RATES.sub("…/s", TIMES.sub("… s", masked_columns(text)))


def masked_columns(text: str) -> str:
    """``text`` with the cells of every table column named in ``MEASURED_COLUMNS`` replaced by
    ``…`` (the column keeps its width)."""
    lines = text.split("\n")
    spans: list[tuple[int, int]] = []
    for i, line in enumerate(lines):
        if line.startswith("┃"):
            bars = [j for j, c in enumerate(line) if c == "┃"]
            spans += [(a + 1, b) for a, b in zip(bars, bars[1:]) if line[a + 1:b].strip() in MEASURED_COLUMNS]
        elif line.startswith("└"):
            spans = []
        elif line.startswith("│"):
            for a, b in spans:
                if line[a - 1] == "│" and line[b:b + 1] == "│" and line[a:b].strip():
                    line = line[:a] + " " + "…".ljust(b - a - 1) + line[b:]
            lines[i] = line
    return "\n".join(lines)


@functools.cache
def scratch(name: str) -> Path:
    """A temporary folder shared by the commands of one example, removed at exit."""
    folder = Path(tempfile.mkdtemp(prefix=f"fltr-docs-{name}-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


@functools.cache
def warm() -> None:
    """Import the CLI, its command modules and the API modules they run once, in this process,
    before forking (the CLI imports the API lazily: without them each child imported numpy, scipy,
    scikit-learn, pandas and matplotlib again, 1.4 s of CPU per example)."""
    os.environ.update(ENVIRONMENT)
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from fltr_audit.cli import register_commands

    register_commands()
    import fltr_audit.api

    for module in pkgutil.iter_modules(fltr_audit.api.__path__):
        importlib.import_module(f"fltr_audit.api.{module.name}")
    gc.freeze()  # what is imported stays out of every child's garbage collections


def _child(argv: list[str], cwd: Path) -> int:
    """In the forked child: run ``fltr-audit ARGS`` or ``python SCRIPT ARGS``; the exit code."""
    os.chdir(cwd)
    if argv[0] == "fltr-audit":
        from fltr_audit.cli import main

        return main(argv[1:])
    if argv[0] != "python":
        raise ValueError(f"an example runs fltr-audit or python, not {argv[0]!r}")
    script = str(cwd / argv[1])
    sys.argv = [script, *argv[2:]]
    sys.path.insert(0, str(Path(script).parent))
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return 0


def forked(argv: list[str], cwd: Path) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of ``argv`` run in a child forked from this warm process."""
    warm()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the child: never returns
            code = 1
            try:
                os.dup2(out.fileno(), 1)
                os.dup2(err.fileno(), 2)
                code = _child(argv, cwd)
            except BaseException as exc:  # noqa: BLE001 - reported to the parent as exit code 1
                print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        out.seek(0)
        err.seek(0)
        return os.waitstatus_to_exitcode(status), out.read(), err.read()


@functools.lru_cache(maxsize=None)
def run(command: str, *, out_name: str = "fltr-audit-demo", tmp: str = "") -> str:
    """Stdout of ``command`` (``fltr-audit …`` runs this checkout's CLI), measurements masked; run
    once per cog process. ``{out}`` in the command is a fresh temporary folder, shown as
    ``out_name`` in the output (so a store left by an earlier run is never reused). The command runs
    in the project root, or with ``tmp`` in the folder shared by the commands of the example named
    ``tmp`` (paths relative to it); ``{root}`` is the project root. Both folders are left out of
    the output."""
    out_folder = Path(tempfile.mkdtemp(prefix="fltr-docs-"))
    out = str(out_folder / "out")
    cwd = scratch(tmp) if tmp else ROOT
    command = command.replace("{out}", out).replace("{root}", str(ROOT))
    try:
        code, stdout, stderr = forked(shlex.split(command), cwd)
    finally:
        shutil.rmtree(out_folder, ignore_errors=True)
    if code not in (0, 2):
        raise RuntimeError(f"{command!r} exited {code}: {stderr.strip()[-500:]}")
    text = stdout if stdout.strip() else stderr
    text = text.replace(out, out_name).replace(f"{cwd}{os.sep}", "").replace(f"{ROOT}{os.sep}", "")
    return masked(text.rstrip("\n"))


def console(command: str, *, shown: str | None = None, tmp: str = "", head: int | None = None) -> None:
    """Write a ```console block: ``$ command`` and what it printed (``shown`` replaces the
    command line, e.g. to hide a test-only option or ``{root}``; ``tmp`` names the folder the
    commands of one example share, see ``run``; ``head`` keeps the first lines of a long output
    and marks the cut with ``…``)."""
    cog.outl("```console")
    cog.outl(f"$ {shown or command}")
    words = (shown or "").split()
    out_name = words[words.index("--out") + 1] if "--out" in words[:-1] else "fltr-audit-demo"
    lines = [line.rstrip() for line in run(command, out_name=out_name, tmp=tmp).splitlines()]
    if head is not None and len(lines) > head:
        lines = [*lines[:head], "…"]
    cog.outl("\n".join(lines))
    cog.outl("```")


def source(path: str, language: str = "python") -> None:
    """Write a fenced block holding the file ``path`` (relative to the project root)."""
    cog.outl(f"```{language}")
    cog.outl((ROOT / path).read_text().rstrip("\n"))
    cog.outl("```")


def snippet(path: str, name: str, language: str = "python") -> None:
    """Write a fenced block holding the top-level class or function ``name`` of the file ``path``
    (relative to the project root), as written there."""
    import ast

    text = (ROOT / path).read_text()
    node = next(n for n in ast.parse(text).body if getattr(n, "name", None) == name)
    lines = text.splitlines()[node.lineno - 1 - len(node.decorator_list):node.end_lineno]
    cog.outl(f"```{language}")
    cog.outl("\n".join(lines))
    cog.outl("```")


ANSI = re.compile(r"\x1b\[[0-9;]*m")


def executed_notebook(path: str):
    """The notebook ``path`` (relative to the project root) executed with nbclient in its own folder."""
    import nbformat
    from nbclient import NotebookClient

    file = ROOT / path
    notebook = nbformat.read(file, as_version=4)
    NotebookClient(notebook, timeout=900, kernel_name="python3",
                   resources={"metadata": {"path": str(file.parent)}}).execute()
    return notebook


def notebook(path: str) -> None:
    """Write the notebook ``path`` as Markdown, executed: its Markdown cells as they are, each code
    cell as a python block and its text output as a text block (measurements masked)."""
    for cell in executed_notebook(path).cells:
        if cell.cell_type == "markdown":
            cog.outl(cell.source.replace("# Audit", "## Audit", 1) if cell.source.startswith("# ") else cell.source)
        elif cell.cell_type == "code":
            cog.outl(f"```python\n{cell.source}\n```")
            text = "".join(o.get("text", "") or o.get("data", {}).get("text/plain", "") for o in cell.outputs
                           if o.get("output_type") in ("stream", "execute_result"))
            text = masked(ANSI.sub("", text)).rstrip()
            if text:
                cog.outl("```text\n" + "\n".join(line.rstrip() for line in text.splitlines()) + "\n```")
        cog.outl("")
