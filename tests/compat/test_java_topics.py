"""Topics with the official Java SDK (java/.../Topics.java): SQL and correlation filters, rule actions and
autoforwarding in one JVM run; rules made, listed and deleted through the SDK's ServiceBusRuleManagerClient
(AMQP management on the subscription: com.microsoft:add-rule, enumerate-rules, remove-rule) in another."""

from __future__ import annotations

from typing import Any

import pytest
from java_runner import run_java
from test_js_admin import python_admin
from test_js_topics import TOPOLOGY as JS_TOPOLOGY

TOPOLOGY = JS_TOPOLOGY  # the same entities as the JavaScript suite
MANAGED = {"namespaces": {"compat": {"topics": {"orders": {"subscriptions": {"managed": {}}}}}}}


@pytest.fixture(scope="module")
def namespace(serve):
    return serve(TOPOLOGY)["compat"]


@pytest.fixture(scope="module")
def java(namespace) -> dict[str, Any]:
    return run_java("topics", namespace)


def _seen(messages: list[dict[str, Any]]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(m["body"], m["subject"], m.get("applicationProperties")) for m in messages]


def test_subscriptions_get_what_their_filters_select(java) -> None:
    filters = java["filters"]
    assert [m["body"] for m in filters["all"]] == ["red-big", "red-small", "blue"]
    assert _seen(filters["big"]) == [("red-big", "order", {"color": "red", "quantity": 12})]


def test_a_rule_action_changes_system_and_user_properties(java) -> None:
    assert _seen(java["filters"]["red"]) == [
        ("red-big", "red-order", {"color": "red", "quantity": 12, "RuleName": "only-red", "stamped": "yes"}),
        ("red-small", "red-order", {"color": "red", "quantity": 1, "RuleName": "only-red", "stamped": "yes"}),
    ]


def test_autoforwarding_from_a_subscription_and_along_a_chain(java) -> None:
    assert [(m["body"], m["messageId"]) for m in java["filters"]["refundsForwarded"]] == [("blue", "o3")]
    assert [(m["body"], m["messageId"]) for m in java["chain"]["end"]] == [("hop-1", "h1"), ("hop-2", "h2")]


def test_the_rule_manager_creates_lists_and_deletes_rules(serve) -> None:
    namespace = serve(MANAGED)["compat"]
    managed = run_java("rules", namespace)
    true_filter = {"kind": "TrueRuleFilter", "sqlExpression": "1=1", "parameters": {}}
    assert managed["initial"] == [{"name": "$Default", "filter": true_filter, "action": None}]
    priced = {
        "name": "priced",
        "filter": {"kind": "SqlRuleFilter", "sqlExpression": "quantity > 10 AND color = 'red'",
                   "parameters": {}},
        "action": {"sqlExpression": "SET flagged = TRUE; SET sys.Label = 'big-red'", "parameters": {}},
    }
    # The SDK turns a listed rule into its administration model, whose properties are strings.
    matched = {
        "name": "matched",
        "filter": {"kind": "CorrelationRuleFilter", "correlationId": "cid", "messageId": "mid", "to": "to",
                   "replyTo": "rt", "subject": "lbl", "sessionId": "sess", "replyToSessionId": "rts",
                   "contentType": "application/json", "properties": {"k": "v", "n": "5", "on": "true"}},
        "action": None,
    }
    unset = dict.fromkeys(("correlationId", "messageId", "to", "replyTo", "sessionId", "replyToSessionId",
                           "contentType"))
    refunds = {"name": "refunds", "action": None, "filter": {
        "kind": "CorrelationRuleFilter", **unset, "subject": "refund", "properties": {}}}
    # The SDK sends TrueRuleFilter and FalseRuleFilter as the SQL filters they are ("1=1", "1=0").
    everything = {"name": "everything", "action": None,
                  "filter": {"kind": "SqlRuleFilter", "sqlExpression": "1=1", "parameters": {}}}
    nothing = {"name": "nothing", "action": None,
               "filter": {"kind": "SqlRuleFilter", "sqlExpression": "1=0", "parameters": {}}}
    assert managed["listed"] == [priced, matched, refunds, everything, nothing]
    assert managed["afterDelete"] == [priced, matched, refunds, nothing]
    assert managed["again"]["error"]["reason"] == "MESSAGING_ENTITY_ALREADY_EXISTS", managed["again"]
    assert managed["badSql"]["error"]["name"] in ("ServiceBusException", "AmqpException"), managed["badSql"]
    assert managed["missing"]["error"]["reason"] == "MESSAGING_ENTITY_NOT_FOUND", managed["missing"]
    # "priced" matches the big red order and its action relabels it; "refunds" takes the refund.
    routed = [(m["body"], m["subject"], m["applicationProperties"].get("flagged")) for m in managed["routed"]]
    assert routed == [("managed-big", "big-red", True), ("managed-refund", "refund", None)]
    # The broker kept the types the Java client sent (int, boolean): the admin client reads them back typed.
    stored = python_admin(namespace).get_rule("orders", "managed", "matched").filter.properties
    assert stored == {"k": "v", "n": 5, "on": True}
