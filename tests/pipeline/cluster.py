"""A real Spark standalone cluster on loopback for the tests: one master and N workers, each its own JVM.

Started from the pyspark package's own launcher (``bin/spark-class``), exactly as ``start-master.sh`` and
``start-worker.sh`` would, but in the foreground and in process groups of their own, so that stopping a group also
stops the executors a worker launched (and their Python workers). Everything binds to 127.0.0.1; the logs and the
workers' folders (where each executor leaves ``<app-id>/<executor-id>/``) are in a temporary folder.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["SparkHome", "StandaloneCluster", "free_port", "standalone_cluster"]

STARTUP_SECONDS = 90.0
"""How long the master and its workers may take to be up and registered (two JVMs start on a loaded machine)."""


class SparkHome:
    """The pyspark package's Spark distribution: its ``bin/spark-class`` and ``bin/spark-submit``."""

    def __init__(self) -> None:
        import pyspark

        self.path = Path(pyspark.__file__).parent
        self.spark_class = self.path / "bin" / "spark-class"
        self.spark_submit = self.path / "bin" / "spark-submit"


def free_port() -> int:
    """A port nobody listens on right now (the kernel's choice for port 0)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class StandaloneCluster:
    """A running cluster: its master URL (for ``--master``), its web UI (``/json/`` is the master's state as
    JSON), the workers' folders and the folder of the logs."""

    master_url: str
    web_url: str
    work_dirs: list[Path]
    logs: Path
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def state(self) -> dict[str, Any]:
        """The master's view: workers (``aliveworkers``), running and completed applications with their cores."""
        with urllib.request.urlopen(f"{self.web_url}/json/", timeout=5) as response:
            found: dict[str, Any] = json.load(response)
            return found

    def executor_dirs(self) -> dict[Path, list[Path]]:
        """Per worker folder, the executor folders it created (``<app-id>/<executor-id>``): proof an executor ran
        on that worker."""
        return {work: sorted(p for p in work.glob("app-*/*") if p.is_dir()) for work in self.work_dirs}

    def log_tail(self, lines: int = 30) -> str:
        """The end of every log, for a failure message."""
        parts = []
        for log in sorted(self.logs.glob("*.log")):
            text = log.read_text(errors="replace").splitlines()[-lines:]
            parts.append(f"--- {log.name}\n" + "\n".join(text))
        return "\n".join(parts)


def _start(home: SparkHome, name: str, args: list[str], logs: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """One daemon in the foreground, in its own process group (``spark-class`` execs the JVM in it)."""
    with (logs / f"{name}.log").open("wb") as log:
        return subprocess.Popen(
            [str(home.spark_class), *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the process group (the daemon, its executors and their Python workers), then SIGKILL to what is
    left of it."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(20)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


@contextmanager
def standalone_cluster(
    base: Path, workers: int = 2, cores: int = 1, memory: str = "1g", env: dict[str, str] | None = None
) -> Iterator[StandaloneCluster]:
    """A master and ``workers`` workers on 127.0.0.1 (``cores`` and ``memory`` each), up and registered when this
    yields, and stopped (process groups) when it exits, whatever happened. ``env`` is passed to the daemons, and
    so to the executors they launch."""
    home = SparkHome()
    logs = base / "logs"
    logs.mkdir(parents=True)
    daemon_env = {
        **os.environ,
        **(env or {}),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_HOME": str(home.path),
        "SPARK_DAEMON_MEMORY": "512m",
    }
    port, web_port = free_port(), free_port()
    cluster = StandaloneCluster(
        f"spark://127.0.0.1:{port}",
        f"http://127.0.0.1:{web_port}",
        [base / f"worker-{i}" for i in range(workers)],
        logs,
    )
    with ExitStack() as stack:
        master = _start(
            home,
            "master",
            ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port)]
            + ["--webui-port", str(web_port)],
            logs,
            daemon_env,
        )
        stack.callback(_stop, master)
        cluster.processes.append(master)
        for i, work in enumerate(cluster.work_dirs):
            work.mkdir()
            worker = _start(
                home,
                f"worker-{i}",
                ["org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--webui-port", "0"]
                + ["--cores", str(cores), "--memory", memory, "--work-dir", str(work), cluster.master_url],
                logs,
                daemon_env,
            )
            stack.callback(_stop, worker)  # stopped before the master (callbacks run last in, first out)
            cluster.processes.append(worker)
        _wait_for_workers(cluster, workers)
        yield cluster


def _wait_for_workers(cluster: StandaloneCluster, workers: int) -> None:
    """Until the master lists ``workers`` live workers; a daemon that exits or a slow start is an error with the
    logs' tails."""
    deadline = time.monotonic() + STARTUP_SECONDS
    alive = 0
    while time.monotonic() < deadline:
        exited = [p.args for p in cluster.processes if p.poll() is not None]
        if exited:
            raise RuntimeError(f"a Spark daemon exited while starting: {exited}\n{cluster.log_tail()}")
        try:
            alive = int(cluster.state().get("aliveworkers", 0))
        except (OSError, urllib.error.URLError, ValueError):
            alive = 0  # the master's web UI is not up yet
        if alive == workers:
            return
        time.sleep(0.5)
    raise RuntimeError(
        f"{alive} of {workers} Spark workers registered after {STARTUP_SECONDS:.0f} s\n{cluster.log_tail()}"
    )
