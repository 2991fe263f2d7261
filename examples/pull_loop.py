"""A pull consumer's loop, as Kafka users write one: poll a batch, process it, commit, and hear which queues
come and go.

    python examples/pull_loop.py grpc://127.0.0.1:9876 --count 16     # nameserver_stub
    python examples/pull_loop.py 127.0.0.1:9876 --count 16            # a RocketMQ name server

The rebalance callbacks run inside ``poll()``, on this thread; ``on_queues_revoked`` is the last moment to commit
what belongs to the queues going away (with the fence, their next owner waits for it).
"""

from __future__ import annotations

import argparse

from rocket_rebalance import ConsumeFromWhere, MessageQueue, PullConsumer, RebalanceListener

FIRST = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET  # a new group reads what is there (Java's default: the end)


class Announce(RebalanceListener):
    def __init__(self) -> None:
        self.consumer: PullConsumer | None = None

    def on_queues_assigned(self, queues: frozenset[MessageQueue]) -> None:
        print(f"assigned {sorted(map(str, queues))}", flush=True)

    def on_queues_revoked(self, queues: frozenset[MessageQueue]) -> None:
        print(f"revoked {sorted(map(str, queues))}", flush=True)
        if self.consumer is not None:
            self.consumer.commit()  # what was polled of them counts: the next owner starts after it


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("namesrv", help="grpc://HOST:PORT (nameserver_stub) or HOST:PORT[;HOST:PORT] (RocketMQ)")
    parser.add_argument("--group", default="GID_example_pull")
    parser.add_argument("--topic", default="TopicTest")
    parser.add_argument("--count", type=int, default=16)
    args = parser.parse_args()

    listener = Announce()
    consumer = PullConsumer(
        args.namesrv,
        args.group,
        topics=[args.topic],
        auto_commit=False,
        rebalance_listener=listener,
        consume_from_where=FIRST,
    )
    listener.consumer = consumer
    polled = 0
    with consumer:  # start(); close() at the end: revoke, commit, unlock, unregister
        while polled < args.count:
            messages = consumer.poll(max_messages=32, timeout=1.0)
            for message in messages:
                print(f"{message.queue} offset {message.queue_offset}: {message.body!r}", flush=True)
            polled += len(messages)
            if messages:
                consumer.commit()  # everything polled so far, written now
    print(f"polled and committed {polled} messages", flush=True)


if __name__ == "__main__":
    main()
