"""A plug-in's attack behind the project's boundary (``attacks.registry.make_attack`` wraps every
plug-in's attack in one)."""

from __future__ import annotations

from typing import Any

import numpy as np

from fltr_audit.engine.messages import Guess, ServerView
from fltr_audit.errors import FltrError
from fltr_audit.plugins import call_plugin, returned


class PluginAttack:
    """A plug-in's attack behind the project's boundary: its ``guess`` runs through
    ``fltr_audit.plugins.call_plugin`` and must return a ``Guess`` of the view's shown lists."""

    def __init__(self, name: str, attack: Any) -> None:
        self.name, self._attack = name, attack

    def guess(self, view: ServerView) -> Guess:
        """The plug-in's guess, checked: FltrError naming the plug-in for anything but a ``Guess``
        whose score and decision are arrays of the shown lists' shape."""
        what = f"attack plug-in {self.name!r}: guess()"
        guess = returned(what, call_plugin(f"attack plug-in {self.name!r} failed in guess()", self._attack.guess, view),
                         Guess)
        shape = view.interactions.shown.shape if view.interactions is not None else None
        for field, value in (("score", guess.score), ("decision", guess.decision)):
            if not isinstance(value, np.ndarray) or shape is not None and value.shape != shape:
                raise FltrError(f"{what} returned a Guess whose {field} is {type(value).__name__} of shape "
                                f"{np.shape(value)}, not an array of the shown lists' shape {shape}")
        return guess
