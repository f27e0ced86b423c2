"""A topology (read and validated by the `topology` package) in the broker's terms: engine properties,
SAS policies, and the entities created in dependency order.

`apply_entities(engine, spec, source)` creates a namespace's entities (updating those a durable store
already holds) in `topology.creation_order`, so a forwarding destination exists before the entity that
forwards to it wherever the file declares it. `check_sql` compiles every SQL filter and action with the
broker's rules language, reporting problems in the topology's one-line form.
"""

from __future__ import annotations

from typing import Any

from local_broker.auth import ALL_RIGHTS, SharedAccessPolicy
from local_broker.engine import (
    BrokerError,
    CorrelationFilter,
    EntityAlreadyExistsError,
    EntityStatus,
    FalseFilter,
    QueueProperties,
    RuleProperties,
    SqlFilter,
    SqlRuleAction,
    SubscriptionProperties,
    TopicProperties,
    TrueFilter,
)
from topology import NamespaceSpec, RuleSpec, Topology, TopologyError, creation_order
from topology.durations import parse_duration
from topology.schema import PROPERTIES

EMULATOR_KEY = "SAS_KEY_VALUE"
_ENGINE_PROPERTIES = {"queue": QueueProperties, "topic": TopicProperties,
                      "subscription": SubscriptionProperties}


def declared_policies(spec: NamespaceSpec) -> list[SharedAccessPolicy]:
    """The SAS policies the file declares (none: the server picks the default)."""
    return [SharedAccessPolicy(name, str(body["key"]), frozenset(body.get("rights") or ALL_RIGHTS))
            for name, body in spec.policies.items()]


def engine_properties(kind: str, name: str, declared: dict[str, Any]) -> Any:
    values: dict[str, Any] = {"name": name}
    for key, value in declared.items():
        form = PROPERTIES[kind][key].kind
        values[key] = parse_duration(value) if form == "duration" else EntityStatus(value) \
            if key == "status" else value
    return _ENGINE_PROPERTIES[kind](**values)


def engine_rule(rule: RuleSpec) -> RuleProperties:
    kind = rule.filter_kind
    body = rule.filter[kind]
    parameters = rule.filter.get("parameters") or None
    if kind == "sql":
        rule_filter: Any = SqlFilter(body, parameters)
    elif kind == "correlation":
        rule_filter = CorrelationFilter(**body)
    else:
        rule_filter = TrueFilter() if kind == "true" else FalseFilter()
    action = SqlRuleAction(rule.action["sql"], rule.action.get("parameters")) if rule.action else None
    return RuleProperties(name=rule.name, filter=rule_filter, action=action)


def apply_entities(namespace: Any, spec: NamespaceSpec, source: str = "topology") -> None:
    """Create the spec's entities in an engine namespace (update those a durable store already has).

    Declared rules replace the broker's `$Default`: the first one is the subscription's default rule,
    as with the SDK's `create_subscription(default_rule=...)`. An entity the engine refuses is a
    `TopologyError` line naming it.
    """
    for step in creation_order(spec):
        where = f"{source}: {spec.name}/{step.path}"
        try:
            if step.kind == "subscription":
                _subscription(namespace, step.topic.name, step.spec)  # type: ignore[union-attr]
            else:
                props = engine_properties(step.kind, step.spec.name, step.spec.properties)  # type: ignore[attr-defined]
                try:
                    getattr(namespace, f"create_{step.kind}")(props)
                except EntityAlreadyExistsError:
                    getattr(namespace, f"update_{step.kind}")(props)
        except BrokerError as exc:
            raise TopologyError(f"{where}: {exc.description}") from None


def _subscription(namespace: Any, topic: str, sub: Any) -> None:
    props = engine_properties("subscription", sub.name, sub.properties)
    rules = [engine_rule(r) for r in sub.rules]
    try:
        namespace.create_subscription(topic, props, default_rule=rules[0] if rules else None)
        rules = rules[1:]
    except EntityAlreadyExistsError:
        namespace.update_subscription(topic, props)
    for rule in rules:
        try:
            namespace.create_rule(topic, sub.name, rule)
        except EntityAlreadyExistsError:
            namespace.update_rule(topic, sub.name, rule)


def check_sql(topology: Topology) -> list[str]:
    """Every SQL filter and action of the topology compiled with the broker's rules language; a problem
    line for each one that does not compile."""
    from local_broker.rules import compile_action, compile_filter

    lines = []
    for ns in topology.namespaces.values():
        for topic in ns.topics:
            for sub in topic.subscriptions:
                for rule in sub.rules:
                    where = f"{topology.source}: {ns.name}/{topic.name}/{sub.name}/{rule.name}"
                    sql_filter = "SqlFilter.SqlExpression" if topology.emulator else "filter.sql"
                    sql_action = "Action.SqlExpression" if topology.emulator else "action.sql"
                    if rule.filter_kind == "sql":
                        lines += _compiles(compile_filter, rule.filter["sql"], rule.filter.get("parameters"),
                                           f"{where}: {sql_filter}")
                    if rule.action:
                        lines += _compiles(compile_action, rule.action["sql"], rule.action.get("parameters"),
                                           f"{where}: {sql_action}")
    return lines


def _compiles(compile_sql: Any, text: str, parameters: Any, where: str) -> list[str]:
    try:
        compile_sql(text, parameters=parameters or None)
    except ValueError as exc:
        return [f"{where}: {exc}"]
    return []
