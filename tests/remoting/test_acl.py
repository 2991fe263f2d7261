"""ACL request signing: parity with the Java client's ``AclClientRPCHook`` (golden vectors recorded from the real
classes, see tests/golden/README.md) and the rules that make it so."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocket_rebalance.model import AclCredentials
from rocket_rebalance.remoting import RequestCode, request
from rocket_rebalance.remoting.acl import ACCESS_KEY, SECURITY_TOKEN, SIGNATURE, sign, signature

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "acl_signature_cases.jsonl"
CASES: list[dict[str, Any]] = [json.loads(line) for line in GOLDEN.read_text(encoding="utf-8").splitlines()]


def _signed(case: dict[str, Any]) -> str:
    credentials = AclCredentials(case["access_key"], case["secret_key"], case["security_token"])
    command = request(RequestCode.HEART_BEAT, case["fields"], base64.b64decode(case["body_b64"]))
    return sign(command, credentials).ext[SIGNATURE]


@pytest.mark.parametrize("case", CASES, ids=[f"case{index}" for index in range(len(CASES))])
def test_signature_matches_java(case: dict[str, Any]) -> None:
    assert _signed(case) == case["signature"]


def test_golden_cases_cover_the_hard_parts() -> None:
    """The parity above proves something only if the cases hold what can go wrong: keys whose UTF-16 order differs
    from their code-point order, empty values, empty and binary bodies, a stale Signature, security tokens."""

    def orders_differ(keys: list[str]) -> bool:
        return sorted(keys) != sorted(keys, key=lambda key: key.encode("utf-16-be", "surrogatepass"))

    assert any(orders_differ([*case["fields"], ACCESS_KEY, SECURITY_TOKEN]) for case in CASES)
    assert any("" in case["fields"].values() for case in CASES)
    assert any(case["body_b64"] == "" for case in CASES)
    assert any(b"\x00" in base64.b64decode(case["body_b64"]) for case in CASES)
    assert any(SIGNATURE in case["fields"] for case in CASES)
    assert any(case["security_token"] is not None for case in CASES)
    assert any(case["security_token"] is None for case in CASES)
    assert len(CASES) >= 200


def test_sign_adds_the_access_key_and_token_and_keeps_the_rest() -> None:
    command = request(RequestCode.PULL_MESSAGE, {"topic": "T"}, b"body")
    signed = sign(command, AclCredentials("ak", "sk", "tok"))
    assert signed.ext["topic"] == "T" and signed.ext[ACCESS_KEY] == "ak" and signed.ext[SECURITY_TOKEN] == "tok"
    assert signed.body == b"body" and command.ext == {"topic": "T"}
    assert SECURITY_TOKEN not in sign(command, AclCredentials("ak", "sk")).ext


@given(
    st.dictionaries(st.text(min_size=1), st.text(), max_size=6),
    st.binary(max_size=64),
    st.text(min_size=1).filter(str.strip),
    st.text(),
)
def test_signature_ignores_any_signature_field(fields: dict[str, str], body: bytes, secret: str, stale: str) -> None:
    """The signature covers every field but ``Signature`` itself, so signing a signed request again (a request
    resent after GO_AWAY) gives the same signature."""
    assert signature({**fields, SIGNATURE: stale}, body, secret) == signature(
        {k: v for k, v in fields.items() if k != SIGNATURE}, body, secret
    )


def test_credentials_never_show_the_secret() -> None:
    credentials = AclCredentials("my-access", "s3cr3t-value", "t0ken-value")
    for shown in (repr(credentials), str(credentials), f"{credentials}", f"{credentials!r}"):
        assert "s3cr3t-value" not in shown and "t0ken-value" not in shown
    assert "my-access" in repr(credentials)


@pytest.mark.parametrize(
    ("access_key", "secret_key", "error"),
    [("", "sk", ValueError), ("ak", "  ", ValueError), (None, "sk", TypeError), ("ak", b"sk", TypeError)],
)
def test_blank_or_mistyped_keys_are_refused(access_key: Any, secret_key: Any, error: type[Exception]) -> None:
    with pytest.raises(error, match="access_key|secret_key"):
        AclCredentials(access_key, secret_key)
