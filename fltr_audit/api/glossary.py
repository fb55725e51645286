"""``fltr_audit.explain``: what a word of fltr-audit's output means (the ``fltr-audit explain`` command)."""

from __future__ import annotations

from typing import Any

from fltr_audit.constraints import ParameterError
from reports.glossary import TERMS, lookup


def explain(term: str | None = None) -> list[dict[str, Any]]:
    """The glossary entry of ``term`` (its name, other spellings, definition and the docs page
    that explains it), or every entry when ``term`` is None. ParameterError naming ``term`` with
    the known terms when it names none."""
    if term is None:
        found = list(TERMS)
    else:
        one = lookup(term)
        if one is None:
            raise ParameterError("term", f"no glossary entry for {term!r} (known: {', '.join(t.name for t in TERMS)})")
        found = [one]
    return [{"term": t.name, "aliases": list(t.aliases), "definition": t.text, "see": f"docs/{t.see}"} for t in found]
