"""How a list is written in one value, the same at every door (CLI options, campaign strings, Python
keywords): items separated by commas outside parentheses and brackets, so that a defense stack's
own parameters (``clip(sensitivity=5)+dp-distributed(eps=4.5)``) never split."""

from __future__ import annotations


def split_list(text: str) -> list[str]:
    """``text`` split at the commas outside parentheses and brackets, items stripped, empty ones dropped."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += ch in "(["
        depth -= ch in ")]"
        if ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]
