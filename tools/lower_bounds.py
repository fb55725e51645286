"""Install the lowest releases pyproject.toml allows into a fresh venv and run the quick tests there.

    python tools/lower_bounds.py VENV [--extras test,docs,flower] [--at numpy==1.26.0 ...]

Every direct dependency of the base (and of the extras named) is pinned at its lower bound (its
``>=``); ``--at`` raises one where an extra demands more (flwr 1.41 needs numpy>=1.26,
cryptography>=50, rich>=14). pytest is installed at the test extra's lower bound in any case. What
those pull in resolves to its newest allowed release (the environment a user gets who already has
the old releases). Prints ``pip freeze``, then runs ``pytest -m "not slow"``; exits with pytest's code.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent


def lowest_pins(extras: list[str], raised: list[str]) -> list[str]:
    """``name==lower bound`` of each direct dependency of the base and ``extras`` (pytest always;
    the highest where several name one), those named in ``raised`` (``name==version``) at their
    version instead."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    optional = project["optional-dependencies"]
    reqs = [Requirement(r) for r in project["dependencies"] + [r for e in extras for r in optional[e]]]
    reqs += [Requirement(r) for r in optional["test"] if Requirement(r).name == "pytest"]
    pins: dict[str, Version] = {}
    for req in reqs:
        if req.marker is not None and not req.marker.evaluate():
            continue
        lower = [Version(s.version) for s in req.specifier if s.operator == ">="]
        if not lower:
            raise SystemExit(f"pyproject.toml: {req} has no lower bound")
        pins[req.name] = max(lower + [pins.get(req.name, lower[0])])
    for pin in map(Requirement, raised):
        if pin.name not in pins:
            raise SystemExit(f"--at: {pin.name} is not a direct dependency here")
        pins[pin.name] = Version(next(iter(pin.specifier)).version)
    return sorted(f"{name}=={version}" for name, version in pins.items())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("venv", type=Path, help="Folder of the new venv (must not exist).")
    parser.add_argument("--extras", default="", help="Comma-separated extras to install at their lower bounds too.")
    parser.add_argument("--at", action="append", default=[], help="NAME==VERSION: a pin above the lower bound.")
    args = parser.parse_args()
    extras = [e for e in args.extras.split(",") if e]
    pins = lowest_pins(extras, args.at)
    print("\n".join(pins), flush=True)
    python = args.venv / "bin" / "python"
    subprocess.run([sys.executable, "-m", "venv", str(args.venv)], check=True)
    with tempfile.NamedTemporaryFile("w", suffix=".txt") as constraints:
        constraints.write("\n".join(pins) + "\n")
        constraints.flush()
        target = f"{ROOT}[{','.join(extras)}]" if extras else str(ROOT)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "-c", constraints.name, "-e", target, "pytest"],
                       check=True)
    subprocess.run([str(python), "-m", "pip", "freeze", "--exclude-editable"], check=True)
    return subprocess.run([str(python), "-m", "pytest", "-m", "not slow", "-p", "no:cacheprovider"],
                          cwd=ROOT).returncode


if __name__ == "__main__":
    sys.exit(main())
