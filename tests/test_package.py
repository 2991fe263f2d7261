"""Embedding costs nothing extra: the top-level import stays free of grpc, pyspark, hypothesis and the metrics
library, and so does a consumer without metrics."""

from __future__ import annotations

import re
import string
import subprocess
import sys

from rocket_rebalance.tradeoffs import default_strategies


def test_import_does_not_load_grpc_pyspark_hypothesis_or_prometheus_client() -> None:
    code = (
        "import sys, rocket_rebalance, rocket_rebalance.strategies, rocket_rebalance.plan, rocket_rebalance.cli;"
        "print(sorted(m for m in ('grpc', 'pyspark', 'hypothesis', 'pandas', 'prometheus_client') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_consumer_without_metrics_never_loads_prometheus_client() -> None:
    code = (
        "import sys\n"
        "from rocket_rebalance.runtime.consumer import PushConsumer\n"
        "consumer = PushConsumer('127.0.0.1:9876', 'G', topics=['T'], listener=lambda batch: None)\n"
        "print('prometheus_client' in sys.modules)\n"
        "consumer.transport.close(1)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_console_entry_runs_the_demo() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "rocket_rebalance", "demo", "--static"], capture_output=True, text=True, check=True
    )
    assert "CONSISTENT_HASH" in out.stdout and "MACHINE_ROOM_NEARBY-AVG" in out.stdout


def test_demo_shows_the_tradeoff_chart_and_table_for_every_default_strategy() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "rocket_rebalance", "demo", "--static"], capture_output=True, text=True, check=True
    )
    tradeoffs = out.stdout.split("# Balance against movement", 1)[1]
    assert "max/avg (mean)" in tradeoffs and "share of queues moved on one join" in tradeoffs
    for marker, label in zip(string.ascii_uppercase, default_strategies(), strict=False):
        assert re.search(rf"^  {marker}  {re.escape(label)}  +moved 0\.\d+  max/avg \d", tradeoffs, re.M), label
        assert re.search(rf"^{re.escape(label)} +\d+\.\d+ ", tradeoffs, re.M), label


def test_unknown_command_exits_non_zero() -> None:
    out = subprocess.run([sys.executable, "-m", "rocket_rebalance", "nope"], capture_output=True, text=True)
    assert out.returncode != 0 and "invalid choice" in out.stderr


def test_help_lists_the_consumer_classes_that_load_lazily() -> None:
    code = "import pydoc, rocket_rebalance; print(pydoc.render_doc(rocket_rebalance, renderer=pydoc.plaintext))"
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    for name in ("PushConsumer", "PullConsumer", "AsyncPushConsumer", "AsyncPullConsumer", "RebalanceListener"):
        assert f"class {name}" in shown, name


def test_the_package_logger_has_a_null_handler_so_an_unconfigured_application_prints_nothing() -> None:
    code = "import logging, rocket_rebalance; logging.getLogger('rocket_rebalance.runtime').warning('unseen')"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stderr == ""


def test_both_commands_say_the_package_version() -> None:
    from rocket_rebalance import __version__

    for module, name in (("rocket_rebalance", "rocket-rebalance"), ("nameserver_stub", "nameserver-stub")):
        shown = subprocess.run([sys.executable, "-m", module, "--version"], capture_output=True, text=True, check=True)
        assert shown.stdout == f"{name} {__version__}\n"


# Run with the stub extra's modules hidden (None in sys.modules: not found, as in an install without the extra).
WITHOUT_STUB_EXTRA = (
    "import sys\nfor name in ('grpc', 'grpc_health', 'google.protobuf'):\n    sys.modules[name] = None\n"
)


def test_without_the_stub_extra_a_grpc_address_is_a_named_error_at_construction() -> None:
    code = WITHOUT_STUB_EXTRA + (
        "from rocket_rebalance import AsyncPullConsumer, PushConsumer\n"
        "from rocket_rebalance.runtime.transport import StubWireUnavailableError\n"
        "for kind in (PushConsumer, AsyncPullConsumer):\n"
        "    try:\n"
        "        kind('grpc://127.0.0.1:1', 'G', topics=['T'])\n"
        "    except StubWireUnavailableError as error:\n"
        "        print(error)\n"
    )
    lines = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert lines.count("grpc://127.0.0.1:1 (nameserver_stub's gRPC wire") == 2
    assert lines.count("needs the 'stub' extra (grpcio, protobuf): pip install 'rocket-rebalance[stub]'") == 2


def test_without_the_stub_extra_the_commands_that_need_it_say_so_in_one_line() -> None:
    cli = "from rocket_rebalance.cli import main; sys.exit(main"
    for command in (
        f"{cli}(['consumer-progress', '-n', 'grpc://127.0.0.1:1', '-g', 'G']))",
        f"{cli}(['demo']))",
        "from nameserver_stub.__main__ import main; sys.exit(main(['--listen', '127.0.0.1:0']))",
    ):
        done = subprocess.run([sys.executable, "-c", WITHOUT_STUB_EXTRA + command], capture_output=True, text=True)
        assert done.returncode == 2 and done.stdout == "", (command, done.stdout)
        assert done.stderr.count("\n") == 1 and "pip install 'rocket-rebalance[stub]'" in done.stderr, done.stderr
