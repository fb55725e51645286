"""The machine's memory, asked before a large allocation: ``check_memory`` refuses a size an input
asks for when it exceeds what the machine has available, naming the option or file that asked.

Available memory is Linux's ``MemAvailable`` (``/proc/meminfo``: free memory plus what the kernel
can reclaim without swapping), else ``os.sysconf`` free pages, else unknown (nothing is refused);
``FLTR_AUDIT_MEMORY`` (bytes) overrides it, for tests and for a machine shared with other jobs.
"""

from __future__ import annotations

import os

from fltr_audit.constraints import ParameterError
from fltr_audit.errors import FltrError

HEADROOM = 0.8
"""The share of the available memory one input may ask for (the rest: the interpreter, its
libraries and the work around the allocation)."""


def available_memory() -> int | None:
    """Bytes this process could allocate without swapping, or None when the system does not say."""
    override = os.environ.get("FLTR_AUDIT_MEMORY")
    if override is not None and override.strip().isdigit():
        return int(override)
    try:
        with open("/proc/meminfo", "rb") as fh:
            for line in fh:
                if line.startswith(b"MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        return None


def memory_limit() -> int | None:
    """The bytes one input may ask for: ``HEADROOM`` of the available memory (None: unknown)."""
    available = available_memory()
    return None if available is None else int(available * HEADROOM)


def size_text(nbytes: float) -> str:
    """``nbytes`` for a person: ``3.2 GB``, ``8.0 PB``, ``512 bytes``."""
    units = ("bytes", "kB", "MB", "GB", "TB", "PB", "EB")
    value, unit = float(nbytes), 0
    while value >= 1000 and unit < len(units) - 1:
        value, unit = value / 1000, unit + 1
    return f"{int(value)} bytes" if unit == 0 else f"{value:.1f} {units[unit]}"


def memory_problem(nbytes: float, what: str) -> str | None:
    """Why ``what`` needing ``nbytes`` does not fit in this machine's memory, or None when it fits."""
    limit = memory_limit()
    if limit is None or nbytes <= limit:
        return None
    return (f"{what} would take about {size_text(nbytes)} of memory, more than this machine can give "
            f"({size_text(limit)} of {size_text(available_memory() or 0)} available)")


def check_memory(parameter: str, nbytes: float, what: str) -> None:
    """ParameterError naming ``parameter`` (``population``, ``length``: the CLI says the option)
    when ``what`` needs more memory than the machine has; call it before allocating."""
    problem = memory_problem(nbytes, what)
    if problem:
        raise ParameterError(parameter, problem)


def check_file_memory(source: object, nbytes: float, what: str) -> None:
    """FltrError naming the file ``source`` when reading ``what`` from it needs more memory than the
    machine has."""
    problem = memory_problem(nbytes, what)
    if problem:
        raise FltrError(f"{source}: {problem}")
