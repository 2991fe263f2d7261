from rocket_rebalance._proto.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class PullStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PULL_STATUS_UNSPECIFIED: _ClassVar[PullStatus]
    FOUND: _ClassVar[PullStatus]
    NO_NEW_MSG: _ClassVar[PullStatus]
    NO_MATCHED_MSG: _ClassVar[PullStatus]
    OFFSET_ILLEGAL: _ClassVar[PullStatus]
PULL_STATUS_UNSPECIFIED: PullStatus
FOUND: PullStatus
NO_NEW_MSG: PullStatus
NO_MATCHED_MSG: PullStatus
OFFSET_ILLEGAL: PullStatus

class ConsumerData(_message.Message):
    __slots__ = ("group_name", "consume_type", "message_model", "consume_from_where", "subscriptions")
    GROUP_NAME_FIELD_NUMBER: _ClassVar[int]
    CONSUME_TYPE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_MODEL_FIELD_NUMBER: _ClassVar[int]
    CONSUME_FROM_WHERE_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIPTIONS_FIELD_NUMBER: _ClassVar[int]
    group_name: str
    consume_type: _common_pb2.ConsumeType
    message_model: _common_pb2.MessageModel
    consume_from_where: _common_pb2.ConsumeFromWhere
    subscriptions: _containers.RepeatedCompositeFieldContainer[_common_pb2.SubscriptionData]
    def __init__(self, group_name: _Optional[str] = ..., consume_type: _Optional[_Union[_common_pb2.ConsumeType, str]] = ..., message_model: _Optional[_Union[_common_pb2.MessageModel, str]] = ..., consume_from_where: _Optional[_Union[_common_pb2.ConsumeFromWhere, str]] = ..., subscriptions: _Optional[_Iterable[_Union[_common_pb2.SubscriptionData, _Mapping]]] = ...) -> None: ...

class HeartbeatRequest(_message.Message):
    __slots__ = ("broker_name", "client_id", "consumer_datas")
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    CONSUMER_DATAS_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    client_id: str
    consumer_datas: _containers.RepeatedCompositeFieldContainer[ConsumerData]
    def __init__(self, broker_name: _Optional[str] = ..., client_id: _Optional[str] = ..., consumer_datas: _Optional[_Iterable[_Union[ConsumerData, _Mapping]]] = ...) -> None: ...

class HeartbeatResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class UnregisterClientRequest(_message.Message):
    __slots__ = ("broker_name", "client_id", "consumer_group")
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    client_id: str
    consumer_group: str
    def __init__(self, broker_name: _Optional[str] = ..., client_id: _Optional[str] = ..., consumer_group: _Optional[str] = ...) -> None: ...

class UnregisterClientResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetConsumerListByGroupRequest(_message.Message):
    __slots__ = ("broker_name", "consumer_group")
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    consumer_group: str
    def __init__(self, broker_name: _Optional[str] = ..., consumer_group: _Optional[str] = ...) -> None: ...

class GetConsumerListByGroupResponse(_message.Message):
    __slots__ = ("consumer_id_list",)
    CONSUMER_ID_LIST_FIELD_NUMBER: _ClassVar[int]
    consumer_id_list: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, consumer_id_list: _Optional[_Iterable[str]] = ...) -> None: ...

class QueryConsumerOffsetRequest(_message.Message):
    __slots__ = ("broker_name", "consumer_group", "queues")
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    consumer_group: str
    queues: _containers.RepeatedCompositeFieldContainer[_common_pb2.MessageQueue]
    def __init__(self, broker_name: _Optional[str] = ..., consumer_group: _Optional[str] = ..., queues: _Optional[_Iterable[_Union[_common_pb2.MessageQueue, _Mapping]]] = ...) -> None: ...

class ConsumerOffset(_message.Message):
    __slots__ = ("queue", "found", "offset")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    FOUND_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    queue: _common_pb2.MessageQueue
    found: bool
    offset: int
    def __init__(self, queue: _Optional[_Union[_common_pb2.MessageQueue, _Mapping]] = ..., found: _Optional[bool] = ..., offset: _Optional[int] = ...) -> None: ...

class QueryConsumerOffsetResponse(_message.Message):
    __slots__ = ("offsets",)
    OFFSETS_FIELD_NUMBER: _ClassVar[int]
    offsets: _containers.RepeatedCompositeFieldContainer[ConsumerOffset]
    def __init__(self, offsets: _Optional[_Iterable[_Union[ConsumerOffset, _Mapping]]] = ...) -> None: ...

class UpdateConsumerOffsetRequest(_message.Message):
    __slots__ = ("broker_name", "consumer_group", "client_id", "offsets")
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    OFFSETS_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    consumer_group: str
    client_id: str
    offsets: _containers.RepeatedCompositeFieldContainer[_common_pb2.QueueOffset]
    def __init__(self, broker_name: _Optional[str] = ..., consumer_group: _Optional[str] = ..., client_id: _Optional[str] = ..., offsets: _Optional[_Iterable[_Union[_common_pb2.QueueOffset, _Mapping]]] = ...) -> None: ...

class OffsetUpdateResult(_message.Message):
    __slots__ = ("queue", "stored_offset", "updated")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    STORED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    UPDATED_FIELD_NUMBER: _ClassVar[int]
    queue: _common_pb2.MessageQueue
    stored_offset: int
    updated: bool
    def __init__(self, queue: _Optional[_Union[_common_pb2.MessageQueue, _Mapping]] = ..., stored_offset: _Optional[int] = ..., updated: _Optional[bool] = ...) -> None: ...

class UpdateConsumerOffsetResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[OffsetUpdateResult]
    def __init__(self, results: _Optional[_Iterable[_Union[OffsetUpdateResult, _Mapping]]] = ...) -> None: ...

class LockBatchMQRequest(_message.Message):
    __slots__ = ("broker_name", "consumer_group", "client_id", "queues")
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    consumer_group: str
    client_id: str
    queues: _containers.RepeatedCompositeFieldContainer[_common_pb2.MessageQueue]
    def __init__(self, broker_name: _Optional[str] = ..., consumer_group: _Optional[str] = ..., client_id: _Optional[str] = ..., queues: _Optional[_Iterable[_Union[_common_pb2.MessageQueue, _Mapping]]] = ...) -> None: ...

class LockBatchMQResponse(_message.Message):
    __slots__ = ("locked_queues",)
    LOCKED_QUEUES_FIELD_NUMBER: _ClassVar[int]
    locked_queues: _containers.RepeatedCompositeFieldContainer[_common_pb2.MessageQueue]
    def __init__(self, locked_queues: _Optional[_Iterable[_Union[_common_pb2.MessageQueue, _Mapping]]] = ...) -> None: ...

class UnlockBatchMQRequest(_message.Message):
    __slots__ = ("broker_name", "consumer_group", "client_id", "queues")
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    consumer_group: str
    client_id: str
    queues: _containers.RepeatedCompositeFieldContainer[_common_pb2.MessageQueue]
    def __init__(self, broker_name: _Optional[str] = ..., consumer_group: _Optional[str] = ..., client_id: _Optional[str] = ..., queues: _Optional[_Iterable[_Union[_common_pb2.MessageQueue, _Mapping]]] = ...) -> None: ...

class UnlockBatchMQResponse(_message.Message):
    __slots__ = ("unlocked_queues",)
    UNLOCKED_QUEUES_FIELD_NUMBER: _ClassVar[int]
    unlocked_queues: _containers.RepeatedCompositeFieldContainer[_common_pb2.MessageQueue]
    def __init__(self, unlocked_queues: _Optional[_Iterable[_Union[_common_pb2.MessageQueue, _Mapping]]] = ...) -> None: ...

class MessageToSend(_message.Message):
    __slots__ = ("body", "tags", "keys", "properties", "born_timestamp_ms")
    class PropertiesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    BODY_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    BORN_TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    body: bytes
    tags: str
    keys: str
    properties: _containers.ScalarMap[str, str]
    born_timestamp_ms: int
    def __init__(self, body: _Optional[bytes] = ..., tags: _Optional[str] = ..., keys: _Optional[str] = ..., properties: _Optional[_Mapping[str, str]] = ..., born_timestamp_ms: _Optional[int] = ...) -> None: ...

class SendMessageRequest(_message.Message):
    __slots__ = ("broker_name", "topic", "queue_id", "messages")
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    topic: str
    queue_id: int
    messages: _containers.RepeatedCompositeFieldContainer[MessageToSend]
    def __init__(self, broker_name: _Optional[str] = ..., topic: _Optional[str] = ..., queue_id: _Optional[int] = ..., messages: _Optional[_Iterable[_Union[MessageToSend, _Mapping]]] = ...) -> None: ...

class SendResult(_message.Message):
    __slots__ = ("msg_id", "queue_offset")
    MSG_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    msg_id: str
    queue_offset: int
    def __init__(self, msg_id: _Optional[str] = ..., queue_offset: _Optional[int] = ...) -> None: ...

class SendMessageResponse(_message.Message):
    __slots__ = ("queue_id", "results")
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    queue_id: int
    results: _containers.RepeatedCompositeFieldContainer[SendResult]
    def __init__(self, queue_id: _Optional[int] = ..., results: _Optional[_Iterable[_Union[SendResult, _Mapping]]] = ...) -> None: ...

class MessageExt(_message.Message):
    __slots__ = ("topic", "broker_name", "queue_id", "queue_offset", "msg_id", "body", "tags", "keys", "properties", "born_timestamp_ms", "store_timestamp_ms")
    class PropertiesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MSG_ID_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    BORN_TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    STORE_TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    topic: str
    broker_name: str
    queue_id: int
    queue_offset: int
    msg_id: str
    body: bytes
    tags: str
    keys: str
    properties: _containers.ScalarMap[str, str]
    born_timestamp_ms: int
    store_timestamp_ms: int
    def __init__(self, topic: _Optional[str] = ..., broker_name: _Optional[str] = ..., queue_id: _Optional[int] = ..., queue_offset: _Optional[int] = ..., msg_id: _Optional[str] = ..., body: _Optional[bytes] = ..., tags: _Optional[str] = ..., keys: _Optional[str] = ..., properties: _Optional[_Mapping[str, str]] = ..., born_timestamp_ms: _Optional[int] = ..., store_timestamp_ms: _Optional[int] = ...) -> None: ...

class PullMessageRequest(_message.Message):
    __slots__ = ("broker_name", "consumer_group", "topic", "queue_id", "queue_offset", "max_msg_nums", "max_wait_ms", "sub_expression", "max_bytes")
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MAX_MSG_NUMS_FIELD_NUMBER: _ClassVar[int]
    MAX_WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    SUB_EXPRESSION_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    consumer_group: str
    topic: str
    queue_id: int
    queue_offset: int
    max_msg_nums: int
    max_wait_ms: int
    sub_expression: str
    max_bytes: int
    def __init__(self, broker_name: _Optional[str] = ..., consumer_group: _Optional[str] = ..., topic: _Optional[str] = ..., queue_id: _Optional[int] = ..., queue_offset: _Optional[int] = ..., max_msg_nums: _Optional[int] = ..., max_wait_ms: _Optional[int] = ..., sub_expression: _Optional[str] = ..., max_bytes: _Optional[int] = ...) -> None: ...

class PullMessageResponse(_message.Message):
    __slots__ = ("status", "next_begin_offset", "min_offset", "max_offset", "messages")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    NEXT_BEGIN_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MIN_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MAX_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: _containers.RepeatedCompositeFieldContainer[MessageExt]
    def __init__(self, status: _Optional[_Union[PullStatus, str]] = ..., next_begin_offset: _Optional[int] = ..., min_offset: _Optional[int] = ..., max_offset: _Optional[int] = ..., messages: _Optional[_Iterable[_Union[MessageExt, _Mapping]]] = ...) -> None: ...

class GetMaxOffsetRequest(_message.Message):
    __slots__ = ("broker_name", "topic", "queue_id")
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    topic: str
    queue_id: int
    def __init__(self, broker_name: _Optional[str] = ..., topic: _Optional[str] = ..., queue_id: _Optional[int] = ...) -> None: ...

class GetMaxOffsetResponse(_message.Message):
    __slots__ = ("offset",)
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    offset: int
    def __init__(self, offset: _Optional[int] = ...) -> None: ...

class GetMinOffsetRequest(_message.Message):
    __slots__ = ("broker_name", "topic", "queue_id")
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    topic: str
    queue_id: int
    def __init__(self, broker_name: _Optional[str] = ..., topic: _Optional[str] = ..., queue_id: _Optional[int] = ...) -> None: ...

class GetMinOffsetResponse(_message.Message):
    __slots__ = ("offset",)
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    offset: int
    def __init__(self, offset: _Optional[int] = ...) -> None: ...

class SearchOffsetByTimestampRequest(_message.Message):
    __slots__ = ("broker_name", "topic", "queue_id", "timestamp_ms")
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    topic: str
    queue_id: int
    timestamp_ms: int
    def __init__(self, broker_name: _Optional[str] = ..., topic: _Optional[str] = ..., queue_id: _Optional[int] = ..., timestamp_ms: _Optional[int] = ...) -> None: ...

class SearchOffsetByTimestampResponse(_message.Message):
    __slots__ = ("offset",)
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    offset: int
    def __init__(self, offset: _Optional[int] = ...) -> None: ...

class ConnectRequest(_message.Message):
    __slots__ = ("broker_name", "client_id")
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    client_id: str
    def __init__(self, broker_name: _Optional[str] = ..., client_id: _Optional[str] = ...) -> None: ...

class Connected(_message.Message):
    __slots__ = ("broker_name", "client_id")
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    client_id: str
    def __init__(self, broker_name: _Optional[str] = ..., client_id: _Optional[str] = ...) -> None: ...

class NotifyConsumerIdsChanged(_message.Message):
    __slots__ = ("consumer_group",)
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    consumer_group: str
    def __init__(self, consumer_group: _Optional[str] = ...) -> None: ...

class RunningInfoRequest(_message.Message):
    __slots__ = ("request_id", "consumer_group")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    consumer_group: str
    def __init__(self, request_id: _Optional[str] = ..., consumer_group: _Optional[str] = ...) -> None: ...

class BrokerNotification(_message.Message):
    __slots__ = ("connected", "consumer_ids_changed", "running_info_request")
    CONNECTED_FIELD_NUMBER: _ClassVar[int]
    CONSUMER_IDS_CHANGED_FIELD_NUMBER: _ClassVar[int]
    RUNNING_INFO_REQUEST_FIELD_NUMBER: _ClassVar[int]
    connected: Connected
    consumer_ids_changed: NotifyConsumerIdsChanged
    running_info_request: RunningInfoRequest
    def __init__(self, connected: _Optional[_Union[Connected, _Mapping]] = ..., consumer_ids_changed: _Optional[_Union[NotifyConsumerIdsChanged, _Mapping]] = ..., running_info_request: _Optional[_Union[RunningInfoRequest, _Mapping]] = ...) -> None: ...

class ReportRunningInfoRequest(_message.Message):
    __slots__ = ("broker_name", "client_id", "request_id", "consumer_group", "queues", "properties", "status")
    class PropertiesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    client_id: str
    request_id: str
    consumer_group: str
    queues: _containers.RepeatedCompositeFieldContainer[_common_pb2.QueueRunningInfo]
    properties: _containers.ScalarMap[str, str]
    status: _containers.RepeatedCompositeFieldContainer[_common_pb2.TopicConsumeStatus]
    def __init__(self, broker_name: _Optional[str] = ..., client_id: _Optional[str] = ..., request_id: _Optional[str] = ..., consumer_group: _Optional[str] = ..., queues: _Optional[_Iterable[_Union[_common_pb2.QueueRunningInfo, _Mapping]]] = ..., properties: _Optional[_Mapping[str, str]] = ..., status: _Optional[_Iterable[_Union[_common_pb2.TopicConsumeStatus, _Mapping]]] = ...) -> None: ...

class ReportRunningInfoResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...
