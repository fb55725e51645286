"""The application's help: whole option names and literal brackets at any terminal width."""

import pytest

from fltr_audit.cli import main


@pytest.mark.parametrize("command, text", [
    (["campaign", "run"], "fltr-audit[dask]"),
    (["audit"], "--queries-per-client"),
    (["audit"], "--epsilon-audit / --no-epsilon-audit"),
    (["train", "fpdgd"], "--replace / --no-replace"),
])
def test_help_keeps_option_names_and_brackets(command, text, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    assert main([*command, "--help"]) == 0
    assert text in capsys.readouterr().out
