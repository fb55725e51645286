"""fltr-audit defenses commands (to be filled in)."""
