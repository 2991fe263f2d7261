"""The ``spark-submit`` entry of the impact job: ``spark-submit ... rocket_rebalance/pipeline/submit.py --out DIR``.

Kept apart from :mod:`.job` so that the job is a library module (imported by the CLI, the tests and the benchmark)
and this file is only the program spark-submit runs: the same options as ``rocket-rebalance impact``, with the
master taken from spark-submit unless ``--master`` is given.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import NoReturn

from rocket_rebalance.pipeline.job import run_from_args
from rocket_rebalance.pipeline.options import add_arguments

__all__ = ["main"]


PROG = "rocket-rebalance impact"


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line, as from ``rocket-rebalance impact`` itself (the command layer's parser is out of
    the pipeline's reach)."""

    def error(self, message: str) -> NoReturn:
        print(f"{PROG}: error: {message} (see {PROG} --help)", file=sys.stderr)
        sys.exit(2)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the job as spark-submit started it; a bad option or input is one line and exit status 2."""
    parser = _Parser(prog=PROG, description="fleet impact analysis")
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        run_from_args(args, spark_submit=True)
    except (ValueError, OSError) as error:
        print(f"{PROG}: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
