"""A Ctrl-C or SIGTERM that another exception wraps is still an interruption: pybind11 turns a
KeyboardInterrupt raised while a compiled module initialises (scipy's, matplotlib's) into
``ImportError: initialization failed`` raised from it, which CI saw as an "internal error", exit 1,
after a Ctrl-C one second into ``fltr-audit audit`` (1 run in ~50 of the slow interrupt test)."""

import pytest

import fltr_audit.cli as cli
from fltr_audit.runs import interrupts


def _raising(exc: BaseException):
    def register_commands() -> None:
        raise exc
    return register_commands


def _wrapped(inner: BaseException) -> ImportError:
    try:
        try:
            raise inner
        except BaseException as cause:
            raise ImportError("initialization failed") from cause
    except ImportError as outer:
        return outer


@pytest.mark.parametrize("inner, code, line", [
    (KeyboardInterrupt(), 130, "fltr-audit: interrupted"),
    (interrupts.Terminated(), 143, "fltr-audit: terminated"),
])
def test_an_import_error_raised_from_an_interruption_is_the_interruption(monkeypatch, capsys, inner, code, line):
    monkeypatch.delenv("FLTR_AUDIT_DEBUG", raising=False)
    monkeypatch.setattr(cli, "register_commands", _raising(_wrapped(inner)))
    assert cli.main(["audit", "--quiet"]) == code
    assert capsys.readouterr().err.splitlines() == [line]
    interrupts.last_raised()


def test_an_import_error_of_its_own_is_still_an_internal_error(monkeypatch, capsys):
    monkeypatch.delenv("FLTR_AUDIT_DEBUG", raising=False)
    monkeypatch.setattr(cli, "register_commands", _raising(_wrapped(ValueError("bad build"))))
    assert cli.main(["audit", "--quiet"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("fltr-audit: internal error: ImportError: initialization failed")
