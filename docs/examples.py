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
``python -m cogapp --check ...`` (``tests/test_docs_examples.py``) fails when an output
changed. Wall-clock figures are the only run-to-run noise the project has (the same seed gives
the same numbers), so they are masked before comparing: ``in 28 s`` -> ``in … s``.
"""

from __future__ import annotations

import functools
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import cog

ROOT = Path(__file__).resolve().parent.parent
TIMES = re.compile(r"\b\d+(?:\.\d+)?\s?(?:s|ms|min)\b(?=[\s).,;]|$)")
"""Wall-clock figures (``28 s``, ``0.4 s``, ``120 ms``): masked, they vary from run to run."""
RATES = re.compile(r"\b\d[\d,]*(?:\.\d+)?/s\b")
"""Throughputs (``15,262/s``): masked for the same reason."""
COLUMNS = "100"


def masked(text: str) -> str:
    """``text`` with every wall-clock figure replaced by ``… s``."""
    return RATES.sub("…/s", TIMES.sub("… s", text))


@functools.lru_cache(maxsize=None)
def run(command: str, *, cwd: Path = ROOT, out_name: str = "fltr-audit-demo") -> str:
    """Stdout of ``command`` (``fltr-audit …`` runs this checkout's CLI), times masked; run once per
    cog process (the README and the demo page show the same demo). ``{out}``
    in the command is a fresh temporary folder, shown as ``out_name`` in the output (so a
    store left by an earlier run is never reused)."""
    import tempfile

    scratch = tempfile.mkdtemp(prefix="fltr-docs-")
    out = str(Path(scratch) / "out")
    command = command.replace("{out}", out)
    argv = shlex.split(command)
    if argv[0] == "fltr-audit":
        argv = [sys.executable, "-m", "fltr_audit", *argv[1:]]
    elif argv[0] == "python":
        argv = [sys.executable, *argv[1:]]
    env = {**os.environ, "COLUMNS": COLUMNS, "PYTHONPATH": str(ROOT), "NO_COLOR": "1", "TERM": "dumb"}
    try:
        done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if done.returncode not in (0, 2):
        raise RuntimeError(f"{command!r} exited {done.returncode}: {done.stderr.strip()[-500:]}")
    text = done.stdout if done.stdout.strip() else done.stderr
    return masked(text.replace(out, out_name).rstrip("\n"))


def console(command: str, *, shown: str | None = None) -> None:
    """Write a ```console block: ``$ command`` and what it printed (``shown`` replaces the
    command line, e.g. to hide a test-only option)."""
    cog.outl("```console")
    cog.outl(f"$ {shown or command}")
    words = (shown or "").split()
    out_name = words[words.index("--out") + 1] if "--out" in words[:-1] else "fltr-audit-demo"
    cog.outl("\n".join(line.rstrip() for line in run(command, out_name=out_name).splitlines()))
    cog.outl("```")


def source(path: str, language: str = "python") -> None:
    """Write a fenced block holding the file ``path`` (relative to the project root)."""
    cog.outl(f"```{language}")
    cog.outl((ROOT / path).read_text().rstrip("\n"))
    cog.outl("```")
