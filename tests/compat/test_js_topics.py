"""Topics with the official JavaScript SDK (js/topics.mjs, one node run): SQL and correlation filters, rule
actions, and autoforwarding from a subscription and along a chain of queues."""

from __future__ import annotations

from typing import Any

import pytest
from js_runner import run_js

RED_ACTION = "SET sys.Label = 'red-order'; SET stamped = 'yes'"
TOPOLOGY = {"namespaces": {"compat": {
    "queues": {"chain-end": {}, "chain-mid": {"forward_to": "chain-end"},
               "chain-start": {"forward_to": "chain-mid"}, "refunds": {}},
    "topics": {"orders": {"subscriptions": {
        "all": {},
        "red": {"rules": {"only-red": {"filter": {"sql": "color = 'red'"}, "action": {"sql": RED_ACTION}}}},
        "big": {"rules": {"large": {"filter": {"sql": "quantity > 10 AND sys.Label = 'order'"}}}},
        "refunds": {"forward_to": "refunds",
                    "rules": {"refund": {"filter": {"correlation": {"label": "refund"}}}}},
    }}},
}}}


@pytest.fixture(scope="module")
def js(serve) -> dict[str, Any]:
    return run_js("topics.mjs", serve(TOPOLOGY)["compat"])


def _seen(messages: list[dict[str, Any]]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(m["body"], m["subject"], m.get("applicationProperties")) for m in messages]


def test_subscriptions_get_what_their_filters_select(js) -> None:
    filters = js["filters"]
    assert [m["body"] for m in filters["all"]] == ["red-big", "red-small", "blue"]
    assert _seen(filters["big"]) == [("red-big", "order", {"color": "red", "quantity": 12})]


def test_a_rule_action_changes_system_and_user_properties(js) -> None:
    assert _seen(js["filters"]["red"]) == [
        ("red-big", "red-order", {"color": "red", "quantity": 12, "RuleName": "only-red", "stamped": "yes"}),
        ("red-small", "red-order", {"color": "red", "quantity": 1, "RuleName": "only-red", "stamped": "yes"}),
    ]


def test_autoforwarding_from_a_subscription_and_along_a_chain(js) -> None:
    assert [(m["body"], m["messageId"]) for m in js["filters"]["refundsForwarded"]] == [("blue", "o3")]
    assert [(m["body"], m["messageId"]) for m in js["chain"]["end"]] == [("hop-1", "h1"), ("hop-2", "h2")]
