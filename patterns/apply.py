"""`sbfed topology apply`: read each namespace through `ServiceBusAdministrationClient`, plan the difference
to the topology (`diff.plan`), print it, and carry it out. The same code serves the local broker and Azure;
applying twice changes nothing the second time."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from azure.core.exceptions import AzureError, ResourceNotFoundError
from azure.servicebus.management import ServiceBusAdministrationClient

from patterns.admin_errors import NamespaceFailed
from patterns.diff import Change, NamespaceState, action_key, filter_key, plan, sdk_action, sdk_filter
from topology import NamespaceSpec, Topology
from topology.durations import format_duration

APPLIED_OPS = ("create", "update", "delete")
SYMBOLS = {"create": "+", "update": "~", "delete": "-", "extra": "?", "conflict": "!"}


@dataclass
class ApplyResult:
    changes: dict[str, list[Change]] = field(default_factory=dict)  # namespace -> planned changes

    @property
    def conflicts(self) -> list[Change]:
        return [c for changes in self.changes.values() for c in changes if c.op == "conflict"]

    @property
    def changed(self) -> bool:
        return any(c.op in APPLIED_OPS for changes in self.changes.values() for c in changes)


def read_state(client: ServiceBusAdministrationClient, desired: NamespaceSpec) -> NamespaceState:
    """Every queue and topic; the subscriptions of the declared topics; the rules of the subscriptions that
    declare rules (nothing else is compared, so nothing else is read)."""
    state = NamespaceState(
        queues={q.name: q for q in client.list_queues()},
        topics={t.name: t for t in client.list_topics()},
    )
    existing_topics = {name.lower(): name for name in state.topics}
    for topic in desired.topics:
        name = existing_topics.get(topic.name.lower())
        if name is None:
            continue
        subs = state.subscriptions[name] = {s.name: s for s in client.list_subscriptions(name)}
        existing_subs = {s.lower(): s for s in subs}
        for sub in topic.subscriptions:
            sub_name = existing_subs.get(sub.name.lower())
            if sub.rules and sub_name is not None:
                state.rules[(name, sub_name)] = {r.name: r for r in client.list_rules(name, sub_name)}
    return state


def execute(client: ServiceBusAdministrationClient, change: Change) -> None:
    """Carry out one planned change; `extra` and `conflict` are only reported. The SDK creates entities
    Active: a declared status is set by an update right after."""
    path, props = change.path, dict(change.properties)
    status = props.pop("status", None) if change.op == "create" else None
    match (change.op, change.kind):
        case ("create", "queue"):
            client.create_queue(path[0], **props)
        case ("create", "topic"):
            client.create_topic(path[0], **props)
        case ("create", "subscription"):
            client.create_subscription(path[0], path[1], **props)
        case ("create", "rule"):
            client.create_rule(*path, filter=sdk_filter(change.rule), action=sdk_action(change.rule))
        case ("update", "queue"):
            client.update_queue(client.get_queue(path[0]), **props)
        case ("update", "topic"):
            client.update_topic(client.get_topic(path[0]), **props)
        case ("update", "subscription"):
            client.update_subscription(path[0], client.get_subscription(*path), **props)
        case ("update", "rule"):
            rule = client.get_rule(*path)
            rule.filter, rule.action = sdk_filter(change.rule), sdk_action(change.rule)
            client.update_rule(path[0], path[1], rule)
        case ("delete", kind):
            try:
                getattr(client, f"delete_{kind}")(*path)
            except ResourceNotFoundError:
                pass  # already gone: what a delete wants
    if status is not None:
        execute(client, Change("update", change.kind, path, {"status": status}))


def apply_topology(
    topology: Topology,
    clients: dict[str, ServiceBusAdministrationClient],
    *,
    delete_extra: bool = False,
    dry_run: bool = False,
    report: Callable[[str], None] = print,
) -> ApplyResult:
    """Plan every namespace first; if an immutable property differs anywhere, change nothing (the plan
    says what to delete by hand). Print the plan, then carry it out namespace by namespace. A namespace that
    refuses or cannot be reached raises NamespaceFailed, naming it (and the change it was making)."""
    result = ApplyResult()
    for name, client in clients.items():
        try:
            state = read_state(client, topology.namespaces[name])
        except AzureError as err:
            raise NamespaceFailed(name, client.fully_qualified_namespace, err,
                                  "reading its entities") from err
        result.changes[name] = plan(topology.namespaces[name], state, delete_extra=delete_extra)
    for name, changes in result.changes.items():
        report(f"namespace {name}: {summary(changes)}")
        for change in changes:
            report(f"  {describe(change)}")
    if result.conflicts or dry_run:
        return result
    for name, changes in result.changes.items():
        for change in changes:
            try:
                execute(clients[name], change)
            except AzureError as err:
                raise NamespaceFailed(name, clients[name].fully_qualified_namespace, err,
                                      describe(change)) from err
    return result


def summary(changes: Iterable[Change]) -> str:
    counts = {op: 0 for op in SYMBOLS}
    for change in changes:
        counts[change.op] += 1
    parts = [f"{counts[op]} to {op}" for op in APPLIED_OPS if counts[op]]
    parts += [f"{counts['extra']} not in the topology (kept)"] if counts["extra"] else []
    parts += [f"{counts['conflict']} that cannot change in place"] if counts["conflict"] else []
    return ", ".join(parts) if parts else "up to date"


def describe(change: Change) -> str:
    """One line per change: `+ queue orders (max_delivery_count=5)`, `~ topic events: a: 1 -> 2`, ..."""
    head = f"{SYMBOLS[change.op]} {change.kind} {change.name}"
    if change.op == "create" and change.rule is not None:
        return f"{head} (filter {_rule_text(change)})"
    if change.op == "create":
        props = ", ".join(f"{k}={_text(v)}" for k, v in change.properties.items())
        return f"{head} ({props})" if props else head
    if change.op == "update":
        return f"{head}: {_differences(change)}"
    if change.op == "extra":
        return f"{head}: not in the topology; kept (--delete-extra removes it)"
    if change.op == "conflict":
        return (f"{head}: {_differences(change)} cannot change on an existing {change.kind}; "
                f"delete it (its messages are lost) and apply again")
    return head


def _differences(change: Change) -> str:
    return "; ".join(f"{d.name}: {_text(d.actual)} -> {_text(d.desired)}" for d in change.differences)


def _rule_text(change: Change) -> str:
    assert change.rule is not None
    text = _text(filter_key(sdk_filter(change.rule)))
    action = action_key(sdk_action(change.rule))
    return f"{text}; action: {action}" if action else text


def _text(value: Any) -> str:
    if isinstance(value, dt.timedelta):
        return format_duration(value)
    if isinstance(value, tuple) and value and value[0] in ("true", "false"):
        return value[0]
    if isinstance(value, tuple) and value and value[0] == "sql":
        _, expression, parameters = value
        return f"sql {expression}" + (f" with {dict(parameters)}" if parameters else "")
    if isinstance(value, tuple) and value and value[0] == "correlation":
        _, fields, properties = value
        return "correlation " + ", ".join(f"{k}={v!r}" for k, v in (*fields, *properties))
    return str(value)
