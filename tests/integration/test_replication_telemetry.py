"""The replicators' metrics and traces on a real replication between two local namespaces: what
`sbfed functions run --metrics-port` serves to Prometheus, and the copy spans of the in-process host, each
checked against the messages actually sent and replicated; and Debian's Prometheus server scraping the
brokers and the host, queried through its own HTTP API."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml
from azure.servicebus import ServiceBusMessage
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client.parser import text_string_to_metric_families
from replication_harness import (
    APP,
    REPO,
    drain_subscription,
    functions_host,
    send_all,
    settings_for,
    topology,
)

from patterns.drills.processes import SbfedProcess
from replicators import telemetry
from tests.broker_process import brokers

COUNT = 40
TASK = "events-to-secondary"


def _traced(i: int) -> tuple[ServiceBusMessage, str]:
    """A message as a traced producer sends it (the SDKs' Diagnostic-Id), and its trace id."""
    trace_id = f"{i + 1:032x}"
    parent = f"00-{trace_id}-{i + 1:016x}-01"
    return ServiceBusMessage(f"m-{i}", message_id=f"m-{i}", partition_key="k",
                             application_properties={"Diagnostic-Id": parent}), trace_id


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def _functions_run(directory: Path, settings: dict[str, str]) -> Iterator[int]:
    """`sbfed functions run` of the events task with a Prometheus endpoint; yields its port."""
    port = _free_port()
    argv = ["functions", "run", "--app", str(APP), "--only", TASK, "--metrics-port", str(port)]
    host = SbfedProcess("`sbfed functions run`", argv, directory / "functions.log", env=settings)
    host.start(lambda: "running" in (directory / "functions.log").read_text(), timeout=60)
    try:
        yield port
    finally:
        host.stop(timeout=30)


def _scrape(port: int) -> dict[tuple[str, str], float]:
    """The samples of the task (name, le) -> value, read as Prometheus reads them."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    return {(sample.name, sample.labels.get("le", "")): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples
            if sample.labels.get("task") == TASK}


def test_functions_run_serves_the_copied_count_and_lag_to_prometheus(tmp_path) -> None:
    sent = [_traced(i) for i in range(COUNT)]
    with brokers(topology(), tmp_path) as (namespaces, path):
        settings = settings_for(namespaces, path)
        with _functions_run(tmp_path, settings) as port:
            send_all(settings["PRIMARY"], "events", [m for m, _ in sent])
            replicas = drain_subscription(settings["SECONDARY"], "events", "check", COUNT, timeout=60)
            assert sorted(r.message_id for r in replicas) == sorted(f"m-{i}" for i in range(COUNT))
            # No tracer provider in that process: each replica carries its producer's trace unchanged.
            traces = {r.message_id: r.application_properties[b"Diagnostic-Id"].decode().split("-")[1]
                      for r in replicas}
            assert traces == {f"m-{i}": trace_id for i, (_, trace_id) in enumerate(sent)}
            deadline, samples = time.monotonic() + 30, {}
            while time.monotonic() < deadline:
                samples = _scrape(port)
                if samples.get(("sbfed_replication_copied_total", "")) == COUNT:
                    break
                time.sleep(0.5)
            assert samples.get(("sbfed_replication_copied_total", "")) == COUNT, samples
            assert samples[("sbfed_replication_lag_seconds_count", "")] == COUNT
            assert samples[("sbfed_replication_lag_seconds_bucket", "+Inf")] == COUNT
            assert samples[("sbfed_replication_batches_total", "")] >= 1
        assert "metrics and traces to Prometheus" in (tmp_path / "functions.log").read_text()


def test_each_copy_is_a_span_of_its_producers_trace(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    exporter, reader = InMemorySpanExporter(), InMemoryMetricReader()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(telemetry, "_tracer", provider.get_tracer("test"))
    telemetry.use_metrics(telemetry.ReplicationMetrics(MeterProvider(metric_readers=[reader]).get_meter("t")))
    sent = [_traced(i) for i in range(COUNT)]
    try:
        with brokers(topology(), tmp_path) as (namespaces, path):
            settings = settings_for(namespaces, path)
            send_all(settings["PRIMARY"], "events", [m for m, _ in sent])
            with functions_host(settings, only={TASK}):
                replicas = drain_subscription(settings["SECONDARY"], "events", "check", COUNT, timeout=60)
    finally:
        telemetry.use_metrics(None)
    spans = {f"{s.context.span_id:016x}": s for s in exporter.get_finished_spans()}
    assert len(replicas) == COUNT and len(spans) >= COUNT  # a redelivered batch is copied (and traced) again
    for replica in replicas:
        _, trace_id, span_id, _ = replica.application_properties[b"Diagnostic-Id"].decode().split("-")
        i = int(replica.message_id.split("-")[1])
        span = spans[span_id]  # the replica names its copy span ...
        assert trace_id == sent[i][1] == f"{span.context.trace_id:032x}"  # ... in its producer's trace,
        assert span.parent.span_id == i + 1 and span.name == f"replicate {TASK}"  # its producer's child
    copied = sum(point.value for resource in reader.get_metrics_data().resource_metrics
                 for scope in resource.scope_metrics for metric in scope.metrics
                 if metric.name == "sbfed.replication.copied" for point in metric.data.data_points)
    assert copied >= COUNT


@pytest.fixture(scope="module")
def prometheus_binary() -> str:
    """Debian's Prometheus server (make setup installs it; the fixture too when it is missing)."""
    if shutil.which("prometheus") is None:
        subprocess.run(["bash", str(REPO / "scripts" / "ensure-prometheus.sh")], check=True)
    return shutil.which("prometheus") or "prometheus"


@contextmanager
def _prometheus(binary: str, directory: Path, targets: dict[str, int]) -> Iterator[str]:
    """A Prometheus server scraping `targets` (job -> port on loopback) every second; yields its address."""
    port = _free_port()
    config = {"global": {"scrape_interval": "1s", "scrape_timeout": "900ms"},
              "scrape_configs": [{"job_name": job, "static_configs": [{"targets": [f"127.0.0.1:{target}"]}]}
                                 for job, target in targets.items()]}
    (directory / "prometheus.yml").write_text(yaml.safe_dump(config))
    with open(directory / "prometheus.log", "wb") as log:
        server = subprocess.Popen(
            [binary, f"--config.file={directory / 'prometheus.yml'}",
             f"--storage.tsdb.path={directory / 'tsdb'}", f"--web.listen-address=127.0.0.1:{port}"],
            stdout=log, stderr=subprocess.STDOUT)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(timeout=30)


def _query(address: str, expression: str) -> float | None:
    """An instant query through Prometheus' HTTP API: the one value, or None while there is none."""
    url = f"{address}/api/v1/query?{urllib.parse.urlencode({'query': expression})}"
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            answer = json.load(response)
    except OSError:
        return None  # still starting
    results = answer["data"]["result"]
    return float(results[0]["value"][1]) if len(results) == 1 else None


@pytest.mark.slow
def test_prometheus_scrapes_the_brokers_and_the_replicators(tmp_path, prometheus_binary: str) -> None:
    sent = [_traced(i) for i in range(COUNT)]
    with brokers(topology(), tmp_path) as (namespaces, path):
        settings = settings_for(namespaces, path)
        with _functions_run(tmp_path, settings) as port:
            targets = {"replicators": port, **{name: int(namespaces[name].admin_url.rsplit(":", 1)[1])
                                               for name in ("primary", "secondary")}}
            with _prometheus(prometheus_binary, tmp_path, targets) as prometheus:
                send_all(settings["PRIMARY"], "events", [m for m, _ in sent])
                replicas = drain_subscription(settings["SECONDARY"], "events", "check", COUNT, timeout=60)
                assert len(replicas) == COUNT
                expected = {
                    f'sbfed_replication_copied_total{{task="{TASK}"}}': COUNT,
                    f'sbfed_replication_lag_seconds_count{{task="{TASK}"}}': COUNT,
                    'servicebus_incoming_messages_total{namespace="primary",entity="events"}': COUNT,
                    'servicebus_incoming_messages_total{namespace="secondary",entity="events"}': COUNT,
                    'servicebus_outgoing_messages_total{namespace="secondary",entity="events/subscriptions/check"}':
                        COUNT,
                    'servicebus_namespace_available{namespace="secondary"}': 1,
                }
                deadline, seen = time.monotonic() + 60, {}
                while time.monotonic() < deadline:
                    seen = {expression: _query(prometheus, expression) for expression in expected}
                    if seen == expected:
                        break
                    time.sleep(1)
                assert seen == expected
                p99 = _query(prometheus, "histogram_quantile(0.99, sum by (le) "
                                         "(sbfed_replication_lag_seconds_bucket))")
                assert p99 is not None and 0 < p99 < 60
