"""The ``fltr-audit`` command (and ``python -m fltr_audit``): from its first instant, Ctrl-C or
SIGTERM while the command line's modules load ends the process with one line and exit code 130 or
143 (under load those imports take seconds, and a traceback from inside them says nothing). Once
loaded, ``fltr_audit.cli.main`` handles interruptions itself."""

import os
import signal


def _stopped_at_start(signum: int, frame: object) -> None:
    os.write(2, b"fltr-audit: interrupted\n" if signum == signal.SIGINT else b"fltr-audit: terminated\n")
    os._exit(130 if signum == signal.SIGINT else 143)


def run() -> None:
    """Load the command line with interruptions handled, then run it."""
    signal.signal(signal.SIGINT, _stopped_at_start)
    signal.signal(signal.SIGTERM, _stopped_at_start)
    # start-up: the handlers above are set before the command line's modules load
    from fltr_audit.cli import main

    main()  # it takes over SIGINT and SIGTERM inside its own error handling


if __name__ == "__main__":
    run()
