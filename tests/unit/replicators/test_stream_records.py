"""stream-to-queue without a broker: a Kafka record (as the Functions Kafka trigger hands it over) becomes the
source message of a copy, the tasks and the `kafka` section are read and checked, and the app registers a
Kafka trigger whose settings the local host resolves."""

from __future__ import annotations

import base64
import datetime as dt
import json
from pathlib import Path

import azure.functions as func
import pytest

from replicators.app import TaskRuntime, register_tasks
from replicators.copy import copy_message
from replicators.host.kafka_runner import KafkaSettingError, consumer_config
from replicators.host.loader import KafkaTrigger
from replicators.stream import record_message_id, record_time, source_message
from replicators.tasks import TaskConfigError, deployment_from_dict
from topology import TopologyError, parse


def _event(**overrides) -> func.KafkaEvent:
    fields = {"body": b'{"page": "/"}', "key": "user-7", "offset": 41, "partition": 2, "topic": "clicks",
              "timestamp": "2026-11-27T17:00:00.1234567Z",
              "headers": [{"Key": "page", "Value": base64.b64encode(b"/home").decode()},
                          {"Key": "raw", "Value": base64.b64encode(b"\xff\x00").decode()},
                          {"Key": "empty", "Value": None},
                          {"Key": "page", "Value": base64.b64encode("/später".encode()).decode()}]}
    return func.KafkaEvent(**{**fields, **overrides})


def test_a_record_becomes_a_message_identified_by_its_place_in_the_log():
    source = source_message(_event(), cluster="web", key_as="session_id")
    assert (source.message_id, source.session_id, source.partition_key) == ("clicks/2/41", "user-7", None)
    assert source.body.as_bytes() == b'{"page": "/"}'
    assert source.application_properties == {"page": "/später", "raw": "/wA=", "empty": None}
    assert (source.namespace, source.entity, source.sequence_number) == ("web", "clicks", 41)
    assert source.enqueued_time_utc == dt.datetime(2026, 11, 27, 17, 0, 0, 123456, tzinfo=dt.UTC)
    replica = copy_message(source, target_entity="clicks")
    stamps = {k: v for k, v in replica.application_properties.items() if k.startswith("repl-")}
    assert stamps == {"repl-enqueued-time": "2026-11-27T17:00:00.123Z", "repl-sequence": "41",
                      "repl-source": "web/clicks"}
    assert replica.message_id == "clicks/2/41" and replica.session_id == "user-7"


def test_the_key_goes_where_the_task_says_and_a_long_one_is_hashed_alike():
    keyed = source_message(_event(), cluster="web", key_as="partition_key")
    assert (keyed.partition_key, keyed.session_id) == ("user-7", None)
    unkeyed = source_message(_event(key=None), cluster="web", key_as="session_id")
    assert unkeyed.session_id is None
    assert source_message(_event(), cluster="web", key_as="none").session_id is None
    long_key = "k" * 200
    first = source_message(_event(key=long_key), cluster="web", key_as="session_id").session_id
    again = source_message(_event(key=long_key, offset=42), cluster="web", key_as="session_id").session_id
    assert first == again and len(first) == 64


def test_a_message_id_fits_128_characters_whatever_the_topic():
    assert record_message_id("t", 0, 0) == "t/0/0"
    long = record_message_id("x" * 250, 31, 2**40)
    assert len(long) <= 128 and long.endswith("/31/1099511627776")
    assert long != record_message_id("y" * 250, 31, 2**40)


def test_record_times_in_the_forms_the_trigger_and_the_local_host_write():
    assert record_time("2026-11-27T17:00:00.000+00:00") == dt.datetime(2026, 11, 27, 17, tzinfo=dt.UTC)
    assert record_time("2026-11-27T18:00:00+01:00") == dt.datetime(2026, 11, 27, 17, tzinfo=dt.UTC)
    assert record_time("2026-11-27T17:00:00") == dt.datetime(2026, 11, 27, 17, tzinfo=dt.UTC)
    with pytest.raises(ValueError, match="no timestamp"):
        record_time(None)


def _raw(**task) -> dict:
    return {
        "namespaces": {"central": {"queues": {"clicks": {"requires_session": True}, "plain": {}}}},
        "kafka": {"web": {"topics": {"clicks": {"partitions": 3}}}},
        "connections": {"CENTRAL": "central", "WEB": "web"},
        "audit": {"sink": "/tmp/audit"},
        "tasks": [{"name": "clicks-in", "kind": "stream-to-queue",
                   "source": {"connection": "WEB", "topic": "clicks"},
                   "target": {"connection": "CENTRAL", "queue": "clicks"}, **task}],
    }


def test_stream_tasks_read_and_default_their_key_and_group():
    task = deployment_from_dict(_raw()).tasks[0]
    assert task.source.stream.consumer_group == "clicks-in" and task.source.stream.partition is None
    assert task.record_key_as == "session_id"  # the target queue takes sessions
    plain = deployment_from_dict(_raw(target={"connection": "CENTRAL", "queue": "plain"})).tasks[0]
    assert plain.record_key_as == "partition_key"
    one = deployment_from_dict(_raw(source={"connection": "WEB", "topic": "clicks", "partition": 1,
                                            "consumer_group": "g"}, options={"key_as": "none"})).tasks[0]
    assert (one.source.stream.partition, one.source.stream.consumer_group) == (1, "g")
    assert one.record_key_as == "none"


@pytest.mark.parametrize("change, message", [
    ({"kind": "replicate"}, "a replicate task reads a queue or subscription"),
    ({"source": {"connection": "CENTRAL", "queue": "plain"}}, "a stream-to-queue task reads a Kafka topic"),
    ({"source": {"connection": "WEB", "topic": "clicks", "subscription": "s"}}, "subscription: unknown key"),
    ({"source": {"connection": "WEB"}}, "names its `topic`"),
    ({"options": {"key_as": "session"}}, "key_as: 'session', allowed: session_id, partition_key, none"),
])
def test_stream_task_mistakes_are_named(change, message):
    with pytest.raises(TaskConfigError, match=message):
        deployment_from_dict(_raw(**change))


def test_the_kafka_section_is_checked_with_the_rest_of_the_file():
    raw = _raw(source={"connection": "WEB", "topic": "click", "partition": 0})
    raw["kafka"]["web"]["topics"]["bad name!"] = {"partitions": 0, "retention": "P1D"}
    raw["kafka"]["central"] = {"topics": {"t": {}}}
    raw["tasks"].append({"name": "x", "kind": "stream-to-queue",
                         "source": {"connection": "WEB", "topic": "clicks", "partition": 3},
                         "target": {"connection": "CENTRAL", "queue": "clicks"}})
    with pytest.raises(TopologyError) as error:
        parse(raw)
    assert error.value.problems == [
        "topology: kafka/web/bad name!: name: 'bad name!' is not a topic name, allowed letters, digits, '.', "
        "'-' and '_', starting and ending with a letter or digit (at most 256)",
        "topology: kafka/web/bad name!: retention: unknown key, did you mean partitions?",
        "topology: kafka/web/bad name!: partitions: 0 is out of range, allowed 1 to 1024",
        "topology: kafka/central: also the name of a namespace, allowed: a name of its own (connections map "
        "a setting to either)",
        "topology: tasks/clicks-in/source: topic: 'click' is not a topic of Kafka cluster web, did you mean "
        "clicks?",
        "topology: tasks/x/source: partition: 3 is not a partition of clicks, allowed 0 to 2",
    ]
    assert parse(_raw()).to_dict()["kafka"] == {"web": {"topics": {"clicks": {"partitions": 3}}}}


def test_the_app_registers_a_kafka_trigger_signing_in_to_event_hubs_when_given_a_password():
    deployment = deployment_from_dict(_raw(options={"batch_size": 50}))
    local = register_tasks(func.FunctionApp(), TaskRuntime(deployment, {})).get_functions()[0]
    binding = json.loads(local.get_function_json())["bindings"][0]
    assert {k: binding[k] for k in ("type", "topic", "brokerList", "consumerGroup", "cardinality",
                                    "maxBatchSize", "protocol")} == {
        "type": "kafkaTrigger", "topic": "clicks", "brokerList": "%WEB%", "consumerGroup": "clicks-in",
        "cardinality": "MANY", "maxBatchSize": 50, "protocol": "NOTSET"}
    azure = register_tasks(func.FunctionApp(), TaskRuntime(deployment, {"WEB__password": "Endpoint=sb://..."}))
    trigger = azure.get_functions()[0].get_trigger()
    assert (trigger.username, trigger.password) == ("$ConnectionString", "%WEB__password%")
    assert (trigger.protocol.name, trigger.authentication_mode.name) == ("SASLSSL", "PLAIN")


def test_the_local_host_resolves_the_bindings_settings():
    trigger = KafkaTrigger("f", "records", "clicks", "%WEB%", "g", True, 10, "$ConnectionString",
                           "%WEB__password%", "SASLSSL", "PLAIN", None, print)
    config = consumer_config(trigger, {"WEB": "ns.servicebus.windows.net:9093", "WEB__password": "secret"})
    assert {k: config[k] for k in ("bootstrap.servers", "group.id", "enable.auto.commit", "security.protocol",
                                    "sasl.mechanisms", "sasl.username", "sasl.password")} == {
        "bootstrap.servers": "ns.servicebus.windows.net:9093", "group.id": "g", "enable.auto.commit": False,
        "security.protocol": "sasl_ssl", "sasl.mechanisms": "PLAIN", "sasl.username": "$ConnectionString",
        "sasl.password": "secret"}
    with pytest.raises(KafkaSettingError, match="app setting 'WEB' is not set"):
        consumer_config(trigger, {})


def test_a_one_partition_task_lets_the_other_partitions_pass(tmp_path: Path):
    raw = _raw(source={"connection": "WEB", "topic": "clicks", "partition": 1})
    raw["tasks"][0] = {"name": "audit-clicks", "kind": "audit", "source": raw["tasks"][0]["source"]}
    runtime = TaskRuntime(deployment_from_dict(raw), {"SBFED_AUDIT_SINK": str(tmp_path)})
    runtime.invoke(runtime.deployment.tasks[0], [_event(partition=p, offset=p) for p in range(3)])
    runtime.close()
    lines = [line for path in tmp_path.rglob("*.jsonl") for line in path.read_text().splitlines()]
    assert [(r["namespace"], r["entity"], r["message_id"]) for r in map(json.loads, lines)] == [
        ("web", "clicks", "clicks/1/1")]

