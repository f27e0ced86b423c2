"""The control API: fault injection routes on each namespace's management port (docs/control-api.md).

Routes (JSON in and out; the caller needs a SAS token with the Manage right, like the management API):

    GET  /$control/faults                          the namespace's fault state
    PUT  /$control/faults                          {"namespace_down": "refuse"|"drop"|null, "latency_ms": N}
    PUT  /$control/partitions/{entity}/{id}        {"available": false|true}
    GET  /$control/status/{entity}                 {"entity": ..., "status": ...}
    PUT  /$control/status/{entity}                 {"status": "Active"|"Disabled"|"SendDisabled"|...}
    GET  /$control/geo                             a geo-replicated namespace's replicas: role, state, lag
    POST /$control/geo/promote                     {"region": R, "mode": "planned"|"forced"}
    PUT  /$control/geo/regions/{region}            {"available": false|true, "latency_ms": N}

`{entity}` is a queue or topic path, or `{topic}/subscriptions/{sub}`. Partition and status changes go
through the engine (its semantics, its errors); namespace-wide faults live in `NamespaceFaults`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

from local_broker.engine import BrokerError, EntityNotFoundError, EntityStatus
from local_broker.faults import MAX_LATENCY_MS, NamespaceFaults
from local_broker.geo.store import GeoError
from local_broker.wire.admin.operations import RunOnEngine, parse_target

CONTROL_PREFIX = "$control"


class ControlError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class ControlResponse:
    status: int
    body: dict[str, Any]

    def encode(self) -> bytes:
        return json.dumps(self.body).encode()


def control_error(status: int, message: str) -> ControlResponse:
    return ControlResponse(status, {"error": {"code": status, "message": message}})


def _json_object(body: bytes) -> dict[str, Any]:
    try:
        value = json.loads(body or b"{}")
    except ValueError as exc:
        raise ControlError(400, f"The body is not JSON: {exc}.") from exc
    if not isinstance(value, dict):
        raise ControlError(400, "The body must be a JSON object.")
    return value


class ControlApi:
    """Answers `/$control/...` requests for one namespace."""

    def __init__(self, namespace_name: str, faults: NamespaceFaults, run_on_engine: RunOnEngine,
                 geo: Any = None) -> None:
        self.namespace_name = namespace_name
        self.faults = faults
        self.run_on_engine = run_on_engine
        self.geo = geo  # local_broker.geo.hosting.GeoHost, for a geo-replicated namespace

    def handle(self, method: str, segments: list[str], body: bytes) -> ControlResponse:
        """`segments` is the path after `$control`, percent-decoded."""
        try:
            return self._route(method, segments, body)
        except ControlError as exc:
            return control_error(exc.status, exc.message)
        except GeoError as exc:
            return control_error(exc.status, str(exc))
        except BrokerError as exc:
            return control_error(exc.http_status, exc.description)

    def _route(self, method: str, segments: list[str], body: bytes) -> ControlResponse:
        head = segments[0].lower() if segments else ""
        if head == "faults" and len(segments) == 1:
            if method == "GET":
                return self._faults()
            if method == "PUT":
                try:
                    self.faults.set(_json_object(body))
                except ValueError as exc:
                    raise ControlError(400, str(exc)) from exc
                return self._faults()
        elif head == "partitions" and len(segments) >= 3 and method == "PUT":
            return self._set_partition("/".join(segments[1:-1]), segments[-1], _json_object(body))
        elif head == "status" and len(segments) >= 2 and method in ("GET", "PUT"):
            entity = "/".join(segments[1:])
            status = _json_object(body).get("status") if method == "PUT" else None
            return self._status(entity, status)
        elif head == "geo":
            return self._geo(method, segments[1:], _json_object(body) if method != "GET" else {})
        raise ControlError(404, f"No control route {method} /{CONTROL_PREFIX}/{'/'.join(segments)}.")

    def _faults(self) -> ControlResponse:
        return ControlResponse(200, {"namespace": self.namespace_name, **self.faults.state.to_json()})

    def _geo(self, method: str, rest: list[str], body: dict[str, Any]) -> ControlResponse:
        if self.geo is None:
            raise ControlError(404, f"The namespace '{self.namespace_name}' is not geo-replicated (declare "
                                    "geo_replication in its topology).")
        if method == "GET" and not rest:
            return ControlResponse(200, self.geo.status())
        if method == "POST" and rest == ["promote"]:
            mode = body.get("mode", "planned")
            if not isinstance(body.get("region"), str) or mode not in ("planned", "forced"):
                raise ControlError(400, 'The body must be {"region": "...", "mode": "planned"|"forced"}.')
            return ControlResponse(200, self.geo.promote(body["region"], forced=mode == "forced"))
        if method == "PUT" and len(rest) == 2 and rest[0] == "regions":
            available, latency = body.get("available"), body.get("latency_ms")
            if (available is not None and not isinstance(available, bool)) or (
                    latency is not None and (isinstance(latency, bool) or not isinstance(latency, int)
                                             or not 0 <= latency <= MAX_LATENCY_MS)):
                raise ControlError(400, 'The body must be {"available": true|false, "latency_ms": '
                                        f'0..{MAX_LATENCY_MS}}} (either may be left out).')
            return ControlResponse(200, self.geo.set_region(rest[1], available, latency))
        raise ControlError(404, f"No control route {method} /{CONTROL_PREFIX}/geo/{'/'.join(rest)}.")

    def _set_partition(self, entity: str, partition: str, body: dict[str, Any]) -> ControlResponse:
        available = body.get("available")
        if not isinstance(available, bool):
            raise ControlError(400, 'The body must be {"available": true} or {"available": false}.')
        if not partition.isdigit():
            raise ControlError(400, f"The partition id must be a whole number, not '{partition}'.")
        partition_id = int(partition)

        def apply(ns: Any) -> None:
            ns.set_partition_available(entity, partition_id, available)
            ns.commit()

        self.run_on_engine(apply)
        self.faults.record_partition(entity, partition_id, available)
        return self._faults()

    def _status(self, entity: str, status: object) -> ControlResponse:
        target = parse_target(entity)
        if target.kind not in ("entity", "subscription"):
            raise ControlError(400, f"'{entity}' is not a queue, topic or subscription path.")
        wanted: EntityStatus | None = None
        if status is not None:
            try:
                wanted = EntityStatus(status)
            except ValueError as exc:
                choices = ", ".join(s.value for s in EntityStatus)
                raise ControlError(400, f"The status must be one of {choices}, not {status!r}.") from exc

        def apply(ns: Any) -> str:
            if target.kind == "subscription":
                props = ns.get_subscription(target.topic, target.subscription)
                if wanted is not None:
                    props = ns.update_subscription(target.topic, replace(props, status=wanted))
            else:
                try:
                    get, update = ns.get_queue, ns.update_queue
                    props = get(target.topic)
                except EntityNotFoundError:
                    get, update = ns.get_topic, ns.update_topic
                    props = get(target.topic)
                if wanted is not None:
                    props = update(replace(props, status=wanted))
            ns.commit()
            return EntityStatus(props.status).value

        return ControlResponse(200, {"entity": entity, "status": self.run_on_engine(apply)})
