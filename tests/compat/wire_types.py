"""The AMQP types Service Bus puts on the wire, as ONE table, and a raw client's view of what the broker
sends.

`SERVICE_BUS_TYPES` says, for every field the broker emits (header, properties, x-opt annotations, the
application properties it writes itself, delivery tags, attach properties, `$cbs` and `$management` replies
operation by operation), the AMQP type Service Bus sends and where that comes from. `Audit` decodes what the
broker sent with proton's `Data` (so symbol vs string, int vs long, short, uint, timestamp, uuid and arrays
vs lists are seen as they are on the wire) and checks every field against the table: a field the table does
not know fails too, so a new field or operation needs its row here. Add rows for new `$management`
operations (rule management, batch-delete-messages) with their reply keys under `REPLY_BODIES`.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from proton import (
    Array,
    Data,
    Delivery,
    Described,
    Handler,
    Link,
    Message,
    byte,
    char,
    float32,
    int32,
    short,
    symbol,
    timestamp,
    ubyte,
    uint,
    ulong,
    ushort,
)
from proton.reactor import LinkOption
from proton.utils import BlockingConnection

from local_broker.auth import generate_sas_token
from local_broker.wire.amqp import codec, compat
from patterns.drills.broker import BrokerNamespace
from tests.compat.test_raw_amqp import _settings

TIMEOUT_S = 10

# Where each row comes from (short names, used in the table's third column).
SPEC = "AMQP 1.0 part 3, 3.2"  # message format: header 3.2.1, properties 3.2.4, annotations 3.2.3/3.2.5
NET_CONVERTER = ".NET Azure.Messaging.ServiceBus src/Amqp/AmqpMessageConverter.cs"
NET_RECEIVED = ".NET src/Primitives/ServiceBusReceivedMessage.cs (unboxing casts)"
NET_RECEIVER = ".NET src/Amqp/AmqpReceiver.cs (GetValue<T> of the reply map)"
NET_SENDER = ".NET src/Amqp/AmqpSender.cs (GetValue<long[]>(sequence-numbers))"
NET_CBS = "Microsoft.Azure.Amqp src/Cbs/AmqpCbsLink.cs ((int) status-code, (string) status-description)"
NET_CONSTANTS = ".NET src/Amqp/AmqpClientConstants.cs, AmqpReceiver.cs (TryGetValue<long> locked-until-utc)"
LEARN = "Microsoft Learn: AMQP 1.0 in Azure Service Bus: request-response-based operations"
PYTHON_SDK = "azure-servicebus 7.15.0 _pyamqp (servicebus-wire.md 2, 4.4)"
JAVA_SERIALIZER = "Java azure-messaging-servicebus ServiceBusMessageSerializer / ManagementChannel"
GO_MESSAGE = "Go azservicebus message.go (DeliveryAnnotations[x-opt-lock-token].(amqp.UUID))"
NET_RULES = ".NET src/Amqp/Framing/AmqpRuleDescriptionCodec.cs, AmqpSqlRuleFilterCodec.cs, AmqpRuleManager.cs"
NET_DELETE = ".NET src/Amqp/AmqpReceiver.cs DeleteMessagesAsync (GetValue<int>(message-count))"

# The message-id types AMQP allows (3.2.11-3.2.14): a client's choice, kept; the broker's own ids are strings.
MESSAGE_ID = "message-id"
MESSAGE_ID_TYPES = frozenset({"string", "uuid", "ulong", "binary"})

# (where, field) -> (AMQP type, source). "where" is a message section, a reply, or an attach.
SERVICE_BUS_TYPES: dict[tuple[str, str], tuple[str, str]] = {
    ("header", "durable"): ("boolean", SPEC),
    ("header", "priority"): ("ubyte", SPEC),
    ("header", "ttl"): ("uint", f"{SPEC}; {NET_CONVERTER} (Header.Ttl)"),
    ("header", "first-acquirer"): ("boolean", SPEC),
    ("header", "delivery-count"): ("uint", f"{SPEC}; {NET_RECEIVED} (DeliveryCount)"),
    ("properties", "message-id"): (MESSAGE_ID, f"{SPEC} 3.2.4; {NET_CONVERTER} (MessageId.ToString())"),
    ("properties", "user-id"): ("binary", SPEC),
    ("properties", "to"): ("string", SPEC),
    ("properties", "subject"): ("string", SPEC),
    ("properties", "reply-to"): ("string", SPEC),
    ("properties", "correlation-id"): (MESSAGE_ID, SPEC),
    ("properties", "content-type"): ("symbol", f"{SPEC} 3.2.4; {NET_CONVERTER} (ContentType.Value); uAMQP-C"),
    ("properties", "content-encoding"): ("symbol", f"{SPEC} 3.2.4; {NET_CONVERTER} (ContentEncoding.Value)"),
    ("properties", "absolute-expiry-time"): ("timestamp", SPEC),
    ("properties", "creation-time"): ("timestamp", SPEC),
    ("properties", "group-id"): ("string", SPEC),
    ("properties", "group-sequence"): ("uint", f"{SPEC} (sequence-no)"),
    ("properties", "reply-to-group-id"): ("string", SPEC),
    ("message-annotations", "x-opt-sequence-number"): ("long", f"{NET_RECEIVED} ((long) SequenceNumber)"),
    ("message-annotations", "x-opt-enqueued-time"): ("timestamp", f"{NET_RECEIVED} ((DateTime))"),
    ("message-annotations", "x-opt-locked-until"): ("timestamp", f"{NET_CONVERTER} ((DateTime) LockedUntil)"),
    ("message-annotations", "x-opt-enqueue-sequence-number"): ("long", f"{NET_RECEIVED} ((long))"),
    ("message-annotations", "x-opt-message-state"): ("int", f"{NET_RECEIVED} ((ServiceBusMessageState) int)"),
    ("message-annotations", "x-opt-partition-id"): ("short", f"{NET_RECEIVED} (short PartitionId)"),
    ("message-annotations", "x-opt-partition-key"): ("string", f"{NET_CONVERTER}; {PYTHON_SDK}"),
    ("message-annotations", "x-opt-via-partition-key"): ("string", NET_CONVERTER),
    ("message-annotations", "x-opt-scheduled-enqueue-time"): ("timestamp", f"{NET_CONVERTER} (DateTime)"),
    ("message-annotations", "x-opt-deadletter-source"): ("string", f"{NET_RECEIVED} ((string))"),
    ("application-properties", "DeadLetterReason"): ("string", f"{NET_RECEIVED} (as string); {PYTHON_SDK}"),
    ("application-properties", "DeadLetterErrorDescription"): ("string", f"{NET_RECEIVED} (as string)"),
    ("application-properties", "RuleName"): (
        "string", "Microsoft Learn: Topic filters and actions (an action's copy names its rule)"),
    ("delivery-annotations", "x-opt-lock-token"): ("uuid", f"{GO_MESSAGE}; {PYTHON_SDK} 7"),
    ("delivery", "tag"): ("binary16", f"{NET_CONVERTER} (16-byte tag read as a Guid); {PYTHON_SDK} 7"),
    ("cbs reply", "correlation-id"): (
        "request message-id", "Microsoft.Azure.Amqp src/RequestResponseAmqpLink.cs (matched by MessageId)"),
    ("cbs reply", "status-code"): ("int", NET_CBS),
    ("cbs reply", "status-description"): ("string", NET_CBS),
    ("management reply", "correlation-id"): ("request message-id", LEARN),
    ("management reply", "statusCode"): ("int", f"{LEARN}; .NET src/Amqp/AmqpResponseMessage.cs ((int))"),
    ("management reply", "statusDescription"): ("string", LEARN),
    ("management reply", "errorCondition"): ("symbol", f"{LEARN}; .NET AmqpResponseMessage.cs (AmqpSymbol)"),
    ("attach sender", "com.microsoft:max-message-batch-size"): ("ulong", PYTHON_SDK),
    ("attach session receiver", "com.microsoft:locked-until-utc"): ("long", NET_CONSTANTS),
    ("attach session receiver", "com.microsoft:session-filter"): ("string", NET_CONSTANTS),
}

# $management reply bodies: operation -> {key: (AMQP type, source)}; `messages` entries are maps whose
# keys are listed as "messages[].<key>". An operation answering an empty map has no keys.
REPLY_BODIES: dict[str, dict[str, tuple[str, str]]] = {
    "com.microsoft:renew-lock": {"expirations": ("array<timestamp>", f"{LEARN}; {NET_RECEIVER}")},
    "com.microsoft:peek-message": {
        "messages": ("list<map>", f"{LEARN}; {NET_RECEIVER} (GetListValue<AmqpMap>)"),
        "messages[].message": ("binary", f"{LEARN}; {NET_RECEIVER} ((ArraySegment<byte>))"),
    },
    "com.microsoft:receive-by-sequence-number": {
        "messages": ("list<map>", f"{LEARN}; {NET_RECEIVER}"),
        "messages[].message": ("binary", LEARN),
        "messages[].lock-token": ("uuid", f"{LEARN}; {NET_RECEIVER} ((Guid))"),
    },
    "com.microsoft:schedule-message": {"sequence-numbers": ("array<long>", f"{LEARN}; {NET_SENDER}")},
    "com.microsoft:cancel-scheduled-message": {},
    "com.microsoft:update-disposition": {},
    "com.microsoft:renew-session-lock": {"expiration": ("timestamp", f"{LEARN}; {NET_RECEIVER} (DateTime)")},
    "com.microsoft:get-session-state": {"session-state": ("binary", f"{LEARN}; {NET_RECEIVER}")},
    "com.microsoft:set-session-state": {},
    "com.microsoft:get-message-sessions": {
        "skip": ("int", LEARN),
        "sessions-ids": ("array<string>", f"{LEARN}; {JAVA_SERIALIZER}"),
    },
    "com.microsoft:batch-delete-messages": {"message-count": ("int", NET_DELETE)},
    "com.microsoft:add-rule": {},
    "com.microsoft:remove-rule": {},
    "com.microsoft:enumerate-rules": {
        "rules": ("list<map>", f"{LEARN}; {NET_RULES}"),
        # a described list (descriptor ulong 0x13700000004): filter, action, name, created-at
        "rules[].rule-description": ("described", NET_RULES),
        "rules[].rule-description.descriptor": ("ulong", NET_RULES),
        "rules[].rule-description.filter": ("described", NET_RULES),
        "rules[].rule-description.action": ("described", NET_RULES),
        "rules[].rule-description.name": ("string", NET_RULES),
        "rules[].rule-description.created-at": ("timestamp", NET_RULES),
    },
}
_RULE_DESCRIPTION_FIELDS = ("filter", "action", "name", "created-at")

_HEADER_FIELDS = ("durable", "priority", "ttl", "first-acquirer", "delivery-count")
_PROPERTY_FIELDS = ("message-id", "user-id", "to", "subject", "reply-to", "correlation-id", "content-type",
                    "content-encoding", "absolute-expiry-time", "creation-time", "group-id", "group-sequence",
                    "reply-to-group-id")
_TYPE_NAMES: dict[type, str] = {
    type(None): "null", bool: "boolean", symbol: "symbol", str: "string", int32: "int", int: "long",
    short: "short", ushort: "ushort", byte: "byte", ubyte: "ubyte", uint: "uint", ulong: "ulong",
    timestamp: "timestamp", uuid.UUID: "uuid", bytes: "binary", memoryview: "binary", float32: "float",
    float: "double", char: "char", dict: "map", list: "list", Described: "described",
}
_ARRAY_TYPES = {Data.TIMESTAMP: "timestamp", Data.LONG: "long", Data.UUID: "uuid", Data.STRING: "string",
                Data.INT: "int", Data.SYMBOL: "symbol"}


def amqp_type(value: Any) -> str:
    """The AMQP type name of a value as proton's Data decoded it."""
    if isinstance(value, Array):
        return f"array<{_ARRAY_TYPES.get(value.type, value.type)}>"
    return _TYPE_NAMES[type(value)]


def decoded(raw: bytes) -> Any:
    """One encoded value, as proton's Data reads it (its own types kept; binaries copied out)."""
    data = Data()
    data.decode(bytes(raw))
    data.rewind()
    data.next()
    return _owned(data.get_object())


def _owned(value: Any) -> Any:
    if isinstance(value, memoryview):
        return bytes(value)
    if isinstance(value, dict):
        return {_owned(k): _owned(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_owned(v) for v in value]
    if isinstance(value, Described):
        return Described(value.descriptor, _owned(value.value))
    return value


@dataclass
class WireMessage:
    """An encoded message split into its sections, each decoded by proton with its AMQP types."""

    header: dict[str, Any] = field(default_factory=dict)
    delivery_annotations: dict[Any, Any] = field(default_factory=dict)
    annotations: dict[Any, Any] = field(default_factory=dict)
    properties: dict[str, Any] = field(default_factory=dict)
    application_properties: dict[Any, Any] = field(default_factory=dict)
    body: list[Any] = field(default_factory=list)  # data sections' bytes / amqp-value / amqp-sequence values

    @classmethod
    def of(cls, raw: bytes) -> WireMessage:
        out = cls()
        for code, start, end in codec.split_sections(bytes(raw)):
            value = decoded(raw[start:end]).value
            if code == codec.HEADER:
                out.header = dict(zip(_HEADER_FIELDS, value, strict=False))
            elif code == codec.DELIVERY_ANNOTATIONS:
                out.delivery_annotations = value
            elif code == codec.MESSAGE_ANNOTATIONS:
                out.annotations = value
            elif code == codec.PROPERTIES:
                out.properties = dict(zip(_PROPERTY_FIELDS, value, strict=False))
            elif code == codec.APPLICATION_PROPERTIES:
                out.application_properties = value
            elif code in codec.BODY_SECTIONS:
                out.body.append(value)
        return out


class Audit:
    """Checks what the broker sent against SERVICE_BUS_TYPES; `seen` lists the rows met. The names of the
    application properties and annotations the client sent itself are `own` (their types are the client's:
    the tests compare them with what was sent)."""

    def __init__(self, own: frozenset[str] = frozenset()) -> None:
        self.own = own
        self.seen: set[tuple[str, str]] = set()

    def check(self, where: str, name: str, value: Any, *, request_id: Any = None) -> None:
        row = SERVICE_BUS_TYPES.get((where, name))
        assert row is not None, f"{where} field {name!r} ({amqp_type(value)}) has no row in SERVICE_BUS_TYPES"
        expected, got = row[0], amqp_type(value)
        if expected == MESSAGE_ID:
            assert got in MESSAGE_ID_TYPES, f"{where} {name}: {got} is not a message-id type"
        elif expected == "request message-id":
            assert (got, value) == (amqp_type(request_id), request_id), f"{where} {name}: {got} {value!r}"
        elif expected == "binary16":
            assert got == "binary" and len(value) == 16, f"{where} {name}: {got} of {len(value)} bytes"
        else:
            assert got == expected, f"{where} {name}: Service Bus sends {expected}, the broker sent {got}"
        self.seen.add((where, name))

    def message(self, raw: bytes, *, tag: bytes | None = None) -> WireMessage:
        """Every header, property, annotation and broker-written application property of a message."""
        m = WireMessage.of(raw)
        for name, value in m.header.items():
            if value is not None:
                self.check("header", name, value)
        for name, value in m.properties.items():
            if value is not None:
                self.check("properties", name, value)
        for key, value in m.delivery_annotations.items():
            self.check("delivery-annotations", key, value)
        for key, value in m.annotations.items():
            assert type(key) is symbol, f"annotation key {key!r} is not a symbol"
            if key not in self.own:
                self.check("message-annotations", key, value)
        for key, value in m.application_properties.items():
            if key not in self.own:
                self.check("application-properties", key, value)
        if tag is not None:
            self.check("delivery", "tag", tag)
        return m

    def attach(self, where: str, link: Any) -> None:
        """The properties of the broker's attach (and the session filter it echoes on a session receiver)."""
        for key, value in (link.remote_properties or {}).items():
            self.check(where, key, value)
        if where == "attach session receiver":
            data = link.remote_source.filter
            data.rewind()
            data.next()
            for key, value in data.get_object().items():
                self.check(where, key, value)

    def reply(self, raw: bytes, request_id: Any, *, operation: str | None) -> WireMessage:
        """A `$cbs` reply (operation None) or a `$management` reply to `operation`, body included."""
        m = WireMessage.of(raw)
        where = "cbs reply" if operation is None else "management reply"
        self.check(where, "correlation-id", m.properties.get("correlation-id"), request_id=request_id)
        for key, value in m.application_properties.items():
            self.check(where, key, value)
        if operation is not None and m.application_properties.get("statusCode") == 200:
            self._reply_body(operation, m.body[0])
        return m

    def _reply_body(self, operation: str, body: Any) -> None:
        rows = REPLY_BODIES.get(operation)
        assert rows is not None, f"no REPLY_BODIES row for {operation}"
        assert type(body) is dict, f"{operation}: the reply body is {amqp_type(body)}, not a map"
        for key, value in body.items():
            self._body_field(operation, rows, str(key), value)
            if amqp_type(value) != "list":
                continue
            for entry in value:  # messages, rules: a map each
                for inner_key, inner in entry.items():
                    name = f"{key}[].{inner_key}"
                    self._body_field(operation, rows, name, inner)
                    if inner_key == "message":
                        self.message(inner)
                    elif inner_key == "rule-description":
                        self._body_field(operation, rows, f"{name}.descriptor", inner.descriptor)
                        for field_name, item in zip(_RULE_DESCRIPTION_FIELDS, inner.value, strict=True):
                            self._body_field(operation, rows, f"{name}.{field_name}", item)

    def _body_field(self, operation: str, rows: dict[str, tuple[str, str]], key: str, value: Any) -> None:
        assert key in rows, f"{operation} reply key {key!r} ({amqp_type(value)}) has no row in REPLY_BODIES"
        expected, got = rows[key][0], amqp_type(value)
        if expected == "list<map>":
            assert got == "list" and all(type(v) is dict for v in value), f"{operation} {key}: {got}"
        else:
            assert got == expected, f"{operation} {key}: Service Bus sends {expected}, the broker sent {got}"
        self.seen.add((operation, key))


# --- a raw receiver: the bytes of each delivery, as the broker sent them -----------------------------------

@dataclass
class Received:
    raw: bytes
    tag: bytes
    delivery: Delivery

    def settle(self, outcome: int = Delivery.ACCEPTED) -> None:
        self.delivery.update(outcome)
        self.delivery.settle()


class RawDeliveries(Handler):
    """A receiver link's handler that keeps each delivery's bytes and raw tag (proton's Message would
    re-decode and lose types; its Delivery.tag assumes UTF-8)."""

    def __init__(self) -> None:
        super().__init__()
        self.received: list[Received] = []

    def on_delivery(self, event: Any) -> None:
        delivery = event.delivery
        if delivery.readable and not delivery.partial:  # once: advance() moves the link past it
            raw = delivery.link.recv(delivery.pending)
            delivery.link.advance()
            self.received.append(Received(bytes(raw), compat.delivery_tag(delivery._impl), delivery))


def wait_for(connection: BlockingConnection, done: Callable[[], bool], what: str) -> None:
    connection.wait(done, timeout=TIMEOUT_S, msg=f"the broker did not send {what}")


def raw_receiver(connection: BlockingConnection, address: str, *, credit: int, name: str | None = None,
                 options: Any = None) -> tuple[Any, RawDeliveries]:
    handler = RawDeliveries()
    receiver = connection.create_receiver(address, credit=credit, name=name, handler=handler, options=options)
    return receiver, handler


def next_delivery(connection: BlockingConnection, handler: RawDeliveries, what: str) -> Received:
    wait_for(connection, lambda: bool(handler.received), what)
    return handler.received.pop(0)


@dataclass(frozen=True)
class LinkShape(LinkOption):
    """A link's addresses, settle mode and attach properties as a given SDK sets them."""

    source: str | None = None
    target: str | None = None
    properties: dict[symbol, Any] | None = None
    presettled: bool = False

    def apply(self, link: Any) -> None:
        if self.source is not None:
            link.source.address = self.source
        if self.target is not None:
            link.target.address = self.target
        if self.properties:
            link.properties = self.properties
        if self.presettled:
            link.snd_settle_mode = Link.SND_SETTLED


# application-properties keys are strings (AMQP 1.0 3.2.5); attach properties keys are symbols
SERVER_TIMEOUT, REQUEST_TRACKING_ID = "com.microsoft:server-timeout", "com.microsoft:tracking-id"
TRACKING_ID = symbol("com.microsoft:tracking-id")
TIMEOUT = symbol("com.microsoft:timeout")
ENTITY_TYPE = symbol("com.microsoft:entity-type")


class RequestLink:
    """A request/response pair on `node` as an SDK attaches it, and its requests in that SDK's form.

    .NET (Microsoft.Azure.Amqp RequestResponseAmqpLink.cs, used for `$cbs` and `<entity>/$management`):
    links `duplex<ids>:sender` / `:receiver`, both pre-settled with `com.microsoft:timeout` (uint) among
    their properties, the sender without a source address, the receiver's target a GUID in "N" form that
    is also every request's `reply-to`; message-ids are strings (the link's name and a counter).
    Java (azure-core-amqp RequestResponseChannel): `<name>:sender` / `:receiver`, the reply address as the
    sender's source and the receiver's target, unsettled, ulong message-ids counting from 0.
    """

    def __init__(self, connection: BlockingConnection, node: str, sdk: str = ".NET") -> None:
        self.connection, self.node, self.sdk, self.count = connection, node, sdk, 0
        if sdk == ".NET":
            name = f"duplex{uuid.uuid4().int % 1000}:1:{uuid.uuid4().int % 100}"
            self.reply_to = uuid.uuid4().hex
            props = {TIMEOUT: uint(60_000)}
            sender_shape = LinkShape(properties=props, presettled=True)
            receiver_shape = LinkShape(target=self.reply_to, properties=props, presettled=True)
        else:
            name = self.reply_to = f"{node}-{uuid.uuid4()}"
            sender_shape, receiver_shape = LinkShape(source=self.reply_to), LinkShape(target=self.reply_to)
        self.name = name
        self.sender = connection.create_sender(node, name=f"{name}:sender", options=sender_shape)
        self.receiver, self.replies = raw_receiver(connection, node, credit=50, name=f"{name}:receiver",
                                                   options=receiver_shape)

    def request_id(self) -> Any:
        self.count += 1
        return f"{self.name}{self.count}" if self.sdk == ".NET" else ulong(self.count - 1)

    def call(self, audit: Audit, operation: str | None, application_properties: dict[str, Any],
             body: Any) -> WireMessage:
        """Send one request; the reply, every field of it checked by `audit` (a $cbs one if `operation`
        is None)."""
        request_id = self.request_id()  # proton's Message reads a ulong id back as an int: keep ours
        message = Message(id=request_id, reply_to=self.reply_to, properties=application_properties, body=body)
        self.sender.send(message)
        reply = next_delivery(self.connection, self.replies, f"a reply to {operation or 'put-token'}")
        reply.settle()
        return audit.reply(reply.raw, request_id, operation=operation)

    def management(self, audit: Audit, operation: str, body: dict[str, Any], **extra: Any) -> WireMessage:
        """A `$management` request as .NET's AmqpRequestMessage.cs builds it: operation, server-timeout
        (uint ms), tracking-id (a GUID string), plus `extra` (e.g. associated-link-name)."""
        app = {"operation": operation, SERVER_TIMEOUT: uint(60_000), REQUEST_TRACKING_ID: str(uuid.uuid4()),
               **extra}
        return self.call(audit, operation, app, body)

    def close(self) -> None:
        self.sender.close()
        self.receiver.close()


def put_token(link: RequestLink, audit: Audit, audience: str, token: str) -> WireMessage:
    """A CBS put-token as Microsoft.Azure.Amqp's AmqpCbsLink.cs sends it: the token as an amqp-value string;
    operation, type, name (the audience) and expiration (a timestamp) as application properties."""
    expires = timestamp(int((time.time() + 3600) * 1000))
    return link.call(audit, None, {"operation": "put-token", "type": "servicebus.windows.net:sastoken",
                                   "name": audience, "expiration": expires}, token)


def sas_token(namespace: BrokerNamespace, path: str = "", key: str | None = None) -> tuple[str, str]:
    """(audience, SAS token) for `sb://<host>/<path>` with the namespace's policy (or another `key`)."""
    host, key_name, real_key = _settings(namespace)
    audience = f"sb://{host}/{path}"
    return audience, generate_sas_token(audience, key_name, key or real_key, int(time.time()) + 3600)


@contextmanager
def dotnet_connection(namespace: BrokerNamespace, host: str | None = None) -> Iterator[BlockingConnection]:
    """A connection (to `host`, by default the namespace's AMQP port) authorized for the whole namespace by
    a put-token in .NET's form, its reply audited."""
    opened = BlockingConnection(f"amqp://{host or _settings(namespace)[0]}", timeout=TIMEOUT_S,
                                allowed_mechs="ANONYMOUS")
    try:
        assert status(put_token(RequestLink(opened, "$cbs"), Audit(), *sas_token(namespace))) == 202
        yield opened
    finally:
        opened.close()


def status(reply: WireMessage) -> int:
    props = reply.application_properties
    return props.get("statusCode", props.get("status-code"))
