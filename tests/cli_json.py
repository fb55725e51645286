"""Reading a command's ``--json`` output in tests: the envelope checked against
``docs/json-envelope.schema.json``, its ``result`` returned.

Without jsonschema (the test extra), as in CI's plain install (``pip install -e . pytest``), the
envelope's required keys are checked instead and a warning says so: the commands' JSON output is
still exercised there, where a new release of a dependency would break it first."""

from __future__ import annotations

import json
import warnings
from functools import lru_cache
from pathlib import Path
from typing import Any

SCHEMA = Path(__file__).resolve().parents[1] / "docs" / "json-envelope.schema.json"


@lru_cache(maxsize=1)
def _validator():
    """The schema's validator, or None without jsonschema."""
    try:
        from jsonschema import Draft202012Validator
    except ImportError:
        return None
    schema = json.loads(SCHEMA.read_text())
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def envelope(text: str) -> dict:
    """The parsed ``--json`` output ``text``, validated against the envelope's schema (the
    command's result too, where the schema describes it); an invalid one fails the test."""
    out = json.loads(text)
    validator = _validator()
    if validator is None:
        warnings.warn("jsonschema is not installed (pip install -e '.[test]'): the JSON envelope's required keys "
                      "checked, not its schema", stacklevel=2)
        missing = set(json.loads(SCHEMA.read_text())["required"]) - set(out)
        assert not missing, f"the envelope lacks {sorted(missing)}"
        return out
    errors = sorted(validator.iter_errors(out), key=lambda e: list(e.absolute_path))
    assert not errors, "; ".join(f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors)[:2000]
    return out


def cli_result(text: str) -> Any:
    """The ``result`` of the ``--json`` output ``text`` (its envelope validated)."""
    return envelope(text)["result"]
