"""The replicators' instruments and the copy span, on the OpenTelemetry SDK's in-memory reader and
exporter."""

from __future__ import annotations

import datetime as dt

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from replicators import telemetry
from replicators.telemetry import ReplicationMetrics, copy_span, source_context

PRODUCER = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def _points(reader: InMemoryMetricReader) -> dict[str, list]:
    data = reader.get_metrics_data()
    return {metric.name: list(metric.data.data_points)
            for resource in data.resource_metrics for scope in resource.scope_metrics
            for metric in scope.metrics}


def test_a_replicated_batch_counts_its_copies_and_their_lag() -> None:
    reader = InMemoryMetricReader()
    instruments = ReplicationMetrics(MeterProvider(metric_readers=[reader]).get_meter("test"))
    accepted = dt.datetime(2026, 11, 27, 12, 0, 10, tzinfo=dt.UTC)
    enqueued = [accepted - dt.timedelta(seconds=s) for s in (0.02, 0.3, 4, 70)]
    instruments.replicated("orders-to-west", "orders", "orders", enqueued, 2, accepted)
    instruments.replicated("orders-to-west", "orders", "orders", enqueued[:1], 0, accepted)
    points = _points(reader)
    labels = {"task": "orders-to-west", "source": "orders", "target": "orders"}
    [copied] = points["sbfed.replication.copied"]
    assert copied.value == 5 and dict(copied.attributes) == labels
    assert [p.value for p in points["sbfed.replication.dropped"]] == [2]
    assert [p.value for p in points["sbfed.replication.batches"]] == [2]
    [lag] = points["sbfed.replication.lag"]
    assert lag.count == 5 and lag.sum == pytest.approx(0.02 + 0.3 + 4 + 70 + 0.02)
    assert tuple(lag.explicit_bounds) == telemetry.LAG_BUCKETS  # the advisory buckets, not the SDK's
    assert lag.bucket_counts[telemetry.LAG_BUCKETS.index(0.025)] == 2  # 0.02 s twice: (0.01, 0.025]


def test_the_copy_continues_the_source_messages_trace() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    replica: dict = {"keep": 1}
    with copy_span("orders-to-west", {"Diagnostic-Id": PRODUCER.encode()}, replica, provider.get_tracer("t")):
        pass
    [span] = exporter.get_finished_spans()
    assert span.name == "replicate orders-to-west"
    assert f"{span.context.trace_id:032x}" == PRODUCER.split("-")[1]  # the producer's trace
    assert f"{span.parent.span_id:016x}" == PRODUCER.split("-")[2]  # a child of the producer's span
    _, trace_id, span_id, _ = replica["Diagnostic-Id"].split("-")
    assert (trace_id, span_id) == (PRODUCER.split("-")[1], f"{span.context.span_id:016x}")
    assert replica["traceparent"] == replica["Diagnostic-Id"] and replica["keep"] == 1


def test_a_source_without_a_trace_starts_one_and_without_a_provider_keeps_its_own() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    started: dict = {}
    with copy_span("t", {}, started, provider.get_tracer("t")):
        pass
    [root] = exporter.get_finished_spans()
    assert root.parent is None and started["traceparent"].split("-")[1] == f"{root.context.trace_id:032x}"
    kept: dict = {}
    with copy_span("t", {"traceparent": PRODUCER}, kept):  # the API's no-op tracer: no provider set here
        pass
    assert kept == {"Diagnostic-Id": PRODUCER, "traceparent": PRODUCER}
    untraced: dict = {}
    with copy_span("t", {}, untraced):
        pass
    assert untraced == {}


@pytest.mark.parametrize("value", ["", "not-a-traceparent", b"\xff\xfe", 42,
                                   "00-00000000000000000000000000000000-b7ad6b7169203331-01"])
def test_an_unreadable_trace_property_is_no_context(value: object) -> None:
    assert source_context({"Diagnostic-Id": value}) is None


def test_configure_without_settings_sets_up_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(telemetry, "_configured", False)
    assert telemetry.configure({}) == []
    assert telemetry.configure({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}) == []  # once only
