"""What `sbfed topology apply` would change: the desired namespace (a `NamespaceSpec`) against what the
admin client reported (SDK models), as a list of changes. Pure: no I/O, so every comparison rule is
unit-tested on constructed SDK objects.

Comparison rules: only properties the topology declares are compared (the service fills in the rest);
durations compare as timedeltas (ISO strings in the file, timedeltas from the SDK); `forward_to` compares by
entity name (the service returns `sb://<namespace>/<name>`); SQL compares after trimming whitespace; a
true/false filter equals the SQL filter `1=1`/`1=0` the service stores for it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

from azure.servicebus.management import (
    CorrelationRuleFilter,
    FalseRuleFilter,
    RuleProperties,
    SqlRuleAction,
    SqlRuleFilter,
    TrueRuleFilter,
)

from topology import NamespaceSpec, RuleSpec, creation_order
from topology.durations import format_duration, parse_duration
from topology.schema import CORRELATION_FIELDS, FORWARDING, PROPERTIES

DEFAULT_RULE = "$Default"
DURATION_TOLERANCE = dt.timedelta(milliseconds=1)  # the service keeps 100 ns ticks, Python microseconds
# Properties Service Bus cannot change once the entity exists (an update is rejected).
IMMUTABLE = {
    "queue": frozenset({"requires_session", "requires_duplicate_detection", "enable_partitioning"}),
    "topic": frozenset({"requires_duplicate_detection", "enable_partitioning"}),
    "subscription": frozenset({"requires_session"}),
}
DURATIONS = frozenset(name for table in PROPERTIES.values() for name, spec in table.items()
                      if spec.kind == "duration")


@dataclass(frozen=True)
class Difference:
    name: str
    actual: Any
    desired: Any


@dataclass(frozen=True)
class Change:
    """One step: `create`, `update` or `delete` an entity or rule; `extra` (exists, not declared, kept) and
    `conflict` (an immutable property differs) are reported only."""

    op: str
    kind: str  # queue | topic | subscription | rule
    path: tuple[str, ...]  # (queue,) (topic,) (topic, subscription) (topic, subscription, rule)
    properties: Mapping[str, Any] = field(default_factory=dict)  # SDK keyword arguments to create/update
    differences: tuple[Difference, ...] = ()
    rule: RuleSpec | None = None

    @property
    def name(self) -> str:
        return "/".join(self.path)


@dataclass
class NamespaceState:
    """What a namespace holds, as the admin client returned it (keys are entity names as the service spells
    them; lookups are case-insensitive like Service Bus)."""

    queues: dict[str, Any] = field(default_factory=dict)
    topics: dict[str, Any] = field(default_factory=dict)
    subscriptions: dict[str, dict[str, Any]] = field(default_factory=dict)  # topic -> name -> properties
    rules: dict[tuple[str, str], dict[str, RuleProperties]] = field(default_factory=dict)  # (topic, sub)


def plan(desired: NamespaceSpec, actual: NamespaceState, *, delete_extra: bool = False) -> list[Change]:
    """The changes that make `actual` hold everything `desired` declares, in an order that works:
    entities before what forwards to them, topics before subscriptions before rules, deletions last."""
    changes: list[Change] = []
    for queue in desired.queues:
        changes += _entity("queue", (queue.name,), queue.properties, _find(actual.queues, queue.name))
    for topic in desired.topics:
        changes += _entity("topic", (topic.name,), topic.properties, _find(actual.topics, topic.name))
        existing_subs = _find(actual.subscriptions, topic.name) or {}
        for sub in topic.subscriptions:
            path = (topic.name, sub.name)
            current = _find(existing_subs, sub.name)
            changes += _entity("subscription", path, sub.properties, current)
            if sub.rules:
                # a new subscription starts with the broker's $Default rule, which is then removed
                rules = _find_rules(actual.rules, path) if current is not None else _NEW_SUBSCRIPTION_RULES
                changes += _rules(path, sub.rules, rules, delete_extra=delete_extra)
        changes += _extras("subscription", [(topic.name, s) for s in existing_subs],
                           {s.name.lower() for s in topic.subscriptions}, delete_extra)
    changes += _extras("queue", [(q,) for q in actual.queues], {q.name.lower() for q in desired.queues},
                       delete_extra)
    changes += _extras("topic", [(t,) for t in actual.topics], {t.name.lower() for t in desired.topics},
                       delete_extra)
    return _ordered(changes, desired)


# What the service gives a subscription created without rules.
_NEW_SUBSCRIPTION_RULES = {DEFAULT_RULE: RuleProperties(DEFAULT_RULE, filter=TrueRuleFilter(), action=None,
                                                        created_at_utc=None)}


def _find(items: Mapping[str, Any], name: str) -> Any:
    return next((v for k, v in items.items() if k.lower() == name.lower()), None)


def _find_rules(rules: Mapping[tuple[str, str], dict[str, RuleProperties]], path: tuple[str, str]):
    key = next((k for k in rules if (k[0].lower(), k[1].lower()) == (path[0].lower(), path[1].lower())), None)
    return rules[key] if key is not None else {}


def _entity(kind: str, path: tuple[str, ...], declared: Mapping[str, Any], current: Any) -> list[Change]:
    wanted = {name: _sdk_value(name, value) for name, value in declared.items()}
    if current is None:
        return [Change("create", kind, path, wanted)]
    differences = tuple(
        Difference(name, getattr(current, name, None), value)
        for name, value in wanted.items()
        if not _same(name, getattr(current, name, None), value)
    )
    if not differences:
        return []
    fixed = tuple(d for d in differences if d.name in IMMUTABLE[kind])
    if fixed:
        return [Change("conflict", kind, path, differences=fixed)]
    return [Change("update", kind, path, {d.name: d.desired for d in differences}, differences)]


def _sdk_value(name: str, value: Any) -> Any:
    """A declared value (validated when the topology was read) as the SDK takes it: durations become
    timedeltas."""
    return parse_duration(value) if name in DURATIONS and value is not None else value


def _same(name: str, actual: Any, desired: Any) -> bool:
    if actual is None or desired is None:
        return actual is None and desired is None
    if name in DURATIONS:
        return abs(parse_duration(actual) - desired) <= DURATION_TOLERANCE
    if name in FORWARDING:
        return _entity_name(actual) == _entity_name(desired)
    return bool(actual == desired)


def _entity_name(reference: str) -> str:
    """`sb://ns.servicebus.windows.net/Orders` and `orders` name the same entity."""
    parsed = urlparse(reference)
    return (parsed.path if parsed.netloc else reference).strip("/").lower()


def _rules(
    path: tuple[str, str], declared: list[RuleSpec], current: Mapping[str, RuleProperties],
    *, delete_extra: bool,
) -> list[Change]:
    """A subscription that declares rules gets exactly those: the broker's `$Default` (everything passes) is
    removed, since it would defeat the declared filters; other undeclared rules go only with delete_extra."""
    changes: list[Change] = []
    for rule in declared:
        wanted_filter = filter_key(sdk_filter(rule))  # checks the declaration before anything is created
        existing = _find(current, rule.name)
        rule_path = (*path, rule.name)
        if existing is None:
            changes.append(Change("create", "rule", rule_path, rule=rule))
            continue
        differences = tuple(
            Difference(name, have, want)
            for name, have, want in (
                ("filter", filter_key(existing.filter), wanted_filter),
                ("action", action_key(existing.action), action_key(sdk_action(rule))),
            )
            if have != want
        )
        if differences:
            changes.append(Change("update", "rule", rule_path, differences=differences, rule=rule))
    declared_names = {r.name.lower() for r in declared}
    for name in current:
        if name.lower() in declared_names:
            continue
        if name.lower() == DEFAULT_RULE.lower() or delete_extra:
            changes.append(Change("delete", "rule", (*path, name)))
        else:
            changes.append(Change("extra", "rule", (*path, name)))
    return changes


def _extras(kind: str, paths: list[tuple[str, ...]], declared: set[str], delete_extra: bool) -> list[Change]:
    op = "delete" if delete_extra else "extra"
    return [Change(op, kind, path) for path in paths if path[-1].lower() not in declared]


def sdk_filter(rule: RuleSpec) -> SqlRuleFilter | CorrelationRuleFilter:
    kind = rule.filter_kind
    body = rule.filter[kind]
    if kind == "true":
        return TrueRuleFilter()
    if kind == "false":
        return FalseRuleFilter()
    if kind == "sql":
        return SqlRuleFilter(body, parameters=rule.filter.get("parameters") or None)
    return CorrelationRuleFilter(**(body or {}))


def sdk_action(rule: RuleSpec) -> SqlRuleAction | None:
    return SqlRuleAction(rule.action["sql"]) if rule.action else None


def filter_key(rule_filter: Any) -> tuple[Any, ...]:
    """A filter reduced to what it selects, for comparing the file's form with the service's."""
    if rule_filter is None or isinstance(rule_filter, TrueRuleFilter):
        return ("true",)
    if isinstance(rule_filter, FalseRuleFilter):
        return ("false",)
    if isinstance(rule_filter, CorrelationRuleFilter):
        fields = {f: getattr(rule_filter, f) for f in CORRELATION_FIELDS}
        fields = {f: value for f, value in fields.items() if value is not None}
        return ("correlation", _frozen(fields), _frozen(dict(rule_filter.properties or {})))
    expression = " ".join((rule_filter.sql_expression or "").split())
    if expression.replace(" ", "") in ("1=1", "1=0"):
        return ("true",) if expression.replace(" ", "") == "1=1" else ("false",)
    return ("sql", expression, _frozen(dict(rule_filter.parameters or {})))


def action_key(action: Any) -> str | None:
    expression = getattr(action, "sql_expression", None)
    return " ".join(expression.split()) if expression else None


def _frozen(mapping: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    items = ((k, format_duration(v) if isinstance(v, dt.timedelta) else v) for k, v in mapping.items())
    return tuple(sorted(items))


_KIND_ORDER = {"queue": 0, "topic": 0, "subscription": 1, "rule": 2}


def _ordered(changes: list[Change], desired: NamespaceSpec) -> list[Change]:
    """Creates and updates first, in the topology's creation order (topics, then each queue after its
    forwarding destinations, then subscriptions and rules); deletions last, rules before subscriptions
    before queues and topics."""
    building = [c for c in changes if c.op != "delete"]
    deleting = [c for c in changes if c.op == "delete"]
    rank = {step.path.lower(): index for index, step in enumerate(creation_order(desired))}
    building.sort(key=lambda c: (_KIND_ORDER[c.kind], rank.get("/".join(c.path[:2]).lower(), 0)))
    deleting.sort(key=lambda c: -_KIND_ORDER[c.kind])
    return building + deleting
