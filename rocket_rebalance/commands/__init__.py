"""The sub-commands of ``rocket-rebalance``: each module parses its arguments and prints; the library does the work."""


class CommandError(Exception):
    """A failure to report as one line (``rocket-rebalance: <message>``) with exit status 2."""
