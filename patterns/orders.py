"""The order schemas of the consolidation recipe and the transform that normalizes them on the way to the
central namespace (`patterns.orders:normalize_order`; docs/patterns.md).

Shops publish order schema v1 (flat: `order_id`, `customer`, `total` as a decimal string, `currency`,
`items` of `sku`/`qty`, `placed`) or already v2 (`"schema": "order/v2"`: `id`, `customer_id`, `amount` in
cents with its currency, `lines` of `sku`/`quantity`, `placed_at`, `source`). The central topic receives v2
only: a v1 order is converted, a v2 order is checked and gets its `source` (the shop's namespace, from the
`repl-source` stamp) when it lacks one. An order that is neither valid v1 nor valid v2 goes to the central
`<topic>-quarantine` queue with the reason (`patterns.transforms.quarantine`).
"""

from __future__ import annotations

import json
import re
from decimal import Decimal, InvalidOperation
from typing import Any

from patterns.transforms import ORIGIN_PROPERTY, add_origin, quarantine
from replicators.message import AmqpBody, Replica

SCHEMA_V1, SCHEMA_V2 = "order/v1", "order/v2"
SCHEMA_PROPERTY = "order-schema"
JSON = "application/json"
CURRENCY = re.compile(r"^[A-Z]{3}$")


class InvalidOrder(ValueError):
    """The order cannot be normalized; the message says which field and why."""


def normalize_order(replica: Replica) -> Replica:
    """Normalization with validation: v1 -> v2, v2 checked, anything else quarantined with the reason."""
    replica = add_origin(replica)
    origin = replica.application_properties.get(ORIGIN_PROPERTY)
    try:
        order = _document(replica.body.as_bytes())
        schema = order.get("schema", SCHEMA_V1)
        if schema == SCHEMA_V1:
            normalized = order_v2_from_v1(order, source=origin)
        elif schema == SCHEMA_V2:
            normalized = checked_v2({"source": origin, **order})
        else:
            raise InvalidOrder(f"unknown schema {schema!r} (expected {SCHEMA_V1} or {SCHEMA_V2})")
    except InvalidOrder as error:
        return quarantine(replica, f"order: {error}")
    replica.body = AmqpBody.data(json.dumps(normalized, separators=(",", ":")).encode())
    replica.content_type = JSON
    replica.application_properties[SCHEMA_PROPERTY] = SCHEMA_V2
    return replica


def order_v2_from_v1(order: dict[str, Any], *, source: str | None) -> dict[str, Any]:
    items = _field(order, "items", list)
    if not items:
        raise InvalidOrder("items: an order has at least one item")
    return checked_v2({
        "schema": SCHEMA_V2,
        "id": _field(order, "order_id", str),
        "customer_id": _field(order, "customer", str),
        "amount": {"cents": _cents(_field(order, "total", str)), "currency": _field(order, "currency", str)},
        "lines": [{"sku": _field(item, "sku", str), "quantity": _field(item, "qty", int)}
                  for item in map(_object, items)],
        "placed_at": _field(order, "placed", str),
        "source": source,
    })


def checked_v2(order: dict[str, Any]) -> dict[str, Any]:
    """A v2 order as the central topic takes it; raises InvalidOrder naming the first wrong field."""
    for name in ("id", "customer_id", "placed_at", "source"):
        if not _field(order, name, str):
            raise InvalidOrder(f"{name}: empty")
    amount = _field(order, "amount", dict)
    if _field(amount, "cents", int) < 0:
        raise InvalidOrder("amount.cents: negative")
    if not CURRENCY.match(_field(amount, "currency", str)):
        raise InvalidOrder(f"amount.currency: {amount['currency']!r} is not an ISO 4217 code")
    lines = _field(order, "lines", list)
    if not lines:
        raise InvalidOrder("lines: an order has at least one line")
    for line in map(_object, lines):
        _field(line, "sku", str)
        if _field(line, "quantity", int) < 1:
            raise InvalidOrder(f"lines: quantity {line['quantity']} of {line['sku']!r} is below 1")
    return order


def _document(body: bytes) -> dict[str, Any]:
    try:
        return _object(json.loads(body))
    except (ValueError, UnicodeDecodeError) as error:
        raise InvalidOrder(f"the body is not a JSON document: {error}") from None


def _object(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InvalidOrder(f"expected a JSON object, got {type(value).__name__}")
    return value


def _field(document: dict[str, Any], name: str, kind: type) -> Any:
    value = document.get(name)
    if value is None:
        raise InvalidOrder(f"{name}: missing")
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise InvalidOrder(f"{name}: expected {kind.__name__}, got {type(value).__name__}")
    return value


def _cents(total: str) -> int:
    try:
        amount = Decimal(total)
    except InvalidOperation:
        raise InvalidOrder(f"total: {total!r} is not a decimal amount") from None
    if not amount.is_finite() or amount * 100 != (amount * 100).to_integral_value():
        raise InvalidOrder(f"total: {total!r} is not an amount in cents")
    return int(amount * 100)
