"""Topics with the official Go SDK (go/topics.go, one run): SQL and correlation filters, rule actions, rules
replaced on a live subscription through the SDK's admin package (the Go SDK manages rules only there), and
autoforwarding from a subscription and along a chain of queues."""

from __future__ import annotations

from typing import Any

import pytest
import test_js_topics
from go_runner import run_go

# The JavaScript suite's entities, a subscription whose rules the Go scenario replaces, a session one.
_JS = test_js_topics.TOPOLOGY["namespaces"]["compat"]
TOPOLOGY = {"namespaces": {"compat": {"queues": _JS["queues"], "topics": {"orders": {"subscriptions": {
    **_JS["topics"]["orders"]["subscriptions"], "live": {},
    "by-tenant": {"requires_session": True, "rules": {"tenants": {"filter": {"sql": "quantity = 0"}}}}}}}}}}


@pytest.fixture(scope="module")
def go(serve) -> dict[str, Any]:
    return run_go("topics", serve(TOPOLOGY)["compat"])


def _seen(messages: list[dict[str, Any]]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(m["body"], m["subject"], m["applicationProperties"]) for m in messages]


def test_subscriptions_get_what_their_filters_select(go) -> None:
    filters = go["filters"]
    assert [m["body"] for m in filters["all"]] == ["red-big", "red-small", "blue"]
    assert _seen(filters["big"]) == [("red-big", "order", {"color": "red", "quantity": 12})]


def test_a_rule_action_changes_system_and_user_properties(go) -> None:
    assert _seen(go["filters"]["red"]) == [
        ("red-big", "red-order", {"color": "red", "quantity": 12, "RuleName": "only-red", "stamped": "yes"}),
        ("red-small", "red-order", {"color": "red", "quantity": 1, "RuleName": "only-red", "stamped": "yes"}),
    ]


def test_rules_the_admin_package_puts_on_a_live_subscription_select_at_once(go) -> None:
    managed = go["managed"]
    assert [m["body"] for m in managed["before"]] == ["red-big", "red-small", "blue"]  # $Default: everything
    assert managed["rules"] == ["vip", "bulk"]  # in the order they were made
    assert _seen(managed["received"]) == [
        ("vip-small", "order", {"tier": "vip", "quantity": 1}),  # no action: the message as it was sent
        ("plain-bulk", "bulk-order", {"tier": "std", "quantity": 500, "RuleName": "bulk", "bulk": True}),
    ]


def test_autoforwarding_from_a_subscription_and_along_a_chain(go) -> None:
    assert [(m["body"], m["messageId"]) for m in go["filters"]["refundsForwarded"]] == [("blue", "o3")]
    assert [(m["body"], m["messageId"]) for m in go["chain"]["end"]] == [("hop-1", "h1"), ("hop-2", "h2")]


def test_a_session_subscription_and_its_dead_letter_queue(go) -> None:
    tenant = go["sessionSubscription"]
    assert tenant["received"] == ["s1", "s2"] and tenant["sessionIds"] == ["tenant-1", "tenant-1"]
    [dead] = tenant["deadLettered"]
    assert (dead["body"], dead["sessionId"], dead["deadLetterReason"]) == ("s2", "tenant-1", "tenant-gone")
