"""The committed generated code must be exactly what `make proto` produces from proto/."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path
from types import ModuleType

from tests.stub.harness import REPO_ROOT


def load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_proto", REPO_ROOT / "tools" / "gen_proto.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_generated_code_is_up_to_date() -> None:
    generator = load_generator()
    assert generator.stale_files() == [], "run `make proto` and commit rocket_rebalance/_proto"


def test_staleness_is_detected(tmp_path: Path) -> None:
    """The check above can fail: an edited, a missing and an extra file are each reported."""
    generator = load_generator()
    copy = tmp_path / "_proto"
    shutil.copytree(generator.OUTPUT, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "v1" / "broker_pb2.py").write_text("# edited\n", encoding="utf-8")
    (copy / "v1" / "admin_pb2.pyi").unlink()
    (copy / "v1" / "leftover_pb2.py").write_text("", encoding="utf-8")
    assert generator.stale_files(copy) == ["v1/admin_pb2.pyi", "v1/leftover_pb2.py", "v1/broker_pb2.py"]


def test_generated_imports_live_under_the_library_package() -> None:
    for path in (REPO_ROOT / "rocket_rebalance" / "_proto").rglob("*.py*"):
        text = path.read_text(encoding="utf-8")
        assert "from rocket_rebalance.v1 " not in text and "import rocket_rebalance.v1." not in text, path
    from rocket_rebalance._proto.v1 import admin_pb2_grpc, broker_pb2_grpc, namesrv_pb2_grpc

    assert {"HeartBeat", "Connect", "PullMessage"} <= set(dir(broker_pb2_grpc.BrokerStub(_FakeChannel())))
    assert hasattr(admin_pb2_grpc, "AdminStub") and hasattr(namesrv_pb2_grpc, "NameServerStub")


class _FakeChannel:
    """Only records method paths: enough to build a stub object without a network."""

    def _method(self, path: str, **kwargs: object) -> str:
        return path

    unary_unary = unary_stream = stream_unary = stream_stream = _method


def test_every_proto_file_is_under_the_versioned_package() -> None:
    generator = load_generator()
    names = [path.name for path in generator.proto_files()]
    assert names == ["admin.proto", "broker.proto", "common.proto", "namesrv.proto"]
    for path in generator.proto_files():
        assert "package rocket_rebalance.v1;" in path.read_text(encoding="utf-8")
