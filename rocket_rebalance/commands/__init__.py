"""The sub-commands of ``rocket-rebalance``: each module parses its arguments and prints; the library does the work."""


class CommandError(Exception):
    """A failure to report as one line (``rocket-rebalance: <message>``) with exit status 2."""


def printable(text: str) -> str:
    """Text as it may go to a terminal: control characters escaped, so a client ID or broker name from a server
    (or an error quoting one) cannot move the cursor, clear the screen or forge a line."""
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in text)
