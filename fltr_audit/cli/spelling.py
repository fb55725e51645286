"""One command line: list options take both forms, and old spellings keep working.

* A list option (``cli.options.LIST_OPTIONS``) is written either repeated or comma-separated:
  ``--attack olsr,score`` = ``--attack olsr --attack score``; a defense string's own commas, inside
  ``(...)``, are not separators. Where a command takes one value, several are refused by name.
* ``cli.options.DEPRECATED`` maps an old option spelling to the current one, and
  ``DEPRECATED_POSITIONAL`` an old option to the command's positional argument: they still work,
  with one warning line on stderr (``FltrDeprecation``).
"""

from __future__ import annotations

import warnings
from typing import Any

from fltr_audit.cli.options import DEPRECATED, DEPRECATED_POSITIONAL, LIST_OPTIONS
from fltr_audit.errors import FltrDeprecation, FltrError
from fltr_audit.spec.listing import split_list


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
    _, start = _leaf(root, args)
    return " ".join(a for a in args[:start] if not a.startswith("-"))


def _renamed(args: list[str]) -> list[str]:
    """``args`` with deprecated option spellings replaced, warning once each."""
    out = []
    for token in args:
        name, eq, value = token.partition("=")
        if name in DEPRECATED:
            warnings.warn(f"{name} is deprecated: write {DEPRECATED[name]}", FltrDeprecation, stacklevel=3)
            token = DEPRECATED[name] + eq + value
        out.append(token)
    return out


def _positional(args: list[str], start: int, command: Any) -> list[str]:
    """``args`` with a deprecated option whose value is now the positional argument moved there."""
    takes = any(getattr(p, "param_type_name", "") == "argument" for p in getattr(command, "params", []))
    for i in range(start, len(args)):
        name, eq, value = args[i].partition("=")
        if name in DEPRECATED_POSITIONAL and takes and (eq or i + 1 < len(args)):
            warnings.warn(f"{name} is deprecated: write the algorithm as the first argument "
                          f"({DEPRECATED_POSITIONAL[name]})", FltrDeprecation, stacklevel=3)
            value = value if eq else args[i + 1]
            rest = args[:i] + args[i + (1 if eq else 2):]
            return rest[:start] + [value] + rest[start:]
    return args


def normalize(root: Any, args: list[str]) -> list[str]:
    """``args`` with deprecated spellings replaced (warning once each) and every list option in
    the repeated form; FltrError naming a list option given several values where the command takes one."""
    args = _renamed(args)
    command, start = _leaf(root, args)
    args = _positional(args, start, command)
    params = {opt: p for p in getattr(command, "params", []) if getattr(p, "opts", None) for opt in p.opts}
    out, i = args[:start], start
    while i < len(args):
        name, eq, inline = args[i].partition("=")
        if name in LIST_OPTIONS and name in params and (eq or i + 1 < len(args)):
            value = inline if eq else args[i + 1]
            i += 1 if eq else 2
            items = split_list(value) or [value]
            if not getattr(params[name], "multiple", False):
                if len(items) > 1:
                    raise FltrError(f"{name}: this command takes one value, got {len(items)} ({value})")
                out += [name, value]
            else:
                for item in items:
                    out += [name, item]
            continue
        out.append(args[i])
        i += 1
    return out
