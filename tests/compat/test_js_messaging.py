"""Sending, receiving and settling with the official JavaScript SDK (js/messaging.mjs, one node run), and the
same messages crossing between the JavaScript and Python SDKs."""

from __future__ import annotations

import base64
import datetime as dt
import re
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from js_runner import run_js

TOPOLOGY = {"namespaces": {"compat": {"queues": {
    "basic": {}, "batch": {}, "settle": {"max_delivery_count": 2}, "peek": {}, "schedule": {},
    "subscribe": {},
    "dedup": {"requires_duplicate_detection": True, "duplicate_detection_history_time_window": "PT10M"},
    "partitioned": {"enable_partitioning": True}, "from-python": {}, "from-js": {},
    "expiring": {"dead_lettering_on_message_expiration": True},
}}}}
SERVICE_BUS_ID = re.compile(r"^[0-9a-f]{32}$")  # what Service Bus assigns: a GUID without dashes


@pytest.fixture(scope="module")
def namespace(serve):
    return serve(TOPOLOGY)["compat"]


def send_from_python(namespace) -> None:
    """What another SDK's run receives from the queue `from-python`: text with properties, and binary."""
    with ServiceBusClient.from_connection_string(namespace.connection_string) as client, \
            client.get_queue_sender("from-python") as sender:
        sender.send_messages([
            ServiceBusMessage("from python", message_id="py-1", subject="interop", correlation_id="corr",
                              application_properties={"text": "v", "number": 42}),
            ServiceBusMessage(b"\x00\x01\xff", message_id="py-2"),
        ])


@pytest.fixture(scope="module")
def js(namespace) -> dict[str, Any]:
    send_from_python(namespace)
    return run_js("messaging.mjs", namespace)


def test_send_keeps_every_property_and_a_message_without_id_gets_one(js) -> None:
    full, anonymous, *listed = js["sendAndReceive"]["messages"]
    assert full["body"] == {"hello": "world"}
    fields = ("messageId", "subject", "correlationId", "contentType", "to", "replyTo")
    assert {k: full[k] for k in fields} == {
        "messageId": "m-full", "subject": "subj", "correlationId": "c1", "contentType": "application/json",
        "to": "dest", "replyTo": "back"}
    assert full["timeToLive"] == 300000
    assert full["applicationProperties"] == {"k": "v", "n": 7, "flag": True}
    assert full["deliveryCount"] == 0 and full["state"] == "active" and full["lockToken"]
    assert anonymous["body"] == "no id" and SERVICE_BUS_ID.match(anonymous["messageId"])
    assert [(m["body"], m["messageId"]) for m in listed] == [("list-0", "l0"), ("list-1", "l1")]
    assert [m["sequenceNumber"] for m in js["sendAndReceive"]["messages"]] == [1, 2, 3, 4]
    assert js["sendAndReceive"]["leftover"] == 0


def test_a_batch_of_100_built_by_create_message_batch_delivers_100_messages_in_order(js) -> None:
    batch = js["batch"]
    assert batch["count"] == 100
    assert batch["maxSizeInBytes"] == 256 * 1024  # the attach's max-message-size: the Standard tier's limit
    assert batch["bodies"][:100] == [f"b{i}" for i in range(100)]
    assert batch["ids"][:100] == [f"b{i}" for i in range(100)]
    assert batch["properties"] == list(range(100))
    anonymous_ids = batch["ids"][100:]
    assert batch["bodies"][100:] == ["a0", "a1", "a2"]
    assert len(set(anonymous_ids)) == 3 and all(SERVICE_BUS_ID.match(i) for i in anonymous_ids)
    assert batch["lockTokens"] == [None] * 103  # receive-and-delete


def test_complete_abandon_defer_and_dead_letter(js) -> None:
    settle = js["settle"]
    again = settle["abandonedAgain"]
    assert again["body"] == "abandon" and again["deliveryCount"] == 1
    assert again["applicationProperties"] == {"abandonedBy": "js"}  # abandon's properties-to-modify
    assert settle["deferred"]["body"] == "defer" and settle["deferred"]["state"] == "deferred"
    assert settle["afterSettling"] == 0
    reasons = {m["body"]: (m["deadLetterReason"], m["deadLetterErrorDescription"])
               for m in settle["deadLettered"]}
    assert reasons == {
        "deadletter": ("bad-order", "total < 0"),
        "abandon": ("MaxDeliveryCountExceeded",
                    "Message couldn't be consumed after maximum delivery attempts."),
    }


def test_an_expired_message_is_dead_lettered_with_its_reason(js) -> None:
    [expired] = js["expired"]
    assert (expired["body"], expired["messageId"]) == ("short-lived", "ttl")
    assert expired["deadLetterReason"] == "TTLExpiredException"


def test_peek_pages_and_receive_and_delete(js) -> None:
    peek = js["peek"]
    assert [m["body"] for m in peek["firstPeek"]] == ["p0", "p1", "p2"]
    assert all(m.get("lockToken") is None and m["state"] == "active" for m in peek["firstPeek"])
    assert peek["nextPeek"] == ["p3", "p4"]  # the receiver remembers where the last peek stopped
    assert peek["fromStart"] == ["p0", "p1"]
    assert [m["body"] for m in peek["taken"]] == ["p0", "p1", "p2", "p3", "p4"]
    assert all(m.get("lockToken") is None for m in peek["taken"])
    assert peek["emptyPeek"] == 0


def test_schedule_and_cancel(js) -> None:
    schedule = js["schedule"]
    assert len(set(schedule["sequenceNumbers"])) == 2
    assert [(m["body"], m["state"]) for m in schedule["peeked"]] == [("kept", "scheduled")]
    assert [m["body"] for m in schedule["received"]] == ["kept"]
    # activated "as if enqueued now": with a new sequence number, as Service Bus does
    assert schedule["received"][0]["sequenceNumber"] not in schedule["sequenceNumbers"]
    enqueued = dt.datetime.fromisoformat(schedule["received"][0]["enqueuedTimeUtc"])
    assert enqueued >= dt.datetime.fromisoformat(schedule["scheduledFor"]) - dt.timedelta(milliseconds=50)


def test_subscribe_delivers_everything_and_auto_completes(js) -> None:
    assert sorted(js["subscribe"]["bodies"]) == [f"s{i}" for i in range(6)]
    assert js["subscribe"]["errors"] == []
    assert js["subscribe"]["leftAfterAutoComplete"] == 0


def test_duplicate_detection_drops_a_repeated_message_id(js) -> None:
    assert js["dedup"] == ["first", "other"]


def test_partitioned_queue_keeps_partition_keys(js) -> None:
    messages = js["partitioned"]["messages"]
    assert sorted((m["body"], m["partitionKey"]) for m in messages) == [
        ("k0", "pk-1"), ("k1", "pk-1"), ("k2", "pk-1"), ("k3", "pk-1"), ("k4", "pk-1"), ("other-key", "pk-2")]
    assert [m["body"] for m in messages if m["partitionKey"] == "pk-1"] == [f"k{i}" for i in range(5)]
    assert js["partitioned"]["mismatch"]["name"] == "TypeError"  # refused by the SDK before sending


def test_messages_cross_between_the_python_and_javascript_sdks(js, namespace) -> None:
    from_python = js["interop"]
    # A Data body that is not JSON reaches JS code as a Buffer (the JS SDK JSON-decodes Data bodies).
    assert [(m["body"], m["messageId"]) for m in from_python] == [
        ({"base64": base64.b64encode(b"from python").decode()}, "py-1"), ({"base64": "AAH/"}, "py-2")]
    assert from_python[0]["subject"] == "interop" and from_python[0]["correlationId"] == "corr"
    assert from_python[0]["applicationProperties"] == {"text": "v", "number": 42}
    with ServiceBusClient.from_connection_string(namespace.connection_string) as client, \
            client.get_queue_receiver("from-js", max_wait_time=5) as receiver:
        received = receiver.receive_messages(max_message_count=2, max_wait_time=5)
        for message in received:
            receiver.complete_message(message)
    text, binary = received
    assert (str(text), text.message_id, text.subject, text.correlation_id, text.content_type) == (
        '"from js"', "js-1", "interop", "corr", "text/plain")  # the JS SDK JSON-encodes a string body
    assert text.time_to_live == dt.timedelta(seconds=60)
    assert text.application_properties == {b"text": b"v", b"number": 42, b"yes": True}
    assert (b"".join(binary.body), binary.message_id) == (b"\x00\x01\x02\xff", "js-2")
