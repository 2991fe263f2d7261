"""The wheel's build hook: compiles the optional decoder of pull answers (``rocket_rebalance/runtime/transport/
_pulled.c``, see :mod:`rocket_rebalance.runtime.transport.pulled`) where a C compiler and Python's headers are.

Without them (or when the compiler fails: ``CC=false`` makes a pure wheel), the hook says so in one line and
the wheel is pure Python: it installs and works everywhere, decoding in Python. With them the wheel is tagged for
this interpreter and platform. An editable install (``pip install -e``, ``make``) builds the module beside its
source, where the package is imported from; a regular wheel carries it. ``python hatch_build.py`` builds it in place
without pip (a worktree, after editing the C source).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

SOURCE = Path("rocket_rebalance/runtime/transport/_pulled.c")


def compile_decoder(root: Path, out_dir: Path) -> Path | None:
    """The compiled module in ``out_dir``, or None (said on stderr) when it cannot be built here."""
    target = out_dir / f"_pulled{sysconfig.get_config_var('EXT_SUFFIX') or '.so'}"
    compiler = shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")
    flags = ["-undefined", "dynamic_lookup"] if sys.platform == "darwin" else []
    include = sysconfig.get_paths()["include"]
    command = [*compiler, "-O2", "-fPIC", "-shared", *flags, f"-I{include}", str(root / SOURCE), "-o", str(target)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as error:
        reason = str(error)
    else:
        if done.returncode == 0:
            return target
        reason = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
    print(f"rocket-rebalance: no compiled decoder ({reason}); a pure-Python build", file=sys.stderr)
    return None


try:
    from hatchling.builders.hooks.plugin.interface import BuildHookInterface
except ImportError:  # run as a script, without hatchling
    BuildHookInterface = object


class DecoderBuildHook(BuildHookInterface):  # type: ignore[misc]
    """Hatchling's hook for the wheel target (``[tool.hatch.build.targets.wheel.hooks.custom]``)."""

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        root = Path(self.root)
        if version == "editable":
            compile_decoder(root, root / SOURCE.parent)
            return
        built = compile_decoder(root, Path(tempfile.mkdtemp(prefix="rr-decoder-")))
        if built is not None:
            build_data["force_include"][str(built)] = str(SOURCE.parent / built.name)
            build_data["pure_python"] = False
            build_data["infer_tag"] = True


if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    sys.exit(0 if compile_decoder(here, here / SOURCE.parent) else 1)
