"""The wheel as a user gets it: built from this checkout, installed with no extras into a fresh virtual environment
outside it, and used against the session's real RocketMQ. The core needs neither grpc nor protobuf: neither is
installed, a remoting consumer consumes what the installed command produced without importing either, and a
``grpc://`` address (the stub's wire) is refused in one line naming the extra, by the consumer and by the command.

Wall time: about 13 s beside the session's cluster (the wheel's build and the venv's install, with pip's cache
warm, most of it); lz4 and zstandard come from the package index, pinned by constraints.txt."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rocket_rebalance import __version__
from rocket_rebalance.lab.mixed_group import new_topic
from rocket_rebalance.lab.rocketmq import RocketMQCluster

pytestmark = pytest.mark.rocketmq

ROOT = Path(__file__).resolve().parents[2]
STUB_EXTRA = ("grpcio", "grpcio-health-checking", "protobuf")
INSTALL_HINT = "pip install 'rocket-rebalance[stub]'"

# Run by the venv's Python: consumes COUNT messages of TOPIC from the first offset with a remoting push consumer,
# then reports what it imported; a grpc:// address must fail at construction, naming the extra.
CONSUMER = """
import json, sys, threading
from rocket_rebalance import ConsumeFromWhere, PushConsumer
from rocket_rebalance.runtime.transport import StubWireUnavailableError

address, group, topic, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
bodies, done = [], threading.Event()

def listener(messages):
    bodies.extend(message.body for message in messages)
    if len(bodies) >= count:
        done.set()

first = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
with PushConsumer(address, group, topics=[topic], listener=listener, consume_from_where=first):
    done.wait(120)
try:
    PushConsumer("grpc://127.0.0.1:1", group, topics=[topic], listener=listener)
    refused = ""
except StubWireUnavailableError as error:
    refused = str(error)
wires = ("grpc", "grpc_health", "google.protobuf", "rocket_rebalance._proto", "nameserver_stub")
print(json.dumps({
    "consumed": len(bodies),
    "loaded": sorted(name for name in wires if name in sys.modules),
    "package": __import__("rocket_rebalance").__file__,
    "refused": refused,
}))
"""


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment holding this checkout's wheel and its default dependencies only."""
    work = tmp_path_factory.mktemp("wheel")
    dist = work / "dist"
    pip_wheel = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(dist), str(ROOT)]
    subprocess.run(pip_wheel, check=True, timeout=600)
    (wheel,) = dist.glob("rocket_rebalance-*.whl")
    subprocess.run([sys.executable, "-m", "venv", str(work / "venv")], check=True, timeout=600)
    python = work / "venv" / "bin" / "python"
    install = [str(python), "-m", "pip", "install", "--quiet", "-c", str(ROOT / "constraints.txt"), str(wheel)]
    subprocess.run(install, check=True, timeout=600)
    return work / "venv"


def run(venv: Path, *command: str) -> subprocess.CompletedProcess[str]:
    """``command`` (a program of the venv and its arguments) run outside the checkout, nothing of it on the path."""
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    program = str(venv / "bin" / command[0])
    return subprocess.run(
        [program, *command[1:]], cwd=venv.parent, env=env, capture_output=True, text=True, timeout=300
    )


def test_the_default_install_holds_neither_grpc_nor_protobuf_but_both_decoders(venv: Path) -> None:
    listed = json.loads(run(venv, "python", "-m", "pip", "list", "--format=json").stdout)
    names = {row["name"].lower() for row in listed}
    assert not names & set(STUB_EXTRA), sorted(names)
    assert {"rocket-rebalance", "lz4", "zstandard"} <= names, sorted(names)


def test_a_remoting_consumer_of_the_wheel_consumes_without_loading_a_grpc_module(
    venv: Path, rocketmq: RocketMQCluster
) -> None:
    topic = new_topic(rocketmq, "Wheel", 2)
    address = rocketmq.namesrv_address
    produced = run(venv, "rocket-rebalance", "produce", "-n", address, "-t", topic, "--count", "40")
    assert produced.returncode == 0, produced.stderr
    consumer = run(venv, "python", "-c", CONSUMER, address, "GID_wheel", topic, "40")
    assert consumer.returncode == 0, consumer.stderr
    report = json.loads(consumer.stdout.splitlines()[-1])
    assert report["consumed"] >= 40
    assert report["loaded"] == []
    assert Path(report["package"]).is_relative_to(venv), report["package"]
    assert INSTALL_HINT in report["refused"] and "grpc://127.0.0.1:1" in report["refused"]


def test_the_installed_commands_say_their_version_and_refuse_the_stub_in_one_line(venv: Path) -> None:
    for command in ("rocket-rebalance", "nameserver-stub"):
        shown = run(venv, command, "--version")
        assert (shown.returncode, shown.stdout) == (0, f"{command} {__version__}\n"), shown.stderr
    refusals = [
        run(venv, "rocket-rebalance", "consumer-progress", "-n", "grpc://127.0.0.1:1", "-g", "G"),
        run(venv, "rocket-rebalance", "demo"),
        run(venv, "nameserver-stub", "--listen", "127.0.0.1:0"),
    ]
    for refused in refusals:
        assert refused.returncode == 2 and refused.stdout == "", refused.stdout
        assert len(refused.stderr.splitlines()) == 1 and INSTALL_HINT in refused.stderr, refused.stderr
    overview = run(venv, "rocket-rebalance", "demo", "--static")  # a command that needs no broker, nor the extra
    assert overview.returncode == 0 and "CONSISTENT_HASH" in overview.stdout, overview.stderr
