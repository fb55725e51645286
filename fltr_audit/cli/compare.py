"""fltr-audit compare commands (to be filled in)."""
