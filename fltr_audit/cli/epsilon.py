"""fltr-audit epsilon commands (to be filled in)."""
