"""`com.microsoft:batch-delete-messages` (the JavaScript SDK's deleteMessages/purgeMessages from 7.10, .NET's
DeleteMessagesAsync/PurgeMessagesAsync; the pinned JS SDK 7.9.5 predates them, so raw AMQP in their form):
`message-count` (int), `enqueued-time-utc` (timestamp) and, from a session receiver, `session-id`; the reply's
`message-count` is how many went. The limit per request is the tier's (Standard 500)."""

# ruff: noqa: F811 (`connection` is test_raw_amqp's fixture)
from __future__ import annotations

import time
import uuid

import pytest
from proton import Message, int32, symbol, timestamp

from tests.compat.test_raw_amqp import TIMEOUT_S, authorize, connection, forms, request  # noqa: F401

TOPOLOGY = {"namespaces": {"purge": {"queues": {"q": {}, "s": {"requires_session": True}}}}}
FORM = "receiver target (.NET, Go, JS $management)"


@pytest.fixture(scope="module")
def namespace(serve):
    return serve(TOPOLOGY)["purge"]


def delete(connection, entity: str, count: int, before_ms: int | None = None, session: str | None = None):
    body = {"message-count": int32(count)}
    if before_ms is not None:
        body["enqueued-time-utc"] = timestamp(before_ms)
    if session is not None:
        body["session-id"] = session
    node = f"{entity}/$management"
    message = Message(id=uuid.uuid4(), body=body, properties={
        "operation": "com.microsoft:batch-delete-messages", "associated-link-name": "receiver-1"})
    return request(connection, node, forms(node)[FORM], message)


def peek_ids(connection, entity: str) -> list[str]:
    node = f"{entity}/$management"
    reply = request(connection, node, forms(node)[FORM], Message(id=uuid.uuid4(), body={
        "from-sequence-number": 1, "message-count": int32(50)}, properties={
        "operation": "com.microsoft:peek-message"}))
    if reply.properties["statusCode"] == 204:
        return []
    found = []
    for entry in reply.body["messages"]:
        decoded = Message()
        decoded.decode(entry["message"])
        found.append(decoded.id)
    return found


def test_delete_the_oldest_up_to_the_count_and_before_the_cut_off(namespace, connection) -> None:
    authorize(connection, namespace)
    sender = connection.create_sender("q")
    for i in range(4):
        sender.send(Message(id=f"old-{i}", body=b"x"))
    cut_off = int(time.time() * 1000) + 1
    time.sleep(0.01)
    sender.send(Message(id="new", body=b"x"))
    reply = delete(connection, "q", 3, cut_off)
    assert reply.properties["statusCode"] == 200
    assert reply.body == {"message-count": 3} and type(reply.body["message-count"]) is int32
    assert peek_ids(connection, "q") == ["old-3", "new"]
    assert delete(connection, "q", 10, cut_off).body == {"message-count": 1}
    assert delete(connection, "q", 500).body == {"message-count": 1}  # no cut-off: now
    assert peek_ids(connection, "q") == []


def test_one_sessions_messages_and_the_limit(namespace, connection) -> None:
    authorize(connection, namespace)
    sender = connection.create_sender("s")
    for session in ("A", "B", "B"):
        sender.send(Message(id=f"in-{session}-{uuid.uuid4()}", group_id=session, body=b"x"))
    assert delete(connection, "s", 10, session="B").body == {"message-count": 2}
    assert [i.split("-")[1] for i in peek_ids(connection, "s")] == ["A"]
    refused = delete(connection, "s", 501).properties
    assert refused["statusCode"] == 400
    assert refused["errorCondition"] == symbol("com.microsoft:argument-out-of-range")
