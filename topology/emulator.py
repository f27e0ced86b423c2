"""The official Service Bus emulator's Config.json (`UserConfig.Namespaces[]`): PascalCase properties, lists
of named entities, empty strings for "not set". Read into the same model as the sbfed file; problems name
the properties as the file spells them."""

from __future__ import annotations

from typing import Any

from topology.model import NamespaceSpec, QueueSpec, RuleSpec, SubscriptionSpec, TopicSpec, Topology
from topology.problems import (
    Problems,
    check_entity_name,
    check_segment_name,
    checked_properties,
    unknown_key,
)
from topology.schema import CORRELATION_FIELDS, NAME_RULE, PROPERTIES

DEFAULT_NAMESPACE = "sbemulatorns"
FILTER_TYPES = ("Correlation", "Sql")


def pascal(name: str) -> str:
    """`forward_dead_lettered_messages_to` -> `ForwardDeadLetteredMessagesTo`."""
    return "".join(part.capitalize() for part in name.split("_"))


def _pascal_table(names: Any) -> dict[str, str]:
    return {pascal(name): name for name in names}


_PROPERTIES = {kind: _pascal_table(table) for kind, table in PROPERTIES.items()}
_CORRELATION = _pascal_table(CORRELATION_FIELDS)


def read(document: dict[str, Any], problems: Problems) -> Topology:
    topology = Topology(source=problems.source, emulator=True)
    for key in document:
        if key not in ("UserConfig", "$schema"):
            problems.add("", str(key), unknown_key(key, ("UserConfig",), "key"))
    config = _keys(document.get("UserConfig"), "", "UserConfig", ("Namespaces", "Logging"), problems)
    for index, raw in enumerate(_list(config.get("Namespaces"), "", "UserConfig.Namespaces", problems)):
        body = _keys(raw, "", f"Namespaces[{index}]", ("Name", "Queues", "Topics"), problems)
        name = str(body.get("Name") or DEFAULT_NAMESPACE)
        topology.namespaces[name] = _namespace(name, body, problems)
    if not topology.namespaces:
        problems.add("", "UserConfig.Namespaces", "missing, declare at least one namespace")
    return topology


def _keys(raw: Any, where: str, name: str, allowed: tuple[str, ...], problems: Problems) -> dict[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        problems.add(where, name, f"{type(raw).__name__} where an object is expected")
        return {}
    for key in raw:
        if key not in allowed:
            problems.add(where, f"{name}.{key}" if name else str(key), unknown_key(key, allowed, "key"))
    return raw


def _list(raw: Any, where: str, name: str, problems: Problems) -> list[Any]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        problems.add(where, name, f"{type(raw).__name__} where a list is expected")
        return []
    return raw


def _named(raw: Any, where: str, kind: str, index: int, allowed: tuple[str, ...],
           problems: Problems) -> tuple[str | None, dict[str, Any]]:
    """An entry of a list of named entities: its name (None, reported, when it has none) and body."""
    body = _keys(raw, where, f"{kind}[{index}]", ("Name", *allowed), problems)
    name = body.get("Name")
    if not isinstance(name, str) or not name:
        problems.add(where, f"{kind}[{index}].Name", f"{name!r} is not a name, allowed {NAME_RULE}")
        return None, body
    return name, body


def _namespace(name: str, body: dict[str, Any], problems: Problems) -> NamespaceSpec:
    spec = NamespaceSpec(name=name)
    for index, raw in enumerate(_list(body.get("Queues"), name, "Queues", problems)):
        queue, queue_body = _named(raw, name, "Queues", index, ("Properties",), problems)
        if queue is None:
            continue
        where = f"{name}/{queue}"
        check_entity_name(queue, where, "Name", problems)
        props = _properties("queue", queue_body.get("Properties"), where, problems)
        spec.queues.append(QueueSpec(queue, props))
    for index, raw in enumerate(_list(body.get("Topics"), name, "Topics", problems)):
        topic, topic_body = _named(raw, name, "Topics", index, ("Properties", "Subscriptions"), problems)
        if topic is None:
            continue
        where = f"{name}/{topic}"
        check_entity_name(topic, where, "Name", problems)
        props = _properties("topic", topic_body.get("Properties"), where, problems)
        subscriptions = _list(topic_body.get("Subscriptions"), where, "Subscriptions", problems)
        read = [_subscription(raw_sub, where, i, problems) for i, raw_sub in enumerate(subscriptions)]
        spec.topics.append(TopicSpec(topic, props, [sub for sub in read if sub is not None]))
    return spec



def _properties(kind: str, raw: Any, where: str, problems: Problems) -> dict[str, Any]:
    if not isinstance(raw, dict):
        if raw is not None:
            problems.add(where, "Properties", f"{type(raw).__name__} where an object is expected")
        return {}
    return checked_properties(PROPERTIES[kind], raw, where, problems, _PROPERTIES[kind])


def _subscription(raw: Any, topic_where: str, index: int, problems: Problems) -> SubscriptionSpec | None:
    name, body = _named(raw, topic_where, "Subscriptions", index, ("Properties", "Rules"), problems)
    if name is None:
        return None
    where = f"{topic_where}/{name}"
    check_segment_name("subscription", name, where, "Name", problems)
    props = _properties("subscription", body.get("Properties"), where, problems)
    rules = _list(body.get("Rules"), where, "Rules", problems)
    read = [_rule(raw_rule, where, i, problems) for i, raw_rule in enumerate(rules)]
    return SubscriptionSpec(name, props, [rule for rule in read if rule is not None])


def _rule(raw: Any, sub_where: str, index: int, problems: Problems) -> RuleSpec | None:
    name, body = _named(raw, sub_where, "Rules", index, ("Properties",), problems)
    if name is None:
        return None
    where = f"{sub_where}/{name}"
    check_segment_name("rule", name, where, "Name", problems)
    props = _keys(body.get("Properties"), where, "Properties",
                  ("FilterType", "SqlFilter", "CorrelationFilter", "Action"), problems)
    kind = props.get("FilterType", "Sql")
    rule = RuleSpec(name)
    if kind == "Correlation":
        rule.filter = {"correlation": _correlation(props.get("CorrelationFilter"), where, problems)}
    elif kind == "Sql":
        expression = _keys(props.get("SqlFilter"), where, "SqlFilter", ("SqlExpression",),
                           problems).get("SqlExpression", "1=1")
        if not isinstance(expression, str) or not expression.strip():
            problems.add(where, "SqlFilter.SqlExpression", f"{expression!r} is not a SQL expression")
        rule.filter = {"sql": expression}
    else:
        problems.add(where, "FilterType", f"{kind!r} is not a filter type, allowed: "
                     f"{', '.join(FILTER_TYPES)}")
    action = _keys(props.get("Action"), where, "Action", ("SqlExpression",), problems).get("SqlExpression")
    if action not in (None, ""):
        if isinstance(action, str):
            rule.action = {"sql": action}
        else:
            problems.add(where, "Action.SqlExpression", f"{action!r} is not a SQL action")
    return rule


def _correlation(raw: Any, where: str, problems: Problems) -> dict[str, Any]:
    body = _keys(raw, where, "CorrelationFilter", (*_CORRELATION, "Properties"), problems)
    out: dict[str, Any] = {}
    for key, value in body.items():
        if key == "Properties":
            if not isinstance(value, dict):
                problems.add(where, "CorrelationFilter.Properties", "not an object of name to value")
            elif value:
                out["properties"] = dict(value)
        elif key in _CORRELATION and value not in ("", None):
            if not isinstance(value, str):
                problems.add(where, f"CorrelationFilter.{key}", f"{value!r} is not text")
            out[_CORRELATION[key]] = value
    if not out:
        problems.add(where, "CorrelationFilter", "empty, allowed one or more of "
                     f"{', '.join([*_CORRELATION, 'Properties'])}")
    return out
