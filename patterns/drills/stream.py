"""The stream-to-queue drill: records of a Kafka topic (Apache Kafka's own broker, started by the drill)
copied by the Functions host into a session queue of the Service Bus namespace, drained by competing
consumers.

A producer writes keyed records across the topic's partitions (each key to one partition, each record
numbered within its key). The namespace is taken down once (the drill's outage) and the host is killed
(SIGKILL) once after it came back, then started again: it resumes from the offsets its consumer group
committed, and copies again what it had sent but not committed, which the queue's duplicate detection drops.
The promise checked: every record is processed exactly once, each key's records in the order produced.

Its logs: the producer's `sent` record for each record the topic acknowledged and the audit tap's `enqueued`
record for each record it read (namespace `stream`, the Kafka side), the consumers' `processed` records in
the Service Bus namespace; `sbfed reconcile --mode exactly-once` compares them (sbfed demo does).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import threading
from collections import OrderedDict
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

from azure.servicebus import NEXT_AVAILABLE_SESSION, ServiceBusClient
from confluent_kafka import Producer

from patterns.building import connection_setting
from patterns.drills.drill import Drill
from patterns.drills.kafka_broker import KafkaBroker
from patterns.drills.metrics import Record
from patterns.drills.scenario import Scenario, Step
from patterns.regions import Region, message_record
from replicators.audit import AuditSink
from replicators.stream import record_message_id
from topology import QueueSpec, Topology
from topology.model import KafkaClusterSpec, KafkaTopicSpec, NamespaceSpec

log = logging.getLogger(__name__)
QUEUE = "clicks"
PARTITIONS = 3
KEYS = 12
CONSUMERS = 3
RESTART_SECONDS = 2.0  # from the host's kill to its restart
VIOLATIONS_LISTED = 20


@dataclass(frozen=True)
class SentRecord:
    """A record the topic acknowledged, as its audit record names it."""

    message_id: str
    session_id: str
    sequence_number: int


class KafkaProducer:
    """Writes each record and waits for the topic's acknowledgement, then writes its `sent` record (the
    MessageId is the record's place in the log, known only then)."""

    def __init__(self, bootstrap: str, topic: str, cluster: str, audit: AuditSink) -> None:
        self._producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True},
                                  logger=log)  # librdkafka's lines into logging, not onto the drill's screen
        self.topic, self.cluster, self.audit = topic, cluster, audit

    def send(self, record: dict[str, Any]) -> str:
        acknowledged: list[Any] = []
        self._producer.produce(self.topic, key=record["key"], value=record["value"],
                               headers=record["headers"],
                               on_delivery=lambda error, message: acknowledged.append((error, message)))
        self._producer.flush(30)
        if not acknowledged or acknowledged[0][0] is not None:
            raise RuntimeError(f"the topic did not take record {record['key']}: {acknowledged}")
        message = acknowledged[0][1]
        sent = SentRecord(record_message_id(self.topic, message.partition(), message.offset()), record["key"],
                          message.offset())
        now = dt.datetime.now(dt.UTC)
        self.audit.write([message_record("sent", sent, namespace=self.cluster, entity=self.topic,
                                         enqueued=now, observed=now)])
        return self.cluster


class StreamToQueue(Scenario):
    pattern = "stream-to-queue"
    namespace_roles = "kafka-cluster,namespace"
    default_namespaces = ("stream", "central")
    namespace_counts = (2, 2)
    fails_over = False

    def __init__(self, drill: Drill) -> None:
        super().__init__(drill)
        self.kafka: KafkaBroker | None = None
        self.topic = f"{QUEUE}-{drill.run_id}-records"  # the run id in every MessageId, as summaries expect
        self.order: dict[str, list[int]] = {}  # per key, the record numbers in the order first processed
        self.violations: list[str] = []
        self._lock = threading.Lock()
        self._seen: OrderedDict[str, None] = OrderedDict()

    @classmethod
    def broker_namespaces(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        return names[1:]

    @property
    def down(self) -> str:
        return self.drill.names[1]

    def topology(self, names: tuple[str, ...], audit_sink: str) -> Topology:
        cluster, namespace = names
        queue = QueueSpec(QUEUE, {"requires_session": True, "requires_duplicate_detection": True,
                                  "duplicate_detection_history_time_window": "PT10M"})
        source = {"connection": connection_setting(cluster), "topic": self.topic}
        return Topology(
            namespaces={namespace: NamespaceSpec(namespace, queues=[queue])},
            kafka={cluster: KafkaClusterSpec(cluster, [KafkaTopicSpec(self.topic, PARTITIONS)])},
            connections={connection_setting(cluster): cluster, connection_setting(namespace): namespace},
            tasks=[{"name": "records-to-queue", "kind": "stream-to-queue", "source": source,
                    "target": {"connection": connection_setting(namespace), "queue": QUEUE},
                    "options": {"batch_size": 50}},
                   {"name": "audit-records", "kind": "audit",
                    "source": {**source, "consumer_group": "audit-records"}}],
            audit={"sink": audit_sink},
        )

    def services(self, stack: ExitStack) -> dict[str, str]:
        self.kafka = KafkaBroker(self.drill.settings.out / "kafka-data", partitions=PARTITIONS).start()
        stack.callback(self.kafka.stop)
        self.kafka.create_topic(self.topic)
        return {connection_setting(self.drill.names[0]): self.kafka.bootstrap_servers}

    def start(self, rate: float) -> None:
        cluster, namespace = self.drill.names
        assert self.kafka is not None, "services() starts Kafka before the clients"
        producer = KafkaProducer(self.kafka.bootstrap_servers, self.topic, cluster,
                                 self.drill.sink(f"producer-{cluster}"))
        self._produce(producer, "r", self.drill.settings.messages, rate, compose=_record)
        client = ServiceBusClient.from_connection_string(self.drill.namespaces[namespace].connection_string,
                                                         retry_total=0)
        for index in range(CONSUMERS):
            region = Region(namespace, lambda: client.get_queue_receiver(
                QUEUE, session_id=NEXT_AVAILABLE_SESSION, max_wait_time=1))
            self._consume(region, self._in_order, entity=self.topic, processor=f"{namespace}/{QUEUE}",
                          writer=f"consumer-{namespace}-{index}", seen=self._seen, sessions=True)

    def steps(self, after: float) -> list[Step]:
        host = self.drill.functions_host
        return [Step(after, "Functions host killed", host.kill),
                Step(after + RESTART_SECONDS, "Functions host started again", host.start)]

    def _in_order(self, message: Any) -> None:
        """Each key's records must come in the order produced: numbers rising within a session."""
        number = json.loads(b"".join(message.body))["n"]
        with self._lock:
            order = self.order.setdefault(str(message.session_id), [])
            if order and number < order[-1]:
                self.violations.append(f"{message.message_id}: record {number} of key {message.session_id} "
                                       f"after record {order[-1]}")
            order.append(number)

    def problems(self, summary: dict[str, Any], details: dict[str, Any], by_event: dict[str, list[Record]],
                 handled: list[Record]) -> list[str]:
        problems = []
        if summary["processed_twice"]:
            problems.append(f"{summary['processed_twice']} record(s) processed twice")
        read = {r["message_id"] for r in by_event["enqueued"] if r["namespace"] == self.drill.names[0]}
        unread = {r["message_id"] for r in by_event["sent"]} - read
        details["read_by_audit_tap"] = len(read)
        if unread:
            problems.append(f"{len(unread)} record(s) the audit tap never read: {sorted(unread)[:20]}")
        details["violations"] = self.violations[:VIOLATIONS_LISTED]
        if self.violations:
            problems.append(f"{len(self.violations)} record(s) out of their key's order: "
                            f"{details['violations']}")
        details["outcome"] = (f"{len(self.order)} keys over {PARTITIONS} partitions, drained by {CONSUMERS} "
                              "competing consumers; the host killed once and restarted")
        return problems


def _record(index: int, _message_id: str) -> dict[str, Any]:
    """Record `index`: its key (one of KEYS), its number in the body, a header."""
    key = f"user-{index % KEYS:02d}"
    return {"key": key, "value": json.dumps({"n": index, "user": key}).encode(),
            "headers": [("source", b"drill")]}
