"""The JavaScript SDK over AMQPS and AMQP over WebSockets (js/tls.mjs), as a client with no emulator mode:
the connection string in Azure's form with the AMQPS port in its endpoint, the broker's certificate trusted
through NODE_EXTRA_CA_CERTS, WebSockets through the `ws` package and `customEndpointAddress`."""

from __future__ import annotations

import pytest

from local_broker.server import BrokerServer
from tests.compat.js_runner import run_js
from topology import parse

QUEUES = {"q": {}, "settle": {}, "sessions": {"requires_session": True}}


@pytest.fixture(scope="module")
def broker():
    """In this process: the client is node, in a process of its own (see conftest.py for why that matters)."""
    with BrokerServer(parse({"namespaces": {"tls": {"queues": QUEUES}}})) as server:
        yield server


@pytest.mark.parametrize("transport", ["amqps", "websocket"])
def test_the_js_sdk_over_tls(broker: BrokerServer, transport: str) -> None:
    namespace = broker.namespaces["tls"]
    env = {"SB_CONNECTION_STRING": namespace.amqps_connection_string, "NODE_EXTRA_CA_CERTS": broker.cert_path,
           "SB_WEBSOCKET_PORT": str(namespace.websocket_port)}
    result = run_js("tls.mjs", None, transport, env=env)
    assert result["settle"] == {"received": ["0", "1", "2"], "again": {"messageId": "2", "deliveryCount": 1},
                                "dead": {"messageId": "1", "reason": "bad"}}
    assert result["management"] == {"peeked": ["peeked"], "renewed": True, "left": 0}
    assert result["session"] == {"state": "halfway", "bodies": ["0", "1"]}
    assert result["wrongKey"]["code"] == "UnauthorizedAccess", result["wrongKey"]
    assert "InvalidSignature" in result["wrongKey"]["message"]
