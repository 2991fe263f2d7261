"""Runtime tests run against a real in-process stub: reuse its fixture."""

from tests.stub.conftest import start_stub

__all__ = ["start_stub"]
