"""The wheel as pip builds it from this tree, with a C compiler and without one.

With one, the wheel carries the compiled decoder of pull answers and is tagged for this interpreter and platform;
without one (``CC`` names a compiler that is not there), the build says so and the wheel is pure Python. Each is
installed into a directory of its own and the decoder's differential tests (``tests/runtime/test_pulled.py``) run
against that installation: the pure one as a pure build (``ROCKET_REBALANCE_PURE_PYTHON=1``, the compiled paths
not there to test), the compiled one in full. pip fetches the build backend (hatchling) as for any user's install.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DECODER = "rocket_rebalance/runtime/transport/_pulled"

pytestmark = pytest.mark.e2e


def build_and_install(work: Path, env: dict[str, str]) -> tuple[Path, Path, str]:
    """The wheel pip builds, the directory it is installed into, and what the build said on stderr."""
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-v", "-w", str(work / "dist"), str(ROOT)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    (wheel,) = (work / "dist").glob("*.whl")
    target = work / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
        env=env,
        check=True,
        capture_output=True,
        timeout=600,
    )
    return wheel, target, built.stdout + built.stderr


def run_decoder_tests(site: Path, work: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """tests/runtime/test_pulled.py (with the suite's hypothesis profile) against the package installed in ``site``,
    from a directory of its own so that this tree's package cannot be imported instead."""
    tests = work / "tests"
    tests.mkdir()
    for name in ("conftest.py", "runtime/test_pulled.py"):
        shutil.copy(ROOT / "tests" / name, tests / Path(name).name)
    check = "import rocket_rebalance, sys; assert rocket_rebalance.__file__.startswith(sys.argv[1]), rocket_rebalance"
    env = {**env, "PYTHONPATH": str(site)}
    subprocess.run([sys.executable, "-c", check, str(site)], env=env, check=True, cwd=tests, timeout=120)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(tests), str(tests)]
    return subprocess.run(command, env=env, cwd=tests, capture_output=True, text=True, timeout=600)


def test_without_a_compiler_the_wheel_is_pure_python_and_its_decoder_tests_pass(tmp_path: Path) -> None:
    env = {**os.environ, "CC": str(tmp_path / "no-such-cc")}
    env.pop("ROCKET_REBALANCE_PURE_PYTHON", None)
    wheel, site, said = build_and_install(tmp_path, env)
    assert wheel.name.endswith("-py3-none-any.whl"), wheel.name
    assert not [name for name in zipfile.ZipFile(wheel).namelist() if name.startswith(DECODER) and name.endswith(".so")]
    assert "no compiled decoder" in said and "a pure-Python build" in said
    probe = "from rocket_rebalance.runtime.transport import pulled; print(pulled.compiled)"
    loaded = subprocess.run(
        [sys.executable, "-c", probe],
        env={**env, "PYTHONPATH": str(site)},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert loaded.stdout.strip() == "None"  # the package runs pure without being told
    ran = run_decoder_tests(site, tmp_path, {**env, "ROCKET_REBALANCE_PURE_PYTHON": "1"})
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    assert " passed" in ran.stdout and " failed" not in ran.stdout


def test_with_a_compiler_the_wheel_carries_the_compiled_decoder_and_its_tests_pass(tmp_path: Path) -> None:
    env = dict(os.environ)
    env.pop("ROCKET_REBALANCE_PURE_PYTHON", None)
    env.pop("CC", None)
    wheel, site, said = build_and_install(tmp_path, env)
    platform_tag = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    assert platform_tag in wheel.name and f"cp{sys.version_info[0]}{sys.version_info[1]}" in wheel.name, wheel.name
    module = f"{DECODER}{sysconfig.get_config_var('EXT_SUFFIX')}"
    assert module in zipfile.ZipFile(wheel).namelist(), said[-2000:]
    ran = run_decoder_tests(site, tmp_path, env)
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    assert " passed" in ran.stdout and "skipped" not in ran.stdout
