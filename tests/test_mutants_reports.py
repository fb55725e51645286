"""Mutant-killing tests (issue 22): see tools/mutation.toml."""
