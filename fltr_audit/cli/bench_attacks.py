"""fltr-audit bench subcommands (to be filled in)."""
