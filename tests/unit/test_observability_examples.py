"""docs/examples' alert rules and Grafana dashboard read only series that exist: each name they use is one
the broker's /metrics page or the replicators' Prometheus endpoint serves, as rendered here."""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path

import yaml
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics import MeterProvider
from prometheus_client import REGISTRY, generate_latest

from local_broker.console.operations import EntityRow
from local_broker.wire.admin.metrics import ConnectionCounts, render
from local_broker.wire.amqp.tally import Requests
from replicators.telemetry import ReplicationMetrics

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"
SERIES = re.compile(r"\b(?:servicebus|sbfed)_[a-z_]+\b")


def _served() -> set[str]:
    """Every series name the broker and the replicators serve (histograms with their three suffixes)."""
    row = EntityRow("orders", "queue", "Active", 1, 0, 0, 0, 0, 10)
    broker = render("primary", [row], ConnectionCounts(1, 1, 0), available=True, requests=Requests()).decode()
    provider = MeterProvider(metric_readers=[PrometheusMetricReader()], shutdown_on_exit=False)
    try:
        instruments = ReplicationMetrics(provider.get_meter("examples"))
        now = dt.datetime.now(dt.UTC)
        instruments.replicated("t", "a", "b", [now], 1, now)
        for counter in (instruments.failures, instruments.retries, instruments.settle_failures):
            counter.add(1, {"task": "t"})
        replicators = generate_latest(REGISTRY).decode()
    finally:
        provider.shutdown()  # the reader leaves prometheus_client's registry
    return {line.split("{")[0].split(" ")[0] for line in (broker + replicators).splitlines()
            if line and not line.startswith("#")}


def _used(texts: list[str]) -> set[str]:
    return {name for text in texts for name in SERIES.findall(text)}


def test_the_alert_rules_use_served_series() -> None:
    rules = yaml.safe_load((EXAMPLES / "prometheus-alerts.yaml").read_text())
    alerts = [rule for group in rules["groups"] for rule in group["rules"]]
    names = {a["alert"] for a in alerts}
    assert names == {"ReplicationLagHigh", "DeadLettersGrowing", "SecondaryNamespaceDown"}
    assert all(a["expr"] and a["labels"]["severity"] and a["annotations"]["summary"] for a in alerts)
    used = _used([a["expr"] for a in alerts])
    assert used and used <= _served(), used - _served()


def test_the_dashboard_uses_served_series() -> None:
    dashboard = json.loads((EXAMPLES / "grafana-dashboard.json").read_text())
    expressions = [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]
    used = _used(expressions)
    assert len(used) >= 12 and used <= _served(), used - _served()
    assert len({panel["id"] for panel in dashboard["panels"]}) == len(dashboard["panels"])
