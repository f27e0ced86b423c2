"""The JavaScript `ServiceBusAdministrationClient` (@azure/service-bus, pinned in js/package.json) against
the broker, unchanged: queues, topics, subscriptions and rules created, read, updated, listed (past one
page) and deleted, runtime figures of messages the Python SDK put there, and the errors the client names
(404 MessageEntityNotFoundError, 409 MessageEntityAlreadyExistsError, 400 ServiceError, 401
UnauthorizedRequestError). Each node script prints one JSON document; the assertions are here.
"""

from __future__ import annotations

import datetime as dt

from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.management import (
    FalseRuleFilter,
    ServiceBusAdministrationClient,
    TrueRuleFilter,
)
from js_runner import run_js

from patterns.drills.broker import BrokerNamespace

NOT_FOUND = ("MessageEntityNotFoundError", 404)
EXISTS = ("MessageEntityAlreadyExistsError", 409)


def error_of(outcome: dict) -> tuple[str, int]:
    assert "error" in outcome, f"expected an error, got {outcome}"
    return outcome["error"]["code"], outcome["error"]["statusCode"]


def part(model: dict, expected: dict) -> dict:
    """The model's values of the keys `expected` names."""
    return {key: model.get(key) for key in expected}


def value_of(outcome: dict) -> dict:
    assert "value" in outcome, f"expected a value, got {outcome}"
    return outcome["value"]


def start(serve) -> BrokerNamespace:
    """A broker of its own for the test (the lists it checks hold exactly what the test made)."""
    return serve({"namespaces": {"primary": {}}})["primary"]


def admin_host(broker: BrokerNamespace) -> str:
    """host:port of the management endpoint, as forwarding destinations are named."""
    return broker.admin_url.removeprefix("https://")


def python_admin(broker: BrokerNamespace) -> ServiceBusAdministrationClient:
    return ServiceBusAdministrationClient.from_connection_string(
        broker.admin_connection_string, connection_verify=broker.cert_path, retry_total=0)


def fill(broker: BrokerNamespace, queue: str | None = None, topic: str | None = None) -> None:
    """Through the Python SDK: 4 messages sent (one then dead-lettered) and 2 scheduled for tomorrow."""
    with ServiceBusClient.from_connection_string(broker.connection_string) as client:
        with client.get_queue_sender(queue) if queue else client.get_topic_sender(topic) as sender:
            sender.send_messages([ServiceBusMessage(f"m{i}") for i in range(4)])
            tomorrow = dt.datetime.now(dt.UTC) + dt.timedelta(days=1)
            sender.schedule_messages([ServiceBusMessage("later"), ServiceBusMessage("later")], tomorrow)
        receiver = (client.get_queue_receiver(queue) if queue
                    else client.get_subscription_receiver(topic, "all"))
        with receiver:
            (message,) = receiver.receive_messages(max_message_count=1, max_wait_time=10)
            receiver.dead_letter_message(message, reason="test")


def with_busy_queue(serve) -> BrokerNamespace:
    """A broker with a queue `busy` that `fill` filled (for the runtime figures)."""
    broker = start(serve)
    python_admin(broker).create_queue("busy")
    fill(broker, queue="busy")
    return broker


def with_busy_topic(serve) -> BrokerNamespace:
    """A broker with a topic `busy` and its subscription `all` that `fill` filled."""
    broker = start(serve)
    admin = python_admin(broker)
    admin.create_topic("busy")
    admin.create_subscription("busy", "all")
    fill(broker, topic="busy")
    return broker


def with_python_rules(serve) -> BrokerNamespace:
    """A broker with a subscription t/s holding rules the Python SDK made with true and false filters."""
    broker = start(serve)
    admin = python_admin(broker)
    admin.create_topic("t")
    admin.create_subscription("t", "s")
    admin.create_rule("t", "s", "everything", filter=TrueRuleFilter())
    admin.create_rule("t", "s", "nothing", filter=FalseRuleFilter())
    return broker


def test_queues(serve):
    broker = with_busy_queue(serve)
    result = run_js("admin_queues.mjs", broker, "busy")

    namespace = value_of(result["namespace"])
    assert (namespace["name"], namespace["messagingSku"]) == ("primary", "Standard")
    forward = f"sb://{admin_host(broker)}/archive"
    expected = {
        "name": "orders", "lockDuration": "PT45S", "maxSizeInMegabytes": 2048, "maxDeliveryCount": 4,
        "requiresDuplicateDetection": True, "requiresSession": False, "enablePartitioning": True,
        "defaultMessageTimeToLive": "P1D", "duplicateDetectionHistoryTimeWindow": "PT5M",
        "deadLetteringOnMessageExpiration": True, "enableBatchedOperations": False,
        "forwardTo": forward, "forwardDeadLetteredMessagesTo": forward, "userMetadata": "owner=billing",
        "status": "Active", "availabilityStatus": "Available",
    }
    for key in ("created", "fetched"):
        assert part(value_of(result[key]), expected) == expected, key
    assert error_of(result["createdAgain"]) == EXISTS
    assert result["exists"] == {"orders": True, "missing": False}
    for key in ("updated", "refetched"):
        queue = value_of(result[key])
        assert (queue["maxDeliveryCount"], queue["userMetadata"], queue["status"]) == (7, "owner=payments",
                                                                                       "SendDisabled")
        assert "forwardTo" not in queue and queue["forwardDeadLetteredMessagesTo"] == forward

    runtime = value_of(result["runtime"])
    counts = {"activeMessageCount": 3, "deadLetterMessageCount": 1, "scheduledMessageCount": 2,
              "transferMessageCount": 0, "transferDeadLetterMessageCount": 0, "totalMessageCount": 6}
    assert part(runtime, counts) == counts and runtime["sizeInBytes"] > 0
    assert runtime["createdAt"] <= runtime["modifiedAt"] <= runtime["accessedAt"]
    assert result["listed"] == ["archive", "busy", "orders"]
    assert result["listedRuntime"] == [["archive", 0], ["busy", 3], ["orders", 0]]

    assert {call: error_of(outcome) for call, outcome in result["missing"].items()} == {
        "get": NOT_FOUND, "runtime": NOT_FOUND, "update": NOT_FOUND, "delete": NOT_FOUND}
    # Entity-level SAS rules are refused (not silently dropped): the namespace's policies authorize.
    assert error_of(result["authorizationRules"]) == ("ServiceError", 400)
    assert value_of(result["deleted"]) == {}
    assert error_of(result["afterDelete"]) == NOT_FOUND
    assert error_of(result["wrongKey"]) == ("UnauthorizedRequestError", 401)


def test_topics_and_subscriptions(serve):
    broker = with_busy_topic(serve)
    result = run_js("admin_topics.mjs", broker, "busy", "all")

    expected = {
        "name": "events", "maxSizeInMegabytes": 2048, "defaultMessageTimeToLive": "PT10H",
        "requiresDuplicateDetection": True, "enablePartitioning": True, "supportOrdering": False,
        "enableBatchedOperations": False, "duplicateDetectionHistoryTimeWindow": "PT1M",
        "autoDeleteOnIdle": "PT3H",
        "userMetadata": "team=events", "status": "Active",
    }
    for key in ("topic", "topicFetched"):
        assert part(value_of(result[key]), expected) == expected, key
    assert error_of(result["topicAgain"]) == EXISTS
    assert result["topicExists"] == {"events": True, "missing": False}
    updated = value_of(result["topicUpdated"])
    assert (updated["userMetadata"], updated["status"]) == ("team=payments", "SendDisabled")

    expected = {
        "topicName": "events", "subscriptionName": "audit", "lockDuration": "PT20S", "requiresSession": True,
        "defaultMessageTimeToLive": "PT1H", "deadLetteringOnMessageExpiration": True,
        "deadLetteringOnFilterEvaluationExceptions": False, "maxDeliveryCount": 2,
        "enableBatchedOperations": False,
        "autoDeleteOnIdle": "PT4H", "forwardDeadLetteredMessagesTo": f"sb://{admin_host(broker)}/sink",
        "userMetadata": "to=secondary", "status": "Active",
    }
    for key in ("subscription", "subscriptionFetched"):
        assert part(value_of(result[key]), expected) == expected, key
    assert error_of(result["subscriptionAgain"]) == EXISTS
    relay = value_of(result["forwarding"])
    assert relay["forwardTo"] == f"sb://{admin_host(broker)}/sink"
    assert result["relayRules"] == ["orders-only"]  # the default rule given replaces $Default
    assert result["subscriptionExists"] == {"audit": True, "missing": False}
    for key in ("subscriptionUpdated", "subscriptionRefetched"):
        sub = value_of(result[key])
        assert (sub["maxDeliveryCount"], sub["status"]) == (9, "ReceiveDisabled")
        assert "forwardDeadLetteredMessagesTo" not in sub

    topic_runtime = value_of(result["topicRuntime"])
    assert (topic_runtime["subscriptionCount"], topic_runtime["scheduledMessageCount"]) == (1, 2)
    sub_runtime = value_of(result["subscriptionRuntime"])
    assert (sub_runtime["activeMessageCount"], sub_runtime["deadLetterMessageCount"],
            sub_runtime["totalMessageCount"]) == (3, 1, 4)
    assert result["topics"] == ["busy", "events"]
    assert result["topicsRuntime"] == [["busy", 1], ["events", 2]]
    assert result["subscriptions"] == [["events", "audit"], ["events", "relay"]]
    assert result["subscriptionsRuntime"] == [["all", 3]]

    assert {call: error_of(outcome) for call, outcome in result["missing"].items()} == {
        "topic": NOT_FOUND, "subscription": NOT_FOUND, "subscriptionOfMissingTopic": NOT_FOUND,
        "deleteSubscription": NOT_FOUND}
    assert value_of(result["subscriptionDeleted"]) == {} and value_of(result["topicDeleted"]) == {}
    assert error_of(result["afterSubscriptionDelete"]) == NOT_FOUND
    assert error_of(result["afterTopicDelete"]) == NOT_FOUND  # the topic's subscriptions went with it


def test_rules(serve):
    broker = with_python_rules(serve)
    result = run_js("admin_rules.mjs", broker, "t", "s")

    priced = {
        "name": "priced",
        "filter": {"sqlExpression": "price > @limit AND region = @region",
                   "sqlParameters": {"@limit": 10.5, "@region": "eu"}},
        "action": {"sqlExpression": "SET flagged = @flag", "sqlParameters": {"@flag": True}},
    }
    assert value_of(result["sql"]) == value_of(result["fetched"]) == priced
    matched = {
        "name": "matched",
        "filter": {"correlationId": "cid", "messageId": "mid", "to": "to", "replyTo": "rt", "subject": "lbl",
                   "sessionId": "sess", "replyToSessionId": "rts", "contentType": "application/json",
                   "applicationProperties": {"k": "v", "n": 5, "on": True, "at": "2024-01-01T00:00:00.000Z"}},
        "action": {},
    }
    assert value_of(result["correlation"]) == matched
    assert error_of(result["again"]) == EXISTS
    assert error_of(result["badSql"]) == ("ServiceError", 400)
    assert result["exists"] == {"priced": True, "missing": False}
    repriced = {"name": "priced", "filter": {"sqlExpression": "price > 100"}, "action": {}}
    assert value_of(result["updated"]) == value_of(result["refetched"]) == repriced

    # Rules the Python SDK made with true/false filters read back as the SQL Service Bus stores for them.
    true_rule = {"filter": {"sqlExpression": "1=1"}, "action": {}}
    assert result["listed"] == [
        {"name": "$Default", **true_rule},
        {"name": "everything", **true_rule},
        {"name": "nothing", "filter": {"sqlExpression": "1=0"}, "action": {}},
        repriced,
        matched,
    ]
    assert {call: error_of(outcome) for call, outcome in result["missing"].items()} == {
        "get": NOT_FOUND, "delete": NOT_FOUND, "update": NOT_FOUND, "ofMissingSubscription": NOT_FOUND}
    assert value_of(result["deleted"]) == {}
    assert error_of(result["afterDelete"]) == NOT_FOUND
    assert [r.name for r in python_admin(broker).list_rules("t", "s")] == [
        "$Default", "everything", "nothing", "priced"]


def test_lists_page_past_one_hundred(serve):
    broker = start(serve)
    admin = python_admin(broker)
    queues = [f"q{i:03d}" for i in range(105)]
    for name in queues:
        admin.create_queue(name)
    admin.create_topic("t")
    subscriptions = [f"s{i:03d}" for i in range(101)]
    for name in subscriptions:
        admin.create_subscription("t", name)
    rules = [f"r{i:03d}" for i in range(101)]
    for name in rules:
        admin.create_rule("t", "s000", name)
    result = run_js("admin_paging.mjs", broker, "t", "s000")

    assert result["queues"] == queues and result["queuesRuntime"] == 105
    assert result["queuePages"] == {"sizes": [40, 40, 25], "names": queues}
    assert result["firstPage"] == {"size": 40, "continuationToken": "40"}
    assert result["resumed"] == {"sizes": [65], "names": queues[40:]}
    assert result["topics"] == ["t"]
    assert result["subscriptions"] == subscriptions
    assert result["rules"] == ["$Default", *rules]
