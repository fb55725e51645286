"""One command line: every list option takes both forms, and old spellings keep working.

* A list option is written either as one comma-separated value or repeated:
  ``--attack olsr,score`` = ``--attack olsr --attack score``; ``--defense a --defense b`` =
  ``--defense a,b`` (a defense string's own commas, inside ``(...)``, are not separators). The
  command's option declares which it is: repeatable (click ``multiple``) or one text value
  whose help says "comma-separated"; ``normalize`` rewrites the other form into it.
* ``DEPRECATED`` maps an old option spelling to the current one: it still works, with one
  warning line on stderr (``FltrDeprecation``).
"""

from __future__ import annotations

import warnings
from typing import Any

from fltr_audit.errors import FltrDeprecation

DEPRECATED = {"--click-models": "--click-model", "--C": "--svm-c"}
"""Old option spelling -> the current one (the same option in every command)."""


def split_top_level(text: str) -> list[str]:
    """``text`` split at the commas outside parentheses and brackets."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += ch in "(["
        depth -= ch in ")]"
        if ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def _leaf(root: Any, args: list[str]) -> tuple[Any, int]:
    """The click command ``args`` invoke and the index of its first own argument."""
    command, i = root, 0
    while hasattr(command, "commands") and i < len(args):
        if args[i].startswith("-"):
            i += 1
            continue
        sub = command.commands.get(args[i])
        if sub is None:
            break
        command, i = sub, i + 1
    return command, i


def command_names(root: Any, args: list[str]) -> str:
    """The command ``args`` invoke, as its names joined by spaces (``"train fpdgd"``)."""
    command, start = _leaf(root, args)
    return " ".join(a for a in args[:start] if not a.startswith("-"))


def normalize(root: Any, args: list[str]) -> list[str]:
    """``args`` with deprecated spellings replaced (warning once each) and every list option
    in the form its command declares."""
    renamed = []
    for token in args:
        name, eq, value = token.partition("=")
        if name in DEPRECATED:
            warnings.warn(f"{name} is deprecated: write {DEPRECATED[name]}", FltrDeprecation, stacklevel=2)
            token = DEPRECATED[name] + eq + value
        renamed.append(token)
    command, start = _leaf(root, renamed)
    options = {opt: p for p in getattr(command, "params", []) if getattr(p, "opts", None) for opt in p.opts}
    repeated = {o for o, p in options.items() if getattr(p, "multiple", False)}
    joined = {o for o, p in options.items() if not getattr(p, "multiple", False) and not getattr(p, "is_flag", False)
              and "comma-separated" in (getattr(p, "help", "") or "").lower()}
    out, merged = renamed[:start], {}
    i = start
    while i < len(renamed):
        token = renamed[i]
        name, eq, inline = token.partition("=")
        if name in repeated | joined and (eq or i + 1 < len(renamed)):
            value = inline if eq else renamed[i + 1]
            i += 1 if eq else 2
            if name in repeated:
                for item in split_top_level(value) or [value]:
                    out += [name, item]
            elif name in merged:
                out[merged[name]] += "," + value
            else:
                out += [name, value]
                merged[name] = len(out) - 1
            continue
        out.append(token)
        i += 1
    return out
