"""The Go SDK's admin package (azservicebus/admin, the same pinned module) against the broker's management
port, unchanged: queues, topics, subscriptions and rules created, read, updated, listed (past one page) and
deleted, runtime figures of messages the Python SDK put there, and the errors it reports (an
*azcore.ResponseError with the HTTP status; a Get of a missing entity answers nil, no error). Each Go scenario
prints one JSON document; the assertions are here."""

from __future__ import annotations

import datetime as dt

from go_runner import run_go
from test_js_admin import admin_host, python_admin, start, with_busy_queue, with_busy_topic, with_python_rules

NOT_FOUND, EXISTS, BAD_REQUEST, UNAUTHORIZED = 404, 409, 400, 401


def status_of(outcome: dict) -> int:
    assert "error" in outcome, f"expected an error, got {outcome}"
    return outcome["error"]["statusCode"]


def value_of(outcome: dict):
    assert "error" not in outcome, f"expected a value, got {outcome}"
    return outcome["value"]


def part(model: dict, expected: dict) -> dict:
    return {key: model.get(key) for key in expected}


def test_queues(serve):
    broker = with_busy_queue(serve)
    result = run_go("admin-queues", broker, "busy")

    namespace = value_of(result["namespace"])
    assert (namespace["Name"], namespace["SKU"]) == ("primary", "Standard")
    forward = f"sb://{admin_host(broker)}/archive"
    expected = {
        "LockDuration": "PT45S", "MaxSizeInMegabytes": 2048, "MaxDeliveryCount": 4,
        "RequiresDuplicateDetection": True, "RequiresSession": False, "EnablePartitioning": True,
        "DefaultMessageTimeToLive": "P1D", "DuplicateDetectionHistoryTimeWindow": "PT5M",
        "DeadLetteringOnMessageExpiration": True, "EnableBatchedOperations": False,
        "AutoDeleteOnIdle": "P10675199DT2H48M5.4775807S",  # TimeSpan.MaxValue: autoforwarding turns it off
        "ForwardTo": forward, "ForwardDeadLetteredMessagesTo": forward, "UserMetadata": "owner=billing",
        "Status": "Active",
    }
    for key in ("created", "fetched"):
        assert part(value_of(result[key]), expected) == expected, key
    assert value_of(result["created"])["QueueName"] == "orders"
    assert status_of(result["createdAgain"]) == EXISTS
    for key in ("updated", "refetched"):
        queue = value_of(result[key])
        assert (queue["MaxDeliveryCount"], queue["UserMetadata"], queue["Status"]) == (7, "owner=payments",
                                                                                       "SendDisabled")
        assert queue["ForwardTo"] is None and queue["ForwardDeadLetteredMessagesTo"] == forward

    runtime = value_of(result["runtime"])
    counts = {"ActiveMessageCount": 3, "DeadLetterMessageCount": 1, "ScheduledMessageCount": 2,
              "TransferMessageCount": 0, "TransferDeadLetterMessageCount": 0, "TotalMessageCount": 6}
    assert part(runtime, counts) == counts and runtime["SizeInBytes"] > 0
    created, updated, accessed = (dt.datetime.fromisoformat(runtime[k])
                                  for k in ("CreatedAt", "UpdatedAt", "AccessedAt"))
    assert created <= updated <= accessed
    assert result["listed"] == ["archive", "busy", "orders"]
    assert result["listedRuntime"] == [["archive", 0], ["busy", 3], ["orders", 0]]

    missing = result["missing"]
    assert value_of(missing["get"]) is None and value_of(missing["runtime"]) is None  # the SDK's nil, nil
    assert status_of(missing["update"]) == NOT_FOUND and status_of(missing["delete"]) == NOT_FOUND
    # Entity-level SAS rules are refused (not silently dropped): the namespace's policies authorize.
    assert status_of(result["authorizationRules"]) == BAD_REQUEST
    assert value_of(result["deleted"]) == {}
    assert value_of(result["afterDelete"]) is None
    assert status_of(result["wrongKey"]) == UNAUTHORIZED


def test_topics_and_subscriptions(serve):
    broker = with_busy_topic(serve)
    result = run_go("admin-topics", broker, "busy", "all")

    expected = {
        "MaxSizeInMegabytes": 2048, "DefaultMessageTimeToLive": "PT10H", "RequiresDuplicateDetection": True,
        "EnablePartitioning": True, "SupportOrdering": False, "EnableBatchedOperations": False,
        "DuplicateDetectionHistoryTimeWindow": "PT1M", "AutoDeleteOnIdle": "PT3H",
        "UserMetadata": "team=events", "Status": "Active",
    }
    for key in ("topic", "topicFetched"):
        assert part(value_of(result[key]), expected) == expected, key
    assert status_of(result["topicAgain"]) == EXISTS
    updated = value_of(result["topicUpdated"])
    assert (updated["UserMetadata"], updated["Status"]) == ("team=payments", "SendDisabled")

    expected = {
        "LockDuration": "PT20S", "RequiresSession": True, "DefaultMessageTimeToLive": "PT1H",
        "DeadLetteringOnMessageExpiration": True, "EnableDeadLetteringOnFilterEvaluationExceptions": False,
        "MaxDeliveryCount": 2, "EnableBatchedOperations": False, "AutoDeleteOnIdle": "PT4H",
        "ForwardDeadLetteredMessagesTo": f"sb://{admin_host(broker)}/sink", "UserMetadata": "to=secondary",
        "Status": "Active",
    }
    for key in ("subscription", "subscriptionFetched"):
        assert part(value_of(result[key]), expected) == expected, key
    assert status_of(result["subscriptionAgain"]) == EXISTS
    assert value_of(result["forwarding"])["ForwardTo"] == f"sb://{admin_host(broker)}/sink"
    assert result["relayRules"] == ["orders-only"]  # the default rule given replaces $Default
    for key in ("subscriptionUpdated", "subscriptionRefetched"):
        sub = value_of(result[key])
        # the SDK leaves Status out of the subscription it sends (its description has no Status set)
        assert (sub["MaxDeliveryCount"], sub["Status"]) == (9, "Active")
        assert sub["ForwardDeadLetteredMessagesTo"] is None

    topic_runtime = value_of(result["topicRuntime"])
    assert (topic_runtime["SubscriptionCount"], topic_runtime["ScheduledMessageCount"]) == (1, 2)
    # api-version 2024-05's filter counts: the one subscription's $Default is a SQL (true) filter
    assert (topic_runtime["SQLFilterCount"], topic_runtime["CorrelationFilterCount"]) == (1, 0)
    sub_runtime = value_of(result["subscriptionRuntime"])
    assert (sub_runtime["ActiveMessageCount"], sub_runtime["DeadLetterMessageCount"],
            sub_runtime["TotalMessageCount"]) == (3, 1, 4)
    assert result["topics"] == ["busy", "events"]
    assert result["topicsRuntime"] == [["busy", 1], ["events", 2]]
    assert result["subscriptions"] == [["events", "audit"], ["events", "relay"]]
    assert result["subscriptionsRuntime"] == [["all", 3]]

    missing = result["missing"]
    for call in ("topic", "subscription", "subscriptionOfMissingTopic"):
        assert value_of(missing[call]) is None, call
    assert status_of(missing["deleteSubscription"]) == status_of(missing["deleteTopic"]) == NOT_FOUND
    value_of(result["subscriptionDeleted"]), value_of(result["topicDeleted"])
    assert value_of(result["afterSubscriptionDelete"]) is None
    assert value_of(result["afterTopicDelete"]) is None  # the topic's subscriptions went with it


def sql(expression: str, parameters: dict | None = None) -> dict:
    return {"type": "*admin.SQLFilter", "value": {"Expression": expression, "Parameters": parameters}}


def test_rules(serve):
    broker = with_python_rules(serve)
    result = run_go("admin-rules", broker, "t", "s")

    priced = {
        "name": "priced",
        "filter": sql("price > @limit AND region = @region", {"@limit": 10.5, "@region": "eu", "@count": 3}),
        "action": {"type": "*admin.SQLAction",
                   "value": {"Expression": "SET flagged = @flag", "Parameters": {"@flag": True}}},
    }
    assert value_of(result["sql"]) == value_of(result["fetched"]) == priced
    matched = {
        "name": "matched",
        "filter": {"type": "*admin.CorrelationFilter", "value": {
            "CorrelationID": "cid", "MessageID": "mid", "To": "to", "ReplyTo": "rt", "Subject": "lbl",
            "SessionID": "sess", "ReplyToSessionID": "rts", "ContentType": "application/json",
            "ApplicationProperties": {"k": "v", "n": 5, "on": True, "at": "2024-01-01T00:00:00Z",
                                      "ratio": 0.5}}},
        "action": None,
    }
    assert value_of(result["correlation"]) == matched
    # a rule made with no filter gets the true filter, which the Go SDK reads back as its TrueFilter
    assert value_of(result["default"])["filter"] == {"type": "*admin.TrueFilter", "value": {}}
    assert status_of(result["again"]) == EXISTS
    assert status_of(result["badSql"]) == BAD_REQUEST
    repriced = {"name": "priced", "filter": sql("price > 100"), "action": None}
    assert value_of(result["updated"]) == value_of(result["refetched"]) == repriced

    true_filter = {"type": "*admin.TrueFilter", "value": {}}
    assert result["listed"] == [
        {"name": "$Default", "filter": true_filter, "action": None},
        {"name": "everything", "filter": true_filter, "action": None},
        {"name": "nothing", "filter": {"type": "*admin.FalseFilter", "value": {}}, "action": None},
        repriced,
        matched,
        {"name": "unfiltered", "filter": true_filter, "action": None},
    ]
    missing = result["missing"]
    assert value_of(missing["get"]) is None and value_of(missing["ofMissingSubscription"]) is None
    assert status_of(missing["update"]) == status_of(missing["delete"]) == NOT_FOUND
    assert value_of(result["deleted"]) == {}
    assert value_of(result["afterDelete"]) is None
    assert [r.name for r in python_admin(broker).list_rules("t", "s")] == [
        "$Default", "everything", "nothing", "priced", "unfiltered"]


def test_lists_page_past_one_hundred(serve):
    result = run_go("admin-paging", start(serve), "t", "s000")  # the scenario makes the entities it lists

    queues = [f"q{i:03d}" for i in range(105)]
    assert result["queues"] == queues and result["queuePageSizes"] == [40, 40, 25]
    assert result["allQueues"] == result["queuesRuntime"] == 105
    assert result["defaultPageSizes"] == [100, 5, 0]  # the service's page; the SDK reads on to an empty one
    assert result["subscriptions"] == [f"s{i:03d}" for i in range(101)]
    assert result["rules"] == ["$Default", *(f"r{i:03d}" for i in range(101))]
