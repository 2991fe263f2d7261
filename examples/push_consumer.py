"""A threaded push consumer: the library decides which queues this process owns and calls ``handle`` with
their messages.

    python examples/push_consumer.py grpc://127.0.0.1:9876 --count 16     # nameserver_stub
    python examples/push_consumer.py 127.0.0.1:9876 --count 16            # a RocketMQ name server

It prints each message, and stops once ``--count`` messages were consumed (Ctrl-C stops it too).
"""

from __future__ import annotations

import argparse
import threading

from rocket_rebalance import ConsumeFromWhere, Message, PushConsumer

FIRST = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET  # a new group reads what is there (Java's default: the end)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("namesrv", help="grpc://HOST:PORT (nameserver_stub) or HOST:PORT[;HOST:PORT] (RocketMQ)")
    parser.add_argument("--group", default="GID_example_push")
    parser.add_argument("--topic", default="TopicTest")
    parser.add_argument("--count", type=int, default=16)
    args = parser.parse_args()

    consumed = 0
    lock = threading.Lock()
    enough = threading.Event()

    def handle(messages: list[Message]) -> None:  # raising means "not consumed": the batch comes again
        nonlocal consumed
        for message in messages:
            print(f"{message.queue} offset {message.queue_offset}: {message.body!r}", flush=True)
        with lock:
            consumed += len(messages)
            if consumed >= args.count:
                enough.set()

    with PushConsumer(args.namesrv, args.group, topics=[args.topic], listener=handle, consume_from_where=FIRST):
        try:
            enough.wait()
        except KeyboardInterrupt:
            pass
    # leaving the block shut the consumer down: in-flight messages finished, offsets persisted, queues released
    print(f"consumed {consumed} messages", flush=True)


if __name__ == "__main__":
    main()
