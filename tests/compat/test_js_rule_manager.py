"""Rules through the official JavaScript SDK's rule manager (js/rule_manager.mjs, one node run): add-rule,
enumerate-rules (paged) and remove-rule over AMQP with a Listen-only policy, the errors as Service Bus gives
them, and the subscription then getting what the rules select."""

from __future__ import annotations

from typing import Any

import pytest
from js_runner import run_js

LISTEN_KEY = "bGlzdGVuLW9ubHk="
TOPOLOGY = {"namespaces": {"compat": {
    "policies": {"listen-only": {"key": LISTEN_KEY, "rights": ["Listen", "Send"]}},
    "topics": {"events": {"subscriptions": {"picked": {}}}},
}}}


@pytest.fixture(scope="module")
def js(serve) -> dict[str, Any]:
    return run_js("rule_manager.mjs", serve(TOPOLOGY)["compat"])


def test_added_rules_are_listed_as_they_were_added(js) -> None:
    by_name = {rule["name"]: rule for rule in js["afterAdd"]}
    assert list(by_name) == ["sql", "corr"]
    assert by_name["sql"]["filter"] == {"sqlExpression": "color = 'red'"}
    assert by_name["sql"]["action"] == {"sqlExpression": "SET sys.Label = 'sql'"}
    corr = by_name["corr"]["filter"]
    assert (corr["correlationId"], corr["subject"], corr["contentType"]) == ("cid", "lbl", "application/json")
    assert corr["applicationProperties"] == {"kind": "urgent", "level": 3, "flag": True}
    assert by_name["corr"]["action"] == {}
    assert js["pages"] == [["sql"], ["corr"]]
    # 204 (no rules) is an empty page; the SDK's pager turns a first page that is missing into one undefined
    # item, whatever the server (its getPage returns undefined for an empty page)
    assert js["afterRemove"] in ([], [None])


def test_rule_errors_are_service_bus_errors(js) -> None:
    assert js["duplicate"]["code"] == "MessagingEntityAlreadyExists", js["duplicate"]
    assert js["missing"]["code"] == "MessagingEntityNotFound", js["missing"]
    assert js["badSql"] is not None and "column" in js["badSql"]["message"], js["badSql"]


def test_the_subscription_gets_what_the_added_rules_select(js) -> None:
    assert sorted((m["body"], m["subject"]) for m in js["got"]) == [("red", "sql"), ("urgent", "lbl")]
