"""Configuration parsing and the refusals that happen before anything is served."""

from __future__ import annotations

from pathlib import Path

import pytest

from nameserver_stub.__main__ import build_parser, config_from_args
from nameserver_stub.config import ConfigError, StubConfig, TopicQueues, is_loopback, parse_topic_spec, split_listen
from nameserver_stub.server import StubServer
from tests.stub.conftest import StartStub


def test_topic_spec() -> None:
    spec = parse_topic_spec("TopicTest:broker-a=4,broker-b=8/2")
    assert spec.topic == "TopicTest"
    assert spec.brokers == (TopicQueues("broker-a", 4, 4), TopicQueues("broker-b", 8, 2))


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("TopicTest", "is not TOPIC:BROKER"),
        ("Bad Topic:broker-a=4", "characters outside"),
        ("T:broker-a", "is not BROKER=QUEUES"),
        ("T:broker-a=x", "is not a number"),
        ("T:broker-a=0", "outside 1..1024"),
        ("T:broker-a=2000", "outside 1..1024"),
        ("T:broker-a=4,broker-a=2", "appears twice"),
        ("T:bad broker=4", "broker name"),
    ],
)
def test_bad_topic_specs(text: str, fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment):
        parse_topic_spec(text)


def test_listen_addresses() -> None:
    assert split_listen("127.0.0.1:0") == ("127.0.0.1", 0)
    assert split_listen("[::1]:9876") == ("::1", 9876)
    for bad in ("127.0.0.1", ":80", "host:port", "127.0.0.1:70000", "::1:0", "::1", "[127.0.0.1]:0", "[::1:0"):
        with pytest.raises(ConfigError):
            split_listen(bad)
    assert is_loopback("127.0.0.1") and is_loopback("127.1.2.3") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("10.0.0.1") and not is_loopback("example.com")


def test_non_loopback_listen_is_refused_unless_allowed(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not a loopback address.*--allow-remote"):
        StubServer(StubConfig(listen="0.0.0.0:0", data_dir=tmp_path))
    StubConfig(listen="0.0.0.0:0", data_dir=tmp_path, allow_remote=True).check()


def test_ipv6_loopback(start_stub: StartStub) -> None:
    try:
        server = start_stub(listen="[::1]:0")
    except ConfigError:
        pytest.skip("no IPv6 loopback here")
    assert server.address.startswith("[::1]:") and not server.address.endswith(":0")


def test_remote_listen_works_when_allowed(start_stub: StartStub) -> None:
    server = start_stub(listen="0.0.0.0:0", allow_remote=True)
    assert server.address.startswith("0.0.0.0:") and not server.address.endswith(":0")


@pytest.mark.parametrize(
    ("overrides", "fragment"),
    [
        ({"client_expiry": 0}, "client_expiry must be positive"),
        ({"lock_expiry": -1}, "lock_expiry must be positive"),
        ({"tls_cert": Path("cert.pem")}, "needs both"),
        ({"token": ""}, "token is empty"),
        ({"brokers": ("bad broker",)}, "broker name"),
    ],
)
def test_bad_configs(tmp_path: Path, overrides: dict[str, object], fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment):
        StubConfig(data_dir=tmp_path, **overrides).check()  # type: ignore[arg-type]


def test_brokers_come_from_topics_and_the_broker_list() -> None:
    config = StubConfig(topics=(parse_topic_spec("T:broker-b=1"),), brokers=("broker-c",))
    assert config.broker_names() == ("broker-b", "broker-c")
    assert StubConfig().broker_names() == ("broker-a",)


def test_command_line_defaults_and_options() -> None:
    defaults = config_from_args(build_parser().parse_args([]))
    assert defaults.listen == "127.0.0.1:9876"
    assert defaults.data_dir == Path(".stub-data")
    assert (defaults.client_expiry, defaults.lock_expiry, defaults.enable_faults) == (120.0, 60.0, False)
    args = build_parser().parse_args(
        [
            "--listen",
            "127.0.0.1:0",
            "--topic",
            "TopicTest:broker-a=4,broker-b=4",
            "--client-expiry",
            "5",
            "--lock-expiry",
            "7",
            "--enable-faults",
            "--token",
            "s3cret",
        ]
    )
    config = config_from_args(args)
    assert config.topics[0].topic == "TopicTest" and config.client_expiry == 5 and config.lock_expiry == 7
    assert config.enable_faults and config.token == "s3cret"


def test_a_taken_port_is_an_error(start_stub: StartStub, tmp_path: Path) -> None:
    first = start_stub()
    with pytest.raises(ConfigError, match="cannot listen"):
        StubServer(StubConfig(listen=first.address, data_dir=tmp_path / "other")).start()


def test_a_data_dir_serves_one_stub_at_a_time(start_stub: StartStub, tmp_path: Path) -> None:
    first = start_stub(data_dir=tmp_path / "shared")
    with pytest.raises(ConfigError, match="in use"):
        StubServer(StubConfig(listen="127.0.0.1:0", data_dir=tmp_path / "shared")).start()
    first.stop()
    start_stub(data_dir=tmp_path / "shared")  # free again once the first one stopped
