"""`GET /metrics`: a namespace's figures in Prometheus' text exposition format (0.0.4), named after Azure
Monitor's Service Bus metrics so dashboards and alerts carry over (the Azure name is in each HELP line).

Every series has the label `namespace`; an entity's also `entity` (its path, Azure's EntityName dimension)
and `kind`. Counters count since the broker started (Prometheus handles the reset); gauges are read when
scraped. Reading them is one walk of the engine's entities on the reactor thread, nothing on the hot path
but the integer increments the engine and the AMQP endpoint keep anyway.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from local_broker.console.operations import EntityRow
from local_broker.wire.amqp.tally import Histogram, Requests
from local_broker.wire.rest.tally import LATENCY_FAMILY, OPERATIONS, RestCounts

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


@dataclass(frozen=True)
class Family:
    name: str
    kind: str  # counter or gauge
    azure: str  # the Azure Monitor metric it stands for ("" where Azure has none)
    help: str
    value: Callable[[EntityRow], int]


ENTITY_FAMILIES = (
    Family("servicebus_incoming_messages_total", "counter", "IncomingMessages",
           "Messages sent to the entity (a topic's, and each subscription's copy)",
           lambda r: r.totals.enqueued),
    Family("servicebus_outgoing_messages_total", "counter", "OutgoingMessages",
           "Messages delivered to receivers (peek-lock and receive-and-delete)",
           lambda r: r.totals.delivered),
    Family("servicebus_complete_message_total", "counter", "CompleteMessage",
           "Messages completed (or received and deleted)", lambda r: r.totals.completed),
    Family("servicebus_abandon_message_total", "counter", "AbandonMessage",
           "Messages abandoned", lambda r: r.totals.abandoned),
    Family("servicebus_dead_lettered_message_total", "counter", "",
           "Messages moved to the dead-letter queue (by a receiver, expiry or the delivery count)",
           lambda r: r.totals.dead_lettered),
    Family("servicebus_active_messages", "gauge", "ActiveMessages",
           "Active messages (deferred excluded)", lambda r: r.active),
    Family("servicebus_deadlettered_messages", "gauge", "DeadletteredMessages",
           "Messages in the dead-letter queue", lambda r: r.dead_letter),
    Family("servicebus_transfer_deadlettered_messages", "gauge", "",
           "Messages in the transfer dead-letter queue", lambda r: r.transfer_dead_letter),
    Family("servicebus_scheduled_messages", "gauge", "ScheduledMessages",
           "Scheduled messages not yet enqueued", lambda r: r.scheduled),
    Family("servicebus_deferred_messages", "gauge", "", "Deferred messages", lambda r: r.deferred),
    Family("servicebus_size_bytes", "gauge", "Size", "Bytes the entity's messages take", lambda r: r.size),
)


@dataclass(frozen=True)
class ConnectionCounts:
    """The namespace's AMQP connections, as its endpoint counts them."""

    active: int
    opened: int
    closed: int


def render(namespace: str, rows: Iterable[EntityRow], connections: ConnectionCounts,
           available: bool, requests: Requests, rest: RestCounts | None = None,
           geo: dict[str, Any] | None = None) -> bytes:
    """`available`: the namespace serves clients (not taken down through the control API or the console);
    `requests`: its AMQP endpoint's requests, failures and latencies; `rest`: its REST messaging door's,
    the same families' series with `protocol="rest"` and `operation` (the AMQP series keep their labels);
    `geo`: a geo-replicated namespace's replicas, as /$control/geo answers them (`GeoStore.status`)."""
    rest = rest or RestCounts()
    rows = list(rows)
    lines: list[str] = []
    for family in ENTITY_FAMILIES:
        _head(lines, family.name, family.kind, family.azure, family.help)
        for row in rows:
            labels = _labels(namespace=namespace, entity=row.path, kind=row.kind)
            lines.append(f"{family.name}{labels} {family.value(row)}")
    ns = _labels(namespace=namespace)
    for name, kind, azure, text, value in (
            ("servicebus_namespace_available", "gauge", "", "1 while the namespace serves clients, 0 while "
             "it is down (a drill's fault)", int(available)),
            ("servicebus_active_connections", "gauge", "ActiveConnections", "Open AMQP connections",
             connections.active),
            ("servicebus_connections_opened_total", "counter", "ConnectionsOpened", "AMQP connections opened",
             connections.opened),
            ("servicebus_connections_closed_total", "counter", "ConnectionsClosed", "AMQP connections closed",
             connections.closed)):
        _head(lines, name, kind, azure, text)
        lines.append(f"{name}{ns} {value}")
    for name, azure, text, value, rest_values in (
            ("servicebus_incoming_requests_total", "IncomingRequests",
             "Requests: AMQP attaches, sends, settlements, $cbs and $management requests; REST messaging "
             "requests", requests.incoming, lambda op: rest.incoming[op]),
            ("servicebus_successful_requests_total", "SuccessfulRequests",
             "Requests that succeeded", requests.successful, rest.successful)):
        _head(lines, name, "counter", azure, text)
        lines.append(f"{name}{ns} {value}")
        lines += [f"{name}{_labels(namespace=namespace, protocol='rest', operation=op)} {rest_values(op)}"
                  for op in OPERATIONS]
    for name, azure, text, kind in (
            ("servicebus_user_errors_total", "UserErrors",
             "Requests refused for the client's error (not found, unauthorized, lock lost, too large, ...)",
             "user_errors"),
            ("servicebus_server_errors_total", "ServerErrors",
             "Requests failed by the broker (its store could not write)", "server_errors"),
            ("servicebus_throttled_requests_total", "ThrottledRequests",
             "Requests refused as server-busy", "throttled")):
        _head(lines, name, "counter", azure, text)
        lines.append(f"{name}{ns} {getattr(requests, kind)}")
        lines += [f"{name}{_labels(namespace=namespace, protocol='rest', operation=op, status=status)} {n}"
                  for (op, counted, status), n in sorted(rest.errors.items()) if counted == kind]
    for name, azure, text, family, histogram in (
            ("servicebus_server_send_latency_seconds", "ServerSendLatency",
             "From the broker reading a send to its acceptance leaving", "send", requests.send_latency),
            ("servicebus_server_settle_latency_seconds", "",
             "From the broker reading a settlement (REST: also a renew) to its answer leaving", "settle",
             requests.settle_latency)):
        _head(lines, name, "histogram", azure, text)
        lines += _histogram(name, {"namespace": namespace}, histogram)
        for op, rest_histogram in rest.latency.items():
            if LATENCY_FAMILY[op] == family:
                lines += _histogram(name, {"namespace": namespace, "protocol": "rest", "operation": op},
                                    rest_histogram)
    if geo is not None:
        lines += _geo(namespace, geo)
    return ("\n".join(lines) + "\n").encode()


def _histogram(name: str, labels: dict[str, str], histogram: Histogram) -> list[str]:
    lines, cumulative = [], 0
    for bound, count in zip((*histogram.bounds, "+Inf"), histogram.buckets, strict=True):
        cumulative += count
        lines.append(f"{name}_bucket{_labels(**labels, le=bound)} {cumulative}")
    series = _labels(**labels)
    return [*lines, f"{name}_sum{series} {histogram.sum}", f"{name}_count{series} {histogram.count}"]


def _geo(namespace: str, status: dict[str, Any]) -> list[str]:
    """Each replica's role and state (an info gauge: 1 on the series of its current ones), and each
    secondary's lag: what /$control/geo shows, for alerts on a secondary falling behind or out."""
    lines: list[str] = []
    replicas = status["replicas"]
    secondaries = [r for r in replicas if r["role"] != "Primary"]
    _head(lines, "servicebus_geo_replica_info", "gauge", "",
          "1 for each replica, labelled with its region, role (Primary, Secondary) and state (Ready, "
          "Unavailable, Seeding)")
    lines += [f"servicebus_geo_replica_info"
              f"{_labels(namespace=namespace, region=r['region'], role=r['role'], state=r['state'])} 1"
              for r in replicas]
    for name, key, text in (
            ("servicebus_geo_replication_lag_seconds", "lag_seconds",
             "Seconds since the oldest operation the secondary has not applied (0: caught up)"),
            ("servicebus_geo_replication_pending_operations", "pending_operations",
             "Operations the primary committed that the secondary has not applied")):
        _head(lines, name, "gauge", "", text)
        lines += [f"{name}{_labels(namespace=namespace, region=r['region'])} {r[key]}" for r in secondaries]
    _head(lines, "servicebus_geo_max_replication_lag_seconds", "gauge", "",
          "The lag beyond which the primary refuses work as server-busy (asynchronous; 0: synchronous)")
    lines.append(f"servicebus_geo_max_replication_lag_seconds{_labels(namespace=namespace)} "
                 f"{status['max_replication_lag_seconds']}")
    return lines


def _head(lines: list[str], name: str, kind: str, azure: str, text: str) -> None:
    lines.append(f"# HELP {name} {text}" + (f" (Azure Monitor: {azure})" if azure else "") + ".")
    lines.append(f"# TYPE {name} {kind}")


def _labels(**labels: Any) -> str:
    return "{" + ",".join(f'{name}="{_escape(value)}"' for name, value in labels.items()) + "}"


def _escape(value: Any) -> str:
    """A label value as the exposition format wants it: backslash, quote and line feed escaped."""
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
