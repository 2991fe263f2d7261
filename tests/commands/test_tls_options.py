"""The TLS options every command with ``-n`` takes: each ``--tls-*`` implies ``--tls``, and a bad file is one
line naming it, before anything is sent."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from rocket_rebalance.cli import build_parser
from rocket_rebalance.commands import CommandError
from rocket_rebalance.commands.options import tls_settings
from rocket_rebalance.lab.certs import LabCertificates, make_certificates
from rocket_rebalance.model import TlsSettings
from tests.commands.test_acl_options import CONSUME, _subcommands
from tests.hostile.cli import one_line_error, run_cli


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> LabCertificates:
    return make_certificates(tmp_path_factory.mktemp("tls"))


def _args(*extra: str | Path) -> argparse.Namespace:
    return build_parser().parse_args([*CONSUME, *map(str, extra)])


def test_every_command_with_n_takes_the_tls_options() -> None:
    with_n = {name: sub for name, sub in _subcommands().items() if "--namesrv" in sub._option_string_actions}
    assert {"consume", "produce", "consumer-progress", "consumer-connection", "snapshot", "simulate"} <= set(with_n)
    for name, sub in with_n.items():
        assert {"--tls", "--tls-ca", "--tls-cert", "--tls-key", "--tls-insecure"} <= set(sub._option_string_actions), (
            name
        )


def test_the_options_give_the_settings_and_each_file_implies_tls(certs: LabCertificates) -> None:
    assert tls_settings(_args()) is None
    assert tls_settings(_args("--tls")) == TlsSettings()
    assert tls_settings(_args("--tls-ca", certs.ca)) == TlsSettings(ca_file=str(certs.ca))
    assert tls_settings(_args("--tls-insecure")) == TlsSettings(verify=False)
    assert tls_settings(_args("--tls-cert", certs.client_cert, "--tls-key", certs.client_key)) == TlsSettings(
        None, str(certs.client_cert), str(certs.client_key)
    )


def test_bad_options_are_refused_naming_the_file(certs: LabCertificates, tmp_path: Path) -> None:
    not_pem = tmp_path / "not.pem"
    not_pem.write_text("hello\n")
    cases = [
        (["--tls-ca", tmp_path / "missing.pem"], f"TLS CA file {tmp_path / 'missing.pem'}: no such file"),
        (["--tls-ca", not_pem], f"TLS CA file {not_pem} holds no PEM certificate"),
        (["--tls-key", certs.client_key], f"--tls-key {certs.client_key} needs its certificate: pass --tls-cert"),
        (["--tls-ca", certs.ca, "--tls-insecure"], "which --tls-insecure turns off"),
        (
            ["--tls-cert", certs.client_cert, "--tls-key", certs.server_key],
            f"TLS key file {certs.server_key} does not match the certificate in {certs.client_cert}",
        ),
    ]
    for options, expected in cases:
        with pytest.raises(CommandError) as raised:
            tls_settings(_args(*options))
        assert expected in str(raised.value) and "\n" not in str(raised.value), options


def test_a_bad_file_is_one_line_from_the_command(tmp_path: Path) -> None:
    missing = tmp_path / "missing.pem"
    done = run_cli("consumer-progress", "-n", "127.0.0.1:1", "-g", "G", "--tls-ca", missing)
    one_line_error(done, f"TLS CA file {missing}: no such file")


def test_the_stub_wire_refuses_tls_in_one_line() -> None:
    done = run_cli("consumer-progress", "-n", "grpc://127.0.0.1:1", "-g", "G", "--tls")
    one_line_error(done, "TLS options", "not nameserver_stub")
