"""Consumption throughput on a real RocketMQ 5.3.3 broker with ACL 2.0 on (every request signed, authenticated and
authorized), with TLS enforcing (every connection encrypted, the server's certificate verified against a CA the
run makes with ``openssl``), and with both, against the same broker setup without either, in one run.

Each row: a fresh NameServer and broker, a 4-queue topic, ``--messages`` messages produced first, then one of our
consumers (from the first offset) timed until it has consumed them all.

Usage: ``python benchmarks/security.py [--messages 3000]`` (Java 17 and Maven, as ``tests/rocketmq``).
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from pathlib import Path

from rocket_rebalance.lab.certs import LabCertificates, make_certificates
from rocket_rebalance.lab.rocketmq import RocketMQCluster, mqadmin
from rocket_rebalance.lab.wait import wait_until
from rocket_rebalance.model import AclCredentials, ConsumeFromWhere
from rocket_rebalance.runtime.consumer import PushConsumer
from rocket_rebalance.runtime.transport import Message
from rocket_rebalance.runtime.transport.remoting import RemotingTransport
from tests.rocketmq.test_security import ACL_BROKER, ADMIN

READER = AclCredentials("bench-reader", "bench-Secret-5e0c")
TOPIC, GROUP, QUEUES = "BenchTopic", "GID_bench", 4


def _run(work_dir: Path, secured: bool, messages: int, tls: LabCertificates | None = None) -> float:
    """Messages per second consumed by one consumer, on a broker of its own (ACL on when ``secured``, TLS
    enforcing with ``tls``)."""
    cluster = RocketMQCluster(
        work_dir,
        ("broker-a",),
        broker_settings=ACL_BROKER if secured else None,
        credentials=ADMIN if secured else None,
        tls=tls,
    )
    cluster.start()
    try:
        cluster.create_topic(TOPIC, QUEUES)
        consumer_keys: dict[str, str] = {} if tls is None else {"tls_ca_file": str(tls.ca)}
        if secured:
            assert cluster.lib is not None
            home, broker = work_dir / "mqadmin", cluster.brokers["broker-a"].address
            mqadmin(cluster.lib, home, "createUser", "-b", broker, "-u", READER.access_key, "-p", READER.secret_key,
                    credentials=ADMIN, tls=tls)  # fmt: skip
            mqadmin(cluster.lib, home, "createAcl", "-b", broker, "-s", f"User:{READER.access_key}",
                    "-r", f"Topic:{TOPIC},Group:{GROUP}", "-a", "Sub", "-d", "Allow", credentials=ADMIN,
                    tls=tls)  # fmt: skip
            consumer_keys |= {"access_key": READER.access_key, "secret_key": READER.secret_key}
        producer = RemotingTransport(
            [cluster.namesrv_address], credentials=cluster.credentials, tls=cluster.tls_settings
        )
        try:
            for queue in range(QUEUES):
                producer.send(TOPIC, "broker-a", [b"x" * 100] * (messages // QUEUES), queue_id=queue)
        finally:
            producer.close()
        count = [0]
        lock = threading.Lock()

        def listener(batch: list[Message]) -> None:
            with lock:
                count[0] += len(batch)

        consumer = PushConsumer(
            cluster.namesrv_address, GROUP, topics=[TOPIC], listener=listener,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, **consumer_keys,  # type: ignore[arg-type]
        )  # fmt: skip
        started = time.monotonic()
        consumer.start()
        try:
            wait_until(lambda: count[0] >= messages // QUEUES * QUEUES, 300, "every message consumed", poll=0.01)
            return count[0] / (time.monotonic() - started)
        finally:
            consumer.shutdown()
    finally:
        cluster.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=3000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        certs = make_certificates(Path(folder) / "certs")
        rows = [
            ("plain", _run(Path(folder) / "plain", False, args.messages)),
            ("ACL 2.0", _run(Path(folder) / "acl", True, args.messages)),
            ("TLS", _run(Path(folder) / "tls", False, args.messages, certs)),
            ("ACL + TLS", _run(Path(folder) / "acl-tls", True, args.messages, certs)),
        ]
    plain = rows[0][1]
    print(f"{'setup':<12}{'messages':>10}{'msg/s':>12}{'vs plain':>10}")
    for name, rate in rows:
        print(f"{name:<12}{args.messages:>10,}{rate:>12,.0f}{rate / plain:>10.2f}")


if __name__ == "__main__":
    main()
