"""fltr-audit data commands (to be filled in)."""
