"""Entry ids, titles, links and feeds as Service Bus writes them: clients read names back from them (the
JavaScript SDK splits the entry `<id>` on `/Subscriptions/` and `/Rules/`)."""

from xml.etree import ElementTree

from local_broker.engine import (
    Namespace,
    NamespaceConfig,
    QueueProperties,
    RuleProperties,
    SqlFilter,
    SubscriptionProperties,
    TopicProperties,
)
from local_broker.wire.admin import atom
from local_broker.wire.admin.operations import AdminRequest, Operations, parse_target

BASE = "https://127.0.0.1:5300"
ATOM = f"{{{atom.ATOM_NS}}}"


def get(path: str, **query: str) -> ElementTree.Element:
    namespace = Namespace(NamespaceConfig(name="primary"))
    namespace.create_queue(QueueProperties(name="sink"))
    namespace.create_topic(TopicProperties(name="t1"))
    namespace.create_subscription("t1", SubscriptionProperties(name="s1", topic_name="t1", forward_to="sink"))
    namespace.create_rule("t1", "s1", RuleProperties("r1", SqlFilter("a = 1")))
    operations = Operations("primary", lambda fn: fn(namespace))
    answer = operations.handle(AdminRequest("GET", parse_target(path), query, b"", False, BASE))
    assert answer.status == 200
    return ElementTree.fromstring(answer.body)


def test_subscription_and_rule_entries_are_named_as_service_bus_names_them():
    subscription = get("t1/subscriptions/s1", **{"api-version": "2024-05"})
    assert subscription.findtext(f"{ATOM}id") == f"{BASE}/t1/Subscriptions/s1?api-version=2024-05"
    assert subscription.find(f"{ATOM}link").get("href") == subscription.findtext(f"{ATOM}id")
    assert subscription.findtext(f"{ATOM}title") == "s1"
    description = subscription.find(f"{ATOM}content")[0]
    assert description.findtext(atom.sb("ForwardTo")) == "sb://127.0.0.1:5300/sink"
    rule = get("t1/subscriptions/s1/rules/r1")
    assert rule.findtext(f"{ATOM}id") == f"{BASE}/t1/Subscriptions/s1/Rules/r1?api-version={atom.API_VERSION}"
    assert rule.findtext(f"{ATOM}title") == "r1"


def test_feeds_are_titled_and_identified_by_the_request():
    query = {"$skip": "0", "$top": "1", "api-version": "2021-05"}
    rules = get("t1/Subscriptions/s1/Rules/", **query)
    assert rules.findtext(f"{ATOM}title") == "Rules"
    rules_url = f"{BASE}/t1/Subscriptions/s1/Rules"
    assert rules.findtext(f"{ATOM}id") == f"{rules_url}?$skip=0&$top=1&api-version=2021-05"
    assert [e.findtext(f"{ATOM}title") for e in rules.findall(f"{ATOM}entry")] == ["$Default"]
    next_link = rules.findall(f"{ATOM}link")[1]
    assert (next_link.get("rel"), next_link.get("href")) == (
        "next", f"{rules_url}?%24skip=1&%24top=1&api-version=2021-05")
    queues = get("$Resources/queues")
    assert queues.findtext(f"{ATOM}title") == "Queues" and len(queues.findall(f"{ATOM}link")) == 1
    assert queues.find(f"{ATOM}entry").findtext(f"{ATOM}id") == f"{BASE}/sink?api-version={atom.API_VERSION}"
