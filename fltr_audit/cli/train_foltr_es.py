"""fltr-audit train train_foltr_es commands (to be filled in)."""
