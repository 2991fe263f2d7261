from rocket_rebalance._proto.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class FaultKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FAULT_KIND_UNSPECIFIED: _ClassVar[FaultKind]
    DROP_HEARTBEATS: _ClassVar[FaultKind]
    DROP_NOTIFICATIONS: _ClassVar[FaultKind]
    DELAY_NOTIFICATIONS: _ClassVar[FaultKind]
FAULT_KIND_UNSPECIFIED: FaultKind
DROP_HEARTBEATS: FaultKind
DROP_NOTIFICATIONS: FaultKind
DELAY_NOTIFICATIONS: FaultKind

class CreateOrUpdateTopicRequest(_message.Message):
    __slots__ = ("broker_name", "topic", "read_queue_nums", "write_queue_nums", "perm")
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    READ_QUEUE_NUMS_FIELD_NUMBER: _ClassVar[int]
    WRITE_QUEUE_NUMS_FIELD_NUMBER: _ClassVar[int]
    PERM_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    topic: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    def __init__(self, broker_name: _Optional[str] = ..., topic: _Optional[str] = ..., read_queue_nums: _Optional[int] = ..., write_queue_nums: _Optional[int] = ..., perm: _Optional[int] = ...) -> None: ...

class CreateOrUpdateTopicResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetBrokerClusterInfoRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class BrokerInfo(_message.Message):
    __slots__ = ("broker_name", "cluster", "address", "up")
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    UP_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    cluster: str
    address: str
    up: bool
    def __init__(self, broker_name: _Optional[str] = ..., cluster: _Optional[str] = ..., address: _Optional[str] = ..., up: _Optional[bool] = ...) -> None: ...

class GetBrokerClusterInfoResponse(_message.Message):
    __slots__ = ("brokers",)
    BROKERS_FIELD_NUMBER: _ClassVar[int]
    brokers: _containers.RepeatedCompositeFieldContainer[BrokerInfo]
    def __init__(self, brokers: _Optional[_Iterable[_Union[BrokerInfo, _Mapping]]] = ...) -> None: ...

class ConsumerProgressRequest(_message.Message):
    __slots__ = ("consumer_group", "topic")
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    consumer_group: str
    topic: str
    def __init__(self, consumer_group: _Optional[str] = ..., topic: _Optional[str] = ...) -> None: ...

class QueueProgress(_message.Message):
    __slots__ = ("queue", "broker_offset", "consumer_offset", "diff", "last_owner", "lock_owner", "last_update_timestamp_ms")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    BROKER_OFFSET_FIELD_NUMBER: _ClassVar[int]
    CONSUMER_OFFSET_FIELD_NUMBER: _ClassVar[int]
    DIFF_FIELD_NUMBER: _ClassVar[int]
    LAST_OWNER_FIELD_NUMBER: _ClassVar[int]
    LOCK_OWNER_FIELD_NUMBER: _ClassVar[int]
    LAST_UPDATE_TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    queue: _common_pb2.MessageQueue
    broker_offset: int
    consumer_offset: int
    diff: int
    last_owner: str
    lock_owner: str
    last_update_timestamp_ms: int
    def __init__(self, queue: _Optional[_Union[_common_pb2.MessageQueue, _Mapping]] = ..., broker_offset: _Optional[int] = ..., consumer_offset: _Optional[int] = ..., diff: _Optional[int] = ..., last_owner: _Optional[str] = ..., lock_owner: _Optional[str] = ..., last_update_timestamp_ms: _Optional[int] = ...) -> None: ...

class ConsumerProgressResponse(_message.Message):
    __slots__ = ("queues", "total_diff")
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    TOTAL_DIFF_FIELD_NUMBER: _ClassVar[int]
    queues: _containers.RepeatedCompositeFieldContainer[QueueProgress]
    total_diff: int
    def __init__(self, queues: _Optional[_Iterable[_Union[QueueProgress, _Mapping]]] = ..., total_diff: _Optional[int] = ...) -> None: ...

class ConsumerConnectionRequest(_message.Message):
    __slots__ = ("consumer_group", "broker_name")
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    consumer_group: str
    broker_name: str
    def __init__(self, consumer_group: _Optional[str] = ..., broker_name: _Optional[str] = ...) -> None: ...

class Connection(_message.Message):
    __slots__ = ("client_id", "broker_name", "connected", "last_heartbeat_ms_ago", "subscriptions", "consume_type", "message_model", "consume_from_where")
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    CONNECTED_FIELD_NUMBER: _ClassVar[int]
    LAST_HEARTBEAT_MS_AGO_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIPTIONS_FIELD_NUMBER: _ClassVar[int]
    CONSUME_TYPE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_MODEL_FIELD_NUMBER: _ClassVar[int]
    CONSUME_FROM_WHERE_FIELD_NUMBER: _ClassVar[int]
    client_id: str
    broker_name: str
    connected: bool
    last_heartbeat_ms_ago: int
    subscriptions: _containers.RepeatedCompositeFieldContainer[_common_pb2.SubscriptionData]
    consume_type: _common_pb2.ConsumeType
    message_model: _common_pb2.MessageModel
    consume_from_where: _common_pb2.ConsumeFromWhere
    def __init__(self, client_id: _Optional[str] = ..., broker_name: _Optional[str] = ..., connected: _Optional[bool] = ..., last_heartbeat_ms_ago: _Optional[int] = ..., subscriptions: _Optional[_Iterable[_Union[_common_pb2.SubscriptionData, _Mapping]]] = ..., consume_type: _Optional[_Union[_common_pb2.ConsumeType, str]] = ..., message_model: _Optional[_Union[_common_pb2.MessageModel, str]] = ..., consume_from_where: _Optional[_Union[_common_pb2.ConsumeFromWhere, str]] = ...) -> None: ...

class ConsumerConnectionResponse(_message.Message):
    __slots__ = ("connections", "subscription_table")
    CONNECTIONS_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIPTION_TABLE_FIELD_NUMBER: _ClassVar[int]
    connections: _containers.RepeatedCompositeFieldContainer[Connection]
    subscription_table: _containers.RepeatedCompositeFieldContainer[_common_pb2.SubscriptionData]
    def __init__(self, connections: _Optional[_Iterable[_Union[Connection, _Mapping]]] = ..., subscription_table: _Optional[_Iterable[_Union[_common_pb2.SubscriptionData, _Mapping]]] = ...) -> None: ...

class ConsumerRunningInfoRequest(_message.Message):
    __slots__ = ("consumer_group", "client_id", "timeout_ms")
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    consumer_group: str
    client_id: str
    timeout_ms: int
    def __init__(self, consumer_group: _Optional[str] = ..., client_id: _Optional[str] = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class ConsumerRunningInfoResponse(_message.Message):
    __slots__ = ("client_id", "broker_name", "queues", "properties", "status")
    class PropertiesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    client_id: str
    broker_name: str
    queues: _containers.RepeatedCompositeFieldContainer[_common_pb2.QueueRunningInfo]
    properties: _containers.ScalarMap[str, str]
    status: _containers.RepeatedCompositeFieldContainer[_common_pb2.TopicConsumeStatus]
    def __init__(self, client_id: _Optional[str] = ..., broker_name: _Optional[str] = ..., queues: _Optional[_Iterable[_Union[_common_pb2.QueueRunningInfo, _Mapping]]] = ..., properties: _Optional[_Mapping[str, str]] = ..., status: _Optional[_Iterable[_Union[_common_pb2.TopicConsumeStatus, _Mapping]]] = ...) -> None: ...

class ListTopicsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListTopicsResponse(_message.Message):
    __slots__ = ("topics",)
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, topics: _Optional[_Iterable[str]] = ...) -> None: ...

class ListConsumerGroupsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListConsumerGroupsResponse(_message.Message):
    __slots__ = ("consumer_groups",)
    CONSUMER_GROUPS_FIELD_NUMBER: _ClassVar[int]
    consumer_groups: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, consumer_groups: _Optional[_Iterable[str]] = ...) -> None: ...

class ResetConsumerOffsetRequest(_message.Message):
    __slots__ = ("consumer_group", "topic", "broker_name", "queue_id", "offset", "timestamp_ms")
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    consumer_group: str
    topic: str
    broker_name: str
    queue_id: int
    offset: int
    timestamp_ms: int
    def __init__(self, consumer_group: _Optional[str] = ..., topic: _Optional[str] = ..., broker_name: _Optional[str] = ..., queue_id: _Optional[int] = ..., offset: _Optional[int] = ..., timestamp_ms: _Optional[int] = ...) -> None: ...

class ResetConsumerOffsetResponse(_message.Message):
    __slots__ = ("offsets",)
    OFFSETS_FIELD_NUMBER: _ClassVar[int]
    offsets: _containers.RepeatedCompositeFieldContainer[_common_pb2.QueueOffset]
    def __init__(self, offsets: _Optional[_Iterable[_Union[_common_pb2.QueueOffset, _Mapping]]] = ...) -> None: ...

class SetBrokerStateRequest(_message.Message):
    __slots__ = ("broker_name", "up")
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    UP_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    up: bool
    def __init__(self, broker_name: _Optional[str] = ..., up: _Optional[bool] = ...) -> None: ...

class SetBrokerStateResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Fault(_message.Message):
    __slots__ = ("kind", "client_id", "delay_ms")
    KIND_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    DELAY_MS_FIELD_NUMBER: _ClassVar[int]
    kind: FaultKind
    client_id: str
    delay_ms: int
    def __init__(self, kind: _Optional[_Union[FaultKind, str]] = ..., client_id: _Optional[str] = ..., delay_ms: _Optional[int] = ...) -> None: ...

class InjectFaultRequest(_message.Message):
    __slots__ = ("broker_name", "fault")
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    FAULT_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    fault: Fault
    def __init__(self, broker_name: _Optional[str] = ..., fault: _Optional[_Union[Fault, _Mapping]] = ...) -> None: ...

class InjectFaultResponse(_message.Message):
    __slots__ = ("faults",)
    FAULTS_FIELD_NUMBER: _ClassVar[int]
    faults: _containers.RepeatedCompositeFieldContainer[Fault]
    def __init__(self, faults: _Optional[_Iterable[_Union[Fault, _Mapping]]] = ...) -> None: ...

class ClearFaultsRequest(_message.Message):
    __slots__ = ("broker_name",)
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    def __init__(self, broker_name: _Optional[str] = ...) -> None: ...

class ClearFaultsResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...
