"""fltr-audit train train_fedips commands (to be filled in)."""
