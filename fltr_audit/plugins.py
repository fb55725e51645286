"""Plug-ins from installed packages: the entry-point groups ``fltr_audit.attacks``,
``fltr_audit.defenses`` and ``fltr_audit.engine.algorithms`` (``importlib.metadata``).

A package adds its own attack, defense or algorithm by declaring, in its ``pyproject.toml``::

    [project.entry-points."fltr_audit.attacks"]
    my-attack = "my_package.attacks:my_attack"          # a factory (see fltr_audit.api.register_attack)

    [project.entry-points."fltr_audit.defenses"]
    my-defense = "my_package.defenses:MY_DEFENSE"        # a fltr_audit.api.DefensePlugin

    [project.entry-points."fltr_audit.engine.algorithms"]
    my-algo = "my_package.algo:SPEC"                     # a fltr_audit.engine.algorithms.registry.AlgorithmSpec

Entry points load lazily: only when a command asks for that name, so a broken plug-in never
breaks a command that does not use it; listing them (``installed_plugins``) reads the packages'
metadata alone and imports nothing. Every call into a plug-in's code -- its import, its factory,
its ``guess`` / ``apply`` / ``aggregate`` -- goes through ``call_plugin``: whatever way it leaves
other than returning (an exception, ``SystemExit``, a ``KeyboardInterrupt`` it raised itself) is one
``FltrError`` naming the plug-in (exit code 2 from the CLI), and ``returned`` checks the type of what
it returned at the same boundary.
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import metadata
from typing import Any, Callable, Iterator, TypeVar

from fltr_audit.errors import FltrError

ATTACKS = "fltr_audit.attacks"
DEFENSES = "fltr_audit.defenses"
ALGORITHMS = "fltr_audit.engine.algorithms"
GROUPS = (ATTACKS, DEFENSES, ALGORITHMS)
KINDS = {ATTACKS: "attack", DEFENSES: "defense", ALGORITHMS: "algorithm"}
NOT_IMPORTED = "installed plug-in (not imported)"
"""What a listing says of a plug-in no command of this process has used (its description and
claims show once a command uses it)."""
T = TypeVar("T")


@dataclass(frozen=True)
class InstalledPlugin:
    """An installed plug-in as its package's metadata declares it (nothing of it is imported)."""

    name: str
    kind: str
    """attack, defense or algorithm."""
    target: str
    """The object the entry point names, ``module:attr``."""
    distribution: str
    """The distribution that declares it ("" when unknown)."""
    version: str


def entry_points(group: str) -> dict[str, metadata.EntryPoint]:
    """The installed entry points of ``group`` by name (nothing is imported)."""
    return {ep.name: ep for ep in metadata.entry_points(group=group)}


def installed_plugins(group: str | None = None) -> list[InstalledPlugin]:
    """Every installed plug-in of ``group`` (default: all three groups), from ``importlib.metadata``
    alone: a plug-in that hangs or exits at import cannot stop a listing."""
    rows = []
    for g in GROUPS if group is None else (group,):
        for name, ep in entry_points(g).items():
            dist = ep.dist
            rows.append(InstalledPlugin(name, KINDS[g], ep.value, dist.name if dist is not None else "",
                                        dist.version if dist is not None else ""))
    return rows


def installed(group: str) -> dict[str, str]:
    """The entry-point names of ``group`` with the distribution that declares each ("" when
    unknown); nothing is imported."""
    return {p.name: p.distribution for p in installed_plugins(group)}


@contextmanager
def _sigint_watch() -> Iterator[list[int] | None]:
    """The SIGINTs that arrive within the block (still handled as before): none ever outside the
    main thread (Python runs signal handlers in the main thread only); None where they cannot be
    watched (under a handler set outside Python)."""
    if threading.current_thread() is not threading.main_thread():
        yield []
        return
    previous = signal.getsignal(signal.SIGINT)
    if previous is None:
        yield None
        return
    arrived: list[int] = []

    def note(signum: int, frame: Any) -> None:
        arrived.append(signum)
        if previous is not signal.SIG_IGN:
            (previous if callable(previous) else signal.default_int_handler)(signum, frame)

    signal.signal(signal.SIGINT, note)
    try:
        yield arrived
    finally:
        signal.signal(signal.SIGINT, previous)


def call_plugin(failure: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)``, code of a plug-in; ``failure`` says how it failed, naming it
    (``"defense plug-in 'halve' failed in apply()"``).

    A FltrError it raises passes unchanged (it already speaks to the user); any other way out -- an
    exception, SystemExit, a KeyboardInterrupt it raised itself while no Ctrl-C came -- is the
    FltrError ``failure: cause``. A real Ctrl-C, and the project's own interruptions (subclasses of
    KeyboardInterrupt), pass.
    """
    with _sigint_watch() as arrived:
        try:
            return fn(*args, **kwargs)
        except FltrError:
            raise
        except KeyboardInterrupt as exc:
            if type(exc) is not KeyboardInterrupt or arrived is None or arrived:
                raise
            raise FltrError(f"{failure}: it raised KeyboardInterrupt (no Ctrl-C came)") from None
        except BaseException as exc:  # third-party code: SystemExit and any exception are the plug-in's
            raise FltrError(f"{failure}: {type(exc).__name__}: {_short(exc)}") from None


def returned(what: str, value: Any, expected: type | tuple[type, ...]) -> Any:
    """``value``, what ``what`` (``"defense plug-in 'halve': apply()"``) returned, when it is an
    ``expected`` instance; else FltrError naming the plug-in and what it returned."""
    if not isinstance(value, expected):
        names = " or ".join(t.__name__ for t in (expected if isinstance(expected, tuple) else (expected,)))
        raise FltrError(f"{what} returned {type(value).__name__} {_short(value)}, not a {names}")
    return value


def _short(value: Any) -> str:
    """``value`` in at most 80 characters of one line (an exception: its message)."""
    text = " ".join((str(value) if isinstance(value, BaseException) else repr(value)).split())
    return text if len(text) <= 80 else text[:77] + "..."


def load(group: str, name: str) -> Any | None:
    """The object the entry point ``name`` of ``group`` names, or None when no package declares it.

    FltrError naming the plug-in and the cause when it is declared but does not load (whatever
    way its import ends, ``call_plugin``).
    """
    ep = entry_points(group).get(name)
    if ep is None:
        return None
    return call_plugin(f"{KINDS[group]} plug-in {name!r} ({group} = {ep.value}) does not load", ep.load)

