"""Messages as .NET and Java put them on the wire, and every field of every message the broker delivers
checked against the one table of Service Bus's AMQP types (wire_types.SERVICE_BUS_TYPES): received in
peek-lock, from a partitioned queue and a session, forwarded, dead-lettered (with the broker's
DeadLetterReason properties), scheduled, deferred, peeked and received by sequence number. What a client
typed itself (application properties, its annotations, a uuid or ulong message-id, content-type as a symbol)
comes back in the same type."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from proton import (
    UNDESCRIBED,
    Array,
    Condition,
    Data,
    Delivery,
    Described,
    Message,
    int32,
    short,
    symbol,
    timestamp,
    uint,
    ulong,
)
from proton.utils import BlockingConnection

from patterns.drills.broker import BrokerNamespace
from tests.compat.test_raw_amqp import SessionFilter
from tests.compat.wire_types import (
    ENTITY_TYPE,
    MESSAGE_ID_TYPES,
    SERVICE_BUS_TYPES,
    TIMEOUT,
    TRACKING_ID,
    Audit,
    LinkShape,
    RequestLink,
    WireMessage,
    amqp_type,
    dotnet_connection,
    next_delivery,
    raw_receiver,
    status,
)

TOPOLOGY = {"namespaces": {"conformance": {"queues": {
    "plain": {}, "partitioned": {"enable_partitioning": True}, "sessions": {"requires_session": True},
    "forwarder": {"forward_to": "forwarded"}, "forwarded": {}, "dead": {}, "later": {}, "deferred": {},
    "dead-forwarding": {"forward_dead_lettered_messages_to": "dead-target"}, "dead-target": {},
}, "topics": {"events": {"subscriptions": {"acted-on": {"rules": {"stamp": {
    "filter": {"sql": "1=1"}, "action": {"sql": "SET stamped = 1"}}}}}}}}}}
TIMESPAN = symbol("com.microsoft:timespan")
# Application properties as .NET's converter writes them (TryGetAmqpObjectFromNetObject): each in its AMQP
# type; TimeSpan as a described long of ticks.
DOTNET_PROPERTIES = {
    "int": int32(7), "long": 2**40, "uint": uint(8), "short": short(-3), "double": 0.25, "bool": True,
    "string": "text", "guid": uuid.UUID(int=77), "datetime": timestamp(1_700_000_000_000),
    "timespan": Described(TIMESPAN, 10_000_000), "binary": b"\x00\x01",
}
CLIENT_ANNOTATIONS = {symbol("x-client-note"): "kept", symbol("x-client-count"): int32(3)}


@pytest.fixture(scope="module")
def namespace(serve) -> BrokerNamespace:
    return serve(TOPOLOGY)["conformance"]


@pytest.fixture
def connection(namespace: BrokerNamespace) -> Iterator[BlockingConnection]:
    with dotnet_connection(namespace) as opened:
        yield opened


def dotnet_message(message_id: object = None, **fields: object) -> Message:
    """A message as .NET's AmqpMessageConverter.SBMessageToAmqpMessage builds one with every property set:
    ttl (uint) with creation-time and absolute-expiry-time, content-type a symbol (proton's Message
    writes it so), typed application properties."""
    now = time.time()
    fields.setdefault("annotations", dict(CLIENT_ANNOTATIONS))
    return Message(
        id=message_id or str(uuid.uuid4()), correlation_id="corr", subject="label", address="to-somewhere",
        reply_to="replies", content_type="application/json", reply_to_group_id="reply-session", ttl=300,
        creation_time=now, expiry_time=now + 300, durable=True, body=b'{"n": 1}',
        properties=dict(DOTNET_PROPERTIES), **fields)


def receiver_shape(sessions: bool = False) -> LinkShape:
    """A receiver's attach properties as .NET and Java set them: entity-type (int), timeout (uint),
    tracking-id (string)."""
    return LinkShape(properties={ENTITY_TYPE: int32(0), TIMEOUT: uint(10_000),
                                 TRACKING_ID: str(uuid.uuid4())})


OWN = frozenset([*DOTNET_PROPERTIES, *CLIENT_ANNOTATIONS, "stamped"])  # `stamped`: set by a rule action


def assert_clients_types_kept(m: WireMessage, message_id: object) -> None:
    assert (m.properties["message-id"], amqp_type(m.properties["message-id"])) == (
        message_id, amqp_type(message_id))
    assert (m.properties["content-type"], amqp_type(m.properties["content-type"])) == (
        "application/json", "symbol")
    for name, value in DOTNET_PROPERTIES.items():
        got = m.application_properties[name]
        assert (amqp_type(got), got) == (amqp_type(value), value), name
    for key, value in CLIENT_ANNOTATIONS.items():
        assert (amqp_type(m.annotations[key]), m.annotations[key]) == (amqp_type(value), value)


def send(connection: BlockingConnection, address: str, *messages: Message,
         audit: Audit | None = None) -> None:
    sender = connection.create_sender(address, options=LinkShape(properties={ENTITY_TYPE: int32(0)}))
    if audit is not None:
        audit.attach("attach sender", sender.link)
    for message in messages:
        sender.send(message)
    sender.close()


def test_every_field_of_every_delivered_message_has_the_service_bus_type(connection) -> None:
    """One pass over each way a message reaches a client; at the end every message row of the table has
    been met, so a field the broker stopped sending shows too."""
    audit = Audit(OWN)
    ids = [str(uuid.uuid4()), uuid.UUID(int=5), ulong(42), b"binary-id"]  # every message-id type
    assert {amqp_type(i) for i in ids} == MESSAGE_ID_TYPES
    send(connection, "plain", *[dotnet_message(i, user_id=b"user") for i in ids], audit=audit)
    receiver, deliveries = raw_receiver(connection, "plain", credit=10, options=receiver_shape())
    for message_id in ids:
        got = next_delivery(connection, deliveries, "a message")
        m = audit.message(got.raw, tag=got.tag)
        assert_clients_types_kept(m, message_id)
        got.settle()
    receiver.close()

    # a partitioned queue: x-opt-partition-id (short) and the partition key
    send(connection, "partitioned", dotnet_message(annotations={**CLIENT_ANNOTATIONS,
                                                                symbol("x-opt-partition-key"): "pk",
                                                                symbol("x-opt-via-partition-key"): "pk"}))
    receiver, deliveries = raw_receiver(connection, "partitioned", credit=1, options=receiver_shape())
    got = next_delivery(connection, deliveries, "a partitioned message")
    m = audit.message(got.raw, tag=got.tag)
    assert amqp_type(m.annotations[symbol("x-opt-partition-id")]) == "short"
    got.settle()
    receiver.close()

    # forwarded: the message that reaches `forwarded` through `forwarder`
    send(connection, "forwarder", dotnet_message())
    receiver, deliveries = raw_receiver(connection, "forwarded", credit=1, options=receiver_shape())
    got = next_delivery(connection, deliveries, "a forwarded message")
    assert_clients_types_kept(audit.message(got.raw, tag=got.tag), got and WireMessage.of(
        got.raw).properties["message-id"])
    got.settle()
    receiver.close()

    # a session: group-id, group-sequence, content-encoding; the session receiver's attach
    send(connection, "sessions", dotnet_message("in-session", group_id="S", group_sequence=3,
                                                content_encoding="utf-8"))
    receiver, deliveries = raw_receiver(connection, "sessions", credit=1,
                                        options=[receiver_shape(), SessionFilter("S")])
    audit.attach("attach session receiver", receiver.link)
    got = next_delivery(connection, deliveries, "a session's message")
    m = audit.message(got.raw, tag=got.tag)
    assert (m.properties["group-id"], m.properties["group-sequence"]) == ("S", uint(3))
    got.settle()
    receiver.close()

    # a subscription's copy made by a rule's action: RuleName, and the client's types kept beside it
    send(connection, "events", dotnet_message("acted-on"))
    receiver, deliveries = raw_receiver(connection, "events/Subscriptions/acted-on", credit=1,
                                        options=receiver_shape())
    got = next_delivery(connection, deliveries, "the action's copy")
    m = audit.message(got.raw, tag=got.tag)
    assert (m.application_properties["RuleName"], m.application_properties["stamped"]) == ("stamp", 1)
    assert_clients_types_kept(m, "acted-on")
    got.settle()
    receiver.close()

    dead_letter_with_reason(connection, audit)
    schedule_defer_peek_and_receive_by_sequence_number(connection, audit)

    message_rows = {key for key in SERVICE_BUS_TYPES if key[0] in (
        "header", "properties", "message-annotations", "application-properties", "delivery",
        "delivery-annotations",
        "attach sender", "attach session receiver")}
    missing = message_rows - audit.seen
    assert not missing, f"rows of the table no delivered message carried: {sorted(missing)}"


def dead_letter_with_reason(connection: BlockingConnection, audit: Audit) -> None:
    """Dead-lettered over the receive link with a rejected outcome as .NET sends it: the broker writes
    DeadLetterReason / DeadLetterErrorDescription (strings) and the DLQ message keeps the client's types."""
    send(connection, "dead", dotnet_message("to-dead-letter"))
    receiver, deliveries = raw_receiver(connection, "dead", credit=1, options=receiver_shape())
    got = next_delivery(connection, deliveries, "a message to dead-letter")
    got.delivery.local.condition = Condition("com.microsoft:dead-letter", "why", {
        "DeadLetterReason": "reason", "DeadLetterErrorDescription": "description"})
    got.settle(Delivery.REJECTED)
    receiver.close()
    receiver, deliveries = raw_receiver(connection, "dead/$DeadLetterQueue", credit=1,
                                        options=receiver_shape())
    got = next_delivery(connection, deliveries, "the dead-lettered message")
    m = audit.message(got.raw, tag=got.tag)
    assert m.application_properties["DeadLetterReason"] == "reason"
    assert_clients_types_kept(m, "to-dead-letter")
    got.settle()
    receiver.close()

    # dead-lettered where dead letters are forwarded: x-opt-deadletter-source names where it died
    send(connection, "dead-forwarding", dotnet_message("to-forward-dead"))
    receiver, deliveries = raw_receiver(connection, "dead-forwarding", credit=1, options=receiver_shape())
    got = next_delivery(connection, deliveries, "a message to dead-letter and forward")
    got.settle(Delivery.REJECTED)
    receiver.close()
    receiver, deliveries = raw_receiver(connection, "dead-target", credit=1, options=receiver_shape())
    got = next_delivery(connection, deliveries, "the forwarded dead letter")
    m = audit.message(got.raw, tag=got.tag)
    assert m.annotations[symbol("x-opt-deadletter-source")] == "dead-forwarding"
    got.settle()
    receiver.close()


def schedule_defer_peek_and_receive_by_sequence_number(connection: BlockingConnection, audit: Audit) -> None:
    """A message scheduled through `$management` (as .NET's AmqpSender schedules: a list of maps with the
    encoded message as binary) and one deferred; peeked (state int 2 and 1, scheduled-enqueue-time) and the
    deferred one received by its sequence number (the reply's message and lock-token audited)."""
    later = RequestLink(connection, "later/$management")
    scheduled_for = timestamp(int((time.time() + 3600) * 1000))
    inner = dotnet_message("scheduled", annotations={
        **CLIENT_ANNOTATIONS, symbol("x-opt-scheduled-enqueue-time"): scheduled_for})
    reply = later.management(audit, "com.microsoft:schedule-message", {"messages": [{
        "message-id": "scheduled", "message": bytes(inner.encode())}]})
    assert status(reply) == 200
    peeked = later.management(audit, "com.microsoft:peek-message", {
        "from-sequence-number": 1, "message-count": int32(10)})
    (entry,) = peeked.body[0]["messages"]
    m = WireMessage.of(entry["message"])
    assert m.annotations[symbol("x-opt-message-state")] == int32(2)
    assert_clients_types_kept(m, "scheduled")
    later.close()

    send(connection, "deferred", dotnet_message("to-defer"))
    receiver, deliveries = raw_receiver(connection, "deferred", credit=1, name="deferring-receiver",
                                        options=receiver_shape())
    got = next_delivery(connection, deliveries, "a message to defer")
    sequence_number = WireMessage.of(got.raw).annotations[symbol("x-opt-sequence-number")]
    got.delivery.local.failed = True
    got.delivery.local.undeliverable = True
    got.settle(Delivery.MODIFIED)  # .NET defers with modified(undeliverable-here)
    deferred = RequestLink(connection, "deferred/$management")
    peeked = deferred.management(audit, "com.microsoft:peek-message", {
        "from-sequence-number": sequence_number, "message-count": int32(1)})
    assert WireMessage.of(peeked.body[0]["messages"][0]["message"]).annotations[
        symbol("x-opt-message-state")] == int32(1)
    fetched = deferred.management(audit, "com.microsoft:receive-by-sequence-number", {
        "sequence-numbers": Array(UNDESCRIBED, Data.LONG, sequence_number), "receiver-settle-mode": uint(1)},
        **{"associated-link-name": "deferring-receiver"})
    (entry,) = fetched.body[0]["messages"]
    assert_clients_types_kept(WireMessage.of(entry["message"]), "to-defer")
    done = deferred.management(audit, "com.microsoft:update-disposition", {
        "disposition-status": "completed", "lock-tokens": Array(UNDESCRIBED, Data.UUID, entry["lock-token"])})
    assert status(done) == 200
    deferred.close()
    receiver.close()
