"""The two spellings of a canonical defense name: the sensitivity of ``clip``,
``dp-distributed`` and ``dp-local-laplace`` is written ``sensitivity=`` today and was written
``delta=`` before (``delta`` now means the DP delta only).

Run keys hash the legacy spelling (so every run key, and every store a campaign resumes,
stays as it was), and the store reads rows written with the legacy spelling back in the
current one. Plain text rewriting of canonical names (components joined by ``+``, parameters
``key=value`` joined by ``,``, no spaces), so the engine needs no defense import;
``defenses.stack`` declares ``delta`` as the deprecated alias of exactly these components'
``sensitivity`` (a test checks both agree).
"""

from __future__ import annotations

import re

RENAMED_COMPONENTS = ("clip", "dp-distributed", "dp-local-laplace")
"""The defenses whose ``sensitivity`` parameter was called ``delta``."""

LEGACY_NAME, CURRENT_NAME = "delta", "sensitivity"

_COMPONENT = re.compile(r"(^|\+)(" + "|".join(map(re.escape, RENAMED_COMPONENTS)) + r")\(([^()]*)\)")


def _rename(name: str, old: str, new: str) -> str:
    param, replacement = re.compile(rf"(^|,){old}="), rf"\g<1>{new}="

    def component(match: re.Match) -> str:
        lead, head, params = match.groups()
        return f"{lead}{head}({param.sub(replacement, params)})"

    return _COMPONENT.sub(component, name)


def legacy_spelling(name: str) -> str:
    """``clip(sensitivity=5)+dp-distributed(eps=4.5)`` -> ``clip(delta=5)+dp-distributed(eps=4.5)``."""
    return _rename(name, CURRENT_NAME, LEGACY_NAME)


def current_spelling(name: str) -> str:
    """``clip(delta=5)+dp-distributed(eps=4.5)`` -> ``clip(sensitivity=5)+dp-distributed(eps=4.5)``."""
    return _rename(name, LEGACY_NAME, CURRENT_NAME)
