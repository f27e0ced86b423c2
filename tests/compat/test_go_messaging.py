"""Sending, receiving and settling with the official Go SDK (go/messaging.go, one run), and the same messages
crossing between the Go and Python SDKs."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import pytest
import test_js_messaging
from azure.servicebus import ServiceBusClient
from go_runner import run_go
from test_js_messaging import SERVICE_BUS_ID, send_from_python

# The JavaScript suite's queues, one the Go SDK sends to for the Python SDK, one for whole AMQP messages, one
# for messages the SDK releases, one forwarding to a queue that refuses sends.
TOPOLOGY = {"namespaces": {"compat": {"queues": {
    **test_js_messaging.TOPOLOGY["namespaces"]["compat"]["queues"], "from-go": {}, "amqp": {},
    "release": {}, "closed": {"status": "SendDisabled"}, "forwarder": {"forward_to": "closed"}}}}}
UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


@pytest.fixture(scope="module")
def namespace(serve):
    return serve(TOPOLOGY)["compat"]


@pytest.fixture(scope="module")
def go(namespace) -> dict[str, Any]:
    send_from_python(namespace)
    return run_go("messaging", namespace)


def test_send_keeps_every_property_and_a_message_without_id_gets_one(go) -> None:
    full, anonymous, *listed = go["sendAndReceive"]["messages"]
    assert full["body"] == '{"hello":"world"}'
    fields = ("messageId", "subject", "correlationId", "contentType", "to", "replyTo", "replyToSessionId")
    assert {k: full[k] for k in fields} == {
        "messageId": "m-full", "subject": "subj", "correlationId": "c1", "contentType": "application/json",
        "to": "dest", "replyTo": "back", "replyToSessionId": "rs"}
    assert full["timeToLiveMs"] == 300000
    assert full["applicationProperties"] == {"k": "v", "n": 7, "i": 3, "flag": True, "f": 2.5}
    # each property comes back as the AMQP type it was sent as
    assert full["applicationPropertyTypes"] == {"k": "string", "n": "int64", "i": "int32", "flag": "bool",
                                                "f": "float64"}
    # the Go SDK counts this delivery too: the header's delivery-count (0 on a first delivery) plus one
    assert full["deliveryCount"] == 1 and full["state"] == "active" and full["lockToken"]
    enqueued, locked, expires = (dt.datetime.fromisoformat(full[k]) for k in ("enqueuedTime", "lockedUntil",
                                                                              "expiresAt"))
    assert enqueued < locked and expires == enqueued + dt.timedelta(minutes=5)
    assert anonymous["body"] == "no id" and SERVICE_BUS_ID.match(anonymous["messageId"])
    assert [(m["body"], m["messageId"]) for m in listed] == [("list-0", "l0"), ("list-1", "l1")]
    assert [m["sequenceNumber"] for m in go["sendAndReceive"]["messages"]] == [1, 2, 3, 4]
    assert go["sendAndReceive"]["leftover"] == 0


def test_a_batch_of_100_delivers_100_messages_in_order(go) -> None:
    batch = go["batch"]
    assert batch["count"] == 100
    assert batch["bodies"][:100] == [f"b{i}" for i in range(100)]
    assert batch["ids"][:100] == [f"b{i}" for i in range(100)]
    assert batch["properties"] == list(range(100))
    anonymous_ids = batch["ids"][100:]
    assert batch["bodies"][100:] == ["a0", "a1", "a2"]
    assert len(set(anonymous_ids)) == 3 and all(UUID.match(i) for i in anonymous_ids)  # the SDK gives batched
    # messages without an id one of its own
    assert batch["lockTokens"] == [None] * 103  # receive-and-delete
    assert batch["tooBigFits"] is False  # sized from the attach's max-message-size (256 KB, Standard tier)


def test_complete_abandon_defer_and_dead_letter(go) -> None:
    settle = go["settle"]
    again = settle["abandonedAgain"]
    assert again["body"] == "abandon" and again["deliveryCount"] == 2  # the Go SDK's count: see above
    assert again["applicationProperties"] == {"abandonedBy": "go"}  # abandon's properties-to-modify
    deferred = settle["deferred"]
    assert (deferred["body"], deferred["state"]) == ("defer", "deferred")
    assert deferred["applicationProperties"] == {"deferredBy": "go", "deferredAgain": True}  # deferred twice
    assert settle["renewedDeferred"] is None  # a deferred message's lock renews through the management link
    assert settle["afterSettling"] == 0
    dead = {m["body"]: m for m in settle["deadLettered"]}
    assert {body: (m["deadLetterReason"], m["deadLetterErrorDescription"]) for body, m in dead.items()} == {
        "deadletter": ("bad-order", "total < 0"),
        "abandon": ("MaxDeliveryCountExceeded",
                    "Message couldn't be consumed after maximum delivery attempts."),
    }
    # the further properties of a rejected outcome's error info are kept, as Service Bus keeps them
    assert dead["deadletter"]["applicationProperties"] == {
        "checkedBy": "go", "DeadLetterReason": "bad-order", "DeadLetterErrorDescription": "total < 0"}


def test_an_expired_message_is_dead_lettered_with_its_reason(go) -> None:
    [expired] = go["expired"]
    assert (expired["body"], expired["messageId"]) == ("short-lived", "ttl")
    assert expired["deadLetterReason"] == "TTLExpiredException"


def test_peek_pages_and_receive_and_delete(go) -> None:
    peek = go["peek"]
    assert [m["body"] for m in peek["firstPeek"]] == ["p0", "p1", "p2"]
    assert all(m["lockToken"] is None and m["state"] == "active" for m in peek["firstPeek"])
    assert peek["nextPeek"] == ["p3", "p4"]  # the receiver remembers where the last peek stopped
    assert peek["fromStart"] == ["p0", "p1"]
    assert [m["body"] for m in peek["taken"]] == ["p0", "p1", "p2", "p3", "p4"]
    assert all(m["lockToken"] is None for m in peek["taken"])
    assert peek["emptyPeek"] == 0


def test_schedule_and_cancel(go) -> None:
    schedule = go["schedule"]
    assert len(set(schedule["sequenceNumbers"])) == 2
    scheduled_for = dt.datetime.fromisoformat(schedule["scheduledFor"])
    # ScheduleMessages' "kept" (its twin cancelled), and a message sent with ScheduledEnqueueTime
    assert [(m["body"], m["state"]) for m in schedule["peeked"]] == [("kept", "scheduled"),
                                                                     ("annotated", "scheduled")]
    for peeked in schedule["peeked"]:
        assert dt.datetime.fromisoformat(peeked["scheduledEnqueueTime"]) == pytest.approx(
            scheduled_for, abs=dt.timedelta(milliseconds=1))
    received = schedule["received"]
    assert sorted(m["body"] for m in received) == ["annotated", "kept"]
    # activated "as if enqueued now": with a new sequence number, as Service Bus does
    kept = next(m for m in received if m["body"] == "kept")
    assert kept["sequenceNumber"] not in schedule["sequenceNumbers"]
    for message in received:
        enqueued = dt.datetime.fromisoformat(message["enqueuedTime"])
        assert enqueued >= scheduled_for - dt.timedelta(milliseconds=50)


def test_duplicate_detection_drops_a_repeated_message_id(go) -> None:
    assert go["dedup"] == ["first", "other"]


def test_partitioned_queue_keeps_partition_keys(go) -> None:
    messages = go["partitioned"]["messages"]
    assert sorted((m["body"], m["partitionKey"]) for m in messages) == [
        ("k0", "pk-1"), ("k1", "pk-1"), ("k2", "pk-1"), ("k3", "pk-1"), ("k4", "pk-1"), ("other-key", "pk-2")]
    assert [m["body"] for m in messages if m["partitionKey"] == "pk-1"] == [f"k{i}" for i in range(5)]


def test_messages_cross_between_the_python_and_go_sdks(go, namespace) -> None:
    text, binary = go["interop"]
    assert (text["body"], text["messageId"], text["subject"], text["correlationId"]) == (
        "from python", "py-1", "interop", "corr")
    assert text["applicationProperties"] == {"text": "v", "number": 42}
    assert (binary["body"], binary["messageId"]) == ({"base64": "AAH/"}, "py-2")
    with ServiceBusClient.from_connection_string(namespace.connection_string) as client, \
            client.get_queue_receiver("from-go", max_wait_time=5) as receiver:
        received = receiver.receive_messages(max_message_count=2, max_wait_time=5)
        for message in received:
            receiver.complete_message(message)
    text, binary = received
    assert (str(text), text.message_id, text.subject, text.correlation_id, text.content_type) == (
        "from go", "go-1", "interop", "corr", "text/plain")
    assert text.time_to_live == dt.timedelta(seconds=60)
    assert text.application_properties == {b"text": b"v", b"number": 42, b"yes": True}
    assert (b"".join(binary.body), binary.message_id) == (b"\x00\x01\x02\xff", "go-2")


def typed(value_type: str, value) -> dict:
    return {"type": value_type, "value": value}


def test_whole_amqp_messages_keep_their_bodies_and_the_types_the_client_chose(go) -> None:
    """SendAMQPAnnotatedMessage: the broker hands back each section as the client typed it (message and
    correlation ids as uuid, ulong, binary; content-encoding; user-id; group-sequence; value and sequence
    bodies; custom annotations), beside its own x-opt-* annotations."""
    value, sequence, string = go["amqp"]["received"]
    assert value["value"] == typed("map[string]interface {}", {
        "n": typed("int64", 1), "s": typed("string", "x"), "i": typed("int32", 2)})
    assert (value["messageId"], value["correlationId"]) == (
        typed("amqp.UUID", "01020304-0506-0708-090a-0b0c0d0e0f10"), typed("uint64", 99))
    assert (value["contentType"], value["contentEncoding"], value["userId"], value["groupSequence"]) == (
        "application/x-custom", "gzip", typed("[]byte", "me"), 5)
    annotations = value["annotations"]
    assert (annotations["x-opt-custom"], annotations["x-opt-number"]) == (typed("string", "kept"),
                                                                          typed("int64", 12))
    assert annotations["x-opt-sequence-number"]["type"] == "int64"
    assert {annotations[k]["type"] for k in ("x-opt-enqueued-time", "x-opt-locked-until")} == {"time.Time"}
    assert value["header"]["ttlMs"] == 3600000 and value["data"] == 0
    assert sequence["sequence"] == typed("[]interface {}", [
        typed("[]interface {}", [typed("string", "a"), typed("int64", 1)]),
        typed("[]interface {}", [typed("bool", True)])])
    assert sequence["messageId"] == typed("uint64", 7)
    assert string["value"] == typed("string", "plain string")
    assert string["messageId"] == typed("[]byte", "\x01\x02")
    # the SDK's own MessageID is a string: empty for ids of the other types
    assert [m["sdkMessageId"] for m in (value, sequence, string)] == ["", "", ""]


def test_messages_the_sdk_releases_go_to_another_receiver_without_a_delivery_counted(go) -> None:
    released = go["released"]
    assert released["early"] == 0
    assert sorted(released["bodies"]) == ["late-1", "late-2"]
    assert released["deliveryCounts"] == [1, 1]  # `released` is no delivery, as in Service Bus


def test_a_message_autoforwarding_cannot_deliver_waits_in_the_transfer_dead_letter_queue(go) -> None:
    [undeliverable] = go["transferDLQ"]
    assert (undeliverable["body"], undeliverable["messageId"]) == ("undeliverable", "fwd-1")
    assert undeliverable["deadLetterReason"] == "MessagingEntityDisabled"
