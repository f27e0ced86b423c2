"""The consolidation recipe's order normalizer: v1 -> v2, v2 checked, everything else quarantined with why."""

import datetime as dt
import json

import pytest

from patterns.orders import normalize_order
from replicators.copy import copy_message
from replicators.message import AmqpBody, SourceMessage

T0 = dt.datetime(2026, 11, 22, 12, 0, tzinfo=dt.UTC)
V1 = {"order_id": "A-17", "customer": "c-3", "total": "12.50", "currency": "EUR",
      "items": [{"sku": "tea", "qty": 2}], "placed": "2026-11-22T11:59:00Z"}
V2 = {"schema": "order/v2", "id": "B-4", "customer_id": "c-9", "amount": {"cents": 700, "currency": "USD"},
      "lines": [{"sku": "mug", "quantity": 1}], "placed_at": "2026-11-22T11:58:00Z"}


def normalized(body, namespace="shop-a"):
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    source = SourceMessage(body=AmqpBody.data(raw), message_id="m1", application_properties={"kind": "order"},
                           namespace=namespace, entity="events", enqueued_time_utc=T0, sequence_number=3)
    return normalize_order(copy_message(source, target_entity="events"))


def test_a_v1_order_becomes_v2_with_its_source():
    replica = normalized(V1)
    assert replica.entity == "events" and replica.content_type == "application/json"
    assert replica.application_properties["order-schema"] == "order/v2"
    assert json.loads(replica.body.as_bytes()) == {
        "schema": "order/v2", "id": "A-17", "customer_id": "c-3",
        "amount": {"cents": 1250, "currency": "EUR"}, "lines": [{"sku": "tea", "quantity": 2}],
        "placed_at": "2026-11-22T11:59:00Z", "source": "shop-a"}


def test_a_v2_order_passes_checked_and_keeps_a_source_it_names():
    assert json.loads(normalized(V2, "shop-b").body.as_bytes()) == {**V2, "source": "shop-b"}
    assert json.loads(normalized({**V2, "source": "kiosk-1"}).body.as_bytes())["source"] == "kiosk-1"


@pytest.mark.parametrize("body, reason", [
    (b"order A-17: 2 x tea", "the body is not a JSON document"),
    (b"[1, 2]", "expected a JSON object, got list"),
    ({**V1, "total": "12,50"}, "total: '12,50' is not a decimal amount"),
    ({**V1, "total": "12.505"}, "total: '12.505' is not an amount in cents"),
    ({**V1, "total": "NaN"}, "is not an amount in cents"),
    ({k: v for k, v in V1.items() if k != "customer"}, "customer: missing"),
    ({**V1, "items": []}, "items: an order has at least one item"),
    ({**V1, "items": [{"sku": "tea", "qty": True}]}, "qty: expected int, got bool"),
    ({**V1, "items": [{"sku": "tea", "qty": 0}]}, "quantity 0 of 'tea' is below 1"),
    ({**V1, "currency": "euro"}, "amount.currency: 'euro' is not an ISO 4217 code"),
    ({**V2, "amount": {"cents": -1, "currency": "USD"}}, "amount.cents: negative"),
    ({**V2, "schema": "order/v3"}, "unknown schema 'order/v3'"),
])
def test_an_order_that_is_not_valid_goes_to_quarantine_unchanged_with_the_reason(body, reason):
    replica = normalized(body)
    assert replica.entity == "events-quarantine"
    assert reason in replica.application_properties["quarantine-reason"]
    assert replica.application_properties["quarantine-reason"].startswith("order: ")
    assert "order-schema" not in replica.application_properties
    assert replica.body.as_bytes() == (body if isinstance(body, bytes) else json.dumps(body).encode())
