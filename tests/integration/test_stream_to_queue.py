"""stream-to-queue against Apache Kafka's own broker and the local Service Bus broker: the repository's
function_app.py run by the local host copies a topic's records into a session queue, commits its offsets only
after the queue took them, and a replay of the whole topic (as after a host killed before its commit) adds
nothing, because the MessageIds it derives from (topic, partition, offset) meet the queue's duplicate
detection."""

from __future__ import annotations

import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml
from azure.servicebus import ServiceBusClient
from confluent_kafka import ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from replicators.message import decode_application_properties
from tests.integration.replication_harness import functions_host

pytestmark = pytest.mark.slow  # ~25 s, and ~10 s more for the session's Kafka broker
RECORDS, KEYS, PARTITIONS = 90, 6, 3
WAIT_SECONDS = 60


def _topology(topic: str, audit: Path) -> dict:
    return {
        "namespaces": {"central": {"queues": {"clicks": {
            "requires_session": True, "requires_duplicate_detection": True,
            "duplicate_detection_history_time_window": "PT10M"}}}},
        "kafka": {"web": {"topics": {topic: {"partitions": PARTITIONS}}}},
        "connections": {"CENTRAL": "central", "WEB": "web"},
        "audit": {"sink": str(audit)},
        "tasks": [{"name": "clicks-to-queue", "kind": "stream-to-queue",
                   "source": {"connection": "WEB", "topic": topic},
                   "target": {"connection": "CENTRAL", "queue": "clicks"},
                   "options": {"batch_size": 25}}],
    }


def _produce(bootstrap: str, topic: str) -> dict[tuple[int, int], dict]:
    """RECORDS records over KEYS keys; what each landed as, by (partition, offset)."""
    landed: dict[tuple[int, int], dict] = {}
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in range(RECORDS):
        sent = {"key": f"user-{i % KEYS}", "value": f"click {i}".encode(), "index": i}
        headers = [("page", f"/p/{i % 4}".encode()), ("raw", b"\xff\x00")]

        def delivered(error, record, sent=sent) -> None:
            assert error is None, error
            landed[(record.partition(), record.offset())] = sent

        producer.produce(topic, key=sent["key"], value=sent["value"], headers=headers, on_delivery=delivered)
    assert producer.flush(30) == 0
    return landed


def _wait_committed(host, count: int) -> None:
    stats = host.runners[0].stats
    deadline = time.monotonic() + WAIT_SECONDS
    while stats.snapshot().completed < count:
        assert time.monotonic() < deadline, f"{stats.snapshot().line()} after {WAIT_SECONDS} s"
        time.sleep(0.1)


def _drain(connection_string: str, sessions: set[str]) -> list:
    """Every message of the session queue, session by session, in each session's order (with a quiet
    second after each, so a copy too many would show); the sessions at once, each on a client of its own."""
    def session_messages(session: str) -> list:
        got = []
        with ServiceBusClient.from_connection_string(connection_string) as client, \
                client.get_queue_receiver("clicks", session_id=session, max_wait_time=1) as receiver:
            while batch := receiver.receive_messages(max_message_count=100, max_wait_time=1):
                for message in batch:
                    receiver.complete_message(message)
                got += batch
        return got

    with ThreadPoolExecutor(len(sessions)) as pool:
        return [message for got in pool.map(session_messages, sorted(sessions)) for message in got]


def test_records_become_messages_once_in_key_order_and_a_replay_adds_nothing(
        tmp_path, kafka_broker, start_broker):
    topic = f"clicks-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topic(topic, PARTITIONS)
    server = start_broker(_topology(topic, tmp_path / "audit"))
    central = server.namespaces["central"].connection_string
    path = tmp_path / "topology.yaml"
    path.write_text(yaml.safe_dump(_topology(topic, tmp_path / "audit")))
    landed = _produce(kafka_broker.bootstrap_servers, topic)
    settings = {"WEB": kafka_broker.bootstrap_servers, "CENTRAL": central, "SBFED_TOPOLOGY": str(path)}

    with functions_host(settings) as host:
        _wait_committed(host, RECORDS)
    with functions_host(settings) as host:  # the committed offsets are the checkpoints: nothing is read
        time.sleep(3)
        assert host.runners[0].stats.snapshot().completed == 0
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap_servers})
    rewind = [TopicPartition(topic, p, 0) for p in range(PARTITIONS)]
    admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions("clicks-to-queue", rewind)])[
        "clicks-to-queue"].result(30)
    with functions_host(settings) as host:  # as if a host had died before committing anything
        _wait_committed(host, RECORDS)

    got = _drain(central, {sent["key"] for sent in landed.values()})
    ids = [m.message_id for m in got]
    assert sorted(ids) == sorted(f"{topic}/{p}/{o}" for p, o in landed) and len(set(ids)) == RECORDS
    for message in got:
        partition, offset = map(int, message.message_id.rsplit("/", 2)[1:])
        sent = landed[(partition, offset)]
        properties = decode_application_properties(message.application_properties)
        assert message.session_id == sent["key"] and b"".join(message.body) == sent["value"]
        assert properties["page"] == f"/p/{sent['index'] % 4}" and properties["raw"] == "/wA="  # base64
        assert properties["repl-source"] == f"web/{topic}" and properties["repl-sequence"] == str(offset)
    for key in {sent["key"] for sent in landed.values()}:  # each key's records in the order produced
        order = [landed[tuple(map(int, m.message_id.rsplit("/", 2)[1:]))]["index"] for m in got
                 if m.session_id == key]
        assert order == sorted(order) and len(order) == RECORDS // KEYS
