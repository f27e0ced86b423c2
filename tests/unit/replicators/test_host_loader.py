"""The repository's function_app.py, read through the azure-functions library the way the local host
(and the Functions worker) does, and received messages converted to func.ServiceBusMessage."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import azure.functions as func
import pytest
from azure.servicebus import ServiceBusMessage
from azure.servicebus.amqp import AmqpAnnotatedMessage, AmqpMessageBodyType
from sb_wire import ENQUEUED, received

from replicators.host.conversion import to_function_message
from replicators.host.loader import FunctionAppError, import_app, service_bus_triggers
from replicators.message import SourceMessage

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "replicators" / "examples" / "topology.yaml"


@pytest.fixture
def triggers(monkeypatch):
    monkeypatch.setenv("SBFED_TOPOLOGY", str(EXAMPLE))
    return {t.function_name: t for t in service_bus_triggers(import_app(REPO / "function_app.py"))}


def test_one_batch_trigger_per_task_with_retry_policy(triggers):
    assert set(triggers) == {
        "events-primary-to-secondary",
        "events-secondary-to-primary",
        "orders-spillover",
        "audit-primary-events",
        "audit-secondary-events",
    }
    trigger = triggers["events-primary-to-secondary"]
    assert (trigger.connection, trigger.topic_name, trigger.subscription_name) == (
        "PRIMARY",
        "events",
        "to-secondary",
    )
    assert trigger.many and trigger.auto_complete is True and not trigger.dead_letter
    assert (trigger.max_message_batch_size, trigger.max_concurrent_calls) == (100, 2)
    assert trigger.retry.strategy == "exponential_backoff" and trigger.retry.max_retry_count == -1
    assert trigger.retry.minimum_interval == dt.timedelta(seconds=5)
    assert trigger.retry.maximum_interval == dt.timedelta(minutes=5)
    assert trigger.arg_name == "messages"


def test_dead_letter_source_uses_the_standard_sub_queue_path(triggers):
    spill = triggers["orders-spillover"]
    assert (spill.queue_name, spill.dead_letter, spill.source) == (
        "orders",
        True,
        "PRIMARY:orders/$deadletterqueue",
    )


def test_function_json_is_what_azure_gets(monkeypatch):
    monkeypatch.setenv("SBFED_TOPOLOGY", str(EXAMPLE))
    app = import_app(REPO / "function_app.py")
    functions = {f.get_function_name(): f for f in app.get_functions()}
    binding = functions["orders-spillover"].get_dict_repr()["bindings"][0]
    assert binding["type"] == "serviceBusTrigger" and binding["queueName"] == "orders/$deadletterqueue"
    assert str(binding["cardinality"]).lower().endswith("many") and binding["connection"] == "PRIMARY"
    annotation = functions["orders-spillover"].get_user_function().__annotations__["messages"]
    assert annotation.__args__ == (func.ServiceBusMessage,)


def test_a_script_without_a_function_app_is_refused(tmp_path):
    script = tmp_path / "function_app.py"
    script.write_text("x = 1\n")
    with pytest.raises(FunctionAppError, match=r"exactly one azure\.functions\.FunctionApp"):
        import_app(script)
    with pytest.raises(FunctionAppError, match="no Functions app"):
        import_app(tmp_path / "absent.py")


def test_conversion_fills_every_system_property_and_the_trigger_metadata():
    msg = ServiceBusMessage(
        b'{"n":1}',
        message_id="m1",
        session_id="s1",
        partition_key="s1",
        correlation_id="c",
        subject="sub",
        to="to",
        reply_to="rt",
        reply_to_session_id="rts",
        content_type="application/json",
        time_to_live=dt.timedelta(seconds=30),
        application_properties={"k": "v", "n": 3},
    )
    fmsg = to_function_message(received(msg, sequence_number=11, delivery_count=2))
    assert isinstance(fmsg, func.ServiceBusMessage)
    assert fmsg.get_body() == b'{"n":1}'
    assert (fmsg.message_id, fmsg.session_id, fmsg.partition_key, fmsg.correlation_id) == (
        "m1",
        "s1",
        "s1",
        "c",
    )
    assert (fmsg.subject, fmsg.label, fmsg.to, fmsg.reply_to, fmsg.reply_to_session_id) == (
        "sub",
        "sub",
        "to",
        "rt",
        "rts",
    )
    assert fmsg.content_type == "application/json" and fmsg.time_to_live == dt.timedelta(seconds=30)
    assert (fmsg.sequence_number, fmsg.delivery_count, fmsg.enqueued_time_utc) == (11, 2, ENQUEUED)
    assert fmsg.application_properties == fmsg.user_properties == {"k": "v", "n": 3}
    assert fmsg.locked_until == ENQUEUED + dt.timedelta(minutes=1) and fmsg.state == 0
    metadata = fmsg.metadata
    assert (
        metadata["MessageId"] == "m1" and metadata["SequenceNumber"] == 11 and metadata["DeliveryCount"] == 2
    )
    assert metadata["EnqueuedTimeUtc"] == "2026-11-22T12:00:00.123000Z"
    assert metadata["ApplicationProperties"] == {"k": "v", "n": 3}


def test_conversion_keeps_non_data_bodies_for_the_copy():
    msg = AmqpAnnotatedMessage(value_body={"k": 1}, properties={"message_id": "m"})
    fmsg = to_function_message(received(msg))
    source = SourceMessage.from_function(fmsg, namespace="p", entity="q")
    assert source.body.body_type == AmqpMessageBodyType.VALUE
    assert source.body.value == received(msg).body
