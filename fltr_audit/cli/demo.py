"""fltr-audit demo commands (to be filled in)."""
