"""Bad command lines: every refusal is one readable line on stderr and exit status 2, before anything is served
(the real ``python -m nameserver_stub`` in a subprocess). Covers unusable data directories, tokens gRPC cannot
carry, intervals a timer cannot wait, and TLS files that are not a certificate and key.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nameserver_stub.config import ConfigError
from nameserver_stub.store import DB_NAME, NewMessage, Store
from tests.stub.harness import REPO_ROOT, spawn_stub

pytestmark = pytest.mark.e2e


def run_stub(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "nameserver_stub", "--listen", "127.0.0.1:0", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO_ROOT,
        env={**os.environ, **(env or {})},
    )


def assert_refused(result: subprocess.CompletedProcess[str], *fragments: str) -> None:
    """Exit 2, nothing on stdout (no address: nothing served), exactly one line on stderr saying why."""
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("nameserver-stub: error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0]


def writable(directory: Path) -> bool:
    probe = directory / "probe"
    try:
        probe.touch()
    except OSError:
        return False
    probe.unlink()
    return True


@contextmanager
def read_only(directory: Path) -> Iterator[None]:
    """Make ``directory`` read-only; as root (which ignores modes) with ``chattr +i``, else skip."""
    directory.chmod(0o555)
    immutable = False
    try:
        if writable(directory) and shutil.which("chattr"):
            immutable = subprocess.run(["chattr", "+i", str(directory)], capture_output=True).returncode == 0
        if writable(directory):
            pytest.skip("cannot make a directory read-only here (root without chattr +i)")
        yield
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(directory)], check=True)
        directory.chmod(0o755)


def test_a_data_dir_that_is_a_file(tmp_path: Path) -> None:
    path = tmp_path / "plain-file"
    path.write_text("not a directory")
    assert_refused(run_stub("--data-dir", str(path)), f"data directory {path} is not a directory")


def test_a_data_dir_below_a_file(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    path = tmp_path / "file" / "data"
    assert_refused(run_stub("--data-dir", str(path)), f"data directory {path} cannot be used: Not a directory")


def test_a_read_only_empty_data_dir(tmp_path: Path) -> None:
    path = tmp_path / "ro"
    path.mkdir()
    with read_only(path):
        result = run_stub("--data-dir", str(path))
    assert_refused(result, f"data directory {path} cannot be used")


def test_a_read_only_data_dir_holding_a_database(tmp_path: Path) -> None:
    path = tmp_path / "ro-with-data"
    first = spawn_stub(path)
    assert first.stop() == 0
    with read_only(path):
        result = run_stub("--data-dir", str(path))
    assert_refused(result, f"data directory {path}", "not a usable SQLite database")


def test_a_corrupt_database_file(tmp_path: Path) -> None:
    path = tmp_path / "corrupt"
    path.mkdir()
    (path / DB_NAME).write_bytes(b"this is no SQLite file\n" * 200)
    assert_refused(run_stub("--data-dir", str(path)), f"data directory {path}", "not a usable SQLite database")


def test_a_database_damaged_inside(tmp_path: Path) -> None:
    path = tmp_path / "damaged"
    store = Store(path)
    store.append("broker-a", "T", 0, [NewMessage(b"x" * 3000) for _ in range(50)], 0)
    store.close()
    data = bytearray((path / DB_NAME).read_bytes())
    data[4096 * 3 : 4096 * 6] = b"\xa5" * (4096 * 3)  # pages of the message table
    (path / DB_NAME).write_bytes(bytes(data))
    assert_refused(run_stub("--data-dir", str(path)), f"data directory {path}")


@pytest.mark.parametrize(
    ("args", "env", "fragment"),
    [
        (["--token", "s\u00e9cret"], {}, "not printable ASCII at position 2"),
        (["--token", "tab\there"], {}, "not printable ASCII at position 4"),
        ([], {"NAMESERVER_STUB_TOKEN": "\u2603"}, "not printable ASCII at position 1"),
    ],
)
def test_a_token_grpc_cannot_carry(tmp_path: Path, args: list[str], env: dict[str, str], fragment: str) -> None:
    result = run_stub("--data-dir", str(tmp_path / "d"), *args, env=env)
    assert_refused(result, fragment)
    assert "\u00e9" not in result.stderr and "\u2603" not in result.stderr  # the secret is not echoed


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--sweep-interval", "inf"], "sweep_interval must be positive"),
        (["--sweep-interval", "1e300"], "sweep_interval must be positive"),
        (["--client-expiry", "nan"], "client_expiry must be positive"),
        (["--log-repeat-interval", "0"], "log_repeat_interval must be positive"),
        (["--max-streams", "900"], "must leave a quarter of the 1024 worker threads"),
        (["--max-streams-per-client", "0"], "max_streams_per_client must be at least 1"),
        (["--max-db-bytes", "10"], "max_db_bytes must be at least"),
    ],
)
def test_numbers_the_stub_cannot_work_with(tmp_path: Path, args: list[str], fragment: str) -> None:
    assert_refused(run_stub("--data-dir", str(tmp_path / "d"), *args), fragment)


def test_tls_files_that_are_missing_or_not_pem(tmp_path: Path) -> None:
    missing = tmp_path / "missing.pem"
    junk = tmp_path / "junk.pem"
    junk.write_text("-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n")
    data = str(tmp_path / "d")
    assert_refused(
        run_stub("--data-dir", data, "--tls-cert", str(missing), "--tls-key", str(junk)),
        f"--tls-cert {missing} is not a readable file",
    )
    assert_refused(
        run_stub("--data-dir", data, "--tls-cert", str(junk), "--tls-key", str(junk)),
        "cannot be used together",
    )


def test_a_nul_byte_in_the_data_dir() -> None:
    with pytest.raises(ConfigError, match="cannot be used: it contains a NUL byte"):
        Store(Path("stub\0data"))


@pytest.fixture(scope="module")
def sound_database(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    path = tmp_path_factory.mktemp("sound")
    store = Store(path)
    store.append("broker-a", "T", 0, [NewMessage(b"m" * 500, tags="A") for _ in range(40)], 1)
    store.commit_offsets("broker-a", "G1", "c1", [(("T", 0), 7)], 1)
    store.close()
    return (path / DB_NAME).read_bytes()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_damage_is_refused_at_open_or_harmless(
    sound_database: bytes, tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    """Overwrite a random stretch of a real database: opening either refuses it with ConfigError or works."""
    start = data.draw(st.integers(0, len(sound_database) - 1), label="start")
    junk = data.draw(st.binary(min_size=1, max_size=8192), label="junk")
    damaged = bytearray(sound_database)
    damaged[start : start + len(junk)] = junk[: len(sound_database) - start]
    path = tmp_path_factory.mktemp("damaged")
    (path / DB_NAME).write_bytes(bytes(damaged))
    try:
        store = Store(path)
    except ConfigError as error:
        assert str(error).startswith(f"data directory {path}")
        return
    try:
        store.load_topics()
    finally:
        store.close()
    with sqlite3.connect(path / DB_NAME) as db:
        assert db.execute("PRAGMA quick_check").fetchone()[0] == "ok"
