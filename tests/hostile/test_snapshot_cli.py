"""Hostile input to ``rocket-rebalance snapshot``: a bad address, a name server that is not there or never answers,
an ``--out`` that is a file or somebody else's folder, bad patterns, concurrency or timeout out of range. Each is
one line on stderr and exit status 2, and an ``--out`` that is refused is left exactly as it was."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import pytest

from rocket_rebalance.remoting import RemotingCommand, RequestCode, ResponseCode, response_to
from rocket_rebalance.snapshot_folder import COLLECTOR_FILES, MARKER, TABLES
from tests.hostile.cli import one_line_error, run_cli
from tests.progress_lines import progress_of
from tests.scripted_server import ScriptedServer


def run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return run_cli("snapshot", *args, timeout=60)


@pytest.fixture
def silent_server() -> Iterator[str]:
    """A TCP port that accepts connections (the kernel's backlog) and never answers."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        yield f"127.0.0.1:{server.getsockname()[1]}"


def free_address() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{probe.getsockname()[1]}"  # closed again: nothing listens there


@pytest.mark.parametrize("address", ["localhost", "127.0.0.1:99999", "grpc://", "host name:9876"])
def test_a_bad_address_is_one_line(address: str, tmp_path: Path) -> None:
    one_line_error(run("-n", address, "--out", tmp_path / "out"), "is not HOST:PORT")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("scheme", ["", "grpc://"])
def test_an_unreachable_name_server_is_one_line_and_writes_nothing(tmp_path: Path, scheme: str) -> None:
    out = tmp_path / "out"
    one_line_error(run("-n", scheme + free_address(), "--out", out), "cannot reach the name server", status=3)
    assert not out.exists()


def test_a_name_server_that_never_answers_times_out_in_one_line(tmp_path: Path, silent_server: str) -> None:
    one_line_error(
        run("-n", silent_server, "--out", tmp_path / "out", "--timeout", "0.5"), "cannot reach", "no answer", status=3
    )


def test_out_must_not_be_a_file(tmp_path: Path) -> None:
    target = tmp_path / "file"
    target.write_text("mine", encoding="utf-8")
    one_line_error(run("-n", free_address(), "--out", target), "is a file")
    one_line_error(run("-n", free_address(), "--out", target / "below"), "cannot be created", "not a folder")
    assert target.read_text(encoding="utf-8") == "mine"


def test_a_foreign_folder_is_refused_and_left_alone(tmp_path: Path) -> None:
    out = tmp_path / "data"
    out.mkdir()
    (out / "routes.jsonl").write_text("precious\n", encoding="utf-8")
    one_line_error(run("-n", free_address(), "--out", out), "not empty", "_snapshot.json")
    (out / "_snapshot.json").write_text(
        json.dumps({"written_by": "rocket-rebalance snapshot", "files": ["routes.jsonl", "../elsewhere"]}),
        encoding="utf-8",
    )
    one_line_error(run("-n", free_address(), "--out", out), "../elsewhere", "never writes")
    for forged in ('{"files": ["routes.jsonl"]}', '{"written_by": "rocket-rebalance snapshot", "files": "routes"}'):
        (out / "_snapshot.json").write_text(forged, encoding="utf-8")
        one_line_error(run("-n", free_address(), "--out", out), "is not a snapshot's _snapshot.json")
    assert (out / "routes.jsonl").read_text(encoding="utf-8") == "precious\n"


@pytest.mark.parametrize(
    ("option", "value", "expected"),
    [
        ("--group", "", "--group '' is not a pattern"),
        ("--group", "GID orders", "is not a pattern of RocketMQ names"),
        ("--topic", "Topic[", "--topic 'Topic['"),
        ("--topic", "a/b", "is not a pattern"),
        ("--concurrency", "0", "--concurrency must be 1 to 64"),
        ("--concurrency", "65", "--concurrency must be 1 to 64"),
        ("--settle", "601", "--settle must be 0 to 600 seconds"),
    ],
)
def test_bad_options_are_one_line(option: str, value: str, expected: str, tmp_path: Path) -> None:
    one_line_error(run("-n", free_address(), "--out", tmp_path / "out", option, value), expected)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("value", ["0", "nan", "inf", "-1"])
def test_a_timeout_that_is_no_duration_is_a_usage_error(value: str, tmp_path: Path) -> None:
    """Refused while the command line is parsed, by the library's one duration check (issue 26: 11)."""
    done = run("-n", free_address(), "--out", tmp_path / "out", "--timeout", value)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("rocket-rebalance snapshot: error: argument --timeout: must be a finite number")
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------------------------ a cluster that goes away

EARLIER_ROWS = {table: [{"earlier": table}] for table in TABLES}
"""The rows of an earlier, complete snapshot: one recognisable row per table."""


def earlier_snapshot(out: Path, files: Iterable[str] = ()) -> Path:
    """An earlier complete ``snapshot`` output in ``out``; its marker lists its tables and ``files``."""
    out.mkdir()
    for table, rows in EARLIER_ROWS.items():
        (out / f"{table}.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    tables = [f"{table}.jsonl" for table in TABLES]
    marker = {"written_by": "rocket-rebalance snapshot", "complete": True, "partial": False, "groups_read": 7}
    (out / MARKER).write_text(json.dumps({**marker, "files": [*tables, *files]}), encoding="utf-8")
    return out


def folder_contents(out: Path) -> dict[str, str]:
    """Every entry of ``out`` with its text (a symlink as ``-> target``)."""
    return {
        path.name: f"-> {os.readlink(path)}" if path.is_symlink() else path.read_text(encoding="utf-8")
        for path in sorted(out.iterdir())
    }


@pytest.fixture
def vanishing_cluster() -> Iterator[Callable[[set[str]], ScriptedServer]]:
    """A name server and its one broker (RocketMQ's remoting wire) that list the groups GID_a and GID_b, answer
    "no consumer online" for the connection list of each group in ``offline``, and go away (the listener and every
    connection closed) at the first connection list of any other group."""
    servers: list[ScriptedServer] = []

    def start(offline: set[str]) -> ScriptedServer:
        def handler(command: RemotingCommand) -> RemotingCommand | None:
            if command.code == RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER:
                return response_to(command, ResponseCode.SUCCESS, body=b'{"topicList":["TopicA"]}')
            if command.code == RequestCode.GET_BROKER_CLUSTER_INFO:
                table = '{"broker-a":{"brokerAddrs":{0:"' + server.address + '"},"brokerName":"broker-a"}}'
                body = '{"brokerAddrTable":' + table + ',"clusterAddrTable":{"c":["broker-a"]}}'
                return response_to(command, ResponseCode.SUCCESS, body=body.encode())
            if command.code == RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG:
                body = b'{"subscriptionGroupTable":{"GID_a":{"groupName":"GID_a"},"GID_b":{"groupName":"GID_b"}}}'
                return response_to(command, ResponseCode.SUCCESS, body=body)
            if command.code == RequestCode.GET_CONSUMER_CONNECTION_LIST and command.ext["consumerGroup"] in offline:
                return response_to(command, ResponseCode.CONSUMER_NOT_ONLINE, remark="not online")
            if command.code == RequestCode.GET_CONSUME_STATS and command.ext["consumerGroup"] in offline:
                return response_to(command, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, remark="no offsets")
            server.close()  # gone, mid-snapshot
            return None

        server = ScriptedServer(handler)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()


def test_a_cluster_gone_before_any_group_is_read_leaves_the_earlier_snapshot(
    tmp_path: Path, vanishing_cluster: Callable[[set[str]], ScriptedServer]
) -> None:
    """Issue 26: 7 (probe §8): the earlier tables were deleted before the first group was read, and replaced by
    empty ones under a marker saying ``"complete": true``. No group read is no snapshot: exit 3 (could not read),
    nothing touched."""
    out = earlier_snapshot(tmp_path / "snap")
    before = folder_contents(out)
    server = vanishing_cluster(set())
    done = run("-n", server.address, "--out", out, "--timeout", "2")
    assert done.returncode == 3, (done.stdout, done.stderr)
    *progress, line = done.stderr.splitlines()
    assert progress == progress_of(done.stderr, "snapshot"), progress
    assert line.startswith("rocket-rebalance: no consumer group could be read"), line
    assert "GID_a: connection list unreachable" in line and f"--out {out} is left as it was" in line, line
    assert folder_contents(out) == before
    assert sorted(path.name for path in tmp_path.iterdir()) == ["snap"]  # no staging folder left behind


def test_groups_read_counts_only_groups_that_were_read(
    tmp_path: Path, vanishing_cluster: Callable[[set[str]], ScriptedServer]
) -> None:
    """GID_a answers (nobody online, no offsets: read, and recorded as stopped), then the cluster goes before GID_b
    is read: a partial snapshot of one group read, which replaces the earlier one whole."""
    out = earlier_snapshot(tmp_path / "snap")
    server = vanishing_cluster({"GID_a"})
    done = run("-n", server.address, "--out", out, "--timeout", "2", "--concurrency", "1")
    assert done.returncode == 3, done.stderr
    summary = json.loads(done.stdout)
    marker = json.loads((out / MARKER).read_text(encoding="utf-8"))
    assert summary["groups_read"] == marker["groups_read"] == 1
    assert marker["complete"] is True and marker["partial"] is True
    reasons = {row["group"]: row["reason"] for row in map(json.loads, (out / "rejected.jsonl").open())}
    assert list(reasons) == ["GID_b"] and reasons["GID_b"].startswith("connection list unreachable"), reasons
    stopped = [json.loads(line) for line in (out / "stopped.jsonl").open()]
    assert stopped == [{"group": "GID_a", "topic": None, "lag": 0, "later_lag": None}]
    assert sorted(folder_contents(out)) == sorted([MARKER, *COLLECTOR_FILES])
    assert sorted(path.name for path in tmp_path.iterdir()) == ["snap"]


def test_planted_symlinks_in_an_earlier_snapshot_are_never_followed(
    tmp_path: Path, vanishing_cluster: Callable[[set[str]], ScriptedServer]
) -> None:
    """Issue 26: 18 (probe §23): a ``.routes.jsonl.part`` symlink planted in an earlier snapshot was opened for
    writing, and the file it points to overwritten with the routes table. The marker's temporary file too."""
    precious = tmp_path / "precious.txt"
    precious.write_text("precious\n", encoding="utf-8")
    out = earlier_snapshot(tmp_path / "snap")
    for name in (".routes.jsonl.part", ".rejected.jsonl.part", f".{MARKER}.part"):
        (out / name).symlink_to("../precious.txt")
    server = vanishing_cluster({"GID_a"})
    done = run("-n", server.address, "--out", out, "--timeout", "2", "--concurrency", "1")
    assert done.returncode == 3, done.stderr
    assert precious.read_text(encoding="utf-8") == "precious\n"
    assert json.loads((out / MARKER).read_text(encoding="utf-8"))["groups_read"] == 1
    contents = folder_contents(out)
    assert contents[".routes.jsonl.part"] == contents[".rejected.jsonl.part"] == "-> ../precious.txt"  # not listed
    assert f".{MARKER}.part" not in contents  # the marker's own temporary name: removed as the link it was


def test_a_symlink_listed_by_the_earlier_marker_is_removed_not_followed(
    tmp_path: Path, vanishing_cluster: Callable[[set[str]], ScriptedServer]
) -> None:
    """A name the earlier marker lists (a run that died half-way lists its ``.part`` files) is deleted as the
    link it is; what it points to stays."""
    precious = tmp_path / "precious.txt"
    precious.write_text("precious\n", encoding="utf-8")
    out = earlier_snapshot(tmp_path / "snap", files=[".routes.jsonl.part"])
    (out / ".routes.jsonl.part").symlink_to("../precious.txt")
    (out / "routes.jsonl").unlink()
    (out / "routes.jsonl").symlink_to("../precious.txt")
    done = run("-n", vanishing_cluster({"GID_a"}).address, "--out", out, "--timeout", "2", "--concurrency", "1")
    assert done.returncode == 3, done.stderr
    assert precious.read_text(encoding="utf-8") == "precious\n"
    assert not (out / ".routes.jsonl.part").exists() and not (out / "routes.jsonl").is_symlink()
