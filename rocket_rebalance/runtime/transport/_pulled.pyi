from rocket_rebalance.model import MessageQueue
from rocket_rebalance.runtime.transport import Message

def plain_messages(body: bytes, mq: MessageQueue, message_type: type[Message], /) -> tuple[Message, ...] | None: ...
