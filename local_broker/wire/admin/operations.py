"""Management requests -> engine calls -> Atom responses.

Paths (servicebus-wire.md 11.3; names resolve case-insensitively in the engine):

    /$namespaceinfo                              GET
    /$Resources/queues | /$Resources/topics      GET   ($skip, $top)
    /{queue or topic}                            GET, PUT (If-Match: * = update), DELETE
    /{topic}/subscriptions                       GET   ($skip, $top)
    /{topic}/subscriptions/{sub}                 GET, PUT, DELETE
    /{topic}/subscriptions/{sub}/rules           GET   ($skip, $top)
    /{topic}/subscriptions/{sub}/rules/{rule}    GET, PUT, DELETE

Each request is one `run_on_engine` call so it sees one consistent namespace; writes commit before the
response goes out. Everything semantic (defaults, validation, errors) comes from the engine.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, TypeVar
from urllib.parse import urlsplit

from local_broker.engine import (
    ArgumentError,
    EntityNotFoundError,
    QueueProperties,
    RuntimeProperties,
    SubscriptionProperties,
    TopicProperties,
)
from local_broker.wire.admin import atom, descriptions, rule_codec
from local_broker.wire.admin.durations import format_timestamp

T = TypeVar("T")
RunOnEngine = Callable[[Callable[[Any], T]], T]
DEFAULT_PAGE_SIZE = 100


@dataclass(frozen=True)
class Target:
    """What a management path names."""

    kind: str  # namespace | queues | topics | entity | subscriptions | subscription | rules | rule
    topic: str = ""  # the queue/topic path for entity, the topic for the rest
    subscription: str = ""
    rule: str = ""


def parse_target(path: str) -> Target:
    """Read a (percent-decoded, slash-trimmed) request path."""
    segments = [s for s in path.split("/") if s]
    lowered = [s.lower() for s in segments]
    if lowered == ["$namespaceinfo"]:
        return Target("namespace")
    if len(lowered) == 2 and lowered[0] == "$resources" and lowered[1] in ("queues", "topics"):
        return Target(lowered[1])
    if not segments:
        raise ArgumentError("The request names no entity.")
    for index in range(1, len(segments)):
        tail = lowered[index:]
        if tail[0] != "subscriptions" or len(tail) > 4 or (len(tail) >= 3 and tail[2] != "rules"):
            continue
        topic = "/".join(segments[:index])
        sub = segments[index + 1] if len(tail) > 1 else ""
        rule = segments[index + 3] if len(tail) > 3 else ""
        kind = ("subscriptions", "subscription", "rules", "rule")[len(tail) - 1]
        return Target(kind, topic, sub, rule)
    return Target("entity", "/".join(segments))


@dataclass(frozen=True)
class AdminRequest:
    method: str
    target: Target
    query: Mapping[str, str]
    body: bytes
    is_update: bool  # PUT with If-Match
    base_url: str  # https://host:port as the client addressed it


@dataclass(frozen=True)
class AdminResponse:
    status: int
    body: bytes
    content_type: str = atom.ENTRY_CONTENT_TYPE
    headers: dict[str, str] = field(default_factory=dict)  # beyond Content-Type and Content-Length


def parse_put_body(request: AdminRequest) -> tuple[str, Any]:
    """(description kind, parsed body) of a PUT, checked against what the path names."""
    description = atom.parse_entry(request.body)
    tag = description.tag.removeprefix(f"{{{atom.SB_NS}}}")
    if request.target.kind == "rule":
        return tag, rule_codec.parse_rule(description, default_name=request.target.rule)
    expected = ("SubscriptionDescription",) if request.target.kind == "subscription" else (
        "QueueDescription", "TopicDescription")
    if tag not in expected:
        raise ArgumentError(f"A PUT to this path takes a {' or '.join(expected)}, not '{tag}'.")
    return descriptions.parse_description(description)


def _page(query: Mapping[str, str]) -> tuple[int, int]:
    try:
        skip = int(query.get("$skip", 0))
        top = int(query.get("$top", DEFAULT_PAGE_SIZE))
    except ValueError as exc:
        raise ArgumentError("$skip and $top must be whole numbers.") from exc
    if skip < 0 or top < 1:
        raise ArgumentError("$skip must be 0 or more and $top 1 or more.")
    return skip, top


def _api_version(request: AdminRequest) -> str:
    """Entries name themselves with the api-version they were asked with, as Service Bus does."""
    return request.query.get("api-version") or atom.API_VERSION


def _fields(value: Any) -> dict[str, Any]:
    """A dataclass's fields as a flat dict (nested values kept as they are, unlike `asdict`)."""
    return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}


@dataclass(frozen=True)
class Entry:
    """One entity or rule ready to render: its description kind, Atom title and path, and its values."""

    kind: str
    title: str
    path: str
    values: Any  # description values (dict) or RuleProperties
    published: datetime | None
    updated: datetime | None


def _entity_entry(kind: str, path: str, properties: Any, runtime: RuntimeProperties) -> Entry:
    """Properties and runtime figures merged and keyed by SDK attribute names, as descriptions render."""
    values = _fields(runtime) | _fields(properties)
    values["total_message_count"] = runtime.total_message_count
    return Entry(kind, properties.name, path, values, properties.created_at, properties.updated_at)


class Operations:
    """The management API of one namespace, on top of an engine reached through `run_on_engine`."""

    def __init__(self, namespace_name: str, run_on_engine: RunOnEngine) -> None:
        self.namespace_name = namespace_name
        self.run_on_engine = run_on_engine

    def handle(self, request: AdminRequest, put_body: tuple[str, Any] | None = None) -> AdminResponse:
        """Answer one request; raises the engine's `BrokerError` for the caller to write as an Error body."""
        target = request.target
        method = request.method
        if method == "GET" and target.kind in ("queues", "topics", "subscriptions", "rules"):
            return self._list(request)
        if method == "GET" and target.kind == "namespace":
            return self._namespace_info(request)
        if target.kind in ("entity", "subscription", "rule") and method in ("GET", "PUT", "DELETE"):
            if method == "DELETE":
                self.run_on_engine(lambda ns: self._delete(ns, target))
                return AdminResponse(200, b"", atom.ENTRY_CONTENT_TYPE)
            if method == "PUT":
                kind, parsed = put_body or parse_put_body(request)
                return self._put(request, kind, parsed)
            entry = self.run_on_engine(lambda ns: self._read(ns, target))
            return AdminResponse(200, self._render(request, entry))
        raise _MethodNotAllowed(f"{method} is not supported on this path.")

    # --- reads ------------------------------------------------------------------------------------

    def _read(self, ns: Any, target: Target, kind: str | None = None) -> Entry:
        """One entity or rule as it stands; `kind` says queue or topic when the caller knows."""
        if target.kind == "rule":
            rule = ns.get_rule(target.topic, target.subscription, target.rule)
            path = f"{target.topic}/Subscriptions/{target.subscription}/Rules/{rule.name}"
            return Entry("RuleDescription", rule.name, path, rule, rule.created_at, rule.created_at)
        if target.kind == "subscription":
            props = ns.get_subscription(target.topic, target.subscription)
            runtime = ns.get_subscription_runtime_properties(target.topic, target.subscription)
            return _entity_entry("SubscriptionDescription", f"{target.topic}/Subscriptions/{props.name}",
                                 props, runtime)
        if kind != "TopicDescription":
            try:
                props = ns.get_queue(target.topic)
                return _entity_entry("QueueDescription", props.name, props,
                                     ns.get_queue_runtime_properties(target.topic))
            except EntityNotFoundError:
                if kind == "QueueDescription":
                    raise
        props = ns.get_topic(target.topic)
        runtime = ns.get_topic_runtime_properties(target.topic)
        return _entity_entry("TopicDescription", props.name, props, runtime)

    def _render(self, request: AdminRequest, entry: Entry) -> bytes:
        if entry.kind == "RuleDescription":
            body = rule_codec.render_rule(entry.values)
        else:
            namespace_uri = "sb://" + urlsplit(request.base_url).netloc
            body = descriptions.render_description(
                entry.kind, descriptions.forwarding_as_uris(entry.values, namespace_uri))
        return atom.render_entry(request.base_url, entry.path, entry.title, body, entry.published,
                                 entry.updated, self.namespace_name, _api_version(request))

    def _list(self, request: AdminRequest) -> AdminResponse:
        target = request.target
        skip, top = _page(request.query)

        def read_page(ns: Any) -> list[Entry]:
            if target.kind == "queues":
                return [_entity_entry("QueueDescription", q.name, q, ns.get_queue_runtime_properties(q.name))
                        for q in ns.list_queues(skip=skip, top=top + 1)]
            if target.kind == "topics":
                return [_entity_entry("TopicDescription", t.name, t, ns.get_topic_runtime_properties(t.name))
                        for t in ns.list_topics(skip=skip, top=top + 1)]
            if target.kind == "subscriptions":
                return [self._read(ns, replace(target, kind="subscription", subscription=s.name))
                        for s in ns.list_subscriptions(target.topic, skip=skip, top=top + 1)]
            return [self._read(ns, replace(target, kind="rule", rule=r.name))
                    for r in ns.list_rules(target.topic, target.subscription, skip=skip, top=top + 1)]

        entries = self.run_on_engine(read_page)
        more = len(entries) > top
        title, path = {
            "queues": ("Queues", "$Resources/Queues"),
            "topics": ("Topics", "$Resources/Topics"),
            "subscriptions": ("Subscriptions", f"{target.topic}/Subscriptions"),
        }.get(target.kind, ("Rules", f"{target.topic}/Subscriptions/{target.subscription}/Rules"))
        rendered = [self._render(request, e) for e in entries[:top]]
        body = atom.render_feed(request.base_url, path, title, request.query, rendered, None,
                                skip + top if more else None, top)
        return AdminResponse(200, body, atom.FEED_CONTENT_TYPE)

    def _namespace_info(self, request: AdminRequest) -> AdminResponse:
        info = self.run_on_engine(lambda ns: ns.namespace_properties())
        body = (f'<NamespaceInfo xmlns="{atom.SB_NS}" xmlns:i="{atom.XSI_NS}">'
                f"<CreatedTime>{format_timestamp(info.created_at)}</CreatedTime>"
                f"{atom.element('MessagingSKU', info.messaging_sku)}"
                f"{atom.element('MessagingUnits', info.messaging_units)}"
                f"<ModifiedTime>{format_timestamp(info.modified_at)}</ModifiedTime>"
                f"{atom.element('Name', info.name)}"
                f"{atom.element('NamespaceType', info.namespace_type)}</NamespaceInfo>")
        return AdminResponse(200, atom.render_entry(request.base_url, "$namespaceinfo", info.name, body,
                                                    info.created_at, info.modified_at, self.namespace_name,
                                                    _api_version(request)))

    # --- writes -----------------------------------------------------------------------------------

    def _put(self, request: AdminRequest, kind: str, parsed: Any) -> AdminResponse:
        target, update = request.target, request.is_update

        def write(ns: Any) -> Entry:
            if target.kind == "rule":
                (ns.update_rule if update else ns.create_rule)(target.topic, target.subscription, parsed)
            elif kind == "SubscriptionDescription":
                values = dict(parsed)
                default_rule = values.pop("default_rule", None)
                props = SubscriptionProperties(name=target.subscription, topic_name=target.topic, **values)
                if update:
                    ns.update_subscription(target.topic, props)
                else:
                    ns.create_subscription(target.topic, props, default_rule=default_rule)
            elif kind == "QueueDescription":
                (ns.update_queue if update else ns.create_queue)(QueueProperties(name=target.topic, **parsed))
            else:
                (ns.update_topic if update else ns.create_topic)(TopicProperties(name=target.topic, **parsed))
            ns.commit()
            return self._read(ns, target, kind)

        entry = self.run_on_engine(write)
        return AdminResponse(200 if update else 201, self._render(request, entry))

    def _delete(self, ns: Any, target: Target) -> None:
        if target.kind == "rule":
            ns.delete_rule(target.topic, target.subscription, target.rule)
        elif target.kind == "subscription":
            ns.delete_subscription(target.topic, target.subscription)
        else:
            try:
                ns.delete_queue(target.topic)
            except EntityNotFoundError:
                ns.delete_topic(target.topic)
        ns.commit()


class _MethodNotAllowed(ArgumentError):
    http_status = 405
