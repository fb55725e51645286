"""The one exception type for bad input; the CLI turns it into a one-line error, exit code 2."""


class FltrError(ValueError):
    """Bad input or an impossible parameter.

    The message names the file and line, or the option, that is wrong, and reads as
    one line after ``fltr-audit: error:``.
    """
