"""fltr-audit campaign commands (to be filled in)."""
