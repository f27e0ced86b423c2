"""The local host's Kafka trigger with an app of its own, against the real Kafka broker: a batch whose
invocation fails is handed over again, the same records, under the function's retry policy, and its offsets
are committed only once the function returned; a host stopped while it still retries commits nothing, so the
next host reads the batch again."""

from __future__ import annotations

import os
import sys
import textwrap
import time
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition

from replicators.host.host import FunctionsHost
from replicators.host.hostjson import ServiceBusHostOptions

APP = textwrap.dedent(
    """
    import os

    import azure.functions as func

    app = func.FunctionApp()
    calls = []

    @app.function_name("flaky")
    @app.retry(strategy="fixed_delay", max_retry_count="-1", delay_interval="00:00:00.2")
    @app.kafka_trigger(arg_name="records", topic=os.environ["TOPIC"], broker_list="%KAFKA%",
                       consumer_group=os.environ["GROUP"], cardinality=func.Cardinality.MANY,
                       data_type=func.DataType.BINARY)
    def flaky(records: list[func.KafkaEvent]) -> None:
        calls.append([(r.partition, r.offset, r.key, r.get_body()) for r in records])
        if os.environ["FAIL"] == "always" or len(calls) <= 2:
            raise RuntimeError(f"attempt {len(calls)} failed")
    """
)


def _committed(bootstrap: str, topic: str, group: str) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        return [tp.offset for tp in consumer.committed([TopicPartition(topic, 0)], timeout=10)]
    finally:
        consumer.close()


def _run(tmp_path, monkeypatch, kafka_broker, topic: str, group: str, fail: str, until) -> list:
    for name, value in {"TOPIC": topic, "GROUP": group, "FAIL": fail,
                        "KAFKA": kafka_broker.bootstrap_servers}.items():
        monkeypatch.setenv(name, value)
    tmp_path.mkdir()
    (tmp_path / "function_app.py").write_text(APP)
    host = FunctionsHost(tmp_path / "function_app.py", ServiceBusHostOptions(), dict(os.environ))
    host.start()
    calls = sys.modules["function_app"].calls
    deadline = time.monotonic() + 30
    try:
        while not until(calls, host.runners[0].stats.snapshot()):
            assert time.monotonic() < deadline, f"{calls} {host.runners[0].stats.snapshot().line()}"
            time.sleep(0.05)
    finally:
        host.shutdown()
    return calls


def test_a_failed_batch_comes_back_whole_and_is_committed_only_after_it_succeeded(
        tmp_path, monkeypatch, kafka_broker):
    topic, group = f"flaky-{uuid.uuid4().hex[:8]}", "flaky-host"
    kafka_broker.create_topic(topic, 1)
    producer = Producer({"bootstrap.servers": kafka_broker.bootstrap_servers})
    for i in range(5):
        producer.produce(topic, key=f"k{i}", value=f"v{i}".encode())
    assert producer.flush(30) == 0

    stopped = _run(tmp_path / "a", monkeypatch, kafka_broker, topic, group, "always",
                   lambda calls, stats: stats.failed_invocations >= 2)
    assert stopped[0] == stopped[-1] and len(stopped[0]) == 5  # the same records each time
    assert _committed(kafka_broker.bootstrap_servers, topic, group) == [-1001]  # nothing committed

    calls = _run(tmp_path / "b", monkeypatch, kafka_broker, topic, group, "twice",
                 lambda calls, stats: stats.completed == 5)
    assert len(calls) == 3 and calls[0] == calls[1] == calls[2] == stopped[0]
    assert [(p, o, k) for p, o, k, _ in calls[0]] == [(0, i, f"k{i}") for i in range(5)]
    assert _committed(kafka_broker.bootstrap_servers, topic, group) == [5]
