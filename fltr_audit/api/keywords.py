"""Keyword checks of the Python API, before anything runs (scikit-learn style): an unknown keyword is
one FltrError naming it and the known ones; a deprecated keyword still works, renamed, with one
``FltrDeprecation`` warning."""

from __future__ import annotations

import warnings
from typing import Any, Mapping

from fltr_audit.errors import FltrDeprecation, FltrError
from fltr_audit.spec.listing import split_list


def check_keywords(function: str, options: Mapping[str, Any], known: Mapping[str, Any]) -> None:
    """FltrError naming the first keyword of ``options`` that ``function`` does not know."""
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise FltrError(f"fltr_audit.{function}: unknown keyword {unknown[0]!r} (known: {', '.join(sorted(known))})")


def renamed(function: str, options: Mapping[str, Any], aliases: Mapping[str, str]) -> dict[str, Any]:
    """``options`` with each deprecated keyword of ``aliases`` (old -> new) renamed, warning once
    each; FltrError when both spellings are given."""
    out = dict(options)
    for old, new in aliases.items():
        if old not in out:
            continue
        if new in out:
            raise FltrError(f"fltr_audit.{function}: give {new!r} only ({old!r} is its deprecated spelling)")
        warnings.warn(f"fltr_audit.{function}: keyword {old!r} is deprecated: write {new!r}", FltrDeprecation,
                      stacklevel=3)
        out[new] = out.pop(old)
    return out


def as_tuple(function: str, key: str, value: Any, item: type) -> tuple:
    """A list keyword as a tuple of ``item``: a list or tuple, or one item; strings of a ``str``
    list may be comma-separated (commas inside parentheses do not split: defense stacks)."""

    values = [value] if isinstance(value, (str, int)) and not isinstance(value, bool) else value
    if not isinstance(values, (list, tuple)):
        raise FltrError(f"fltr_audit.{function}: {key} must be a list of {item.__name__}, not {type(value).__name__}")
    items: list = []
    for v in values:
        if item is str and isinstance(v, str):
            items += split_list(v)
            continue
        if not isinstance(v, item) or isinstance(v, bool):
            raise FltrError(f"fltr_audit.{function}: {key} holds {v!r}, expected {item.__name__} items")
        items.append(v)
    if not items:
        raise FltrError(f"fltr_audit.{function}: {key} is empty")
    return tuple(items)
