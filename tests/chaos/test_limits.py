"""Drills: requests past the broker's limits get the answer Service Bus gives, and nothing else suffers.

- a management request with a 10 MB body: the admin SDK sees HTTP 413 with the Service Bus error body (not
  a broken connection), with and without `Expect: 100-continue`;
- a message whose properties exceed the 64 KB header quota: refused with the serialization error the SDK
  raises as `MessageSizeExceededError`; a message just under it goes through.
"""

from __future__ import annotations

import http.client
import ssl

import pytest
from azure.core.exceptions import HttpResponseError
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.exceptions import MessageSizeExceededError
from azure.servicebus.management import ServiceBusAdministrationClient

from tests.chaos.harness import BrokerProcess, topology

pytestmark = pytest.mark.slow

TEN_MB = 10 * 1024 * 1024


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory):
    with BrokerProcess(tmp_path_factory.mktemp("limits"), topology({"q": {}})) as process:
        yield process


def _admin(broker: BrokerProcess) -> ServiceBusAdministrationClient:
    return ServiceBusAdministrationClient.from_connection_string(
        broker.namespace["admin_connection_string"], connection_verify=broker.namespace["cert_path"])


def _https(broker: BrokerProcess) -> http.client.HTTPSConnection:
    context = ssl.create_default_context(cafile=broker.namespace["cert_path"])
    context.check_hostname = False
    return http.client.HTTPSConnection("127.0.0.1", broker.admin_port, context=context, timeout=30)


def test_oversize_management_body_is_an_http_413(broker: BrokerProcess) -> None:
    with _admin(broker) as admin:
        with pytest.raises(HttpResponseError) as refused:
            admin.create_queue("huge", user_metadata="x" * TEN_MB)
        assert refused.value.status_code == 413
        assert "larger than" in str(refused.value)
        assert admin.get_queue("q").name == "q"  # the next request is served


def test_expect_100_continue_is_refused_before_the_body(broker: BrokerProcess) -> None:
    connection = _https(broker)
    connection.putrequest("PUT", "/huge?api-version=2021-05")
    connection.putheader("Content-Length", str(TEN_MB))
    connection.putheader("Expect", "100-continue")
    connection.endheaders()  # no body sent: the answer comes first
    answer = connection.getresponse()
    assert answer.status == 413
    assert b"<Code>413</Code>" in answer.read()
    connection.close()


def test_header_quota(broker: BrokerProcess) -> None:
    over = {f"property-{i:05d}": "value-of-it" for i in range(10_000)}  # ~200 KB of properties
    under = {f"property-{i:05d}": "value-of-it" for i in range(2_000)}  # ~40 KB
    with ServiceBusClient.from_connection_string(broker.connection_string, retry_total=0) as client:
        with client.get_queue_sender("q") as sender:
            with pytest.raises(MessageSizeExceededError, match="size quota for this stream"):
                sender.send_messages(ServiceBusMessage("too many properties", application_properties=over))
            sender.send_messages(ServiceBusMessage("within the quota", application_properties=under))
        with client.get_queue_receiver("q", max_wait_time=5) as receiver:
            [message] = receiver.receive_messages(max_message_count=1, max_wait_time=5)
            assert str(message) == "within the quota"
            assert len(message.application_properties) == 2_000
            receiver.complete_message(message)
