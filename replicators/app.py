"""Builds the Azure Functions (Python v2) app from a topology file: one Service Bus batch trigger per task,
or a Kafka batch trigger for a stream-to-queue task (its records become messages in `stream`).

The trigger binding only receives; replicas are sent with the SDK's ServiceBusSender because the Python
output binding carries a body and nothing else (no MessageId, SessionId, properties). Settlement is the
host's: complete when the function returns, abandon when it raises; the retry policy re-runs a failed
batch with exponential backoff (5 s to 5 min, unlimited) so a target outage never dead-letters data.
"""

import os
import socket
import threading
from collections.abc import Mapping
from typing import Any, List  # noqa: UP035 - the Functions worker resolves this annotation at load time

import azure.functions as func

from replicators.audit import AuditSink, AuditTap, open_sink
from replicators.message import SourceMessage
from replicators.replicate import Replicator
from replicators.sending import TargetSenders
from replicators.stream import source_message
from replicators.tasks import DEAD_LETTER_SUFFIX, Deployment, ReplicationTask
from replicators.telemetry import replication_metrics

TRIGGER_ARG = "messages"
# A stream-to-queue task's Kafka connection: `<setting>` holds the bootstrap servers; with
# `<setting>__password` (an Event Hubs connection string, by Key Vault reference) the trigger signs in to
# an Event Hubs namespace's Kafka endpoint with SASL PLAIN over TLS as user `$ConnectionString`.
KAFKA_PASSWORD_SUFFIX = "__password"
EVENT_HUBS_KAFKA_USER = "$ConnectionString"
RETRY = {
    "strategy": "exponential_backoff",
    "max_retry_count": "-1",
    "minimum_interval": "00:00:05",
    "maximum_interval": "00:05:00",
}
AUDIT_SINK_SETTING = "SBFED_AUDIT_SINK"


class TaskRuntime:
    """What the functions of one app process share: cached senders, audit sinks, one worker per task."""

    def __init__(self, deployment: Deployment, settings: Mapping[str, str]) -> None:
        self.deployment = deployment
        self.settings = settings
        self.senders = TargetSenders(settings)
        self._workers: dict[str, Replicator | AuditTap] = {}
        self._sinks: list[AuditSink] = []
        self._lock = threading.Lock()

    def invoke(self, task: ReplicationTask, messages: list[func.ServiceBusMessage] | list[func.KafkaEvent]
               ) -> None:
        sources = [self._source(task, m) for m in messages if _selected(task, m)]
        worker = self._worker(task)
        try:
            if isinstance(worker, Replicator):
                worker.replicate(sources)
            else:
                worker.record(sources)
        except Exception as exc:  # the host abandons the batch (or the poison messages) and it comes back
            replication_metrics().failures.add(1, {"task": task.name, "error": type(exc).__name__})
            raise

    @staticmethod
    def _source(task: ReplicationTask, message: func.ServiceBusMessage | func.KafkaEvent) -> SourceMessage:
        if isinstance(message, func.KafkaEvent):
            return source_message(message, cluster=task.source.namespace, key_as=task.record_key_as)
        return SourceMessage.from_function(message, namespace=task.source.namespace,
                                           entity=task.source.entity)

    def _worker(self, task: ReplicationTask) -> Replicator | AuditTap:
        with self._lock:
            if task.name not in self._workers:
                self._workers[task.name] = self._new_worker(task)
            return self._workers[task.name]

    def _new_worker(self, task: ReplicationTask) -> Replicator | AuditTap:
        if task.target is not None:
            return Replicator(task, self.senders, task.load_transform())
        location = self.settings.get(AUDIT_SINK_SETTING) or self.deployment.audit_sink or ""
        sink = open_sink(location, writer=f"{task.name}-{socket.gethostname()}-{os.getpid()}")
        self._sinks.append(sink)
        return AuditTap(sink)

    def close(self) -> None:
        """Close the senders' links and the sinks (at exit, or when a host that loaded the app stops)."""
        self.senders.close()
        with self._lock:
            sinks, self._sinks = self._sinks, []
            self._workers.clear()
        for sink in sinks:
            sink.close()


def register_tasks(app: func.FunctionApp, runtime: TaskRuntime) -> func.FunctionApp:
    for task in runtime.deployment.tasks:
        if task.source.stream is not None:
            _register_stream(app, task, runtime)
        else:
            _register(app, task, runtime)
    return app


def _selected(task: ReplicationTask, message: func.ServiceBusMessage | func.KafkaEvent) -> bool:
    """A task that reads one partition lets the others pass: the Kafka trigger reads every partition."""
    stream = task.source.stream
    if stream is None or stream.partition is None:
        return True
    return getattr(message, "partition", None) == stream.partition


def trigger_entity(task: ReplicationTask) -> dict[str, str]:
    """The binding's entity: `queue_name`, or `topic_name` + `subscription_name`; a dead-letter sub-queue
    is addressed with the standard `/$deadletterqueue` suffix."""
    suffix = DEAD_LETTER_SUFFIX if task.source.dead_letter else ""
    if task.source.queue:
        return {"queue_name": task.source.queue + suffix}
    return {"topic_name": task.source.topic or "", "subscription_name": f"{task.source.subscription}{suffix}"}


def _register(app: func.FunctionApp, task: ReplicationTask, runtime: TaskRuntime) -> None:
    def handler(messages: List[func.ServiceBusMessage]) -> None:  # noqa: UP006
        runtime.invoke(task, messages)

    handler.__name__ = handler.__qualname__ = task.name.replace("-", "_")
    entity = trigger_entity(task)
    trigger = app.service_bus_queue_trigger if "queue_name" in entity else app.service_bus_topic_trigger
    builder = trigger(
        arg_name=TRIGGER_ARG,
        connection=task.source.connection,
        cardinality=func.Cardinality.MANY,
        is_sessions_enabled=task.source.facts.requires_session,
        auto_complete_messages=True,
        max_message_batch_size=task.options.batch_size,
        max_concurrent_calls=task.options.concurrency,
        **entity,
    )(handler)
    _name_with_retry(app, task, builder)


def _register_stream(app: func.FunctionApp, task: ReplicationTask, runtime: TaskRuntime) -> None:
    """A Kafka batch trigger on the task's topic and consumer group; the group's committed offsets are its
    checkpoints (the trigger commits a batch once the function returned)."""
    def handler(records: List[func.KafkaEvent]) -> None:  # noqa: UP006
        runtime.invoke(task, records)

    handler.__name__ = handler.__qualname__ = task.name.replace("-", "_")
    stream, connection = task.source.stream, task.source.connection
    assert stream is not None, "register_tasks gives this only tasks that read Kafka"
    password = f"{connection}{KAFKA_PASSWORD_SUFFIX}"
    event_hubs = {"username": EVENT_HUBS_KAFKA_USER, "password": f"%{password}%", "protocol": "SASLSSL",
                  "authentication_mode": "PLAIN"} if runtime.settings.get(password) else {}
    builder = app.kafka_trigger(
        arg_name="records",
        topic=task.source.topic or "",
        broker_list=f"%{connection}%",
        consumer_group=stream.consumer_group,
        cardinality=func.Cardinality.MANY,
        data_type=func.DataType.BINARY,
        max_batch_size=task.options.batch_size,
        **event_hubs,
    )(handler)
    _name_with_retry(app, task, builder)


def _name_with_retry(app: func.FunctionApp, task: ReplicationTask, builder: Any) -> None:
    """Every task's function: the retry policy (a target outage never loses data) and the task's name."""
    builder = app.retry(**RETRY)(builder)
    app.function_name(name=task.name)(builder)
