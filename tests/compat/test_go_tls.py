"""The Go SDK over AMQPS and AMQP over WebSockets (go/tls.go), as a client with no emulator mode: the
connection string in Azure's form with the AMQPS port in its endpoint, TLS verifying the broker's self-signed
certificate through a tls.Config whose only root it is, WebSockets through coder/websocket in the SDK's
NewWebSocketConn option."""

from __future__ import annotations

import pytest
from go_runner import run_go
from test_js_tls import QUEUES

from local_broker.server import BrokerServer
from topology import parse


@pytest.fixture(scope="module")
def broker():
    """In this process: the client is the Go binary, in a process of its own."""
    with BrokerServer(parse({"namespaces": {"tls": {"queues": QUEUES}}})) as server:
        yield server


@pytest.mark.parametrize("transport", ["amqps", "websocket"])
def test_the_go_sdk_over_tls(broker: BrokerServer, transport: str) -> None:
    namespace = broker.namespaces["tls"]
    env = {"SB_CONNECTION_STRING": namespace.amqps_connection_string, "SB_CERT_PATH": broker.cert_path,
           "SB_WEBSOCKET_PORT": str(namespace.websocket_port)}
    result = run_go("tls", None, transport, env=env)
    assert result["transport"] == transport
    assert result["settle"] == {"received": ["0", "1", "2"], "again": {"messageId": "2", "deliveryCount": 2},
                                "dead": {"messageId": "1", "reason": "bad"}}
    assert result["management"] == {"peeked": ["peeked"], "renewed": True, "left": 0}
    assert result["session"] == {"state": "halfway", "bodies": ["0", "1"]}
    assert result["wrongKey"]["code"] == "unauthorized", result["wrongKey"]
    assert "InvalidSignature" in result["wrongKey"]["message"]
