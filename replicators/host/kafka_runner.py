"""Runs one Kafka trigger like the Functions host's Kafka extension: a consumer in the binding's consumer
group, batches of records handed to the function as `func.KafkaEvent`s, the batch's offsets committed only
after the function returned (at-least-once: a host killed before its commit leaves the batch to the next
one, whose copies the target's duplicate detection drops), a failed batch retried per the function's policy
from the same records. Stopping lets the in-flight batch finish and commit."""

from __future__ import annotations

import base64
import datetime as dt
import logging
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import azure.functions as func
from confluent_kafka import Consumer, KafkaException, Message, TopicPartition

from replicators.host.hostjson import ServiceBusHostOptions
from replicators.host.loader import KafkaTrigger
from replicators.host.stats import TriggerStats

log = logging.getLogger(__name__)
POLL_SECONDS = 1.0  # how often an idle consumer looks at the stop event
# A host killed without leaving its group holds its partitions until the broker misses its heartbeats for
# this long (librdkafka's default is 45 s); then the group's other or next consumer takes them over.
SESSION_TIMEOUT_MS = 10_000
PROTOCOLS = {"PLAINTEXT": "plaintext", "SSL": "ssl", "SASLPLAINTEXT": "sasl_plaintext", "SASLSSL": "sasl_ssl"}
MECHANISMS = {"PLAIN": "PLAIN", "SCRAMSHA256": "SCRAM-SHA-256", "SCRAMSHA512": "SCRAM-SHA-512",
              "GSSAPI": "GSSAPI"}


class KafkaSettingError(LookupError):
    """A `%setting%` of the Kafka binding is not set."""


@dataclass(frozen=True)
class KafkaTriggerOptions:
    batch_size: int

    @classmethod
    def of(cls, trigger: KafkaTrigger, host: ServiceBusHostOptions) -> KafkaTriggerOptions:
        return cls(batch_size=(trigger.max_batch_size or host.max_message_batch_size) if trigger.many else 1)


def consumer_config(trigger: KafkaTrigger, settings: Mapping[str, str]) -> dict[str, Any]:
    """librdkafka's settings for the binding: bootstrap servers and credentials resolved from app settings,
    offsets committed by the runner alone, a new group starting at the topic's beginning."""
    config: dict[str, Any] = {
        "bootstrap.servers": resolve(trigger.broker_list, settings),
        "group.id": trigger.consumer_group,
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": SESSION_TIMEOUT_MS,
        "client.id": trigger.function_name,
    }
    if trigger.protocol:
        config["security.protocol"] = PROTOCOLS[trigger.protocol]
    if trigger.authentication_mode:
        config["sasl.mechanisms"] = MECHANISMS[trigger.authentication_mode]
    if trigger.username:
        config["sasl.username"] = resolve(trigger.username, settings)
    if trigger.password:
        config["sasl.password"] = resolve(trigger.password, settings)
    return config


def resolve(value: str, settings: Mapping[str, str]) -> str:
    """`%NAME%` is the app setting NAME, as binding expressions are; anything else is literal."""
    if len(value) > 2 and value.startswith("%") and value.endswith("%"):
        name = value[1:-1]
        if not settings.get(name):
            raise KafkaSettingError(f"app setting '{name}' is not set: the Kafka trigger's {value} needs it "
                                    "(bootstrap servers, e.g. 127.0.0.1:9092)")
        return settings[name]
    return value


def kafka_event(record: Message) -> func.KafkaEvent:
    """The record as the Functions Kafka extension hands it over: key as text, headers base64."""
    key = record.key()
    _, millis = record.timestamp()
    return func.KafkaEvent(
        body=record.value() or b"",
        key=key.decode("utf-8", "replace") if isinstance(key, bytes) else key,
        offset=record.offset(),
        partition=record.partition(),
        topic=record.topic(),
        timestamp=dt.datetime.fromtimestamp(millis / 1000, dt.UTC).isoformat(timespec="milliseconds"),
        headers=[{"Key": name, "Value": None if value is None else base64.b64encode(value).decode()}
                 for name, value in record.headers() or ()],
    )


class KafkaTriggerRunner:
    def __init__(self, trigger: KafkaTrigger, settings: Mapping[str, str], options: KafkaTriggerOptions,
                 stop: threading.Event, *, stats: TriggerStats | None = None) -> None:
        self.trigger = trigger
        self.options = options
        self.stats = stats or TriggerStats(trigger.function_name)
        self._config = consumer_config(trigger, settings)
        self._stop = stop
        self._thread: threading.Thread | None = None

    def describe(self) -> str:
        return (f"{self.trigger.function_name} <- {self.trigger.source} (batch {self.options.batch_size}, "
                f"retry {self.trigger.retry})")

    def start(self) -> None:
        self._thread = threading.Thread(target=self._work, name=self.trigger.function_name, daemon=True)
        self._thread.start()

    def join(self, timeout: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def _work(self) -> None:
        consumer = Consumer(self._config, logger=log)
        consumer.subscribe([self.trigger.topic])
        try:
            while not self._stop.is_set():
                records = [r for r in consumer.consume(self.options.batch_size, POLL_SECONDS)
                           if not self._failed(r)]
                if not records:
                    continue
                if self._invoke(records):
                    self._commit(consumer, records)
                else:  # stopped while retrying: the batch stays uncommitted, for the next host
                    return
        finally:
            consumer.close()

    def _failed(self, record: Message) -> bool:
        error = record.error()
        if error is not None:
            log.warning("%s: %s", self.trigger.function_name, error)
        return error is not None

    def _invoke(self, records: Sequence[Message]) -> bool:
        """Call the function until it returns (True), or until stopped between retries (False)."""
        events: list[func.KafkaEvent] = [kafka_event(r) for r in records]
        retry_number = 0
        while True:
            try:
                if self.trigger.many:
                    self.trigger.user_function(**{self.trigger.arg_name: events})
                else:
                    for event in events:
                        self.trigger.user_function(**{self.trigger.arg_name: event})
                return True
            except Exception as exc:
                self.stats.invocation_failed()
                retry_number += 1
                policy = self.trigger.retry
                # Kafka has no abandon: a batch is retried (or left uncommitted), never skipped
                delay = policy.delay(retry_number) if policy and policy.allows(retry_number) else \
                    dt.timedelta(seconds=POLL_SECONDS)
                log.warning("%s: invocation failed (%s); retry %d in %s", self.trigger.function_name, exc,
                            retry_number, delay)
                if self._stop.wait(delay.total_seconds()):
                    return False

    def _commit(self, consumer: Consumer, records: Sequence[Message]) -> None:
        """The next offset of each partition the batch read; a commit refused (the partition was given to
        another consumer meanwhile) leaves its records to be read again, and copied again harmlessly."""
        following: dict[int, int] = {}
        for record in records:
            following[record.partition()] = max(following.get(record.partition(), 0), record.offset() + 1)
        offsets = [TopicPartition(self.trigger.topic, p, o) for p, o in following.items()]
        try:
            consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as exc:
            self.stats.settle_failed()
            log.warning("%s: offsets not committed (%s); the batch will be read again",
                        self.trigger.function_name, exc)
            return
        self.stats.settled([dt.datetime.fromtimestamp(r.timestamp()[1] / 1000, dt.UTC) for r in records],
                           outcome="completed")
