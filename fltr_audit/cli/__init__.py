"""The ``fltr-audit`` command line: the composition root that wires engine, defenses,
attacks and reports together. ``main`` turns every failure into one line on stderr and a
non-zero exit code: 2 for bad input (``FltrError``, bad options, unreadable or unwritable
files), 1 for runs that failed (``RunsFailed``) and for internal errors (the traceback with
``FLTR_AUDIT_DEBUG=1``), 130 when interrupted (Ctrl-C), 143 when terminated (SIGTERM). A deprecated input that still works
(``FltrDeprecation``) is one line on stderr, each distinct message once per command."""

from __future__ import annotations

import importlib
import os
import signal
import sys
import warnings
from contextlib import contextmanager

import typer


def _click_exception(name: str) -> type:
    """The click exception class ``name`` as the installed typer raises it: typer >= 0.26 vendors
    its own click, older releases use the click package. ``typer.BadParameter`` is public in
    every release and derives from ``UsageError`` and ``ClickException`` of whichever it uses."""
    return next(c for c in typer.BadParameter.__mro__ if c.__name__ == name)


ClickException, UsageError = _click_exception("ClickException"), _click_exception("UsageError")

from fltr_audit.cli.app import RUNNING_COMMAND, app
from fltr_audit.cli.quick import COMMAND_MODULES, quick
from fltr_audit.cli.spelling import command_names, normalize
from fltr_audit.constraints import ParameterError
from fltr_audit.errors import FltrDeprecation, FltrError, RunsFailed
from fltr_audit.runs.interrupts import Interrupted, Terminated, last_raised, raise_interrupted, raise_terminated

_registered = False


def register_commands() -> None:
    """Import every command module (each registers its commands on ``cli.app``), then the
    ``train`` commands read from the algorithm registry; once per process."""
    global _registered
    if _registered:
        return
    for module in COMMAND_MODULES:
        importlib.import_module(f"fltr_audit.cli.{module}")
    importlib.import_module("fltr_audit.cli.train").register_train_commands()  # after the algorithms' own
    order = {f"fltr_audit.cli.{m}": i for i, m in enumerate(COMMAND_MODULES)}  # not the order of first import
    app.registered_commands.sort(key=lambda c: order.get(getattr(c.callback, "__module__", ""), len(order)))
    _registered = True


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; return the exit code (0 ok, 1 failed runs, 2 bad input, 130 interrupted, 143 terminated).

    With ``argv`` None (the installed command) the process exits with that code, and SIGTERM
    is turned into an interruption so that temporary output is cleaned up."""
    quick_code = quick(sys.argv[1:] if argv is None else list(argv))
    if quick_code is not None:  # --help, --version: no command module imported
        return _exit(quick_code, argv)
    last_raised()  # forget interruptions of an earlier in-process call
    try:
        if argv is None:  # the installed command: from here on, the handling below says it in one line
            signal.signal(signal.SIGINT, raise_interrupted)
            signal.signal(signal.SIGTERM, raise_terminated)
        with _deprecations_as_lines(), _quiet_floating_point():
            register_commands()  # inside: Ctrl-C while the command modules load is one line too
            root = typer.main.get_command(app)
            args = normalize(root, sys.argv[1:] if argv is None else list(argv))
            RUNNING_COMMAND.set(command_names(root, args))
            code = app(args=args, standalone_mode=False)
    except FltrError as exc:
        if isinstance(exc, ParameterError):  # named as the engine calls it: say the option typed
            # start-up: --help and --version stop before cli.common loads
            from fltr_audit.cli.common import as_option_error

            exc = as_option_error(exc)
        return _fail(f"fltr-audit: error: {_one_line(exc)}", 2, argv)
    except RunsFailed as exc:
        return _fail(f"fltr-audit: error: {_one_line(exc)}", 1, argv)
    except typer.Exit as exc:
        code = exc.exit_code
    except typer.Abort as exc:
        cause = exc.__cause__ or exc.__context__
        if isinstance(cause, EOFError):  # click turns EOFError into Abort: a truncated input
            return _fail(f"fltr-audit: error: unexpected end of input ({_one_line(cause) or 'EOFError'})", 2, argv)
        return _interrupted(cause, argv)
    except ClickException as exc:
        # one line naming the command and the option, not click's usage block
        command = getattr(getattr(exc, "ctx", None), "command_path", "fltr-audit")
        if exc.format_message():  # empty after the help a command without arguments prints
            print(f"{command}: error: {_one_line(exc.format_message())}", file=sys.stderr)
        return _exit(2 if isinstance(exc, UsageError) else exc.exit_code, argv)
    except OSError as exc:  # a file the command could not read or write
        where = f"{exc.filename}: " if exc.filename else ""
        return _fail(f"fltr-audit: error: {where}{exc.strerror or _one_line(exc)}", 2, argv)
    except MemoryError:
        return _fail("fltr-audit: error: out of memory (the input asks for more than this machine has)", 2, argv)
    except KeyboardInterrupt as exc:
        return _interrupted(exc, argv)
    except Exception as exc:  # a bug: one line, the traceback on request
        interruption = _interruption_behind(exc)
        if interruption is not None:
            return _interrupted(interruption, argv)
        if os.environ.get("FLTR_AUDIT_DEBUG"):
            raise
        return _fail(f"fltr-audit: internal error: {type(exc).__name__}: {_one_line(exc)} "
                     "(FLTR_AUDIT_DEBUG=1 prints the traceback)", 1, argv)
    if code == 130:  # typer turns KeyboardInterrupt (and so SIGTERM) into exit code 130
        return _interrupted(last_raised(), argv)
    return _exit(code if isinstance(code, int) else 0, argv)


@contextmanager
def _deprecations_as_lines():
    """Within the command, print each distinct ``FltrDeprecation`` once, as ``fltr-audit:
    warning: ...`` on stderr (not Python's two-line warning with the source line); other
    warnings go to the previous handler."""
    shown: set[str] = set()
    with warnings.catch_warnings():
        previous = warnings.showwarning
        warnings.simplefilter("always", FltrDeprecation)

        def show(message, category, filename, lineno, file=None, line=None) -> None:
            if not issubclass(category, FltrDeprecation):
                previous(message, category, filename, lineno, file, line)
            elif _one_line(message) not in shown:
                shown.add(_one_line(message))
                print(f"fltr-audit: warning: {_one_line(message)}", file=sys.stderr)

        warnings.showwarning = show
        yield


@contextmanager
def _quiet_floating_point():
    """No numpy floating-point RuntimeWarnings (overflow, invalid value, divide by zero: "... encountered
    in ...") on stderr: the engine checks what it computes and fails with one line naming the cause
    (``FLTR_AUDIT_DEBUG=1`` shows them). A warnings filter, so that numpy loads only when a command
    needs it."""
    if os.environ.get("FLTR_AUDIT_DEBUG"):
        yield
        return
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".* encountered in ", category=RuntimeWarning)
        yield


def _interruption_behind(exc: BaseException) -> KeyboardInterrupt | None:
    """The Ctrl-C or SIGTERM another exception wraps, if any: a compiled module whose initialisation
    the signal interrupts reports ``ImportError: initialization failed`` raised from it (pybind11's
    module init, scipy's and matplotlib's extensions)."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, KeyboardInterrupt):
            return cause
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return None


def _one_line(exc: object) -> str:
    return " ".join(str(exc).split())


def _interrupted(cause: BaseException | None, argv: list[str] | None) -> int:
    """Exit 143 after SIGTERM, 130 after Ctrl-C (with what a stopped campaign kept)."""
    if isinstance(cause, Terminated):
        return _fail("fltr-audit: terminated", 143, argv)
    if isinstance(cause, Interrupted) and cause.args:
        return _fail(f"fltr-audit: interrupted: {_one_line(cause)}", 130, argv)
    return _fail("fltr-audit: interrupted", 130, argv)


def _fail(message: str, code: int, argv: list[str] | None) -> int:
    print(message, file=sys.stderr)
    return _exit(code, argv)


def _exit(code: int, argv: list[str] | None) -> int:
    """The installed command exits with ``code``; after an interruption (130, 143) at once, its
    output flushed and its temporary files and worker pools already cleaned up (``runs.executors``
    releases a pool's processes and semaphores as it unwinds), so that no thread the interpreter
    would wait for at shutdown, and no signal arriving during it, can turn the exit into death by
    the signal."""
    if argv is None:
        if code in (130, 143):
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
        # the work is done: a Ctrl-C or SIGTERM now stays pending while the interpreter shuts down
        # (it resets the handlers first), instead of killing the process by the signal
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        sys.exit(code)
    return code
