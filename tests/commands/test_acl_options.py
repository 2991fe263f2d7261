"""The ACL credential options every command with ``-n`` takes: where the secret may come from (a file or the
environment, never the command line), what is refused, and that the secret is never repeated."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from rocket_rebalance.cli import build_parser
from rocket_rebalance.commands import CommandError
from rocket_rebalance.commands.options import acl_credentials
from tests.hostile.cli import one_line_error, run_cli

SECRET = "s3cr3t-Kp4-never-shown"
CONSUME = ["consume", "-n", "127.0.0.1:1", "-g", "G", "-t", "T"]


def _args(*extra: str) -> argparse.Namespace:
    return build_parser().parse_args([*CONSUME, *extra])


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_every_command_with_n_takes_the_credential_options() -> None:
    with_n = {name: sub for name, sub in _subcommands().items() if "--namesrv" in sub._option_string_actions}
    assert {"consume", "produce", "consumer-progress", "consumer-connection", "snapshot"} <= set(with_n)
    for name, sub in with_n.items():
        assert {"--access-key", "--secret-key-file"} <= set(sub._option_string_actions), name


def test_the_secret_comes_from_a_file_trimmed_or_from_the_environment(tmp_path: Path) -> None:
    key_file = tmp_path / "secret"
    key_file.write_text(f"  {SECRET}\n", encoding="utf-8")
    from_file = acl_credentials(_args("--access-key", "ak", "--secret-key-file", str(key_file)), environ={})
    assert from_file is not None and from_file.secret_key == SECRET and from_file.security_token is None
    environ = {"ROCKETMQ_ACCESS_KEY": "env-ak", "ROCKETMQ_SECRET_KEY": SECRET, "ROCKETMQ_SECURITY_TOKEN": "tok"}
    from_env = acl_credentials(_args(), environ=environ)
    assert from_env is not None and (from_env.access_key, from_env.secret_key, from_env.security_token) == (
        "env-ak",
        SECRET,
        "tok",
    )
    assert acl_credentials(_args(), environ={}) is None


@pytest.mark.parametrize(
    ("options", "environ", "expected"),
    [
        (["--access-key", "ak"], {}, "--secret-key-file FILE or set $ROCKETMQ_SECRET_KEY"),
        ([], {"ROCKETMQ_SECRET_KEY": SECRET}, "no access key"),
        ([], {"ROCKETMQ_SECURITY_TOKEN": "tok"}, "no ACL access key and secret key"),
        (["--access-key", "ak", "--secret-key-file", "/nonexistent/secret"], {}, "cannot read it"),
        (["--secret-key", SECRET], {}, "there is no --secret-key option"),
    ],
)
def test_half_given_credentials_are_refused_without_the_secret(
    options: list[str], environ: dict[str, str], expected: str
) -> None:
    with pytest.raises(CommandError) as raised:
        acl_credentials(_args(*options), environ=environ)
    assert expected in str(raised.value) and SECRET not in str(raised.value)


def test_an_empty_secret_key_file_is_refused(tmp_path: Path) -> None:
    key_file = tmp_path / "secret"
    key_file.write_text("\n", encoding="utf-8")
    with pytest.raises(CommandError, match="is empty"):
        acl_credentials(_args("--access-key", "ak", "--secret-key-file", str(key_file)), environ={})


def test_the_help_offers_a_file_and_the_environment_never_a_secret_option() -> None:
    done = run_cli("consume", "--help")
    assert "--access-key" in done.stdout and "--secret-key-file" in done.stdout
    assert "ROCKETMQ_SECRET_KEY" in done.stdout and "--secret-key " not in done.stdout


def test_the_stub_wire_refuses_credentials_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROCKETMQ_SECRET_KEY", SECRET)
    done = run_cli("consumer-progress", "-n", "grpc://127.0.0.1:1", "-g", "G", "--access-key", "ak")
    line = one_line_error(done, "not nameserver_stub")
    assert SECRET not in done.stdout + done.stderr and SECRET not in line


def test_a_secret_on_the_command_line_is_refused_and_not_repeated() -> None:
    done = run_cli("consumer-progress", "-n", "127.0.0.1:1", "-g", "G", "--access-key", "ak", "--secret-key", SECRET)
    one_line_error(done, "there is no --secret-key option")
    assert SECRET not in done.stdout + done.stderr
