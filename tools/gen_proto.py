"""Regenerate ``rocket_rebalance/_proto`` from ``proto/`` (``make proto``), or check it is up to date.

The .proto files under ``proto/`` are the source of truth for the wire; the generated Python is committed so
that installing the library needs no protoc. protoc names Python modules after the proto path
(``rocket_rebalance.v1``); the library ships them as ``rocket_rebalance._proto.v1``, so the import lines of the
generated files are rewritten. The output depends only on the .proto files and the pinned grpcio-tools, so a
test regenerates into a temporary directory and compares byte for byte (``--check`` does the same).

Usage: ``python tools/gen_proto.py [--check] [--out DIR]``
"""

from __future__ import annotations

import argparse
import filecmp
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "proto"
PROTO_PACKAGE = "rocket_rebalance/v1"
OUTPUT = ROOT / "rocket_rebalance" / "_proto"

_INIT_TEXT = '"""Generated protobuf and gRPC code for the rocket-rebalance wire. Do not edit: run `make proto`."""\n'
_IMPORT_FROM = re.compile(r"^from rocket_rebalance\.v1 import ", re.MULTILINE)
_IMPORT_PLAIN = re.compile(r"^import rocket_rebalance\.v1\.", re.MULTILINE)


def proto_files() -> list[Path]:
    """The .proto sources, sorted so that generation order (and so output) never depends on the file system."""
    return sorted((PROTO_ROOT / PROTO_PACKAGE).glob("*.proto"))


def _rewrite_imports(text: str) -> str:
    text = _IMPORT_FROM.sub("from rocket_rebalance._proto.v1 import ", text)
    return _IMPORT_PLAIN.sub("import rocket_rebalance._proto.v1.", text)


def generate(out_dir: Path) -> list[Path]:
    """Generate the package into ``out_dir`` (created), returning the written files relative to it."""
    from grpc_tools import protoc  # dev dependency: imported here so `--help` works without it

    include = Path(protoc.__file__).parent / "_proto"
    with tempfile.TemporaryDirectory(prefix="gen-proto-") as raw:
        raw_dir = Path(raw)
        args = [
            "grpc_tools.protoc",
            f"-I{PROTO_ROOT}",
            f"-I{include}",
            f"--python_out={raw_dir}",
            f"--pyi_out={raw_dir}",
            f"--grpc_python_out={raw_dir}",
            *(str(path.relative_to(PROTO_ROOT)) for path in proto_files()),
        ]
        if protoc.main(args) != 0:
            raise RuntimeError(f"protoc failed: {' '.join(args)}")
        written: list[Path] = []
        target = out_dir / "v1"
        target.mkdir(parents=True, exist_ok=True)
        for package_dir in (out_dir, target):
            (package_dir / "__init__.py").write_text(_INIT_TEXT, encoding="utf-8")
            written.append((package_dir / "__init__.py").relative_to(out_dir))
        for source in sorted((raw_dir / PROTO_PACKAGE).iterdir()):
            text = _rewrite_imports(source.read_text(encoding="utf-8"))
            (target / source.name).write_text(text, encoding="utf-8")
            written.append((target / source.name).relative_to(out_dir))
    return written


def stale_files(committed: Path = OUTPUT) -> list[str]:
    """Files that differ between ``committed`` and a fresh generation (missing, extra or changed)."""
    with tempfile.TemporaryDirectory(prefix="check-proto-") as fresh_raw:
        fresh = Path(fresh_raw)
        expected = {str(path) for path in generate(fresh)}
        present = {
            str(path.relative_to(committed))
            for path in committed.rglob("*")
            if path.is_file() and "__pycache__" not in path.parts
        }
        differing = sorted(present ^ expected)
        for name in sorted(present & expected):
            if not filecmp.cmp(fresh / name, committed / name, shallow=False):
                differing.append(name)
    return differing


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the committed code is stale")
    parser.add_argument("--out", type=Path, default=OUTPUT, help="output package directory")
    args = parser.parse_args(argv)
    if args.check:
        stale = stale_files(args.out)
        for name in stale:
            print(f"stale: {name}", file=sys.stderr)
        return 1 if stale else 0
    for path in generate(args.out):
        print(args.out / path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
