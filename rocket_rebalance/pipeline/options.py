"""The ``impact`` options and their checks, shared by ``rocket-rebalance impact`` (:mod:`.commands`), the
spark-submit entry (:mod:`.submit`) and the job itself (:mod:`.job`), which checks them again before Spark starts.

A module of its own so that none of those three imports another just for its options.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from rocket_rebalance.model import word_choices
from rocket_rebalance.pipeline.settings import COMPARED_STRATEGIES

__all__ = [
    "ENGINES",
    "FLAT_FORMATS",
    "LOCAL_MAX_GROUPS",
    "MAX_GROUPS",
    "MAX_PARTITIONS",
    "WRITERS",
    "WriterSpec",
    "add_arguments",
    "add_engine_arguments",
    "check_master",
    "choose_engine",
    "parse_conf",
    "writer_spec",
]

MAX_PARTITIONS = 100_000
"""Most partitions of the per-group work: each writes one part file per output table, so a typo of a few digits
would otherwise mean millions of tiny files (a 100-million-group fleet needs a few thousand)."""

MAX_GROUPS = 1_000_000
"""Most groups ``fleet-gen`` writes: about 10 million members and 100 million offset rows, several GB; a typed
extra digit should be an error, not a full disk."""

_MASTER = re.compile(
    r"local(\[([1-9][0-9]*|\*)(,[1-9][0-9]*)?\])?"
    r"|local-cluster\[[1-9][0-9]*,[1-9][0-9]*,[1-9][0-9]*\]"
    r"|spark://[^\s,/]+(,[^\s,/]+)*|k8s://\S+|yarn"
)
"""The master URLs Spark accepts (its SparkContext.createTaskScheduler), checked here because a wrong one makes
the JVM exit before PySpark can say why."""


def check_master(master: str) -> None:
    """Refuse a Spark master URL that Spark would not start with."""
    if not _MASTER.fullmatch(master):
        raise ValueError(
            f"--master {master!r} is not a Spark master "
            "(local, local[N], local[*], local[N,RETRIES], spark://HOST:PORT, yarn, k8s://URL)"
        )


def parse_conf(items: Sequence[str], option: str = "--conf") -> dict[str, str]:
    """``key=value`` pairs from ``--conf`` (or ``option``) options."""
    conf = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"{option} expects key=value, got {item!r}")
        conf[key] = value
    return conf


ENGINES = ("auto", "local", "spark")
"""``local``: the analysis in this process (:func:`~rocket_rebalance.pipeline.reference.write_local`), no JVM.
``spark``: the Spark job (:mod:`.job`). ``auto``: local up to :data:`LOCAL_MAX_GROUPS` groups, Spark above, or
whenever an option only Spark has is given."""

LOCAL_MAX_GROUPS = 15_000
"""Most groups ``--engine auto`` analyses in this process. Spark's fixed cost on this project's 2-core machine (a
JVM, a session, the query's jobs: a minute or more for a one-group run) is what the in-process engine saves; Spark's
per-group work on two cores is cheaper than one process's, so it wins in bulk. benchmarks/RESULTS.md ("Engines",
2026-11-28) has the crossover this is set from (between 10,000 and 20,000 groups); ``--master`` chooses Spark
whatever the size (a cluster, more cores)."""


def choose_engine(engine: str, groups: int, spark_only: Sequence[str]) -> str:
    """``local`` or ``spark`` for ``--engine``: ``groups`` is the snapshot's size, ``spark_only`` the options
    given that only Spark has (``--master``, ``--conf``, ...), which make ``auto`` choose Spark and are refused
    with ``local``."""
    if engine not in ENGINES:
        raise ValueError(f"--engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    if engine == "local" and spark_only:
        raise ValueError(f"{', '.join(spark_only)} needs --engine spark (or auto): --engine local runs no Spark")
    if engine == "auto":
        return "spark" if spark_only or groups > LOCAL_MAX_GROUPS else "local"
    return engine


def add_engine_arguments(parser: argparse.ArgumentParser) -> None:
    """``--engine`` and ``--master``, shared by ``impact`` and ``audit``."""
    parser.add_argument(
        "--engine",
        **word_choices(ENGINES),
        default="auto",
        help=f"where the analysis runs: in this process (local: no JVM, seconds for a small fleet), on Spark, or "
        f"auto (default): local up to {LOCAL_MAX_GROUPS:,} groups, Spark above that or when a Spark option "
        "(--master, --conf, --partitions, --writer spark) is given",
    )
    parser.add_argument(
        "--master", default=None, help="Spark master (default local[*]; under spark-submit: its own); implies Spark"
    )


WRITERS = ("pyarrow", "spark")
"""``pyarrow``: the executors write Parquet part files themselves (fastest; needs a path pyarrow can write to).
``spark``: the executors hand their rows back and Spark's DataFrameWriter writes them (any format, a catalog)."""

FLAT_FORMATS = frozenset({"csv", "text"})
"""Spark's data sources with no list type: the job would analyse the whole fleet and then fail at the first write,
so they are refused before Spark starts."""

_FORMAT = re.compile(r"[a-z][a-z0-9]*")
"""A data source short name (parquet, json, orc, avro, ...): it is also the suffix of the table folders."""

_TABLE_PREFIX = re.compile(r"([A-Za-z_][A-Za-z0-9_]*\.){0,2}([A-Za-z_][A-Za-z0-9_]*)?")
"""``[catalog.][database.]name-start``: unquoted identifiers, so that prefix + table name is a valid table name."""


@dataclass(frozen=True)
class WriterSpec:
    """How the output tables are written: by the executors with pyarrow (Parquet), or by Spark's DataFrameWriter
    in ``format`` with ``options``, into ``<out>/<table>.<format>`` or, with a ``table_prefix``, into the session
    catalog as ``<table_prefix><table>``."""

    writer: str = "pyarrow"
    format: str = "parquet"
    options: dict[str, str] = field(default_factory=dict)
    table_prefix: str | None = None

    def __post_init__(self) -> None:
        if self.writer not in WRITERS:
            raise ValueError(f"--writer must be one of {', '.join(WRITERS)}, got {self.writer!r}")
        if not _FORMAT.fullmatch(self.format):
            raise ValueError(
                f"--format {self.format!r} is not a data source short name (parquet, json, orc, avro, ...)"
            )
        if self.format in FLAT_FORMATS:
            raise ValueError(
                f"--format {self.format} cannot hold the list columns of the output (violations.owners); "
                "use parquet, json, orc or avro"
            )
        if self.writer == "pyarrow":
            spark_only = [
                name
                for name, given in (
                    ("--format", self.format != "parquet"),
                    ("--write-option", bool(self.options)),
                    ("--table-prefix", self.table_prefix is not None),
                )
                if given
            ]
            if spark_only:
                raise ValueError(
                    f"{', '.join(spark_only)} needs --writer spark (the pyarrow writer writes Parquet files only)"
                )
        if self.table_prefix is not None and not (self.table_prefix and _TABLE_PREFIX.fullmatch(self.table_prefix)):
            raise ValueError(
                f"--table-prefix {self.table_prefix!r} is not a table name prefix "
                "(letters, digits and _, optionally after database. or catalog.database., e.g. impact_ or db.impact_)"
            )


def writer_spec(
    writer: str = "pyarrow", fmt: str | None = None, options: Sequence[str] = (), table_prefix: str | None = None
) -> WriterSpec:
    """The writer options of the command line, checked (one-line ``ValueError``s) before Spark starts."""
    if fmt is not None and writer == "pyarrow":
        raise ValueError("--format needs --writer spark (the pyarrow writer writes Parquet files only)")
    return WriterSpec(writer, fmt or "parquet", parse_conf(options, "--write-option"), table_prefix)


QUIET_HELP = "no progress lines on stderr (errors are still said)"
"""``--quiet`` of the pipeline's commands, said one way."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The impact options, shared by ``rocket-rebalance impact`` and the spark-submit entry."""
    parser.add_argument("--snapshot", help="snapshot folder (default: the sample snapshot shipped with the package)")
    change = parser.add_mutually_exclusive_group()
    change.add_argument("--after", help="a second snapshot folder describing the state after the change")
    change.add_argument("--scenario", help="a scenario JSON file (joins, leaves, broker down, strategy switch)")
    parser.add_argument(
        "--out",
        required=True,
        help="output folder (Parquet tables, report.md, charts/): new, empty, or an earlier impact output (whose "
        "files it replaces), apart from the inputs",
    )
    add_engine_arguments(parser)
    parser.add_argument(
        "--partitions",
        type=int,
        default=None,
        metavar="N",
        help=f"partitions of the per-group work, 1 to {MAX_PARTITIONS} (default: 4 per core)",
    )
    parser.add_argument("--no-report", action="store_true", help="skip the Markdown report and charts")
    parser.add_argument("--quiet", action="store_true", help=QUIET_HELP)
    parser.add_argument(
        "--compare",
        default=",".join(COMPARED_STRATEGIES),
        metavar="STRATEGIES",
        help="with --after or --scenario: the strategies the comparison table replays each group's change under, "
        "beside its current one, comma-separated (default: %(default)s), or none: no comparison, a faster run",
    )
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="extra Spark settings")
    parser.add_argument(
        "--writer",
        **word_choices(WRITERS),
        default="pyarrow",
        help="who writes the output tables: the executors with pyarrow, as Parquet (default, faster), or Spark's "
        "DataFrameWriter (any format, options, a table catalog)",
    )
    parser.add_argument(
        "--format", default=None, help="--writer spark: the data source of the tables (default parquet; json, orc...)"
    )
    parser.add_argument(
        "--write-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="--writer spark: an option of the DataFrameWriter (repeatable), e.g. compression=gzip",
    )
    parser.add_argument(
        "--table-prefix",
        default=None,
        metavar="PREFIX",
        help="--writer spark: save the tables into the session catalog as PREFIX<table> (e.g. impact_ or "
        "db.impact_) instead of files in --out",
    )
