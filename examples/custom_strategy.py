"""Your own allocation strategy: write it, check it with the library's property kit, run a consumer with it.

    python examples/custom_strategy.py --check                              # the kit's checks (needs hypothesis)
    python examples/custom_strategy.py grpc://127.0.0.1:9876 --count 16     # a consumer using it

A strategy is any object with a ``name`` and ``allocate(consumer_group, current_cid, mq_all, cid_all)`` that
returns the queues ``current_cid`` owns (the protocol ``rocket_rebalance.AllocateMessageQueueStrategy``). Every
member of the group runs it on the same sorted lists and must compute the same answer, so it must be
deterministic and use nothing but its arguments. A strategy of your own exists in no Java client: a group that
runs it must have Python members only.

This one is rendezvous hashing (highest random weight): each queue goes to the consumer whose hash with it is
the highest. A join moves queues only to the newcomer and a leave only the leaver's, like a consistent-hash ring,
with no ring to build; shares are only as even as the hash makes them.
"""

from __future__ import annotations

import argparse
import hashlib
import threading
from collections.abc import Sequence

from rocket_rebalance import ConsumeFromWhere, Message, MessageQueue, PushConsumer

FIRST = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET  # a new group reads what is there (Java's default: the end)


class Rendezvous:
    """Each queue to the consumer with the highest MD5 of ``client ID|queue``."""

    name = "RENDEZVOUS"
    java_compatible = False  # a consumer running it warns when a member of another language joins the group

    def allocate(
        self,
        consumer_group: str,
        current_cid: str | None,
        mq_all: Sequence[MessageQueue] | None,
        cid_all: Sequence[str] | None,
    ) -> list[MessageQueue]:
        if not current_cid or not mq_all or not cid_all or current_cid not in cid_all:
            return []
        return [mq for mq in mq_all if max(cid_all, key=lambda cid: self._weight(cid, mq)) == current_cid]

    @staticmethod
    def _weight(cid: str, mq: MessageQueue) -> tuple[bytes, str]:
        return hashlib.md5(f"{cid}|{mq}".encode()).digest(), cid  # the ID breaks a tie: the same on every member


def check() -> None:
    """The kit's checks over a few hundred generated groups (realistic client IDs and queues)."""
    from hypothesis import given, settings

    from rocket_rebalance import testing as rt

    @settings(max_examples=300, deadline=None)
    @given(rt.rebalance_inputs())
    def partition_and_monotonic(case: rt.RebalanceCase) -> None:
        rt.check_strategy(Rendezvous(), case, rt.Property.PARTITION | rt.Property.MONOTONIC)

    partition_and_monotonic()
    print(
        "RENDEZVOUS keeps PARTITION (deterministic, order independent, no double owner, full coverage) and MONOTONIC",
        flush=True,
    )


def consume(namesrv: str, topic: str, count: int) -> None:
    consumed = 0
    lock = threading.Lock()
    enough = threading.Event()

    def handle(messages: list[Message]) -> None:
        nonlocal consumed
        with lock:
            consumed += len(messages)
            if consumed >= count:
                enough.set()

    with PushConsumer(
        namesrv,
        "GID_example_rendezvous",
        topics=[topic],
        listener=handle,
        strategy=Rendezvous(),
        consume_from_where=FIRST,
    ) as consumer:
        enough.wait()
        owned = consumer.owned_queues().get(topic, frozenset())
    print(f"consumed {consumed} messages; owned {len(owned)} queues of {topic} by RENDEZVOUS", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("namesrv", nargs="?", help="grpc://HOST:PORT (nameserver_stub) or HOST:PORT (RocketMQ)")
    parser.add_argument("--check", action="store_true", help="run the property kit's checks instead")
    parser.add_argument("--topic", default="TopicTest")
    parser.add_argument("--count", type=int, default=16)
    args = parser.parse_args()
    if args.check:
        check()
    elif args.namesrv is None:
        parser.error("give a name-server address, or --check")
    else:
        consume(args.namesrv, args.topic, args.count)


if __name__ == "__main__":
    main()
