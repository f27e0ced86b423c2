"""The Java SDK over AMQPS and AMQP over WebSockets (java/.../Transports.java, both in one JVM run), as a
client with no emulator mode: the connection string in Azure's form with the AMQPS port in its endpoint,
the broker's certificate trusted through a trust store java_runner.py makes from it (verified, not
disabled), WebSockets as AmqpTransportType.AMQP_WEB_SOCKETS with the WebSocket port as the custom endpoint
address."""

from __future__ import annotations

from typing import Any

import pytest

from local_broker.server import BrokerServer
from tests.compat.java_runner import run_java
from topology import parse

TRANSPORTS = ("amqps", "websocket")
QUEUES = {"q": {}, **{f"{name}-{transport}": options for transport in TRANSPORTS for name, options in (
    ("q", {}), ("settle", {}), ("sessions", {"requires_session": True}))}}


@pytest.fixture(scope="module")
def java() -> dict[str, Any]:
    """In this process: the client is a JVM, a process of its own (see conftest.py for why that matters)."""
    with BrokerServer(parse({"namespaces": {"tls": {"queues": QUEUES}}})) as server:
        namespace = server.namespaces["tls"]
        env = {"SB_CONNECTION_STRING": namespace.amqps_connection_string,
               "SB_WEBSOCKET_PORT": str(namespace.websocket_port)}
        return run_java("transports", None, *TRANSPORTS, env=env, cert_path=server.cert_path)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_the_java_sdk_over_tls(java: dict[str, Any], transport: str) -> None:
    result = java[transport]
    assert result["settle"] == {"received": ["0", "1", "2"], "again": {"messageId": "2", "deliveryCount": 1},
                                "dead": {"messageId": "1", "reason": "bad"}}
    assert result["management"] == {"peeked": ["peeked"], "renewed": True, "left": 0}
    assert result["session"] == {"state": "halfway", "bodies": ["0", "1"]}
    wrong = result["wrongKey"]["error"]
    assert (wrong["reason"], wrong["condition"]) == ("UNAUTHORIZED", "amqp:unauthorized-access"), wrong
    assert "InvalidSignature" in wrong["message"]
