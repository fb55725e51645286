"""fltr-audit report commands (to be filled in)."""
