"""fltr-audit train commands (to be filled in)."""
