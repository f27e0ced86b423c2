"""Every `com.microsoft:*` management operation the broker implements, requested as .NET's AmqpReceiver /
AmqpSender build them (Microsoft.Azure.Amqp's request/response link: pre-settled, string message-ids,
`com.microsoft:server-timeout` uint and `com.microsoft:tracking-id`; map keys as strings; lock tokens as
uuid arrays, sequence numbers as long arrays, counts as ints, settle modes as uints) and as Java does
(ulong message-ids); every reply's properties, application properties and body checked against the one
table (wire_types.REPLY_BODIES), errors included."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from proton import UNDESCRIBED, Array, Data, Message, int32, symbol, timestamp, uint
from proton.utils import BlockingConnection

from patterns.drills.broker import BrokerNamespace
from tests.compat.test_raw_amqp import SessionFilter
from tests.compat.wire_types import (
    REPLY_BODIES,
    Audit,
    RequestLink,
    WireMessage,
    dotnet_connection,
    next_delivery,
    put_token,
    raw_receiver,
    sas_token,
    status,
)

TOPOLOGY = {"namespaces": {"management": {
    "queues": {"q": {}, "sessions": {"requires_session": True}, "purged": {}},
    "topics": {"t": {"subscriptions": {"s": {}}}}}}}
DATETIME_MAX_MS = 253402300800000  # DateTime.MaxValue: "sessions with messages or state" (Learn)


@pytest.fixture(scope="module")
def namespace(serve) -> BrokerNamespace:
    return serve(TOPOLOGY)["management"]


@pytest.fixture
def connection(namespace: BrokerNamespace) -> Iterator[BlockingConnection]:
    with dotnet_connection(namespace) as opened:
        yield opened


def uuids(*values: uuid.UUID) -> Array:
    return Array(UNDESCRIBED, Data.UUID, *values)


def longs(*values: int) -> Array:
    return Array(UNDESCRIBED, Data.LONG, *values)


def received(connection: BlockingConnection, address: str, count: int, link_name: str, **options):
    """`count` messages sent to `address` and received in peek-lock on a link named `link_name`."""
    sender = connection.create_sender(address)
    for i in range(count):
        sender.send(Message(id=f"m{i}", group_id=options.get("session"), body=b"x"))
    sender.close()
    filters = SessionFilter(options["session"]) if options.get("session") else None
    receiver, deliveries = raw_receiver(connection, address, credit=count, name=link_name, options=filters)
    got = [next_delivery(connection, deliveries, f"message {i}") for i in range(count)]
    return receiver, got


def lock_token(delivery) -> uuid.UUID:
    return uuid.UUID(bytes_le=delivery.tag)


def test_every_operation_in_dotnets_form_answers_in_service_bus_types(connection) -> None:
    audit = Audit(own=frozenset({"touched"}))  # an application property abandon sets, in the client's type
    q = RequestLink(connection, "q/$management")
    link = {"associated-link-name": "q-receiver"}
    receiver, got = received(connection, "q", 5, "q-receiver")
    tokens = [lock_token(g) for g in got]
    sequence_numbers = [WireMessage.of(g.raw).annotations[symbol("x-opt-sequence-number")] for g in got]

    renewed = q.management(audit, "com.microsoft:renew-lock", {"lock-tokens": uuids(*tokens[:2])}, **link)
    assert status(renewed) == 200 and len(renewed.body[0]["expirations"].elements) == 2
    peeked = q.management(audit, "com.microsoft:peek-message",
                          {"from-sequence-number": sequence_numbers[0], "message-count": int32(3)})
    assert len(peeked.body[0]["messages"]) == 3
    for tokens_now, disposition, extra in (
            ([tokens[0]], "completed", {}),
            ([tokens[1]], "abandoned", {"properties-to-modify": {"touched": int32(1)}}),
            ([tokens[2]], "defered", {}),  # sic: the SDKs' spelling
            ([tokens[3]], "suspended", {"deadletter-reason": "r", "deadletter-description": "d"})):
        body = {"disposition-status": disposition, "lock-tokens": uuids(*tokens_now), **extra}
        assert status(q.management(audit, "com.microsoft:update-disposition", body, **link)) == 200
    abandoned = q.management(audit, "com.microsoft:peek-message",
                             {"from-sequence-number": sequence_numbers[1], "message-count": int32(1)})
    touched = WireMessage.of(abandoned.body[0]["messages"][0]["message"]).application_properties["touched"]
    assert (type(touched), touched) == (int32, 1)
    deferred = q.management(audit, "com.microsoft:receive-by-sequence-number", {
        "sequence-numbers": longs(sequence_numbers[2]), "receiver-settle-mode": uint(1)}, **link)
    (entry,) = deferred.body[0]["messages"]
    assert status(q.management(audit, "com.microsoft:update-disposition", {
        "disposition-status": "completed", "lock-tokens": uuids(entry["lock-token"])}, **link)) == 200

    in_an_hour = timestamp(int((time.time() + 3600) * 1000))
    scheduled = q.management(audit, "com.microsoft:schedule-message", {"messages": [
        {"message-id": f"s{i}", "message": bytes(Message(id=f"s{i}", body=b"later", annotations={
            symbol("x-opt-scheduled-enqueue-time"): in_an_hour}).encode())} for i in range(2)]})
    numbers = scheduled.body[0]["sequence-numbers"]
    assert len(numbers.elements) == 2
    cancelled = q.management(audit, "com.microsoft:cancel-scheduled-message",
                             {"sequence-numbers": longs(*numbers.elements)})
    assert status(cancelled) == 200
    receiver.close()
    q.close()

    sessions = RequestLink(connection, "sessions/$management")
    receiver, got = received(connection, "sessions", 1, "session-receiver", session="S")
    session_link = {"associated-link-name": "session-receiver"}
    renewed = sessions.management(audit, "com.microsoft:renew-session-lock", {"session-id": "S"},
                                  **session_link)
    assert status(renewed) == 200
    state = sessions.management(audit, "com.microsoft:set-session-state",
                                {"session-id": "S", "session-state": b"\x01state"}, **session_link)
    assert status(state) == 200
    state = sessions.management(audit, "com.microsoft:get-session-state", {"session-id": "S"}, **session_link)
    assert state.body[0]["session-state"] == b"\x01state"
    listed = sessions.management(audit, "com.microsoft:get-message-sessions", {
        "last-updated-time": timestamp(DATETIME_MAX_MS), "skip": int32(0), "top": int32(100)})
    assert list(listed.body[0]["sessions-ids"].elements) == ["S"]
    got[0].settle()
    receiver.close()
    sessions.close()

    purge_and_manage_rules(connection, audit)

    missing = set(REPLY_BODIES) - {operation for operation, _ in audit.seen} - {
        op for op, keys in REPLY_BODIES.items() if not keys}
    assert not missing, f"operations whose reply body was not checked: {sorted(missing)}"


def purge_and_manage_rules(connection: BlockingConnection, audit: Audit) -> None:
    """batch-delete-messages as .NET's DeleteMessagesAsync sends it (message-count int, enqueued-time-utc
    timestamp), and add/enumerate/remove-rule as its ServiceBusRuleManager does (the description as maps)."""
    sender = connection.create_sender("purged")
    for i in range(3):
        sender.send(Message(id=f"p{i}", body=b"x"))
    sender.close()
    purged = RequestLink(connection, "purged/$management")
    deleted = purged.management(audit, "com.microsoft:batch-delete-messages", {
        "message-count": int32(10), "enqueued-time-utc": timestamp(int((time.time() + 60) * 1000))})
    assert deleted.body[0]["message-count"] == 3
    purged.close()

    rules = RequestLink(connection, "t/Subscriptions/s/$management")
    for name, description in (
            ("sql", {"sql-filter": {"expression": "n = 1"}, "sql-rule-action": {"expression": "SET m = 2"}}),
            ("corr", {"correlation-filter": {"correlation-id": "c", "properties": {"n": int32(5)}},
                      "sql-rule-action": None})):
        added = rules.management(audit, "com.microsoft:add-rule", {
            "rule-name": name, "rule-description": {**description, "rule-name": name}})
        assert status(added) == 200
    listed = rules.management(audit, "com.microsoft:enumerate-rules", {"top": int32(100), "skip": int32(0)})
    names = [entry["rule-description"].value[2] for entry in listed.body[0]["rules"]]
    assert names == ["$Default", "sql", "corr"]
    assert status(rules.management(audit, "com.microsoft:remove-rule", {"rule-name": "corr"})) == 200
    rules.close()


def test_errors_carry_an_int_status_and_a_symbol_condition(connection) -> None:
    audit = Audit()
    q = RequestLink(connection, "q/$management")
    lost = q.management(audit, "com.microsoft:renew-lock", {"lock-tokens": uuids(uuid.uuid4())})
    assert (status(lost), lost.application_properties["errorCondition"]) == (
        410, "com.microsoft:message-lock-lost")
    unknown = q.management(audit, "com.microsoft:no-such-operation", {})
    assert (status(unknown), unknown.application_properties["errorCondition"]) == (
        501, "amqp:not-implemented")
    empty = q.management(audit, "com.microsoft:peek-message", {"from-sequence-number": 10**6,
                                                                "message-count": int32(1)})
    assert status(empty) == 204
    assert ("management reply", "errorCondition") in audit.seen


def test_javas_ulong_request_ids_are_echoed_as_ulongs(namespace, connection) -> None:
    """Java's RequestResponseChannel numbers requests with ulongs, from 0, on unsettled links named
    `<name>:sender` / `:receiver`; the reply's correlation-id must be the same ulong."""
    audit = Audit(own=frozenset({"touched"}))  # the property an earlier test's abandon set
    cbs = RequestLink(connection, "$cbs", sdk="Java")
    assert status(put_token(cbs, audit, *sas_token(namespace, "q"))) == 202
    q = RequestLink(connection, "q/$management", sdk="Java")
    assert status(q.management(audit, "com.microsoft:peek-message", {
        "from-sequence-number": 1, "message-count": int32(1)})) in (200, 204)
    assert {("cbs reply", "correlation-id"), ("management reply", "correlation-id")} <= audit.seen
