"""fltr-audit audit commands (to be filled in)."""
