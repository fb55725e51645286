"""``Lazy``: a callable named by ``"module:name"``, imported when first called, so that a catalog
(defenses, attacks) can list what it holds without importing it."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Lazy:
    """The callable at ``path`` (``"module:name"``), called with ``defaults`` as keywords unless the
    call gives them: ``lazy("attacks.olsr:OLSR", loss="l1")(alpha=0.05)`` is
    ``OLSR(loss="l1", alpha=0.05)``."""

    path: str
    defaults: tuple[tuple[str, Any], ...] = ()

    def target(self) -> Any:
        """The callable itself (its module imported now)."""
        module, _, name = self.path.partition(":")
        return getattr(importlib.import_module(module), name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.target()(*args, **{**dict(self.defaults), **kwargs})


def lazy(path: str, **defaults: Any) -> Lazy:
    """``Lazy(path, defaults)`` with the defaults as keywords."""
    return Lazy(path, tuple(defaults.items()))
