"""Consume as fast as the Java client? Throughput and CPU per message on a real RocketMQ broker, beside Java.

Run: ``.venv/bin/python benchmarks/throughput.py [--count 200000] [--reps 3]`` (Java 17 and Maven; the jars are
fetched once). One real NameServer and broker; a topic of 8 queues preloaded with ``--count`` messages of 128 bytes
by the Java producer; then, per repetition, each consumer drains the whole topic in a fresh group from the first
offset, alone, in its own process, with a listener that only counts. The kinds run interleaved (Java, ours, Java,
ours ...), in turn the other way round at every other repetition, so both see the same machine minutes and
neither is always the second of a pair. Per kind, medians over the repetitions of:

* msgs/s: messages over the time from ``start()`` to the last message;
* after first: messages per second from the first message to the last (steady state, without start-up);
* CPU s/10k: the consumer process's CPU seconds (all threads) per 10,000 messages, ``start()`` to the last;
* RSS MiB: the process's peak resident memory (VmHWM);

and each ratio to the Java consumer of the same mode (concurrent or orderly) in the same run. ``--body`` sets the
bodies' size; with ``--compress`` (``none``, ``ZLIB``, ``LZ4``, ``ZSTD``) there is a topic per compression instead,
preloaded one message at a time by the Java producer (``Producer.java``) with that ``compressType`` (``none``: its
threshold set past the body), and every mode is run on each (the mode's name says which): what decoding each
compression costs the consumers, Java's and ours, in the same run. Every run checks
correctness: the consumer counts exactly ``--count`` messages (waiting a second after the last for any extra),
and after its shutdown the broker's committed offset of every queue is the queue's max offset.

Kinds: ``java`` (``DefaultMQPushConsumer``, the client's defaults, ``consumeMessageBatchMaxSize`` set to the
batch), ``py`` (our ``PushConsumer`` with its defaults and the fenced handover), ``py-nofence`` (the fence off),
``py-pure`` (``py`` decoding pull answers in pure Python, ``ROCKET_REBALANCE_PURE_PYTHON=1``: a package built without
a C compiler), ``py-2proc`` (two ``py`` processes in one group, started together, sharing the queues: what a
second core buys; one run from the first start to the last message of either, CPU and memory summed),
``py-pinned`` (``py`` with ``EngineSettings(pin_cpu=...)``: its own threads kept to the last CPU this process may
use), ``py-pull-pinned`` (``py-pull`` so, its polling thread kept there too, as the docs advise) and
``py-2proc-pinned`` (``py-2proc`` with each process kept to a CPU of its own),
``py-metrics`` (``py`` with metrics on, ``PushConsumer(metrics=registry)``, scraped every second as a busy
Prometheus would: what metrics cost, against ``py`` in the same run), ``py-async`` (``AsyncPushConsumer`` with an
``async def`` listener, on one event loop), ``py-pull`` and ``py-async-pull`` (``PullConsumer`` and
``AsyncPullConsumer``, polling batches of 32 with auto-commit; concurrent modes only), and ``py-base`` (``py`` as
the commit given by ``--baseline`` had it, from ``git archive``: the previous code in the same run; likewise
``py-base-async``, ``py-base-pull`` and ``py-base-async-pull``, each printed against its kind of today in a
table of per-repetition ratios); modes:
concurrent with listener batches of 1 and 32, orderly with batches of 1. ``--metrics`` adds ``py-metrics`` to the
kinds run.

To see where our consumer's time goes, run one under a sampling profiler (py-spy, installed apart), e.g.
``py-spy record --gil --idle -o profile.txt -f raw -- .venv/bin/python benchmarks/throughput.py consumer
--namesrv ADDR --topic ThroughputTopic --group G --expect 200000`` against a topic preloaded on a cluster kept
running (``RocketMQCluster`` of ``rocket_rebalance.lab.rocketmq`` in a ``with`` block, its ``namesrv_address``).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import itertools
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rocket_rebalance.lab.rocketmq import JAVA_DIR, RocketMQCluster, java_produce
from rocket_rebalance.model import MessageQueue

if TYPE_CHECKING:
    from rocket_rebalance import Message

TOPIC = "ThroughputTopic"
QUEUES = 8
BODY = 128
SOAK_WORK_MS = 20
SOAK_SAMPLE = 10


@dataclass(frozen=True)
class Mode:
    name: str
    batch: int
    orderly: bool = False


MODES = (Mode("concurrent b1", 1), Mode("concurrent b32", 32), Mode("orderly b1", 1, orderly=True))
KINDS = (
    "java",
    "py",
    "py-nofence",
    "py-pure",
    "py-metrics",
    "py-async",
    "py-pull",
    "py-async-pull",
    "py-base",
    "py-base-async",
    "py-base-pull",
    "py-base-async-pull",
    "py-2proc",
    "py-pinned",
    "py-pull-pinned",
    "py-2proc-pinned",
)
DECODER_SOURCE = "rocket_rebalance/runtime/transport/_pulled.c"  # a baseline that has it runs it compiled
BASE = "py-base"  # a kind starting so runs the --baseline commit's code: py-base-pull is py-pull as it was
APIS = {"py-async": "async-push", "py-pull": "pull", "py-async-pull": "async-pull"}
DEFAULT_KINDS = ("java", "py", "py-nofence")
SCRAPE_INTERVAL = 1.0  # seconds between the scrapes of py-metrics
PROCESSES = {"py-2proc": 2}  # kinds that are several ``py`` processes in one group
PINNED = "-pinned"  # a kind ending so is the kind before it with EngineSettings(pin_cpu=...), see _cpus
IDLE_END = 2.0  # seconds without a message after which a consumer of a several-process kind ends


@dataclass
class Run:
    seconds: float
    steady: float
    cpu: float
    rss_mib: float
    started: float = 0.0  # wall clock at STARTING, to combine the runs of several processes


@dataclass
class Tally:
    runs: dict[tuple[str, str], list[Run]] = field(default_factory=dict)

    def add(self, kind: str, mode: str, run: Run) -> None:
        self.runs.setdefault((kind, mode), []).append(run)


def _java(lib: Path, *args: str) -> list[str]:
    """The Java client as a user runs it: the default JIT and collector, a heap big enough not to matter."""
    return ["java", "-Xms256m", "-Xmx512m", "-cp", f"{lib}/*", str(JAVA_DIR / "Throughput.java"), *args]


def _ours(*args: str) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), "consumer", *args]


def _baseline(commit: str, work: Path) -> dict[str, str]:
    """The environment that runs ``commit``'s package instead of this tree's: its ``rocket_rebalance`` extracted
    with ``git archive`` and put first on the path, with its compiled decoder built as an install would (by this
    tree's build hook), where it has one: the previous code as users run it, not its pure-Python fallback."""
    tree = work / f"baseline-{commit}"
    tree.mkdir()
    root = Path(__file__).resolve().parents[1]
    archive = subprocess.run(["git", "-C", str(root), "archive", commit, "rocket_rebalance"], capture_output=True)
    if archive.returncode != 0:
        raise SystemExit(f"git archive {commit}: {archive.stderr.decode().strip()}")
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
    hook = importlib.util.spec_from_file_location("hatch_build", root / "hatch_build.py")
    if (tree / DECODER_SOURCE).exists() and hook is not None and hook.loader is not None:
        build = importlib.util.module_from_spec(hook)
        hook.loader.exec_module(build)
        build.compile_decoder(tree, (tree / DECODER_SOURCE).parent)
    return {**os.environ, "PYTHONPATH": str(tree)}


def _rss_mib(pid: int, field: str = "VmRSS") -> float:
    """A process's resident memory now (``VmRSS``) or at its peak (``VmHWM``), from /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _drain(command: list[str], count: int, log: Path, env: dict[str, str] | None = None) -> tuple[Run, int]:
    """Run one consumer until it prints STOPPED; its timings, and how many messages it counted in all."""
    marks: dict[str, dict[str, float]] = {}
    rss = float("nan")
    with log.open("wb") as errors:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=errors, text=True, env=env)
        assert process.stdout is not None
        watchdog = threading.Timer(60 + count / 1000, process.kill)  # a consumer that hangs fails the run
        watchdog.start()
        counted = -1
        for line in process.stdout:
            kind, _, payload = line.strip().partition(" ")
            if kind in ("STARTING", "FIRST", "DONE"):
                marks[kind] = json.loads(payload)
                if kind == "DONE":
                    rss = _rss_mib(process.pid, "VmHWM")
            elif kind == "STOPPED":
                counted = int(json.loads(payload)["count"])
        watchdog.cancel()
        if process.wait(60) != 0 or set(marks) != {"STARTING", "FIRST", "DONE"}:
            raise SystemExit(f"consumer failed (exit {process.returncode}); see {log}")
    start, first, done = marks["STARTING"], marks["FIRST"], marks["DONE"]
    run = Run(
        seconds=done["wall"] - start["wall"],
        steady=(done["wall"] - first["wall"]),
        cpu=done["cpu"] - start["cpu"],
        rss_mib=rss,
        started=start["wall"],
    )
    return run, counted


def _drain_group(commands: list[list[str]], count: int, logs: list[Path]) -> tuple[Run, int]:
    """Several consumers of one group, started together, each in its own process (a ``--until-idle`` one: it ends
    once no message came for a while, its DONE mark at its last message): one run from the first start to the last
    message of any, CPU and peak memory summed, and how many messages they counted together (exactly ``count``:
    nothing delivered twice as the queues are shared out between them)."""
    with ThreadPoolExecutor(len(commands)) as pool:  # leaving it waits for every process, a failed one too
        drains = [pool.submit(_drain, command, count, log) for command, log in zip(commands, logs, strict=True)]
    runs = [drain.result() for drain in drains]  # a consumer's failure (SystemExit) ends the benchmark here
    starts = [run.started for run, _ in runs]
    firsts = [run.started + run.seconds - run.steady for run, _ in runs]
    dones = [run.started + run.seconds for run, _ in runs]
    run = Run(
        seconds=max(dones) - min(starts),
        steady=max(dones) - min(firsts),
        cpu=sum(run.cpu for run, _ in runs),
        rss_mib=sum(run.rss_mib for run, _ in runs),
    )
    return run, sum(counted for _, counted in runs)


def _check_offsets(cluster: RocketMQCluster, group: str, topic: str = TOPIC, strict: bool = True) -> None:
    """Every queue's committed offset is its max offset: the group consumed everything and said so. Not
    ``strict`` (the baseline's code): reported, not fatal; code before the offset-write fix of issue 23 loses a
    queue's only offset write now and then (RocketMQ's unlocked first write of a group's offset table)."""
    transport = cluster.transport()
    try:
        queues = [MessageQueue(topic, "broker-a", queue) for queue in range(QUEUES)]
        committed = transport.query_offsets("broker-a", group, queues)
        behind = {str(mq): (committed[mq], transport.max_offset(mq)) for mq in queues}
        behind = {mq: pair for mq, pair in behind.items() if pair[0] != pair[1]}
    finally:
        transport.close()
    if behind and strict:
        raise SystemExit(f"group {group}: committed offsets differ from the max offsets: {behind}")
    if behind:
        print(f"  (baseline) group {group}: committed offsets differ from the max offsets: {behind}", flush=True)


def _soak(args: argparse.Namespace) -> int:
    """Memory with every queue full: Java's consumer and ours side by side, each in its own group on one deep
    backlog, with a listener that sleeps ``SOAK_WORK_MS`` per message so pulls run ahead until flow control stops
    them; each process's resident memory every ``SOAK_SAMPLE`` seconds for ``--soak`` seconds."""
    work = Path(tempfile.mkdtemp(prefix="rr-soak-"))
    backlog = args.soak * 1000 + 100_000  # more than either drains: 20 threads x 1 message per 20 ms each
    with RocketMQCluster(work / "cluster") as cluster:
        assert cluster.lib is not None
        cluster.create_topic(TOPIC, QUEUES)
        _produce(cluster, backlog)
        common = ["--namesrv", cluster.namesrv_address, "--topic", TOPIC, "--expect", str(10**12)]
        common += ["--work-ms", str(SOAK_WORK_MS)]
        kinds = {
            "java": _java(cluster.lib, "consume", *common, "--group", "rr-soak-java"),
            "py": _ours(*common, "--group", "rr-soak-py"),
        }
        logs = {kind: (work / f"soak-{kind}.log").open("wb") for kind in kinds}
        processes = {
            kind: subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=logs[kind])
            for kind, command in kinds.items()
        }
        samples: list[tuple[float, dict[str, float]]] = []
        began = time.monotonic()
        try:
            while time.monotonic() - began < args.soak:
                time.sleep(SOAK_SAMPLE)
                if any(process.poll() is not None for process in processes.values()):
                    raise SystemExit(f"a consumer ended early; see {work}")
                rss = {kind: _rss_mib(process.pid) for kind, process in processes.items()}
                samples.append((time.monotonic() - began, rss))
                print(
                    f"  {samples[-1][0]:6.0f} s  " + "  ".join(f"{k} {v:6.1f} MiB" for k, v in rss.items()), flush=True
                )
        finally:
            for process in processes.values():
                process.kill()
                process.wait()
            for log in logs.values():
                log.close()
    print(
        f"\n{date.today()} {platform.machine()} {os.cpu_count()} cores; {QUEUES} full queues for {args.soak} s, "
        f"listener {SOAK_WORK_MS} ms per message, {SOAK_SAMPLE} s samples"
    )
    print("| kind | RSS after 1 min MiB | RSS at the end MiB | max MiB | growth after 1 min |")
    print("|---|---|---|---|---|")
    settled = next((rss for at, rss in samples if at >= 60), samples[0][1])
    for kind in kinds:
        values = [rss[kind] for _, rss in samples]
        print(
            f"| {kind} | {settled[kind]:.1f} | {values[-1]:.1f} | {max(values):.1f} | "
            f"{values[-1] - settled[kind]:+.1f} |"
        )
    return 0


def _produce(cluster: RocketMQCluster, count: int, body: int = BODY, topic: str = TOPIC, compress: str = "") -> None:
    """Preload ``topic``: in batches of 256 (a batch is never compressed), or with ``compress`` one message at a
    time by the lab's Java producer with that ``compressType`` (``none``: under its size threshold)."""
    assert cluster.lib is not None
    if compress:
        step = f"mode=single,compress={'ZLIB' if compress == 'none' else compress},count={count},size={body}"
        if compress == "none":
            step += f",over={2**31 - 1}"
        began = time.monotonic()
        java_produce(
            cluster.lib, cluster.work_dir / "producer", cluster.namesrv_address, topic, [step], 600 + count / 100
        )
        print(f"PRODUCED {count} to {topic} one by one in {time.monotonic() - began:.0f} s", flush=True)
        return
    command = ["produce", "--namesrv", cluster.namesrv_address, "--topic", topic, "--count", str(count)]
    produced = subprocess.run(
        _java(cluster.lib, *command, "--size", str(body)), capture_output=True, text=True, check=True
    ).stdout
    print(next(line for line in produced.splitlines() if line.startswith("PRODUCED")), flush=True)


def _bench(args: argparse.Namespace) -> int:
    work = Path(tempfile.mkdtemp(prefix="rr-throughput-"))
    tally = Tally()
    with RocketMQCluster(work / "cluster") as cluster:
        assert cluster.lib is not None
        topics = {"": TOPIC} if not args.compress else {c: f"{TOPIC}{c.capitalize()}" for c in args.compress}
        for compress, topic in topics.items():
            cluster.create_topic(topic, QUEUES)
            _produce(cluster, args.count, args.body, topic, compress)
        modes = [mode for mode in MODES if mode.name in args.modes]
        labelled = [replace(mode, name=f"{mode.name} {compress}".strip()) for mode in modes for compress in topics]
        baseline = _baseline(args.baseline, work) if any(k.startswith(BASE) for k in args.kinds) else None
        for rep, mode, (compress, topic) in itertools.product(range(args.reps), modes, topics.items()):
            label = f"{mode.name} {compress}".strip()
            # Alternate the order: the second of two back-to-back drains runs measurably faster here (5-13%,
            # 2026-11-28), so a fixed order would favour whichever kind comes second.
            for kind in args.kinds if rep % 2 == 0 else reversed(args.kinds):
                plain = kind.removesuffix(PINNED)
                api = APIS.get(_today(plain))
                if (kind == "py-nofence" or api in ("pull", "async-pull")) and mode.orderly:
                    continue  # orderly consumers always lock; pull consumers are not orderly
                group = f"rr-tp-{kind}-{mode.batch}{'o' if mode.orderly else 'c'}{compress}-{rep}-{time.time_ns()}"
                common = [
                    "--namesrv",
                    cluster.namesrv_address,
                    "--topic",
                    topic,
                    "--group",
                    group,
                    "--expect",
                    str(args.count),
                    "--batch",
                    str(mode.batch),
                ]
                if mode.orderly:
                    common.append("--orderly")
                if kind == "java":
                    command = _java(cluster.lib, "consume", *common)
                else:
                    command = _ours(
                        *common,
                        *(["--no-fence"] if kind == "py-nofence" else []),
                        *(["--metrics"] if kind == "py-metrics" else []),
                        *(["--api", api] if api else []),
                    )
                env = baseline if kind.startswith(BASE) else None
                if kind == "py-pure":
                    from rocket_rebalance.runtime.transport.pulled import PURE_PYTHON_ENV  # not in a baseline's tree

                    env = {**os.environ, PURE_PYTHON_ENV: "1"}
                processes = PROCESSES.get(plain, 1)
                commands = [command] * processes
                if kind.endswith(PINNED):
                    commands = [[*command, "--pin-cpu", str(cpu)] for cpu in _cpus(processes)]
                if processes > 1:
                    logs = [work / f"{group}-{index}.log" for index in range(processes)]
                    run, counted = _drain_group(
                        [[*c, "--until-idle", str(IDLE_END)] for c in commands], args.count, logs
                    )
                else:
                    run, counted = _drain(commands[0], args.count, work / f"{group}.log", env)
                if counted != args.count:
                    raise SystemExit(f"{kind} {label}: counted {counted} of {args.count} messages")
                _check_offsets(cluster, group, topic, strict=not kind.startswith(BASE))
                tally.add(kind, label, run)
                print(
                    f"  rep {rep} {kind:<10} {label:<20} {args.count / run.seconds:>9,.0f} msgs/s "
                    f"{run.cpu / args.count * 1e4:.2f} CPU s/10k {run.rss_mib:.0f} MiB",
                    flush=True,
                )
    _print_table(tally, args.count, args.body, labelled, args.kinds, args.reps)
    if "py" in args.kinds and "py-metrics" in args.kinds:
        _print_metrics_cost(tally, args.count, labelled)
    _print_against_baseline(tally, labelled, args.kinds, args.baseline)
    return 0


def _cpus(count: int) -> list[int]:
    """The CPUs of ``count`` pinned processes, one each: the last ones this process may run on (the first is
    where the system's own work tends to go)."""
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < count:
        raise SystemExit(f"{count} pinned processes need {count} CPUs; this process may use {len(allowed)}")
    return allowed[-count:]


def _today(kind: str) -> str:
    """The kind a baseline kind runs as it was (``py-base-pull`` -> ``py-pull``); any other kind as it is."""
    return "py" + kind.removeprefix(BASE) if kind.startswith(BASE) else kind


def _print_against_baseline(tally: Tally, modes: list[Mode], kinds: list[str], baseline: str) -> None:
    """Each of our kinds against the same kind on the baseline's code, same mode, same run: each repetition's
    ratio of the two runs that ran back to back (interleaved), then the median of those ratios; from start, in
    the steady state (first message to last), and CPU per message."""
    pairs = [(_today(kind), kind) for kind in kinds if kind.startswith(BASE) and _today(kind) in kinds]
    if not pairs:
        return
    print(f"\nagainst {baseline} (same kind, same run; medians of per-repetition ratios, > 1 is faster or cheaper)")
    print("| kind | mode | msgs/s x base | after first x base | CPU s/10k base / ours |")
    print("|---|---|---|---|---|")
    for mode in modes:
        for ours, base in pairs:
            now, then = tally.runs.get((ours, mode.name), []), tally.runs.get((base, mode.name), [])
            if not now or not then:
                continue
            pairs_run = list(zip(now, then, strict=False))
            rate = statistics.median(was.seconds / run.seconds for run, was in pairs_run)
            steady = statistics.median(was.steady / run.steady for run, was in pairs_run)
            cpu = statistics.median(was.cpu / run.cpu for run, was in pairs_run)
            print(f"| {ours} | {mode.name} | {rate:.3f} | {steady:.3f} | {cpu:.3f} |")


def _print_metrics_cost(tally: Tally, count: int, modes: list[Mode]) -> None:
    """Metrics on against off, same mode, same run: each repetition's py-metrics over its py (they ran back to
    back), then the median of those ratios."""
    print("\n| mode | msgs/s metrics on / off | CPU s/10k metrics on / off |")
    print("|---|---|---|")
    for mode in modes:
        on, off = tally.runs.get(("py-metrics", mode.name), []), tally.runs.get(("py", mode.name), [])
        if on and off:
            rates = [run_off.seconds / run_on.seconds for run_on, run_off in zip(on, off, strict=False)]
            cpus = [run_on.cpu / run_off.cpu for run_on, run_off in zip(on, off, strict=False)]
            print(f"| {mode.name} | {statistics.median(rates):.3f} | {statistics.median(cpus):.3f} |")


def _print_table(tally: Tally, count: int, body: int, modes: list[Mode], kinds: list[str], reps: int) -> None:
    print(
        f"\n{date.today()} {platform.machine()} {os.cpu_count()} cores; {count:,} messages of {body} B in "
        f"{QUEUES} queues, one consumer, medians of {reps}; ratios to Java in the same mode"
    )
    print("| kind | mode | msgs/s | x Java | after first | x Java | CPU s/10k | x Java | peak RSS MiB |")
    print("|---|---|---|---|---|---|---|---|---|")
    for mode in modes:
        java = tally.runs.get(("java", mode.name))
        base = None if not java else _medians(java, count)
        for kind in kinds:
            runs = tally.runs.get((kind, mode.name))
            if not runs:
                continue
            rate, steady, cpu, rss = _medians(runs, count)
            java_rate, java_steady, java_cpu, _ = base or (math.nan, math.nan, math.nan, math.nan)
            print(
                f"| {kind} | {mode.name} | {rate:,.0f} | {rate / java_rate:.2f} | {steady:,.0f} | "
                f"{steady / java_steady:.2f} | {cpu:.2f} | {cpu / java_cpu:.2f} | {rss:.0f} |"
            )


def _medians(runs: list[Run], count: int) -> tuple[float, float, float, float]:
    return (
        statistics.median(count / run.seconds for run in runs),
        statistics.median((count - 1) / run.steady for run in runs),
        statistics.median(run.cpu / count * 1e4 for run in runs),
        statistics.median(run.rss_mib for run in runs),
    )


def _engine_settings() -> Any:
    """The consumer's ``EngineSettings`` class, where the code running has it: ``runtime.settings`` since issue 36,
    ``runtime.engine`` in a ``py-base`` baseline from before."""
    try:
        from rocket_rebalance.runtime import settings
    except ImportError:
        from rocket_rebalance.runtime import engine as settings  # type: ignore[no-redef]
    return settings.EngineSettings


def _pinned(args: argparse.Namespace) -> dict[str, int]:
    """``pin_cpu`` for the settings when ``--pin-cpu`` asks for it (a baseline from before has no such setting)."""
    return {} if args.pin_cpu is None else {"pin_cpu": args.pin_cpu}


def _consumer(args: argparse.Namespace) -> int:
    """One of our consumers, as the Java program behaves: count, report, shut down. Its log (stderr) starts with
    the package it runs, so a ``py-base`` run can be seen to run the baseline's code."""
    import rocket_rebalance

    print(f"package {rocket_rebalance.__file__}", file=sys.stderr, flush=True)
    from rocket_rebalance.model import ConsumeFromWhere
    from rocket_rebalance.runtime.consumer import PushConsumer

    engine_settings = _engine_settings()

    count = [0]
    last = [0.0]  # wall clock of the last message (--until-idle)
    lock = threading.Lock()
    done = threading.Event()

    def mark(kind: str) -> None:
        print(f"{kind} {json.dumps({'wall': time.time(), 'cpu': time.process_time()})}", flush=True)

    def listener(batch: list[Message]) -> None:
        if args.work_ms:
            time.sleep(args.work_ms / 1000)
        with lock:
            before = count[0]
            count[0] += len(batch)
            if args.until_idle:
                last[0] = time.time()
        if before == 0:
            mark("FIRST")
        if before < args.expect <= before + len(batch):
            done.set()

    if args.api != "push":
        return _other_api(args, mark)
    registry = None
    if args.metrics:
        from prometheus_client import CollectorRegistry, generate_latest

        registry = CollectorRegistry()
        scraped = threading.Event()

        def scrape() -> None:  # what a Prometheus server asking every second costs the consumer
            while not scraped.wait(SCRAPE_INTERVAL):
                generate_latest(registry)

        threading.Thread(target=scrape, daemon=True).start()
    consumer = PushConsumer(
        args.namesrv,
        args.group,
        topics=[args.topic],
        listener=listener,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        consume_orderly=args.orderly,
        fenced_handover=not args.no_fence,
        settings=engine_settings(consume_message_batch_max_size=args.batch, **_pinned(args)),
        metrics=registry if registry is not None else False,
    )
    mark("STARTING")
    consumer.start()
    if args.until_idle:
        while not last[0] or time.time() - last[0] < args.until_idle:
            time.sleep(0.1)
        print(f"DONE {json.dumps({'wall': last[0], 'cpu': time.process_time()})}", flush=True)
    else:
        done.wait()
        mark("DONE")
    if registry is not None:
        scraped.set()
    time.sleep(1)  # anything consumed twice would show up in the count meanwhile
    clean = consumer.shutdown()
    print(f"STOPPED {json.dumps({'count': count[0], 'clean': clean, 'state': consumer.describe()})}", flush=True)
    return 0


def _other_api(args: argparse.Namespace, mark: Callable[[str], None]) -> int:
    """The same drain with the asyncio push consumer, or a pull consumer (threaded or asyncio) polling batches of
    32: counted as the push listener counts, ``FIRST`` at the first message and ``DONE`` at the last."""
    from rocket_rebalance import AsyncPullConsumer, AsyncPushConsumer, ConsumeFromWhere, PullConsumer

    engine_settings = _engine_settings()

    options: dict[str, Any] = {
        "topics": [args.topic],
        "consume_from_where": ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        "fenced_handover": not args.no_fence,
        "settings": engine_settings(consume_message_batch_max_size=args.batch, **_pinned(args)),
    }
    count = 0

    def counted(messages: int) -> bool:
        nonlocal count
        if count == 0 and messages:
            mark("FIRST")
        count += messages
        return count >= args.expect

    if args.api == "pull":
        if args.pin_cpu is not None:  # the thread that polls on the consumer's CPU too, as the docs tell its users
            os.sched_setaffinity(0, {args.pin_cpu})
        mark("STARTING")
        with PullConsumer(args.namesrv, args.group, **options) as consumer:
            while not counted(len(consumer.poll(32))):
                pass
            mark("DONE")
            time.sleep(1)  # anything polled twice would show up in the count meanwhile
            counted(len(consumer.poll(32, timeout=0)))
        print(f"STOPPED {json.dumps({'count': count})}", flush=True)
        return 0

    async def drain() -> None:
        if args.api == "async-pull":
            mark("STARTING")
            async with AsyncPullConsumer(args.namesrv, args.group, **options) as pulling:
                while not counted(len(await pulling.poll(32))):
                    pass
                mark("DONE")
                await asyncio.sleep(1)
                counted(len(await pulling.poll(32, timeout=0)))
            return
        done = asyncio.Event()

        async def listener(batch: list[Message]) -> None:
            if counted(len(batch)):
                done.set()

        mark("STARTING")
        async with AsyncPushConsumer(args.namesrv, args.group, listener=listener, **options):
            await done.wait()
            mark("DONE")
            await asyncio.sleep(1)

    asyncio.run(drain())
    print(f"STOPPED {json.dumps({'count': count})}", flush=True)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command")
    sub.required = False
    consumer = sub.add_parser("consumer", help="(internal) one of our consumers, run by the benchmark")
    consumer.add_argument("--namesrv", required=True)
    consumer.add_argument("--topic", required=True)
    consumer.add_argument("--group", required=True)
    consumer.add_argument("--expect", type=int, required=True)
    consumer.add_argument("--batch", type=int, default=1)
    consumer.add_argument("--orderly", action="store_true")
    consumer.add_argument("--no-fence", action="store_true")
    consumer.add_argument("--work-ms", type=int, default=0, help="the listener sleeps this long per call")
    consumer.add_argument("--metrics", action="store_true", help="metrics on, scraped every second")
    consumer.add_argument("--pin-cpu", type=int, help="EngineSettings(pin_cpu=...): the consumer's threads on this CPU")
    consumer.add_argument("--api", choices=["push", *APIS.values()], default="push")
    consumer.add_argument(
        "--until-idle",
        type=float,
        metavar="SECONDS",
        help="one of several processes of a group: end once no message came for this long, DONE at the last one",
    )
    parser.add_argument("--count", type=int, default=200_000)
    parser.add_argument("--soak", type=int, metavar="SECONDS", help="instead: memory with full queues over a long run")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--kinds", nargs="+", choices=KINDS, default=list(DEFAULT_KINDS))
    parser.add_argument("--metrics", action="store_true", help="run py-metrics too: py with metrics on")
    parser.add_argument("--baseline", default="6ff7c78", help="the commit py-base runs (default: before issue 23)")
    parser.add_argument("--modes", nargs="+", choices=[m.name for m in MODES], default=[m.name for m in MODES])
    parser.add_argument("--body", type=int, default=BODY, help="bytes per message body")
    parser.add_argument(
        "--compress",
        nargs="+",
        choices=["none", "ZLIB", "LZ4", "ZSTD"],
        help="a topic per compression, preloaded one message at a time with it by the Java producer (none: not "
        "compressed), each drained by every kind in every mode",
    )
    args = parser.parse_args()
    if args.command == "consumer":
        return _consumer(args)
    if args.metrics and "py-metrics" not in args.kinds:
        args.kinds.append("py-metrics")
    return _soak(args) if args.soak else _bench(args)


if __name__ == "__main__":
    sys.exit(main())
