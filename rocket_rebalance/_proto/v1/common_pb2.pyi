from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ConsumeType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CONSUME_TYPE_UNSPECIFIED: _ClassVar[ConsumeType]
    CONSUME_TYPE_PULL: _ClassVar[ConsumeType]
    CONSUME_TYPE_PUSH: _ClassVar[ConsumeType]

class MessageModel(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MESSAGE_MODEL_UNSPECIFIED: _ClassVar[MessageModel]
    MESSAGE_MODEL_CLUSTERING: _ClassVar[MessageModel]
    MESSAGE_MODEL_BROADCASTING: _ClassVar[MessageModel]

class ConsumeFromWhere(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CONSUME_FROM_WHERE_UNSPECIFIED: _ClassVar[ConsumeFromWhere]
    CONSUME_FROM_LAST_OFFSET: _ClassVar[ConsumeFromWhere]
    CONSUME_FROM_FIRST_OFFSET: _ClassVar[ConsumeFromWhere]
    CONSUME_FROM_TIMESTAMP: _ClassVar[ConsumeFromWhere]
CONSUME_TYPE_UNSPECIFIED: ConsumeType
CONSUME_TYPE_PULL: ConsumeType
CONSUME_TYPE_PUSH: ConsumeType
MESSAGE_MODEL_UNSPECIFIED: MessageModel
MESSAGE_MODEL_CLUSTERING: MessageModel
MESSAGE_MODEL_BROADCASTING: MessageModel
CONSUME_FROM_WHERE_UNSPECIFIED: ConsumeFromWhere
CONSUME_FROM_LAST_OFFSET: ConsumeFromWhere
CONSUME_FROM_FIRST_OFFSET: ConsumeFromWhere
CONSUME_FROM_TIMESTAMP: ConsumeFromWhere

class MessageQueue(_message.Message):
    __slots__ = ("topic", "broker_name", "queue_id")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    topic: str
    broker_name: str
    queue_id: int
    def __init__(self, topic: _Optional[str] = ..., broker_name: _Optional[str] = ..., queue_id: _Optional[int] = ...) -> None: ...

class SubscriptionData(_message.Message):
    __slots__ = ("topic", "sub_string", "expression_type", "sub_version")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    SUB_STRING_FIELD_NUMBER: _ClassVar[int]
    EXPRESSION_TYPE_FIELD_NUMBER: _ClassVar[int]
    SUB_VERSION_FIELD_NUMBER: _ClassVar[int]
    topic: str
    sub_string: str
    expression_type: str
    sub_version: int
    def __init__(self, topic: _Optional[str] = ..., sub_string: _Optional[str] = ..., expression_type: _Optional[str] = ..., sub_version: _Optional[int] = ...) -> None: ...

class QueueOffset(_message.Message):
    __slots__ = ("queue", "offset")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    queue: MessageQueue
    offset: int
    def __init__(self, queue: _Optional[_Union[MessageQueue, _Mapping]] = ..., offset: _Optional[int] = ...) -> None: ...

class QueueRunningInfo(_message.Message):
    __slots__ = ("queue", "commit_offset", "cached_count", "cached_min_offset", "cached_max_offset", "locked", "dropped", "last_pull_timestamp_ms", "last_consume_timestamp_ms", "cached_size_mib", "transaction_min_offset", "transaction_max_offset", "transaction_count", "try_unlock_times", "last_lock_timestamp_ms")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    COMMIT_OFFSET_FIELD_NUMBER: _ClassVar[int]
    CACHED_COUNT_FIELD_NUMBER: _ClassVar[int]
    CACHED_MIN_OFFSET_FIELD_NUMBER: _ClassVar[int]
    CACHED_MAX_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LOCKED_FIELD_NUMBER: _ClassVar[int]
    DROPPED_FIELD_NUMBER: _ClassVar[int]
    LAST_PULL_TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    LAST_CONSUME_TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    CACHED_SIZE_MIB_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_MIN_OFFSET_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_MAX_OFFSET_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_COUNT_FIELD_NUMBER: _ClassVar[int]
    TRY_UNLOCK_TIMES_FIELD_NUMBER: _ClassVar[int]
    LAST_LOCK_TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    queue: MessageQueue
    commit_offset: int
    cached_count: int
    cached_min_offset: int
    cached_max_offset: int
    locked: bool
    dropped: bool
    last_pull_timestamp_ms: int
    last_consume_timestamp_ms: int
    cached_size_mib: int
    transaction_min_offset: int
    transaction_max_offset: int
    transaction_count: int
    try_unlock_times: int
    last_lock_timestamp_ms: int
    def __init__(self, queue: _Optional[_Union[MessageQueue, _Mapping]] = ..., commit_offset: _Optional[int] = ..., cached_count: _Optional[int] = ..., cached_min_offset: _Optional[int] = ..., cached_max_offset: _Optional[int] = ..., locked: _Optional[bool] = ..., dropped: _Optional[bool] = ..., last_pull_timestamp_ms: _Optional[int] = ..., last_consume_timestamp_ms: _Optional[int] = ..., cached_size_mib: _Optional[int] = ..., transaction_min_offset: _Optional[int] = ..., transaction_max_offset: _Optional[int] = ..., transaction_count: _Optional[int] = ..., try_unlock_times: _Optional[int] = ..., last_lock_timestamp_ms: _Optional[int] = ...) -> None: ...

class TopicConsumeStatus(_message.Message):
    __slots__ = ("topic", "pull_rt", "pull_tps", "consume_rt", "consume_ok_tps", "consume_failed_tps", "consume_failed_msgs")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PULL_RT_FIELD_NUMBER: _ClassVar[int]
    PULL_TPS_FIELD_NUMBER: _ClassVar[int]
    CONSUME_RT_FIELD_NUMBER: _ClassVar[int]
    CONSUME_OK_TPS_FIELD_NUMBER: _ClassVar[int]
    CONSUME_FAILED_TPS_FIELD_NUMBER: _ClassVar[int]
    CONSUME_FAILED_MSGS_FIELD_NUMBER: _ClassVar[int]
    topic: str
    pull_rt: float
    pull_tps: float
    consume_rt: float
    consume_ok_tps: float
    consume_failed_tps: float
    consume_failed_msgs: int
    def __init__(self, topic: _Optional[str] = ..., pull_rt: _Optional[float] = ..., pull_tps: _Optional[float] = ..., consume_rt: _Optional[float] = ..., consume_ok_tps: _Optional[float] = ..., consume_failed_tps: _Optional[float] = ..., consume_failed_msgs: _Optional[int] = ...) -> None: ...
