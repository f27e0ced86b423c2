"""The official emulator's connection string with the Go SDK: `UseDevelopmentEmulator=true` (plain AMQP:
azservicebus switches TLS off for it) against `sbfed broker serve`, and the same string on the management
port for its admin package (HTTPS, trusting the broker's certificate)."""

from __future__ import annotations

from pathlib import Path

from go_runner import run_go
from test_js_emulator import DOCUMENTED, _emulator_string, serve_with_no_arguments


def test_the_emulator_connection_string_sends_and_receives(serve) -> None:
    namespace = serve({"namespaces": {"sbemulatorns": {}}})["sbemulatorns"]  # no policies: SAS_KEY_VALUE
    amqp_port = int(namespace.connection_string.split(";")[0].rsplit(":", 1)[1])
    admin_port = int(namespace.admin_url.rsplit(":", 1)[1])
    seen = run_go("emulator", namespace, "queue.1",
                  env={"SB_CONNECTION_STRING": _emulator_string(amqp_port),
                       "SB_ADMIN_CONNECTION_STRING": _emulator_string(admin_port)})
    assert seen == {"body": "from the Go SDK", "messageId": "go-1", "queue": "queue.1"}


def test_the_documented_string_against_serve_with_no_arguments(tmp_path: Path) -> None:
    """Unchanged, the port left out: the Go SDK dials amqp://localhost (5672) for it."""
    with serve_with_no_arguments(tmp_path) as namespace:
        seen = run_go("emulator", None, "queue.1",
                      env={"SB_CONNECTION_STRING": DOCUMENTED, "SB_CERT_PATH": namespace["cert_path"],
                           "SB_ADMIN_CONNECTION_STRING": DOCUMENTED.replace("localhost;", "localhost:5300;")})
    assert seen == {"body": "from the Go SDK", "messageId": "go-1", "queue": "queue.1"}
