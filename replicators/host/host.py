"""The local Functions host: one TriggerRunner per Service Bus function of the app and one
KafkaTriggerRunner per Kafka function, a stop event shared by all, and a periodic throughput/lag report."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from replicators.connections import resolve_connection
from replicators.host.hostjson import ServiceBusHostOptions
from replicators.host.kafka_runner import KafkaTriggerOptions, KafkaTriggerRunner
from replicators.host.loader import app_triggers, import_app
from replicators.host.runner import TriggerOptions, TriggerRunner

log = logging.getLogger(__name__)


class FunctionsHost:
    def __init__(
        self,
        app_path: str | Path,
        host_options: ServiceBusHostOptions,
        settings: Mapping[str, str],
        *,
        only: set[str] | None = None,
        client_kwargs: dict[str, Any] | None = None,
    ) -> None:
        self.stop_event = threading.Event()
        triggers, kafka = app_triggers(import_app(app_path))
        if only:
            missing = only - {t.function_name for t in [*triggers, *kafka]}
            if missing:
                raise ValueError(f"no Service Bus or Kafka function named {', '.join(sorted(missing))} in "
                                 f"{app_path}")
            triggers = [t for t in triggers if t.function_name in only]
            kafka = [t for t in kafka if t.function_name in only]
        self.runners: list[TriggerRunner | KafkaTriggerRunner] = [
            TriggerRunner(
                trigger,
                resolve_connection(trigger.connection, settings),
                TriggerOptions.of(trigger, host_options),
                self.stop_event,
                client_kwargs=client_kwargs,
            )
            for trigger in triggers
        ]
        self.runners += [
            KafkaTriggerRunner(trigger, settings, KafkaTriggerOptions.of(trigger, host_options),
                               self.stop_event)
            for trigger in kafka
        ]

    def start(self) -> None:
        for runner in self.runners:
            log.info("%s", runner.describe())
            runner.start()

    def run(self, report: Callable[[str], None], interval: float) -> None:
        """Start, report every `interval` seconds the functions that did something (all of them at the
        end) until stopped, then let in-flight batches finish."""
        self.start()
        last: dict[str, tuple[int, ...]] = {}
        while not self.stop_event.wait(interval):
            for runner in self.runners:
                snapshot = runner.stats.snapshot()
                counters = (
                    snapshot.completed,
                    snapshot.abandoned,
                    snapshot.dead_lettered,
                    snapshot.failed_invocations,
                    snapshot.settle_failures,
                )
                if counters != last.get(snapshot.function, (0, 0, 0, 0, 0)):
                    report(snapshot.line())
                last[snapshot.function] = counters
        self.shutdown()
        for runner in self.runners:
            report(runner.stats.snapshot().line())

    def shutdown(self) -> None:
        self.stop_event.set()
        for runner in self.runners:
            runner.join()
