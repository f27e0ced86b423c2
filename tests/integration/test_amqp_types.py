"""Typed fields through both of the Python SDK's AMQP stacks: uAMQP-C decodes the properties section strictly
(a string content-type made it fail with "Error getting message properties" and put its receiver in an error
state), and every stack must get application properties back in the types they were sent in."""

from __future__ import annotations

import uuid

import pytest
from azure.servicebus import ServiceBusMessage

from local_broker.server import BrokerServer
from tests.integration.tls_clients import TOPOLOGY, TRANSPORTS, tls_client
from topology import parse


@pytest.fixture(scope="module")
def broker():
    with BrokerServer(parse(TOPOLOGY)) as server:
        yield server


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_content_type_and_typed_properties_reach_every_stack(broker, transport: str) -> None:
    message_id = str(uuid.uuid4())
    sent = ServiceBusMessage('{"n": 1}', message_id=message_id, content_type="application/json",
                             correlation_id="c", subject="s", application_properties={
                                 "int": 7, "text": "t", "flag": True, "ratio": 0.5})
    with tls_client(broker, transport) as client:
        with client.get_queue_sender("q") as sender:
            sender.send_messages(sent)
        with client.get_queue_receiver("q", max_wait_time=10) as receiver:
            (peeked,) = receiver.peek_messages(max_message_count=1)
            (got,) = receiver.receive_messages(max_message_count=1, max_wait_time=10)
            receiver.complete_message(got)
    for message in (peeked, got):
        assert (message.message_id, message.content_type, message.correlation_id, message.subject) == (
            message_id, "application/json", "c", "s")
        props = {(k.decode() if isinstance(k, bytes) else k): v
                 for k, v in message.application_properties.items()}
        assert props["int"] == 7 and props["flag"] is True and props["ratio"] == 0.5
        assert props["text"] in ("t", b"t")
