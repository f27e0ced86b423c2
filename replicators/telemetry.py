"""The replicators' OpenTelemetry: per-task metrics, and a span for each copy that continues its source
message's trace.

Exporters are chosen the way Functions users expect (`configure`): Azure Monitor when
APPLICATIONINSIGHTS_CONNECTION_STRING is set (infra/ sets it on the Function App), OTLP when
OTEL_EXPORTER_OTLP_ENDPOINT is set (any collector), and a Prometheus endpoint when `sbfed functions run
--metrics-port` asks for one. With none of them the OpenTelemetry API's no-op providers make every
instrument cost next to nothing, and a copy keeps its source's trace context unchanged.

Trace context travels as the Service Bus SDKs propagate it: the application property `Diagnostic-Id` (and
`traceparent`), a W3C traceparent. A replica's is its copy span's, a child of the source message's, so a
consumer in the other region links back through the replication to the producer in one trace.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

log = logging.getLogger(__name__)

METER = "sbfed.replicators"
AZURE_MONITOR_SETTING = "APPLICATIONINSIGHTS_CONNECTION_STRING"
OTLP_SETTING = "OTEL_EXPORTER_OTLP_ENDPOINT"
TRACE_PROPERTIES = ("Diagnostic-Id", "traceparent")  # what the SDKs write, the first one read first
# Replication lag buckets, in seconds: a few ms on one machine to minutes behind an outage's backlog.
LAG_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)
_propagator = TraceContextTextMapPropagator()
_tracer = trace.get_tracer(METER)  # a proxy: it follows the provider set later


class ReplicationMetrics:
    """The instruments of every task, labelled by task (the function's name) and, where known, by source
    and target entity. Names follow OpenTelemetry's conventions; Prometheus shows them with `_total` and
    the unit (`sbfed_replication_lag_seconds_bucket`, ...): docs/operations.md has the table."""

    def __init__(self, meter: metrics.Meter | None = None) -> None:
        meter = meter or metrics.get_meter(METER)
        self.copied = meter.create_counter(
            "sbfed.replication.copied", unit="{message}",
            description="Messages whose replica the target accepted")
        self.dropped = meter.create_counter(
            "sbfed.replication.dropped", unit="{message}",
            description="Messages the task's transform dropped (no replica, by design)")
        self.batches = meter.create_counter(
            "sbfed.replication.batches", unit="{batch}", description="Batches the task replicated")
        self.failures = meter.create_counter(
            "sbfed.replication.failures", unit="{batch}",
            description="Invocations that failed (the batch is abandoned and comes back)")
        self.retries = meter.create_counter(
            "sbfed.replication.retries", unit="{send}",
            description="Sends to the target retried after a transient fault")
        self.settle_failures = meter.create_counter(
            "sbfed.replication.settle_failures", unit="{message}",
            description="Source settlements the broker refused (lock lost: the message is processed again)")
        self.lag = meter.create_histogram(
            "sbfed.replication.lag", unit="s",
            description="Source EnqueuedTimeUtc to the target's acceptance of the replica",
            explicit_bucket_boundaries_advisory=LAG_BUCKETS)

    def replicated(self, task: str, source: str, target: str, enqueued: Sequence[dt.datetime],
                   dropped: int, accepted_at: dt.datetime) -> None:
        labels = {"task": task, "source": source, "target": target}
        self.batches.add(1, labels)
        if enqueued:
            self.copied.add(len(enqueued), labels)
        if dropped:
            self.dropped.add(dropped, labels)
        for enqueued_time in enqueued:
            self.lag.record(max(0.0, (accepted_at - enqueued_time).total_seconds()), labels)


_metrics: ReplicationMetrics | None = None
_configured = False


def replication_metrics() -> ReplicationMetrics:
    """The process's instruments, made from the meter provider in place when first asked for (configure
    sets the provider first; tests set their own)."""
    global _metrics
    if _metrics is None:
        _metrics = ReplicationMetrics()
    return _metrics


def use_metrics(instruments: ReplicationMetrics | None) -> None:
    """Record with these instruments from now on (a test's, on its own meter provider); None: make them
    again from the global provider when next asked for."""
    global _metrics
    _metrics = instruments


def configure(settings: Mapping[str, str], *, metrics_port: int | None = None,
              metrics_host: str = "127.0.0.1") -> list[str]:
    """Set the process's providers from the app settings; what was set up, one phrase each (for the log).

    Azure Monitor's distro sets both providers itself; otherwise OTLP and Prometheus readers share one
    meter provider, and OTLP also gets the spans. Only the first call does anything: `sbfed functions run`
    configures before it loads function_app.py, which configures again for Azure."""
    global _configured
    if _configured:
        return []
    _configured = True
    enabled: list[str] = []
    if settings.get(AZURE_MONITOR_SETTING):
        from azure.monitor.opentelemetry import configure_azure_monitor

        configure_azure_monitor(connection_string=settings[AZURE_MONITOR_SETTING])
        enabled.append("Azure Monitor (Application Insights)")
    readers: list[Any] = []
    if settings.get(OTLP_SETTING) and not enabled:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        readers.append(PeriodicExportingMetricReader(OTLPMetricExporter()))
        tracer_provider = TracerProvider(resource=_resource(settings))
        tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        trace.set_tracer_provider(tracer_provider)
        enabled.append(f"OTLP ({settings[OTLP_SETTING]})")
    if metrics_port is not None:
        from opentelemetry.exporter.prometheus import PrometheusMetricReader
        from prometheus_client import start_http_server

        start_http_server(metrics_port, addr=metrics_host)
        readers.append(PrometheusMetricReader())
        enabled.append(f"Prometheus (http://{metrics_host}:{metrics_port}/metrics)")
    if readers:
        from opentelemetry.sdk.metrics import MeterProvider

        metrics.set_meter_provider(MeterProvider(metric_readers=readers, resource=_resource(settings)))
    if enabled:
        use_metrics(None)  # instruments made before now belong to the API's no-op provider
    return enabled


def _resource(settings: Mapping[str, str]) -> Any:
    from opentelemetry.sdk.resources import Resource

    return Resource.create({"service.name": settings.get("OTEL_SERVICE_NAME")
                            or settings.get("WEBSITE_SITE_NAME") or "sbfed-replicators"})


def source_context(application_properties: Mapping[str, Any]) -> Any:
    """The trace context a source message carries (an OpenTelemetry Context), or None."""
    for name in TRACE_PROPERTIES:
        value = application_properties.get(name)
        if isinstance(value, bytes):
            value = value.decode("ascii", "replace")
        if isinstance(value, str) and value:
            context = _propagator.extract({"traceparent": value})
            if trace.get_current_span(context).get_span_context().is_valid:
                return context
    return None


@contextmanager
def copy_span(task: str, source: Mapping[str, Any], replica: dict[str, Any],
              tracer: trace.Tracer | None = None) -> Iterator[None]:
    """The span of one copy: a child of the source message's context (a root when it has none). The
    replica's trace properties are set to it, so the target's consumer continues this trace. Without a
    tracer provider the API's span is the source's own context, which the replica then carries unchanged."""
    with (tracer or _tracer).start_as_current_span(f"replicate {task}", context=source_context(source),
                                                   kind=trace.SpanKind.CONSUMER) as span:
        if span.get_span_context().is_valid:
            carrier: dict[str, str] = {}
            _propagator.inject(carrier)
            for name in TRACE_PROPERTIES:
                replica[name] = carrier["traceparent"]
        yield
