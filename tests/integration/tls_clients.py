"""The Python SDK as a client with no emulator mode builds it: the Azure-form connection string, the broker's
certificate verified, each of the SDK's stacks over AMQPS and over WebSockets. The SDK takes the port of an
Azure-form endpoint from `custom_endpoint_address` (it dials 5671 or 443 whatever the `Endpoint` says)."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import pytest
from azure.servicebus import ServiceBusClient, TransportType

from local_broker.server import BrokerServer
from tests.round_trip import round_trip, round_trip_on

# The SDK's two stacks (its own pyamqp; uAMQP-C with `uamqp_transport=True`), each over AMQPS and over
# WebSockets: the port each dials, its transport type, whether it is uamqp.
TRANSPORTS = {
    "pyamqp-amqps": ("amqps_port", TransportType.Amqp, False),
    "pyamqp-websocket": ("websocket_port", TransportType.AmqpOverWebsocket, False),
    "uamqp-amqps": ("amqps_port", TransportType.Amqp, True),
    "uamqp-websocket": ("websocket_port", TransportType.AmqpOverWebsocket, True),
}
PLAIN = "plain-amqp"
# still_serves's round trips run at once, each through a queue of its own
STILL_SERVING = {way: f"still-serving-{way}" for way in (*TRANSPORTS, PLAIN)}
QUEUES = {"q": {}, "settle": {}, "bulk": {}, "sessions": {"requires_session": True},
          **{queue: {} for queue in STILL_SERVING.values()}}
TOPOLOGY = {"namespaces": {"tls": {"queues": QUEUES}}}


def tls_client(server: BrokerServer, transport: str, *, host: str = "localhost", key: str | None = None,
               verify: str | None = None, namespace_name: str = "tls") -> ServiceBusClient:
    """A client of the namespace over `transport` (a key of TRANSPORTS), that does not retry."""
    namespace = server.namespaces[namespace_name]
    port_kind, transport_type, uamqp = TRANSPORTS[transport]
    connection_string = namespace.amqps_connection_string
    if key is not None:
        connection_string = connection_string.replace(namespace.policy.key, key)
    return ServiceBusClient.from_connection_string(
        connection_string, custom_endpoint_address=f"sb://{host}:{getattr(namespace, port_kind)}",
        transport_type=transport_type, uamqp_transport=uamqp, connection_verify=verify or server.cert_path,
        retry_total=0)


def still_serves(server: BrokerServer) -> None:
    """Every transport, and plain AMQP, still gets a message through: on new clients all at once (a round
    trip is two seconds of the SDK's polling, mostly idle)."""
    def round_trip_over(way: str) -> None:
        if way == PLAIN:
            round_trip(server.namespaces["tls"].connection_string, STILL_SERVING[way],
                       "still serving plain AMQP")
            return
        with tls_client(server, way) as client:
            round_trip_on(client, STILL_SERVING[way], f"still serving over {way}")

    with ThreadPoolExecutor(len(STILL_SERVING)) as pool:
        list(pool.map(round_trip_over, STILL_SERVING))  # the first failure is raised here


# The Python SDK behaviour suites run on these: pyamqp over plain AMQP (the emulator's form), uAMQP-C over
# AMQPS and, in the slow run, over WebSockets.
SDK_STACKS = [pytest.param("pyamqp"), pytest.param("uamqp-amqps"),
              pytest.param("uamqp-websocket", marks=pytest.mark.slow)]
# For a test that waits out a server-side default on uAMQP-C (a minute for a next-available session): over
# AMQPS only, since the wait is the broker's and the same over WebSockets (a minute of CI saved)
SDK_STACKS_UAMQP_SLOW = [pytest.param("pyamqp"), pytest.param("uamqp-amqps", marks=pytest.mark.slow)]


@contextmanager
def sdk_client(server: BrokerServer, stack: str, namespace_name: str,
               **options) -> Iterator[ServiceBusClient]:
    """A client of one of SDK_STACKS (the TLS ones do not retry; `options` go to the pyamqp one)."""
    if stack == "pyamqp":
        connection_string = server.namespaces[namespace_name].connection_string
        with ServiceBusClient.from_connection_string(connection_string, **options) as client:
            yield client
    else:
        with tls_client(server, stack, namespace_name=namespace_name) as client:
            yield client
