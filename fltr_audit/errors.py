"""The one exception type for bad input; the CLI turns it into a one-line error, exit code 2."""


class FltrError(ValueError):
    """Bad input or an impossible parameter.

    The message names the file and line, or the option, that is wrong, and reads as
    one line after ``fltr-audit: error:``.
    """


class RunsFailed(RuntimeError):
    """Runs of a campaign or audit failed; the message gives the count and the first cause
    in one line. The CLI prints it and exits with code 1."""
