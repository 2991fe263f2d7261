"""The asyncio consumers: a push consumer with an ``async def`` listener and a pull consumer read with
``async for``, both on one event loop, in one group each.

    python examples/asyncio_consumer.py grpc://127.0.0.1:9876 --count 16     # nameserver_stub
    python examples/asyncio_consumer.py 127.0.0.1:9876 --count 16            # a RocketMQ name server

Both run the same core as the threaded consumers, on the loop: asyncio streams to RocketMQ (grpc.aio to the stub)
and the loop's timers, no thread of their own.
"""

from __future__ import annotations

import argparse
import asyncio

from rocket_rebalance import (
    AsyncPullConsumer,
    AsyncPushConsumer,
    ConsumeFromWhere,
    Message,
    MessageQueue,
    RebalanceListener,
)

FIRST = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET  # a new group reads what is there (Java's default: the end)


class Announce(RebalanceListener):
    def __init__(self, name: str) -> None:
        self.name = name

    async def on_queues_assigned(self, queues: frozenset[MessageQueue]) -> None:
        print(f"{self.name}: assigned {len(queues)} queues", flush=True)

    async def on_queues_revoked(self, queues: frozenset[MessageQueue]) -> None:
        print(f"{self.name}: revoked {len(queues)} queues", flush=True)


async def push(namesrv: str, topic: str, count: int) -> int:
    consumed = 0
    enough = asyncio.Event()

    async def handle(messages: list[Message]) -> None:
        nonlocal consumed
        await asyncio.sleep(0)  # an await of the application's own (a database, an HTTP call ...)
        consumed += len(messages)
        if consumed >= count:
            enough.set()

    async with AsyncPushConsumer(
        namesrv,
        "GID_example_async_push",
        topics=[topic],
        listener=handle,
        rebalance_listener=Announce("push"),
        consume_from_where=FIRST,
    ):
        await enough.wait()
    return consumed


async def pull(namesrv: str, topic: str, count: int) -> int:
    polled = 0
    async with AsyncPullConsumer(
        namesrv, "GID_example_async_pull", topics=[topic], rebalance_listener=Announce("pull"), consume_from_where=FIRST
    ) as consumer:
        async for message in consumer:  # polls until the consumer is closed; auto-commit (Java's default)
            print(f"pulled {message.queue} offset {message.queue_offset}", flush=True)
            polled += 1
            if polled >= count:
                break
    return polled


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("namesrv", help="grpc://HOST:PORT (nameserver_stub) or HOST:PORT[;HOST:PORT] (RocketMQ)")
    parser.add_argument("--topic", default="TopicTest")
    parser.add_argument("--count", type=int, default=16)
    args = parser.parse_args()
    pushed, pulled = await asyncio.gather(
        push(args.namesrv, args.topic, args.count), pull(args.namesrv, args.topic, args.count)
    )
    print(f"push consumer consumed {pushed}, pull consumer polled {pulled}", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
