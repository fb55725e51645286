"""The one exception type for bad input (the CLI turns it into a one-line error, exit code 2)
and the one warning type for deprecated input that still works (one line on stderr)."""


class FltrError(ValueError):
    """Bad input or an impossible parameter.

    The message names the file and line, or the option, that is wrong, and reads as
    one line after ``fltr-audit: error:``.
    """


class CohortLost(FltrError):
    """An aggregator could not aggregate one cohort (e.g. secure aggregation with fewer
    survivors than it needs). The probe drops that cohort and counts it; elsewhere it is an
    error like any ``FltrError``."""


class RunsFailed(RuntimeError):
    """Runs of a campaign or audit failed; the message gives the count and the first cause
    in one line. The CLI prints it and exits with code 1."""


class FltrDeprecation(FutureWarning):
    """A deprecated spelling that still works, e.g. ``clip(delta=5)`` for ``clip(sensitivity=5)``.

    A ``FutureWarning``, so Python shows it by default (it is about what a user wrote); the
    message names the input and its replacement in one line, which the CLI prints once on
    stderr after ``fltr-audit: warning:``.
    """
