"""Sending, receiving and settling with the official Java SDK (java/.../Messaging.java, one JVM run), and the
same messages crossing between the Java and Python SDKs."""

from __future__ import annotations

import base64
import datetime as dt
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from java_runner import run_java
from test_js_messaging import SERVICE_BUS_ID
from test_js_messaging import TOPOLOGY as JS_TOPOLOGY

# The JavaScript suite's entities, with a queue for messages the Java SDK sends to the Python SDK.
QUEUES = {**JS_TOPOLOGY["namespaces"]["compat"]["queues"], "from-java": {}}
TOPOLOGY = {"namespaces": {"compat": {"queues": QUEUES}}}
NO_LOCK = (None, "00000000-0000-0000-0000-000000000000")  # how the Java SDK shows a message under no lock


@pytest.fixture(scope="module")
def namespace(serve):
    return serve(TOPOLOGY)["compat"]


@pytest.fixture(scope="module")
def java(namespace) -> dict[str, Any]:
    with ServiceBusClient.from_connection_string(namespace.connection_string) as client, \
            client.get_queue_sender("from-python") as sender:
        sender.send_messages([
            ServiceBusMessage("from python", message_id="py-1", subject="interop", correlation_id="corr",
                              application_properties={"text": "v", "number": 42}),
            ServiceBusMessage(b"\x00\x01\xff", message_id="py-2"),
        ])
    return run_java("messaging", namespace)


def time(value: str) -> dt.datetime:
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))


def test_send_keeps_every_property_and_a_message_without_id_gets_one(java) -> None:
    full, anonymous, *listed = java["sendAndReceive"]["messages"]
    assert full["body"] == '{"hello":"world"}'
    fields = ("messageId", "subject", "correlationId", "contentType", "to", "replyTo")
    assert {k: full[k] for k in fields} == {
        "messageId": "m-full", "subject": "subj", "correlationId": "c1", "contentType": "application/json",
        "to": "dest", "replyTo": "back"}
    assert full["timeToLive"] == 300000
    # Java's int, long and double come back as the same AMQP types.
    assert full["applicationProperties"] == {"k": "v", "n": 7, "flag": True, "big": 1 << 40, "ratio": 0.5}
    assert full["deliveryCount"] == 0 and full["state"] == "ACTIVE" and full["lockToken"] not in NO_LOCK
    assert time(full["lockedUntil"]) > time(full["enqueuedTime"])
    assert anonymous["body"] == "no id" and SERVICE_BUS_ID.match(anonymous["messageId"])
    assert [(m["body"], m["messageId"]) for m in listed] == [("list-0", "l0"), ("list-1", "l1")]
    assert [m["sequenceNumber"] for m in java["sendAndReceive"]["messages"]] == [1, 2, 3, 4]
    assert java["sendAndReceive"]["leftover"] == 0


def test_a_batch_of_100_delivers_100_messages_in_order(java) -> None:
    batch = java["batch"]
    assert batch["count"] == 100
    assert batch["maxSizeInBytes"] == 256 * 1024  # the attach's max-message-size: the Standard tier's limit
    assert batch["bodies"][:100] == [f"b{i}" for i in range(100)]
    assert batch["ids"][:100] == [f"b{i}" for i in range(100)]
    assert batch["properties"] == list(range(100))
    anonymous_ids = batch["ids"][100:]
    assert batch["bodies"][100:] == ["a0", "a1", "a2"]
    assert len(set(anonymous_ids)) == 3 and all(SERVICE_BUS_ID.match(i) for i in anonymous_ids)
    assert {token if token != "null" else None for token in batch["lockTokens"]} <= set(NO_LOCK)


def test_complete_abandon_defer_and_dead_letter(java) -> None:
    settle = java["settle"]
    again = settle["abandonedAgain"]
    assert again["body"] == "abandon" and again["deliveryCount"] == 1
    assert again["applicationProperties"] == {"abandonedBy": "java", "attempt": 1}  # properties-to-modify
    assert settle["deferred"]["body"] == "defer" and settle["deferred"]["lockToken"] not in NO_LOCK
    assert settle["afterSettling"] == 0
    reasons = {m["body"]: (m["deadLetterReason"], m["deadLetterErrorDescription"])
               for m in settle["deadLettered"]}
    assert reasons == {
        "deadletter": ("bad-order", "total < 0"),
        "abandon": ("MaxDeliveryCountExceeded",
                    "Message couldn't be consumed after maximum delivery attempts."),
    }
    abandoned = next(m for m in settle["deadLettered"] if m["body"] == "abandon")
    assert abandoned["applicationProperties"]["abandonedBy"] == "java"  # kept through dead-lettering


def test_a_deferred_message_reads_as_deferred(java) -> None:
    """The SDK reads x-opt-message-state only as an AMQP int (as Service Bus sends it)."""
    assert java["settle"]["deferred"]["state"] == "DEFERRED"


def test_an_expired_message_is_dead_lettered_with_its_reason(java) -> None:
    [expired] = java["expired"]
    assert (expired["body"], expired["messageId"]) == ("short-lived", "ttl")
    assert expired["deadLetterReason"] == "TTLExpiredException"


def test_peek_pages_and_receive_and_delete(java) -> None:
    peek = java["peek"]
    assert [m["body"] for m in peek["firstPeek"]] == ["p0", "p1", "p2"]
    assert all(m["lockToken"] is None and m["state"] == "ACTIVE" for m in peek["firstPeek"])
    assert peek["nextPeek"] == ["p3", "p4"]  # the receiver remembers where the last peek stopped
    assert peek["fromStart"] == ["p0", "p1"]
    assert peek["single"] == "p1"
    assert [m["body"] for m in peek["taken"]] == ["p0", "p1", "p2", "p3", "p4"]
    assert all(m["lockToken"] in NO_LOCK and m["lockedUntil"] is None for m in peek["taken"])
    assert peek["emptyPeek"] == [] and peek["afterEmpty"] is True


def test_schedule_and_cancel(java) -> None:
    schedule = java["schedule"]
    assert len(set(schedule["sequenceNumbers"])) == 2
    [peeked] = schedule["peeked"]
    assert peeked["body"] == "kept"
    assert time(peeked["scheduledEnqueueTime"]) == time(schedule["scheduledFor"]).replace(
        microsecond=time(schedule["scheduledFor"]).microsecond // 1000 * 1000)
    assert [m["body"] for m in schedule["received"]] == ["kept"]
    # activated "as if enqueued now": with a new sequence number, as Service Bus does
    assert schedule["received"][0]["sequenceNumber"] not in schedule["sequenceNumbers"]
    enqueued = time(schedule["received"][0]["enqueuedTime"])
    assert enqueued >= time(schedule["scheduledFor"]) - dt.timedelta(milliseconds=50)


def test_a_scheduled_message_peeks_as_scheduled(java) -> None:
    assert [m["state"] for m in java["schedule"]["peeked"]] == ["SCHEDULED"]


def test_the_processor_client_handles_everything_and_auto_completes(java) -> None:
    processor = java["processor"]
    assert processor["done"] and processor["bodies"] == [f"s{i}" for i in range(6)]
    assert processor["errors"] == []
    assert processor["leftAfterAutoComplete"] == 0


def test_duplicate_detection_drops_a_repeated_message_id(java) -> None:
    assert java["dedup"] == ["first", "other"]


def test_partitioned_queue_keeps_partition_keys(java) -> None:
    messages = java["partitioned"]["messages"]
    assert sorted((m["body"], m["partitionKey"]) for m in messages) == [
        ("k0", "pk-1"), ("k1", "pk-1"), ("k2", "pk-1"), ("k3", "pk-1"), ("k4", "pk-1"), ("other-key", "pk-2")]
    assert [m["body"] for m in messages if m["partitionKey"] == "pk-1"] == [f"k{i}" for i in range(5)]
    # a partition key other than the session id: refused by the SDK
    assert java["partitioned"]["mismatch"]["error"]["name"] == "IllegalArgumentException"


def test_messages_cross_between_the_python_and_java_sdks(java, namespace) -> None:
    from_python = java["interop"]
    assert [(m["body"], m["messageId"]) for m in from_python] == [
        ({"base64": base64.b64encode(b"from python").decode()}, "py-1"), ({"base64": "AAH/"}, "py-2")]
    assert from_python[0]["subject"] == "interop" and from_python[0]["correlationId"] == "corr"
    assert from_python[0]["applicationProperties"] == {"text": "v", "number": 42}
    with ServiceBusClient.from_connection_string(namespace.connection_string) as client, \
            client.get_queue_receiver("from-java", max_wait_time=5) as receiver:
        received = receiver.receive_messages(max_message_count=2, max_wait_time=5)
        for message in received:
            receiver.complete_message(message)
    text, binary = received
    assert (str(text), text.message_id, text.subject, text.correlation_id, text.content_type) == (
        "from java", "java-1", "interop", "corr", "text/plain")
    assert text.time_to_live == dt.timedelta(seconds=60)
    assert text.application_properties == {b"text": b"v", b"number": 42, b"yes": True}
    assert (b"".join(binary.body), binary.message_id) == (b"\x00\x01\x02\xff", "java-2")
