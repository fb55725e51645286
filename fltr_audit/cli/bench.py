"""fltr-audit bench commands (to be filled in)."""
