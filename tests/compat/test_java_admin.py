"""The Java `ServiceBusAdministrationClient` (azure-messaging-servicebus, pinned in java/pom.xml) against the
broker's management port: queues, topics, subscriptions and rules created, read, updated, listed (past one
page) and deleted, runtime figures of messages the Python SDK put there, and the exceptions the client throws
(ResourceNotFoundException 404, ResourceExistsException 409, HttpResponseException 400,
ClientAuthenticationException 401). One JVM run (java/.../Admin.java); the assertions are here."""

from __future__ import annotations

from typing import Any

import pytest
from java_runner import run_java
from test_js_admin import fill, python_admin

NOT_FOUND = ("ResourceNotFoundException", 404)
EXISTS = ("ResourceExistsException", 409)


def error_of(outcome: dict) -> tuple[str, int]:
    assert "error" in outcome, f"expected an error, got {outcome}"
    return outcome["error"]["exception"], outcome["error"]["statusCode"]


def value_of(outcome: dict) -> Any:
    assert "value" in outcome, f"expected a value, got {outcome}"
    return outcome["value"]


def part(model: dict, expected: dict) -> dict:
    return {key: model.get(key) for key in expected}


@pytest.fixture(scope="module")
def namespace(serve):
    return serve({"namespaces": {"primary": {}}})["primary"]


@pytest.fixture(scope="module")
def java(namespace) -> dict[str, Any]:
    admin = python_admin(namespace)
    admin.create_queue("busy")
    admin.create_topic("busy-topic")
    admin.create_subscription("busy-topic", "all")
    admin.create_topic("t")
    admin.create_subscription("t", "s")
    fill(namespace, queue="busy")
    fill(namespace, topic="busy-topic")
    return run_java("admin", namespace, "busy", "busy-topic", "all", "t", "s")


def admin_host(namespace) -> str:
    return namespace.admin_url.removeprefix("https://")


def test_queues(java, namespace):
    queues = java["queues"]
    properties = value_of(queues["namespace"])
    assert (properties["name"], properties["messagingSku"], properties["namespaceType"]) == (
        "primary", "Standard", "Messaging")
    forward = f"sb://{admin_host(namespace)}/archive"
    expected = {
        "name": "orders", "lockDuration": "PT45S", "maxSizeInMegabytes": 2048, "maxDeliveryCount": 4,
        "duplicateDetectionRequired": True, "sessionRequired": False, "partitioningEnabled": True,
        "defaultMessageTimeToLive": "PT24H", "duplicateDetectionHistoryTimeWindow": "PT5M",
        "deadLetteringOnMessageExpiration": True, "batchedOperationsEnabled": False, "forwardTo": forward,
        "forwardDeadLetteredMessagesTo": forward, "userMetadata": "owner=billing", "status": "Active",
        "maxMessageSizeInKilobytes": 256,
    }
    for key in ("created", "fetched"):
        assert part(value_of(queues[key]), expected) == expected, key
    assert error_of(queues["createdAgain"]) == EXISTS
    assert queues["exists"] == {"orders": True, "missing": False}
    for key in ("updated", "refetched"):
        queue = value_of(queues[key])
        changed = {"maxDeliveryCount": 7, "userMetadata": "owner=payments", "status": "SendDisabled",
                   "forwardTo": None}
        assert part(queue, changed) == changed
        assert queue["forwardDeadLetteredMessagesTo"] == forward

    runtime = value_of(queues["runtime"])
    counts = {"activeMessageCount": 3, "deadLetterMessageCount": 1, "scheduledMessageCount": 2,
              "transferMessageCount": 0, "transferDeadLetterMessageCount": 0, "totalMessageCount": 6}
    assert part(runtime, counts) == counts and runtime["sizeInBytes"] > 0
    assert runtime["createdAt"] <= runtime["updatedAt"] <= runtime["accessedAt"]
    assert queues["listed"] == ["archive", "busy", "orders"]
    assert {call: error_of(outcome) for call, outcome in queues["missing"].items()} == {
        "get": NOT_FOUND, "runtime": NOT_FOUND, "update": NOT_FOUND, "delete": NOT_FOUND}
    assert value_of(queues["deleted"]) is None
    assert error_of(queues["afterDelete"]) == NOT_FOUND
    assert error_of(queues["wrongKey"]) == ("ClientAuthenticationException", 401)


def test_topics_and_subscriptions(java, namespace):
    topics = java["topics"]
    expected = {
        "name": "events", "maxSizeInMegabytes": 2048, "defaultMessageTimeToLive": "PT10H",
        "duplicateDetectionRequired": True, "partitioningEnabled": True, "orderingSupported": False,
        "batchedOperationsEnabled": False, "duplicateDetectionHistoryTimeWindow": "PT1M",
        "autoDeleteOnIdle": "PT3H", "userMetadata": "team=events", "status": "Active",
    }
    for key in ("topic", "topicFetched"):
        assert part(value_of(topics[key]), expected) == expected, key
    assert error_of(topics["topicAgain"]) == EXISTS
    assert topics["topicExists"] == {"events": True, "missing": False}
    updated = value_of(topics["topicUpdated"])
    assert (updated["userMetadata"], updated["status"]) == ("team=payments", "SendDisabled")

    expected = {
        "topicName": "events", "subscriptionName": "audit", "lockDuration": "PT20S", "sessionRequired": True,
        "defaultMessageTimeToLive": "PT1H", "deadLetteringOnMessageExpiration": True,
        "deadLetteringOnFilterEvaluationExceptions": False, "maxDeliveryCount": 2,
        "batchedOperationsEnabled": False, "autoDeleteOnIdle": "PT4H",
        "forwardDeadLetteredMessagesTo": f"sb://{admin_host(namespace)}/sink", "userMetadata": "to=secondary",
        "status": "Active",
    }
    for key in ("subscription", "subscriptionFetched"):
        assert part(value_of(topics[key]), expected) == expected, key
    assert error_of(topics["subscriptionAgain"]) == EXISTS
    assert value_of(topics["forwarding"])["forwardTo"] == f"sb://{admin_host(namespace)}/sink"
    assert topics["relayRules"] == ["orders-only"]  # the default rule given replaces $Default
    assert topics["subscriptionExists"] == {"audit": True, "missing": False}
    for key in ("subscriptionUpdated", "subscriptionRefetched"):
        subscription = value_of(topics[key])
        assert (subscription["maxDeliveryCount"], subscription["status"]) == (9, "ReceiveDisabled")
        assert subscription["forwardDeadLetteredMessagesTo"] is None

    topic_runtime = value_of(topics["topicRuntime"])
    assert (topic_runtime["subscriptionCount"], topic_runtime["scheduledMessageCount"]) == (1, 2)
    subscription_runtime = value_of(topics["subscriptionRuntime"])
    assert (subscription_runtime["activeMessageCount"], subscription_runtime["deadLetterMessageCount"],
            subscription_runtime["totalMessageCount"]) == (3, 1, 4)
    assert topics["topics"] == ["busy-topic", "events", "t"]
    assert topics["subscriptions"] == [["events", "audit"], ["events", "relay"]]
    assert {call: error_of(outcome) for call, outcome in topics["missing"].items()} == {
        "topic": NOT_FOUND, "subscription": NOT_FOUND, "subscriptionOfMissingTopic": NOT_FOUND,
        "deleteSubscription": NOT_FOUND}
    assert value_of(topics["subscriptionDeleted"]) is None and value_of(topics["topicDeleted"]) is None
    assert error_of(topics["afterSubscriptionDelete"]) == NOT_FOUND
    assert error_of(topics["afterTopicDelete"]) == NOT_FOUND  # the topic's subscriptions went with it


def test_rules(java, namespace):
    rules = java["rules"]
    # The Java client reads every SQL parameter and correlation property back as a string.
    priced = {
        "kind": "RuleProperties", "name": "priced",
        "filter": {"kind": "SqlRuleFilter", "sqlExpression": "price > @limit AND region = @region",
                   "parameters": {"@limit": "10.5", "@region": "eu"}},
        "action": {"kind": "SqlRuleAction", "sqlExpression": "SET flagged = @flag",
                   "parameters": {"@flag": "true"}},
    }
    assert value_of(rules["sql"]) == value_of(rules["fetched"]) == priced
    matched = {
        "kind": "RuleProperties", "name": "matched",
        "filter": {"kind": "CorrelationRuleFilter", "correlationId": "cid", "messageId": "mid", "to": "to",
                   "replyTo": "rt", "label": "lbl", "sessionId": "sess", "replyToSessionId": "rts",
                   "contentType": "application/json",
                   "properties": {"k": "v", "n": "5", "on": "true", "at": "2024-01-01T00:00Z"}},
        "action": {"kind": "EmptyRuleAction"},
    }
    assert value_of(rules["correlation"]) == matched
    assert error_of(rules["again"]) == EXISTS
    assert error_of(rules["badSql"]) == ("HttpResponseException", 400)
    repriced = {"kind": "RuleProperties", "name": "priced", "action": {"kind": "EmptyRuleAction"},
                "filter": {"kind": "SqlRuleFilter", "sqlExpression": "price > 100", "parameters": {}}}
    assert value_of(rules["updated"]) == value_of(rules["refetched"]) == repriced
    true_filter = {"kind": "TrueRuleFilter", "sqlExpression": "1=1", "parameters": {}}
    assert rules["listed"] == [
        {"kind": "RuleProperties", "name": "$Default", "filter": true_filter,
         "action": {"kind": "EmptyRuleAction"}}, repriced, matched]
    assert {call: error_of(outcome) for call, outcome in rules["missing"].items()} == {
        "get": NOT_FOUND, "delete": NOT_FOUND, "ofMissingSubscription": NOT_FOUND}
    assert value_of(rules["deleted"]) is None
    assert error_of(rules["afterDelete"]) == NOT_FOUND
    assert [r.name for r in python_admin(namespace).list_rules("t", "s")] == ["$Default", "priced"]


def test_lists_page_past_one_hundred(java):
    paging = java["paging"]
    queues = sorted(["archive", "busy", "sink", *[f"p{i:03d}" for i in range(105)]])
    assert paging["queues"] == queues  # every queue once, in order, across the pages
    assert paging["pageSizes"] == [100, len(queues) - 100]
