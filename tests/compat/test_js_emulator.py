"""The official emulator's connection string with the JavaScript SDK: `UseDevelopmentEmulator=true` (plain
AMQP) against `sbfed broker serve`, and the same string on the management port for its administration
client (HTTPS; node trusts the broker's certificate through NODE_EXTRA_CA_CERTS)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from js_runner import run_js

from tests.broker_process import ServeProcess, emulator_ports_free

DOCUMENTED = ("Endpoint=sb://localhost;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=SAS_KEY_VALUE;"
              "UseDevelopmentEmulator=true;")


def _emulator_string(port: int) -> str:
    return (f"Endpoint=sb://localhost:{port};SharedAccessKeyName=RootManageSharedAccessKey;"
            "SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true;")


def test_the_emulator_connection_string_sends_and_receives(serve) -> None:
    namespace = serve({"namespaces": {"sbemulatorns": {}}})["sbemulatorns"]  # no policies: SAS_KEY_VALUE
    amqp_port = int(namespace.connection_string.split(";")[0].rsplit(":", 1)[1])
    admin_port = int(namespace.admin_url.rsplit(":", 1)[1])
    seen = run_js("emulator_round_trip.mjs", namespace, "queue.1",
                  env={"SB_CONNECTION_STRING": _emulator_string(amqp_port),
                       "SB_ADMIN_CONNECTION_STRING": _emulator_string(admin_port)})
    assert seen == {"body": "from the JS SDK", "messageId": "js-1", "queues": "queue.1"}


@contextmanager
def serve_with_no_arguments(tmp_path: Path) -> Iterator[dict]:
    """`sbfed broker serve` on the emulator's own ports (5672, 5300): the test is skipped when something else
    holds them."""
    if not emulator_ports_free():
        pytest.skip("5672 or 5300 is taken on this machine; the string is covered on other ports above")
    broker = ServeProcess(tmp_path, "--in-memory")
    try:
        yield broker.wait_ready()
    finally:
        broker.stop()


def test_the_documented_string_against_serve_with_no_arguments(tmp_path: Path) -> None:
    with serve_with_no_arguments(tmp_path) as namespace:
        seen = run_js("emulator_round_trip.mjs", None, "queue.1",
                      env={"SB_CONNECTION_STRING": DOCUMENTED, "NODE_EXTRA_CA_CERTS": namespace["cert_path"],
                           "SB_ADMIN_CONNECTION_STRING": DOCUMENTED.replace("localhost;", "localhost:5300;")})
    assert seen == {"body": "from the JS SDK", "messageId": "js-1", "queues": "queue.1"}
