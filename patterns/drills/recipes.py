"""The drills of the recipes (patterns/recipes.py). The same outage and summary as the three patterns, but
nothing fails over: the outage takes down a namespace the recipe copies *to*, and its replication tasks must
catch up once it is back, losing nothing and enqueuing nothing twice. Each sends a mixed workload and checks
the recipe's promise on what arrives (audit taps) and what its consumers get:

- latency: events published at the origin; each hub enqueues every event once, unchanged, and its consumer
  processes it once; nothing comes back to the origin (the first hub is down).
- routing: orders with a region and a priority (some lacking one, or holding a null region); each target gets
  exactly the orders its filter selects (one order may match two routes), the source's `unrouted`
  subscription those no route selects, including those for which a route's filter is UNKNOWN.
- consolidation: orders from each shop (v1 from some, v2 from others, a few invalid); the central consumer
  gets every valid one once, as v2, with its shop in `source` and in the stamps; the central quarantine
  queue every invalid one, with its reason (the central namespace is down).
- editing: sensor readings with private properties, a few not JSON; the clean consumer gets each valid one
  without its private properties and with its origin, the quarantine queue every other one with its reason.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from azure.servicebus import ServiceBusMessage

from patterns import orders, recipes, transforms
from patterns.drills.clients import RegionProducer
from patterns.drills.metrics import Record, check_arrivals, hops
from patterns.drills.scenario import Scenario
from patterns.drills.scenarios import TOPIC
from replicators.message import decode_application_properties
from topology import Topology

QUARANTINE = f"{TOPIC}{transforms.QUARANTINE_SUFFIX}"
VIOLATIONS_LISTED = 20
Payload = tuple[bytes, dict[str, Any]]  # a message's body and application properties


@dataclass(frozen=True)
class Sent:
    """What the drill published as one message, and where the recipe must deliver it."""

    namespace: str
    body: bytes
    properties: dict[str, Any]
    destinations: frozenset[str]  # where a consumer must process it once (a quarantine consumer counts)
    arrivals: frozenset[str]  # whose audited topic must enqueue it once
    valid: bool = True


class Recipe(Scenario):
    """The base of the recipes' drills: producers in the sources, consumers where the recipe delivers, and
    the checks every recipe shares (arrivals, loop prevention, what the consumers saw)."""

    fails_over = False

    def __init__(self, drill: Any) -> None:
        super().__init__(drill)
        self.workload: dict[str, Sent] = {}
        self.violations: list[str] = []  # what a consumer found wrong with a message it got
        self._lock = threading.Lock()

    @property
    def sources(self) -> tuple[str, ...]:
        return self.drill.names[:1]

    @property
    def down(self) -> str:
        """The first namespace the recipe copies to."""
        return self.drill.names[1]

    def destinations(self, message_id: str) -> frozenset[str] | None:
        sent = self.workload.get(message_id)
        return None if sent is None else sent.destinations

    def compose(self, index: int, message_id: str, namespace: str) -> tuple[ServiceBusMessage, Sent]:
        raise NotImplementedError

    def _publish(self, namespace: str, prefix: str, count: int, rate: float) -> None:
        """A paced producer of `compose`d messages to the topic of `namespace`."""
        producer = RegionProducer(self.drill.region(namespace, topic=TOPIC), TOPIC,
                                  self.drill.sink(f"producer-{namespace}"))

        def composed(index: int, message_id: str) -> ServiceBusMessage:
            message, sent = self.compose(index, message_id, namespace)
            self.workload[message_id] = sent
            return message

        self._produce(producer, prefix, count, rate, composed)

    def _receive(self, namespace: str, handler: Callable[[Any], None], *, subscription: str | None = None,
                 queue: str | None = None) -> None:
        """A consumer of a subscription of the topic, or of a queue; its records name the topic (the
        message's identity in reconciliation) and the subscription or queue it read (`processor`)."""
        entity = {"topic": TOPIC, "subscription": subscription} if subscription else {"queue": queue,
                                                                                     "receive": True}
        where = f"{namespace}/{subscription or queue}"
        self._consume(self.drill.region(namespace, **entity), handler, entity=TOPIC, processor=where,
                      writer=f"consumer-{namespace}-{subscription or queue}")

    def _violation(self, message: Any, what: str) -> None:
        with self._lock:
            self.violations.append(f"{message.message_id}: {what}")

    def _unchanged(self, message: Any) -> None:
        """A copy must carry the body and the application properties it was published with (one published
        null arrives null, not missing)."""
        sent = self.workload.get(str(message.message_id))
        if sent is None:
            return
        properties = decode_application_properties(message.application_properties)
        if body_of(message) != sent.body:
            self._violation(message, "body changed on the way")
        if {k: properties[k] for k in sent.properties if k in properties} != sent.properties:
            self._violation(message, "application properties changed on the way")

    def _quarantined(self, message: Any) -> None:
        """What a quarantine queue holds: the messages the validator rejected, each with its reason, as they
        were sent but for the private properties (which never leave the source)."""
        sent = self.workload.get(str(message.message_id))
        if sent is None:
            return
        properties = decode_application_properties(message.application_properties)
        reason = properties.get(transforms.QUARANTINE_REASON)
        if sent.valid:
            self._violation(message, f"a valid message was quarantined: {reason}")
        if not reason:
            self._violation(message, "quarantined without a reason")
        if body_of(message) != sent.body:
            self._violation(message, "the quarantined copy is not the message as it was sent")
        self._no_private(message, properties)

    def _no_private(self, message: Any, properties: dict[str, Any]) -> None:
        private = sorted(k for k in properties if k.lower().startswith(transforms.PRIVATE_PREFIX))
        if private:
            self._violation(message, f"private properties left the source: {private}")

    def problems(self, summary: dict[str, Any], details: dict[str, Any], by_event: dict[str, list[Record]],
                 handled: list[Record]) -> list[str]:
        problems = check_arrivals(by_event, self.drill.names, self._arrivals, details)
        returned = {r["message_id"] for r in by_event["enqueued"]
                    if r["namespace"] in self.sources and hops(r)}
        details["returned_to_source"] = len(returned)
        if returned:
            problems.append(f"{len(returned)} cop(ies) came back to a source: {sorted(returned)[:20]}")
        if summary["processed_twice"]:
            problems.append(f"{summary['processed_twice']} message(s) processed twice in one namespace")
        details["violations"] = list(self.violations[:VIOLATIONS_LISTED])
        if self.violations:
            problems.append(f"{len(self.violations)} message(s) arrived wrong: {details['violations']}")
        details["outcome"] = self.outcome(handled)
        return problems

    def _arrivals(self, message_id: str) -> Iterable[str]:
        sent = self.workload.get(message_id)
        return () if sent is None else sent.arrivals

    def outcome(self, handled: list[Record]) -> str:
        """One line for the summary: what the recipe did with the messages."""
        where = Counter(r["processor"] for r in handled)
        return "processed by " + ", ".join(f"{name} {n}" for name, n in sorted(where.items()))


class Latency(Recipe):
    pattern = "latency"
    namespace_roles = "origin,hub[,hub...]"
    default_namespaces = ("origin", "hub-west", "hub-east")
    namespace_counts = (2, None)

    def topology(self, names: tuple[str, ...], audit_sink: str) -> Topology:
        return recipes.latency_optimization(names[0], list(names[1:]), TOPIC, audit_sink=audit_sink)

    def start(self, rate: float) -> None:
        origin, *hubs = self.drill.names
        self._publish(origin, "e", self.drill.settings.messages, rate)
        for hub in hubs:
            self._receive(hub, self._unchanged, subscription="consumer")

    def compose(self, index: int, message_id: str, namespace: str) -> tuple[ServiceBusMessage, Sent]:
        body = json.dumps({"sku": f"sku-{index % 40:03d}", "price_cents": 100 + index * 7 % 900}).encode()
        properties = {"kind": "price-update", "sku": f"sku-{index % 40:03d}"}
        hubs = frozenset(self.drill.names[1:])
        return (ServiceBusMessage(body, message_id=message_id, subject="price-update",
                                  application_properties=properties),
                Sent(namespace, body, properties, hubs, hubs | {namespace}))


class Routing(Recipe):
    """Routes: the first target takes `region = 'eu'`, the second `region = 'us' OR priority > 7`, so an eu
    order of priority 8 or 9 goes to both and an apac order of priority 7 or less to neither. Some orders
    lack `priority` or `region`, or hold a null `region`: a route that compares it is UNKNOWN for them, and
    they must go where another route selects them, or else to `unrouted`."""

    pattern = "routing"
    namespace_roles = "source,eu-target,us-target"
    default_namespaces = ("orders", "orders-eu", "orders-us")
    namespace_counts = (3, 3)
    REGIONS = ("eu", "us", "apac")

    def routes(self) -> dict[str, tuple[str, Callable[[dict[str, Any]], bool]]]:
        """Each target's SQL filter, and the same filter in Python for the drill's expectations (TRUE only:
        a comparison with a missing or null property selects nothing)."""
        _, eu, us = self.drill.names
        return {eu: ("region = 'eu'", lambda p: p.get("region") == "eu"),
                us: ("region = 'us' OR priority > 7",
                     lambda p: p.get("region") == "us" or (p.get("priority") or 0) > 7)}

    def topology(self, names: tuple[str, ...], audit_sink: str) -> Topology:
        sql = {target: filter_sql for target, (filter_sql, _) in self.routes().items()}
        return recipes.splitting_and_routing(names[0], sql, TOPIC, audit_sink=audit_sink)

    def start(self, rate: float) -> None:
        source, *targets = self.drill.names
        self._publish(source, "o", self.drill.settings.messages, rate)
        for target in targets:
            self._receive(target, self._unchanged, subscription="consumer")
        self._receive(source, self._unchanged, subscription=recipes.UNROUTED_SUBSCRIPTION)

    def compose(self, index: int, message_id: str, namespace: str) -> tuple[ServiceBusMessage, Sent]:
        region, priority = self.REGIONS[index % 3], index * 7 % 10
        body = json.dumps({"order": message_id, "region": region, "lines": 1 + index % 4}).encode()
        properties: dict[str, Any] = {"region": region, "priority": priority}
        if index % 5 == 4:
            del properties["priority"]
        if index % 7 == 6:
            del properties["region"]
        elif index % 11 == 10:
            properties["region"] = None
        routed = frozenset(t for t, (_, selects) in self.routes().items() if selects(properties))
        return (ServiceBusMessage(body, message_id=message_id, application_properties=properties),
                Sent(namespace, body, properties, routed or frozenset({namespace}), routed | {namespace}))

    def outcome(self, handled: list[Record]) -> str:
        both = sum(1 for s in self.workload.values() if len(s.destinations) > 1)
        lacking = sum(1 for s in self.workload.values()
                      if s.properties.get("region") is None or "priority" not in s.properties)
        return (f"{super().outcome(handled)}; matching two routes: {both}; "
                f"lacking a routed property: {lacking}")


class Validating(Recipe):
    """The recipes whose transform validates, from the sources into the last namespace (which the outage
    takes down): one message in `INVALID_EVERY` is invalid and must land in its quarantine queue, every other
    one in its topic, as the transform makes it."""

    transform = ""
    INVALID_EVERY = 10

    @property
    def sources(self) -> tuple[str, ...]:
        return self.drill.names[:-1]

    @property
    def down(self) -> str:
        return self.drill.names[-1]

    def start(self, rate: float) -> None:
        total, sources = self.drill.settings.messages, self.sources
        for position, source in enumerate(sources):
            share = total // len(sources) + (position < total % len(sources))
            self._publish(source, source, share, rate / len(sources))
        self._receive(self.down, self._delivered, subscription="consumer")
        self._receive(self.down, self._quarantined, queue=QUARANTINE)

    def compose(self, index: int, message_id: str, namespace: str) -> tuple[ServiceBusMessage, Sent]:
        valid = index % self.INVALID_EVERY != self.INVALID_EVERY - 1
        body, properties = self.payload(index, message_id, namespace, valid)
        target = frozenset({self.down})
        return (ServiceBusMessage(body, message_id=message_id, application_properties=properties),
                Sent(namespace, body, properties, target, target | {namespace} if valid else {namespace},
                     valid))

    def payload(self, index: int, message_id: str, namespace: str, valid: bool) -> Payload:
        """The body and application properties of a message, valid or not."""
        raise NotImplementedError

    def _delivered(self, message: Any) -> None:
        sent = self.workload.get(str(message.message_id))
        if sent is None:
            return
        if not sent.valid:
            self._violation(message, "an invalid message reached the consumer")
        else:
            self.delivered(message, sent)

    def delivered(self, message: Any, sent: Sent) -> None:
        """Checks what the target's consumer gets of a valid message."""
        raise NotImplementedError


class Consolidation(Validating):
    """Shops at even positions publish order schema v1, the others v2; one order in ten is invalid."""

    pattern = "consolidation"
    namespace_roles = "shop[,shop...],central"
    default_namespaces = ("shop-a", "shop-b", "central")
    namespace_counts = (2, None)
    transform = "patterns.orders:normalize_order"

    def topology(self, names: tuple[str, ...], audit_sink: str) -> Topology:
        return recipes.consolidation(list(names[:-1]), names[-1], TOPIC, transform=self.transform,
                                     audit_sink=audit_sink)

    def payload(self, index: int, message_id: str, namespace: str, valid: bool) -> Payload:
        order = (order_v1 if self.sources.index(namespace) % 2 == 0 else order_v2)(message_id, index)
        body = json.dumps(order).encode() if valid else invalid_order(order, index // self.INVALID_EVERY)
        return body, {"shop": namespace}

    def delivered(self, message: Any, sent: Sent) -> None:
        order = json.loads(body_of(message))
        try:
            orders.checked_v2(order)
        except orders.InvalidOrder as error:
            self._violation(message, f"not a valid v2 order: {error}")
        if order.get("source") != sent.namespace or order.get("id") != message.message_id:
            self._violation(message, f"id {order.get('id')} from {order.get('source')}, not from "
                                     f"{sent.namespace}")
        self._stamped_from(message, sent.namespace)

    def _stamped_from(self, message: Any, origin: str) -> None:
        properties = decode_application_properties(message.application_properties)
        source = str(properties.get("repl-source") or "")
        if not source.startswith(f"{origin}/"):
            self._violation(message, f"stamped from {source!r}, not from {origin}")

    def outcome(self, handled: list[Record]) -> str:
        invalid = sum(1 for s in self.workload.values() if not s.valid)
        return f"{super().outcome(handled)}; invalid sent: {invalid}"


class Editing(Validating):
    """Validation, reduction and enrichment in one task (`transforms.validate_reduce_enrich`); one reading
    in eight is a CSV line instead of JSON."""

    pattern = "editing"
    namespace_roles = "source,target"
    default_namespaces = ("raw", "clean")
    namespace_counts = (2, 2)
    transform = "patterns.transforms:validate_reduce_enrich"
    INVALID_EVERY = 8

    def topology(self, names: tuple[str, ...], audit_sink: str) -> Topology:
        return recipes.editing(names[0], names[1], self.transform, TOPIC, audit_sink=audit_sink)

    def payload(self, index: int, message_id: str, namespace: str, valid: bool) -> Payload:
        sensor, celsius = f"sensor-{index % 12}", round(18 + index % 70 / 10, 1)
        reading = json.dumps({"sensor": sensor, "celsius": celsius}) if valid else f"{sensor},{celsius}"
        private = {"private-operator": f"op-{index % 5}", "Private-Site": "plant-2"}
        return reading.encode(), {"unit": "C", **private}

    def delivered(self, message: Any, sent: Sent) -> None:
        properties = decode_application_properties(message.application_properties)
        if body_of(message) != sent.body or properties.get("unit") != "C":
            self._violation(message, "the reading changed on the way")
        if properties.get(transforms.ORIGIN_PROPERTY) != sent.namespace:
            self._violation(message, f"origin {properties.get(transforms.ORIGIN_PROPERTY)!r}, not enriched")
        self._no_private(message, properties)


def body_of(message: Any) -> bytes:
    return b"".join(message.body)


def order_v1(order_id: str, index: int) -> dict[str, Any]:
    return {"order_id": order_id, "customer": f"c-{index % 17}",
            "total": f"{5 + index % 40}.{index % 100:02d}", "currency": "EUR",
            "items": [{"sku": f"sku-{index % 9}", "qty": 1 + index % 3}],
            "placed": "2026-11-23T12:00:00Z"}


def order_v2(order_id: str, index: int) -> dict[str, Any]:
    return {"schema": orders.SCHEMA_V2, "id": order_id, "customer_id": f"c-{index % 17}",
            "amount": {"cents": 500 + index * 13 % 4000, "currency": "USD"},
            "lines": [{"sku": f"sku-{index % 9}", "quantity": 1 + index % 3}],
            "placed_at": "2026-11-23T12:00:00Z"}


def invalid_order(order: dict[str, Any], kind: int) -> bytes:
    """Four ways an order goes wrong: not JSON, a bad amount, no customer, no lines."""
    v1 = "items" in order
    match kind % 4:
        case 0:
            return f"ORDER;{order.get('order_id') or order.get('id')};2 x tea".encode()
        case 1:
            wrong = {"total": "12,50"} if v1 else {"amount": {"cents": -5, "currency": "USD"}}
        case 2:
            wrong = {"customer" if v1 else "customer_id": None}
        case _:
            wrong = {"items" if v1 else "lines": []}
    return json.dumps({**order, **wrong}).encode()


RECIPES: tuple[type[Recipe], ...] = (Latency, Routing, Consolidation, Editing)
