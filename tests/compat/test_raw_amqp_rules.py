"""Rule management over AMQP (`com.microsoft:add-rule`, `enumerate-rules`, `remove-rule` on a subscription's
`$management` node) in the exact forms .NET's `ServiceBusRuleManager` and Java's
`ServiceBusRuleManagerAsyncClient` send (raw AMQP: no installed SDK for those), and the reply as both parse
it: a `rules` list of maps whose `rule-description` is a described list (filter, action, name, created-at)
with Service Bus's ulong descriptors. The engine then filters by what was added."""

# ruff: noqa: F811 (`connection` is test_raw_amqp's fixture)
from __future__ import annotations

import uuid
from typing import Any

import pytest
from proton import Described, Message, int32, symbol, timestamp, ulong

from local_broker.wire.amqp import rules
from tests.compat.test_raw_amqp import TIMEOUT_S, authorize, connection, forms, request  # noqa: F401

TOPOLOGY = {"namespaces": {"rules": {"topics": {"t": {"subscriptions": {"s": {}, "other": {}}}}}}}
NODE = "t/Subscriptions/s/$management"
DOTNET = "receiver target (.NET, Go, JS $management)"
JAVA = "sender source and receiver target (Java)"


@pytest.fixture(scope="module")
def namespace(serve):
    return serve(TOPOLOGY)["rules"]


def rule_request(operation: str, body: dict[str, Any]) -> Message:
    return Message(id=uuid.uuid4(), body=body, properties={
        "operation": operation, "com.microsoft:server-timeout": 60_000})


def add_rule(name: str, description: dict[str, Any]) -> Message:
    """.NET's AddRuleInternalAsync: rule-name plus the description map (the filter's map, the action's map or
    null, the name again)."""
    return rule_request("com.microsoft:add-rule", {"rule-name": name, "rule-description": {
        **description, "rule-name": name}})


def call(connection, message: Message, form: str = DOTNET) -> Message:
    return request(connection, NODE, forms(NODE)[form], message)


def enumerate_rules(connection, skip: int = 0, top: int = 100, form: str = DOTNET) -> Message:
    # .NET puts `top` then `skip`, both ints
    return call(connection, rule_request("com.microsoft:enumerate-rules",
                                         {"top": int32(top), "skip": int32(skip)}), form)


CORRELATION = {"correlation-id": "cid", "message-id": "mid", "to": "to", "reply-to": "rt", "label": "lbl",
               "session-id": None, "reply-to-session-id": "rts", "content-type": "application/json",
               "properties": {"k": "v", "n": int32(5), "big": 1 << 40, "b": True, "f": 1.5}}


def test_add_enumerate_and_remove_rules_round_trip_exactly(namespace, connection) -> None:
    authorize(connection, namespace)
    added = {
        "sql": {"sql-filter": {"expression": "color = 'red'"},
                "sql-rule-action": {"expression": "SET a = 'b'"}},
        "corr": {"correlation-filter": CORRELATION, "sql-rule-action": None},
        "true": {"sql-filter": {"expression": "1=1"}, "sql-rule-action": None},
    }
    for name, description in added.items():
        reply = call(connection, add_rule(name, description))
        assert reply.properties["statusCode"] == 200, reply.properties
    reply = enumerate_rules(connection)
    assert reply.properties["statusCode"] == 200
    entries = reply.body["rules"]
    assert all(set(entry) == {"rule-description"} for entry in entries)
    by_name = {entry["rule-description"].value[2]: entry["rule-description"] for entry in entries}
    assert list(by_name) == ["$Default", "sql", "corr", "true"]
    for described in by_name.values():
        assert described.descriptor == ulong(0x0000013700000004)
        assert isinstance(described.value[3], timestamp)  # created-at
    default = by_name["$Default"].value
    assert default[:2] == [Described(ulong(0x1370000007), []), Described(ulong(0x0000013700000005), [])]
    assert by_name["sql"].value[:2] == [Described(ulong(0x1370000006), ["color = 'red'", 20]),
                                        Described(ulong(0x0000013700000006), ["SET a = 'b'", 20])]
    assert type(by_name["sql"].value[0].value[1]) is int32  # compatibility level: an AMQP int
    corr_filter = by_name["corr"].value[0]
    assert corr_filter.descriptor == ulong(0x1370000009)
    assert corr_filter.value[:8] == ["cid", "mid", "to", "rt", "lbl", None, "rts", "application/json"]
    assert corr_filter.value[8] == {"k": "v", "n": 5, "big": 1 << 40, "b": True, "f": 1.5}
    assert type(corr_filter.value[8]["n"]) is int32
    assert by_name["true"].value[0] == Described(ulong(0x1370000006), ["1=1", 20])

    page = enumerate_rules(connection, skip=1, top=2).body["rules"]
    assert [entry["rule-description"].value[2] for entry in page] == ["sql", "corr"]

    for name in added:
        reply = call(connection, rule_request("com.microsoft:remove-rule", {"rule-name": name}))
        assert reply.properties["statusCode"] == 200
    remaining = enumerate_rules(connection).body["rules"]
    assert [entry["rule-description"].value[2] for entry in remaining] == ["$Default"]


def test_errors_are_service_bus_errors(namespace, connection) -> None:
    authorize(connection, namespace)
    description = {"sql-filter": {"expression": "1=1"}, "sql-rule-action": None}
    assert call(connection, add_rule("dup", description)).properties["statusCode"] == 200
    again = call(connection, add_rule("DUP", description)).properties
    assert again["statusCode"] == 409
    assert again["errorCondition"] == symbol("com.microsoft:entity-already-exists")
    assert "already exists" in again["statusDescription"]

    missing = call(connection, rule_request("com.microsoft:remove-rule", {"rule-name": "nope"})).properties
    assert (missing["statusCode"], missing["errorCondition"]) == (404, symbol("amqp:not-found"))

    bad_sql = call(connection, add_rule("bad", {"sql-filter": {"expression": "color = = 'x'"},
                                                "sql-rule-action": None})).properties
    assert bad_sql["statusCode"] == 400 and "column" in bad_sql["statusDescription"], bad_sql
    bad_action = call(connection, add_rule("bad", {"sql-filter": {"expression": "1=1"},
                                                   "sql-rule-action": {"expression": "SET"}})).properties
    assert bad_action["statusCode"] == 400
    call(connection, rule_request("com.microsoft:remove-rule", {"rule-name": "dup"}))


def test_no_rules_is_204_and_a_queue_has_no_rules(namespace, connection) -> None:
    authorize(connection, namespace)
    node = "t/Subscriptions/other/$management"
    request(connection, node, forms(node)[DOTNET],
            rule_request("com.microsoft:remove-rule", {"rule-name": "$Default"}))
    empty = request(connection, node, forms(node)[JAVA], rule_request("com.microsoft:enumerate-rules",
                                                                        {"top": int32(10), "skip": int32(0)}))
    assert empty.properties["statusCode"] == 204
    assert empty.properties["errorCondition"] == symbol("com.microsoft:rules-not-found")


def test_added_rules_decide_what_the_subscription_gets(namespace, connection) -> None:
    authorize(connection, namespace)
    call(connection, rule_request("com.microsoft:remove-rule", {"rule-name": "$Default"}), JAVA)
    call(connection, add_rule("red", {"correlation-filter": {"properties": {"color": "red"}},
                                      "sql-rule-action": {"expression": "SET sys.Label = 'tagged'"}}), JAVA)
    sender = connection.create_sender("t")
    for color in ("blue", "red"):
        sender.send(Message(id=color, body=color.encode(), properties={"color": color}))
    receiver = connection.create_receiver("t/Subscriptions/s", credit=5)
    got = receiver.receive(timeout=TIMEOUT_S)
    receiver.accept()
    assert (got.id, got.subject) == ("red", "tagged")


def test_the_descriptors_are_service_bus_values() -> None:
    """As both SDKs compare them (.NET AmqpRuleDescriptionCodec and friends, Java ServiceBusConstants)."""
    assert (rules.RULE_DESCRIPTION, rules.EMPTY_RULE_ACTION, rules.SQL_RULE_ACTION) == (
        0x0000013700000004, 0x0000013700000005, 0x0000013700000006)
    assert (rules.SQL_FILTER, rules.TRUE_FILTER, rules.FALSE_FILTER, rules.CORRELATION_FILTER) == (
        0x1370000006, 0x1370000007, 0x1370000008, 0x1370000009)
